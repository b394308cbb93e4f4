//! The worker thread that owns a loaded model and its llama.cpp context.
//!
//! llama.cpp contexts are not thread-safe, so each [`crate::LocalModel`] has one thread that holds the
//! model and a context and runs requests one after the other. Parts are sent back through a channel as
//! they are sampled. The context keeps its KV cache between requests: a request that starts with the
//! previous one's tokens (the usual case in a conversation) only evaluates the new ones.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use serde_json::Value;
use tokio::sync::oneshot;
use toolgate_model::ModelError;
use toolgate_protocol::{FinishReason, ModelStreamPart, Usage};

use crate::LocalConfig;
use crate::decide;
use crate::emit::{Emitter, End, Parts};
use crate::format::{self, ChatMessage, FunctionTool, OutputSplitter, TOOL_CALL_OPEN};
use crate::grammar::{ROOT_RULE, ToolGrammar};

/// Prompt tokens evaluated per llama.cpp batch.
const BATCH: usize = 512;
/// How a call starts after `<tool_call>`, before the tool's name (the form the prompt shows).
const NAME_HEAD: &str = r#"{"name": ""#;
/// Text answers penalise tokens repeated within this many recent tokens...
const REPEAT_WINDOW: i32 = 64;
/// ...by this factor (llama.cpp's repetition penalty: positive logits are divided by it, negative ones multiplied).
const REPEAT_PENALTY: f32 = 1.1;
/// Output tokens a call needs beyond its opener for the call steps to be worth starting.
const CALL_ROOM: usize = 8;

/// What a loaded model reports about itself.
#[derive(Debug, Clone)]
pub(crate) struct ModelInfo {
    pub context_length: u32,
    pub chat_template: Option<String>,
}

/// Answered once the prompt fits (or with the reason it does not), before any part is sent.
pub(crate) type Ready = oneshot::Sender<Result<(), ModelError>>;

/// One generation.
pub(crate) struct Job {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<FunctionTool>,
    pub grammar: Option<ToolGrammar>,
    /// With a lazy grammar (tool choice `auto`): the call threshold, see [`crate::decide`].
    pub auto_call_threshold: Option<f64>,
    /// The tool calls already in the conversation, which `auto` does not repeat.
    pub earlier_calls: Vec<(String, Value)>,
    pub max_output_tokens: u32,
    pub temperature: f32,
    pub stop_sequences: Vec<String>,
    pub parts: Parts,
}

fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|error| error.to_string())?;
            if std::env::var_os("TOOLGATE_LLAMA_LOG").is_none() {
                backend.void_logs();
            }
            Ok(backend)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Starts the worker thread: loads the model, creates a context and serves jobs until the sender is dropped.
pub(crate) fn spawn(path: PathBuf, config: LocalConfig) -> Result<(mpsc::Sender<(Job, Ready)>, ModelInfo), String> {
    let (jobs, receiver) = mpsc::channel::<(Job, Ready)>();
    let (loaded_tx, loaded_rx) = mpsc::channel::<Result<ModelInfo, String>>();
    std::thread::Builder::new()
        .name("toolgate-local".into())
        .spawn(move || {
            let backend = match backend() {
                Ok(backend) => backend,
                Err(error) => {
                    let _ = loaded_tx.send(Err(format!("cannot start llama.cpp: {error}")));
                    return;
                }
            };
            let model = match LlamaModel::load_from_file(backend, &path, &LlamaModelParams::default()) {
                Ok(model) => model,
                Err(error) => {
                    let _ = loaded_tx.send(Err(format!("cannot load {}: {error}", path.display())));
                    return;
                }
            };
            let context_length =
                config.context_length.unwrap_or(crate::DEFAULT_CONTEXT_LENGTH).min(model.n_ctx_train().max(1));
            let threads = config.threads.unwrap_or_else(default_threads);
            let threads = i32::try_from(threads).unwrap_or(2);
            let params = LlamaContextParams::default()
                .with_n_ctx(NonZeroU32::new(context_length))
                .with_n_batch(BATCH as u32)
                .with_n_threads(threads)
                .with_n_threads_batch(threads);
            let context = match model.new_context(backend, params) {
                Ok(context) => context,
                Err(error) => {
                    let _ = loaded_tx.send(Err(format!("cannot create a llama.cpp context: {error}")));
                    return;
                }
            };
            let template = model.chat_template(None).ok();
            let chat_template = template.as_ref().and_then(|template| template.to_string().ok());
            let info = ModelInfo { context_length: context.n_ctx(), chat_template };
            if loaded_tx.send(Ok(info)).is_err() {
                return;
            }
            let mut worker = Worker { model: &model, template, context, cached: Vec::new(), seed: config.seed };
            while let Ok((job, ready)) = receiver.recv() {
                worker.run(job, ready);
            }
        })
        .map_err(|error| format!("cannot start the model thread: {error}"))?;
    let info = loaded_rx.recv().map_err(|_| "the model thread stopped while loading".to_owned())??;
    Ok((jobs, info))
}

struct Worker<'m> {
    model: &'m LlamaModel,
    /// The chat template from the GGUF metadata, if it has one.
    template: Option<LlamaChatTemplate>,
    context: LlamaContext<'m>,
    /// The tokens in the KV cache (sequence 0), in order.
    cached: Vec<LlamaToken>,
    seed: u32,
}

impl Worker<'_> {
    fn run(&mut self, job: Job, ready: Ready) {
        let prompt = self.render(&job.messages);
        let tokens = self.model.vocab().tokenize(prompt.as_bytes(), true, true);
        let context_length = self.context.n_ctx() as usize;
        if tokens.len() >= context_length {
            let _ = ready.send(Err(ModelError::ContextTooLong {
                message: format!(
                    "the prompt is {} tokens, but the local model's context holds {context_length} \
                     (and the answer needs room too); shorten the conversation",
                    tokens.len()
                ),
            }));
            return;
        }
        // Checked before the answer starts, so a bad grammar fails the request rather than its stream.
        if let Err(error) = self.sampler(job.grammar.as_ref(), job.temperature, Mode::Text) {
            let _ = ready.send(Err(error));
            return;
        }
        if ready.send(Ok(())).is_err() {
            return;
        }
        let room = (context_length - tokens.len()) as u32;
        let limit = job.max_output_tokens.min(room);
        let prompt_tokens = tokens.len() as u64;
        match self.answer(tokens, &job, limit) {
            Ok((end, output_tokens)) => {
                let finish_reason = match end {
                    End::Stop => FinishReason::Stop,
                    End::Length => FinishReason::Length,
                    End::ToolCall => FinishReason::ToolCalls,
                    End::Dropped | End::Repeat => return,
                };
                let usage = Usage {
                    input_tokens: Some(prompt_tokens),
                    output_tokens: Some(output_tokens),
                    total_tokens: Some(prompt_tokens + output_tokens),
                    ..Usage::default()
                };
                let _ = job.parts.send(Ok(ModelStreamPart::Finish { finish_reason, usage, provider_metadata: None }));
            }
            Err(error) => {
                let _ = job.parts.send(Err(error));
            }
        }
    }

    /// Evaluates the prompt and generates the answer under the job's tool choice; returns how it ended and
    /// the number of output tokens.
    fn answer(&mut self, tokens: Vec<LlamaToken>, job: &Job, limit: u32) -> Result<(End, u64), ModelError> {
        let index = self.evaluate_prompt(&tokens)?;
        let opener = self.model.vocab().tokenize(TOOL_CALL_OPEN.as_bytes(), false, true);
        let grammar = job.grammar.as_ref();
        let calls_fit = opener.len() + CALL_ROOM < limit as usize;
        let output = Output { job, limit, guard_repeats: false };
        match (grammar, job.auto_call_threshold) {
            (Some(grammar), _) if !grammar.lazy && calls_fit => {
                // `required` or a named tool: the answer is a call.
                let next = self.context.get_logits_ith(index).to_vec();
                self.force(&next, &opener)?;
                self.call(job, grammar, &opener, limit, false)
            }
            (Some(grammar), Some(threshold)) if grammar.lazy && calls_fit => {
                let next = self.context.get_logits_ith(index).to_vec();
                let score = self.force(&next, &opener)?;
                tracing::debug!(score, threshold, "local model: tool call score");
                if score >= threshold {
                    match self.call(job, grammar, &opener, limit, true)? {
                        (End::Repeat, _) => tracing::debug!("local model: the call repeats an earlier one"),
                        done => return Ok(done),
                    }
                }
                self.rewind(tokens.len(), &tokens)?;
                let sampler = self.sampler(Some(grammar), job.temperature, Mode::Text)?;
                let first = First::Saved { logits: next, banned: opener.first().copied() };
                self.generate(first, sampler, self.splitter(job), &output)
            }
            // No tools, `auto` left to sampling, or too few tokens allowed for the steps above.
            _ => {
                let sampler = self.sampler(grammar, job.temperature, Mode::Text)?;
                self.generate(First::Index(index), sampler, self.splitter(job), &output)
            }
        }
    }

    /// Generates a call after the opener, which is in the KV cache with its logits in the last batch. With
    /// several tools, the tool is the one whose name the model finds most likely (scoring whole names avoids
    /// greedy token-by-token choice steering into the wrong name); the grammar then shapes its arguments.
    fn call(
        &mut self,
        job: &Job,
        grammar: &ToolGrammar,
        opener: &[LlamaToken],
        limit: u32,
        guard_repeats: bool,
    ) -> Result<(End, u64), ModelError> {
        let mut sampler = self.sampler(Some(grammar), job.temperature, Mode::Call)?;
        let mut splitter = self.splitter(job);
        accept(&mut sampler, opener)?;
        splitter.feed(TOOL_CALL_OPEN);
        let mut forced = opener.len();
        let mut last = opener.len() - 1;
        if job.tools.len() > 1 {
            let head = self.model.vocab().tokenize(NAME_HEAD.as_bytes(), false, true);
            let next = self.context.get_logits_ith(last as i32).to_vec();
            self.force(&next, &head)?;
            let after_head = self.context.get_logits_ith(head.len() as i32 - 1).to_vec();
            let mark = self.cached.len();
            let mut best: Option<(f64, &FunctionTool, Vec<LlamaToken>)> = None;
            for tool in &job.tools {
                let name = self.model.vocab().tokenize(format!("{}\"", tool.name).as_bytes(), false, true);
                let score = self.force(&after_head, &name)?;
                self.truncate_cache(mark)?;
                if best.as_ref().is_none_or(|(best, ..)| score > *best) {
                    best = Some((score, tool, name));
                }
            }
            if let Some((score, tool, name)) = best {
                tracing::debug!(tool = tool.name, score, "local model: chose the tool by its name");
                self.force(&after_head, &name)?;
                accept(&mut sampler, head.iter().chain(&name))?;
                splitter.feed(&format!("{NAME_HEAD}{}\"", tool.name));
                forced += head.len() + name.len();
                last = name.len() - 1;
            }
        }
        let output = Output { job, limit: limit.saturating_sub(forced as u32), guard_repeats };
        let (end, generated) = self.generate(First::Index(last as i32), sampler, splitter, &output)?;
        Ok((end, generated + forced as u64))
    }

    fn splitter(&self, job: &Job) -> OutputSplitter {
        OutputSplitter::new(!job.tools.is_empty(), job.stop_sequences.clone())
    }

    /// Evaluates `tokens` after the cached ones and returns their log-probability, `next` being the
    /// next-token logits before them. Leaves them in the KV cache, with the logits after each in the batch.
    fn force(&mut self, next: &[f32], tokens: &[LlamaToken]) -> Result<f64, ModelError> {
        let Some(first) = tokens.first() else { return Ok(0.0) };
        let mut score = decide::log_prob(next, first.0 as usize);
        let start = self.cached.len();
        let mut batch = LlamaBatch::new(tokens.len(), 1);
        for (offset, token) in tokens.iter().enumerate() {
            batch.add(*token, (start + offset) as i32, &[0], true).map_err(internal)?;
        }
        self.decode(&mut batch)?;
        self.cached.extend_from_slice(tokens);
        for (offset, token) in tokens.iter().enumerate().skip(1) {
            score += decide::log_prob(self.context.get_logits_ith(offset as i32 - 1), token.0 as usize);
        }
        Ok(score)
    }

    /// Drops the KV cache after its first `len` tokens.
    fn truncate_cache(&mut self, len: usize) -> Result<(), ModelError> {
        if self.context.clear_kv_cache_seq(Some(0), Some(len as u32), None).unwrap_or(false) {
            self.cached.truncate(len);
            return Ok(());
        }
        self.context.clear_kv_cache();
        self.cached.clear();
        Err(internal("cannot drop the end of the KV cache"))
    }

    /// Drops everything after the prompt from the KV cache (evaluating the prompt again if llama.cpp
    /// cannot drop a range).
    fn rewind(&mut self, prompt_len: usize, prompt: &[LlamaToken]) -> Result<(), ModelError> {
        match self.truncate_cache(prompt_len) {
            Ok(()) => Ok(()),
            Err(_) => self.evaluate_prompt(prompt).map(|_| ()),
        }
    }

    /// Decodes a batch; on failure the KV cache is cleared, since its content is then unknown.
    fn decode(&mut self, batch: &mut LlamaBatch) -> Result<(), ModelError> {
        self.context.decode(batch).map_err(|error| {
            self.context.clear_kv_cache();
            self.cached.clear();
            internal(error)
        })
    }

    /// The prompt text: the model's chat template, or ChatML when it has none llama.cpp knows.
    fn render(&self, messages: &[ChatMessage]) -> String {
        let chat: Option<Vec<LlamaChatMessage>> = messages
            .iter()
            .map(|message| LlamaChatMessage::new(message.role.to_owned(), message.content.clone()).ok())
            .collect();
        match (&self.template, chat) {
            (Some(template), Some(chat)) => {
                self.model.apply_chat_template(template, &chat, true).unwrap_or_else(|_| format::chatml(messages))
            }
            _ => format::chatml(messages),
        }
    }

    /// The sampler chain for a text answer or for the rest of a call.
    fn sampler(&self, grammar: Option<&ToolGrammar>, temperature: f32, mode: Mode) -> Result<LlamaSampler, ModelError> {
        let mut chain = Vec::new();
        if let Some(grammar) = grammar {
            let constrained = if grammar.lazy && mode == Mode::Text {
                LlamaSampler::grammar_lazy(self.model, &grammar.gbnf, ROOT_RULE, [TOOL_CALL_OPEN], &[])
            } else {
                LlamaSampler::grammar(self.model, &grammar.gbnf, ROOT_RULE)
            };
            chain.push(constrained.map_err(|error| ModelError::Configuration {
                message: format!("llama.cpp rejected the tool grammar: {error}"),
            })?);
        }
        if mode == Mode::Text {
            chain.push(LlamaSampler::penalties(-1, REPEAT_WINDOW, REPEAT_PENALTY, 0.0, 0.0));
        }
        if temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            chain.push(LlamaSampler::top_k(40));
            chain.push(LlamaSampler::top_p(0.9, 1));
            chain.push(LlamaSampler::temp(temperature));
            chain.push(LlamaSampler::dist(self.seed));
        }
        Ok(LlamaSampler::chain_simple(chain))
    }

    /// Evaluates the prompt tokens that are not in the KV cache yet; returns the batch index of the last
    /// token's logits.
    fn evaluate_prompt(&mut self, tokens: &[LlamaToken]) -> Result<i32, ModelError> {
        let mut reuse = self.cached.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        // The last prompt token must be evaluated again for its logits.
        reuse = reuse.min(tokens.len() - 1);
        let removed = self.context.clear_kv_cache_seq(Some(0), Some(reuse as u32), None).unwrap_or(false);
        if !removed {
            self.context.clear_kv_cache();
            reuse = 0;
        }
        self.cached.truncate(reuse);
        let mut batch = LlamaBatch::new(BATCH, 1);
        let last = tokens.len() - 1;
        for (chunk_start, chunk) in tokens[reuse..].chunks(BATCH).enumerate().map(|(i, c)| (reuse + i * BATCH, c)) {
            batch.clear();
            for (offset, token) in chunk.iter().enumerate() {
                let position = chunk_start + offset;
                batch.add(*token, position as i32, &[0], position == last).map_err(internal)?;
            }
            self.decode(&mut batch)?;
            self.cached.extend_from_slice(chunk);
        }
        Ok(((tokens.len() - reuse - 1) % BATCH) as i32)
    }

    /// Samples tokens until the output ends (end of turn, a tool call, a stop sequence, the limit) and sends
    /// them as stream parts.
    fn generate(
        &mut self,
        first: First,
        mut sampler: LlamaSampler,
        mut splitter: OutputSplitter,
        output: &Output<'_>,
    ) -> Result<(End, u64), ModelError> {
        let job = output.job;
        let repeats_of = output.guard_repeats.then_some(job.earlier_calls.as_slice());
        let mut emitter = Emitter::new(&job.parts, &job.tools, repeats_of);
        let mut next = first;
        let mut pending = Vec::new();
        let mut generated = 0u64;
        let mut batch = LlamaBatch::new(1, 1);
        let end = loop {
            if generated >= u64::from(output.limit) {
                break End::Length;
            }
            let token = match next {
                First::Index(index) => sampler.sample(&self.context, index),
                First::Saved { ref logits, banned } => sample_saved(&mut sampler, logits, banned)?,
            };
            generated += 1;
            if self.model.vocab().is_eog(token) {
                break End::Stop;
            }
            pending.extend(self.model.vocab().token_to_piece(token, true, None));
            let text = format::take_utf8(&mut pending);
            let mut ended = None;
            for event in splitter.feed(&text) {
                if let Some(end) = emitter.event(event)? {
                    ended = Some(end);
                }
            }
            if ended.is_none() && job.parts.is_closed() {
                ended = Some(End::Dropped);
            }
            if let Some(end) = ended {
                break end;
            }
            batch.clear();
            batch.add(token, self.cached.len() as i32, &[0], true).map_err(internal)?;
            self.decode(&mut batch)?;
            self.cached.push(token);
            next = First::Index(0);
        };
        if matches!(end, End::Stop | End::Length) {
            let events = splitter.finish().map_err(|error| match end {
                End::Length => ModelError::InvalidResponse {
                    message: format!("{error} (the output limit of {} tokens was reached)", output.limit),
                },
                _ => ModelError::InvalidResponse { message: error.to_string() },
            })?;
            for event in events {
                emitter.event(event)?;
            }
        }
        emitter.close_text();
        Ok((end, generated))
    }
}

/// What a sampler chain produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A text answer: a lazy (`auto`) grammar waits for `<tool_call>`, and recent tokens are penalised, since
    /// small models at temperature 0 otherwise fall into repeating a phrase until the token limit.
    Text,
    /// The rest of a call: the grammar applies from the first token, without penalties (arguments copy
    /// words the model has just read).
    Call,
}

/// Where the next token's distribution is.
enum First {
    /// In the context's logits for this index of the last decoded batch.
    Index(i32),
    /// In saved logits (the prompt's, after the KV cache was rewound), with a token that may not be chosen.
    Saved { logits: Vec<f32>, banned: Option<LlamaToken> },
}

/// Advances the sampler's state (its grammar) over tokens that were forced rather than sampled.
fn accept<'t>(sampler: &mut LlamaSampler, tokens: impl IntoIterator<Item = &'t LlamaToken>) -> Result<(), ModelError> {
    for token in tokens {
        sampler
            .try_accept(*token)
            .map_err(|error| internal(format!("the tool grammar rejected a forced token: {error}")))?;
    }
    Ok(())
}

/// Samples from saved logits and advances the sampler's state (grammar, penalties) with the choice.
fn sample_saved(
    sampler: &mut LlamaSampler,
    logits: &[f32],
    banned: Option<LlamaToken>,
) -> Result<LlamaToken, ModelError> {
    let candidates = logits.iter().enumerate().map(|(id, &logit)| {
        let token = LlamaToken(id as i32);
        LlamaTokenData::new(token, if Some(token) == banned { f32::NEG_INFINITY } else { logit }, 0.0)
    });
    let mut candidates = LlamaTokenDataArray::from_iter(candidates, false);
    candidates.apply_sampler(sampler);
    let token = candidates.selected_token().ok_or_else(|| internal("the sampler chose no token"))?;
    sampler.accept(token);
    Ok(token)
}

/// What one generation produces and under which limits.
struct Output<'j> {
    job: &'j Job,
    /// Output tokens allowed.
    limit: u32,
    /// True for a call `auto` decided to make: a repeat of an earlier call ends it with [`End::Repeat`].
    guard_repeats: bool,
}

/// `TOOLGATE_LOCAL_THREADS`, else all cores but one (at least one). llama.cpp's threads spin while they
/// wait for each other, so using every core collapses throughput (10x measured on 2 cores) as soon as anything
/// else runs.
fn default_threads() -> usize {
    std::env::var("TOOLGATE_LOCAL_THREADS")
        .ok()
        .and_then(|threads| threads.parse().ok())
        .filter(|threads| *threads > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |cores| cores.get().saturating_sub(1).max(1)))
}

fn internal(error: impl std::fmt::Display) -> ModelError {
    ModelError::InvalidResponse { message: format!("llama.cpp failed: {error}") }
}
