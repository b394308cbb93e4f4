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
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::{mpsc as async_mpsc, oneshot};
use toolgate::ModelError;
use toolgate::protocol::{FinishReason, ModelStreamPart, ModelToolCall, Usage};

use crate::LocalConfig;
use crate::format::{self, ChatMessage, Event, FunctionTool, OutputSplitter, TOOL_CALL_OPEN};
use crate::grammar::{ROOT_RULE, ToolGrammar};

/// Prompt tokens evaluated per llama.cpp batch.
const BATCH: usize = 512;

/// What a loaded model reports about itself.
#[derive(Debug, Clone)]
pub(crate) struct ModelInfo {
    pub context_length: u32,
    pub chat_template: Option<String>,
}

/// One generation.
pub(crate) struct Job {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<FunctionTool>,
    pub grammar: Option<ToolGrammar>,
    pub max_output_tokens: u32,
    pub temperature: f32,
    pub stop_sequences: Vec<String>,
    /// Answered once the prompt fits (or with the reason it does not), before any part is sent.
    pub ready: oneshot::Sender<Result<(), ModelError>>,
    pub parts: async_mpsc::UnboundedSender<Result<ModelStreamPart, ModelError>>,
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
pub(crate) fn spawn(path: PathBuf, config: LocalConfig) -> Result<(mpsc::Sender<Job>, ModelInfo), String> {
    let (jobs, receiver) = mpsc::channel::<Job>();
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
            let chat_template = model.chat_template(None).ok().and_then(|template| template.to_string().ok());
            let info = ModelInfo { context_length: context.n_ctx(), chat_template };
            if loaded_tx.send(Ok(info)).is_err() {
                return;
            }
            let mut worker = Worker { model: &model, context, cached: Vec::new(), seed: config.seed };
            while let Ok(job) = receiver.recv() {
                worker.run(job);
            }
        })
        .map_err(|error| format!("cannot start the model thread: {error}"))?;
    let info = loaded_rx.recv().map_err(|_| "the model thread stopped while loading".to_owned())??;
    Ok((jobs, info))
}

struct Worker<'m> {
    model: &'m LlamaModel,
    context: LlamaContext<'m>,
    /// The tokens in the KV cache (sequence 0), in order.
    cached: Vec<LlamaToken>,
    seed: u32,
}

/// How a generation ended.
enum End {
    Stop,
    Length,
    ToolCall,
    /// The consumer went away.
    Dropped,
}

impl Worker<'_> {
    fn run(&mut self, job: Job) {
        let Job { messages, tools, grammar, max_output_tokens, temperature, stop_sequences, ready, parts } = job;
        let prompt = self.render(&messages);
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
        let sampler = match self.sampler(grammar.as_ref(), temperature) {
            Ok(sampler) => sampler,
            Err(error) => {
                let _ = ready.send(Err(error));
                return;
            }
        };
        if ready.send(Ok(())).is_err() {
            return;
        }
        let room = (context_length - tokens.len()) as u32;
        let limit = max_output_tokens.min(room);
        let prompt_tokens = tokens.len() as u64;
        let result = self.generate(tokens, sampler, limit, !tools.is_empty(), stop_sequences, &tools, &parts);
        match result {
            Ok((end, output_tokens)) => {
                let finish_reason = match end {
                    End::Stop => FinishReason::Stop,
                    End::Length => FinishReason::Length,
                    End::ToolCall => FinishReason::ToolCalls,
                    End::Dropped => return,
                };
                let usage = Usage {
                    input_tokens: Some(prompt_tokens),
                    output_tokens: Some(output_tokens),
                    total_tokens: Some(prompt_tokens + output_tokens),
                    ..Usage::default()
                };
                let _ = parts.send(Ok(ModelStreamPart::Finish { finish_reason, usage, provider_metadata: None }));
            }
            Err(error) => {
                let _ = parts.send(Err(error));
            }
        }
    }

    /// The prompt text: the model's chat template, or ChatML when it has none llama.cpp knows.
    fn render(&self, messages: &[ChatMessage]) -> String {
        let template = self.model.chat_template(None).ok();
        let chat: Option<Vec<LlamaChatMessage>> = messages
            .iter()
            .map(|message| LlamaChatMessage::new(message.role.to_owned(), message.content.clone()).ok())
            .collect();
        match (template, chat) {
            (Some(template), Some(chat)) => {
                self.model.apply_chat_template(&template, &chat, true).unwrap_or_else(|_| format::chatml(messages))
            }
            _ => format::chatml(messages),
        }
    }

    fn sampler(&self, grammar: Option<&ToolGrammar>, temperature: f32) -> Result<LlamaSampler, ModelError> {
        let mut chain = Vec::new();
        if let Some(grammar) = grammar {
            let constrained = if grammar.lazy {
                LlamaSampler::grammar_lazy(self.model, &grammar.gbnf, ROOT_RULE, [TOOL_CALL_OPEN], &[])
            } else {
                LlamaSampler::grammar(self.model, &grammar.gbnf, ROOT_RULE)
            };
            chain.push(constrained.map_err(|error| ModelError::Configuration {
                message: format!("llama.cpp rejected the tool grammar: {error}"),
            })?);
        }
        if temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            chain.push(LlamaSampler::penalties(-1, 64, 1.1, 0.0, 0.0));
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
            if let Err(error) = self.context.decode(&mut batch) {
                self.context.clear_kv_cache();
                self.cached.clear();
                return Err(internal(error));
            }
            self.cached.extend_from_slice(chunk);
        }
        Ok(((tokens.len() - reuse - 1) % BATCH) as i32)
    }

    #[allow(clippy::too_many_arguments)]
    fn generate(
        &mut self,
        tokens: Vec<LlamaToken>,
        mut sampler: LlamaSampler,
        limit: u32,
        tools_on: bool,
        stop_sequences: Vec<String>,
        tools: &[FunctionTool],
        parts: &async_mpsc::UnboundedSender<Result<ModelStreamPart, ModelError>>,
    ) -> Result<(End, u64), ModelError> {
        let mut logits_index = self.evaluate_prompt(&tokens)?;
        let mut splitter = OutputSplitter::new(tools_on, stop_sequences);
        let mut emitter = Emitter { parts, text_open: false, tools };
        let mut pending = Vec::new();
        let mut generated = 0u64;
        let mut batch = LlamaBatch::new(1, 1);
        let end = loop {
            if generated >= u64::from(limit) {
                break End::Length;
            }
            let token = sampler.sample(&self.context, logits_index);
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
            if ended.is_none() && parts.is_closed() {
                ended = Some(End::Dropped);
            }
            if let Some(end) = ended {
                break end;
            }
            batch.clear();
            batch.add(token, self.cached.len() as i32, &[0], true).map_err(internal)?;
            if let Err(error) = self.context.decode(&mut batch) {
                self.context.clear_kv_cache();
                self.cached.clear();
                return Err(internal(error));
            }
            self.cached.push(token);
            logits_index = 0;
        };
        if matches!(end, End::Stop | End::Length) {
            pending.clear();
            let events = splitter.finish().map_err(|error| match end {
                End::Length => ModelError::InvalidResponse {
                    message: format!("{error} (the output limit of {limit} tokens was reached)"),
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

/// Turns splitter events into stream parts.
struct Emitter<'a> {
    parts: &'a async_mpsc::UnboundedSender<Result<ModelStreamPart, ModelError>>,
    text_open: bool,
    tools: &'a [FunctionTool],
}

/// The id of the (single) text block of a response.
const TEXT_ID: &str = "text-0";

impl Emitter<'_> {
    fn send(&self, part: ModelStreamPart) {
        let _ = self.parts.send(Ok(part));
    }

    fn close_text(&mut self) {
        if std::mem::take(&mut self.text_open) {
            self.send(ModelStreamPart::TextEnd { id: TEXT_ID.to_owned() });
        }
    }

    /// Sends an event's parts; `Some` when generation should end.
    fn event(&mut self, event: Event) -> Result<Option<End>, ModelError> {
        match event {
            Event::Text(delta) => {
                if !self.text_open {
                    self.text_open = true;
                    self.send(ModelStreamPart::TextStart { id: TEXT_ID.to_owned() });
                }
                self.send(ModelStreamPart::TextDelta { id: TEXT_ID.to_owned(), delta });
                Ok(None)
            }
            Event::Stop => Ok(Some(End::Stop)),
            Event::Call(json) => {
                self.close_text();
                let call = format::parse_tool_call(&json, self.tools)
                    .map_err(|error| ModelError::InvalidResponse { message: error.to_string() })?;
                let id = format!("call_{}", uuid::Uuid::now_v7().simple());
                self.send(ModelStreamPart::ToolInputStart {
                    id: id.clone(),
                    tool_name: call.name.clone(),
                    provider_executed: None,
                });
                self.send(ModelStreamPart::ToolInputDelta { id: id.clone(), delta: call.arguments.clone() });
                self.send(ModelStreamPart::ToolInputEnd { id: id.clone() });
                self.send(ModelStreamPart::ToolCall(ModelToolCall {
                    tool_call_id: id,
                    tool_name: call.name,
                    input: call.arguments,
                    provider_executed: None,
                    provider_metadata: None,
                }));
                Ok(Some(End::ToolCall))
            }
        }
    }
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
