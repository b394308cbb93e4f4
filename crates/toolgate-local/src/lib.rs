//! An in-process local model for toolgate: a GGUF file run on the CPU by llama.cpp
//! (through the `llama-cpp-2` crate), with tool calls constrained by a grammar.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use toolgate::{ModelMessage, TextRequest, generate_text};
//! use toolgate_local::{LocalModel, pull};
//!
//! let model = LocalModel::load(pull::default_model_path())?; // after `toolgate model pull`
//! let request = TextRequest::new(vec![ModelMessage::user("Delete notes.txt")]).toolkit(toolgate::demo::toolkit());
//! let result = generate_text(&model, request).await?;
//! # Ok(()) }
//! ```
//!
//! - The prompt goes through the chat template in the GGUF metadata (ChatML when there is none
//!   llama.cpp knows); tools, tool calls and tool results are written as described in [`mod@format`].
//! - Tool calls are constrained by a grammar built from the tools' JSON Schemas ([`grammar`]), per the
//!   request's tool choice: `auto` (text or one call, decided as described in [`decide`]), `required` (one call), a named tool (one call of
//!   it), `none` (text, no tools shown).
//! - Limits: `max_output_tokens` (default [`LocalConfig::max_output_tokens`]), `temperature` (0 means
//!   greedy; default [`LocalConfig::temperature`]; text answers get a mild repetition penalty, calls none),
//!   `stop_sequences`; generation stops at the end of a tool call or the model's end-of-turn token. A
//!   prompt that does not fit the context fails with [`ModelError::ContextTooLong`] carrying the token
//!   counts.
//! - Output that is still not a valid call (cut off by the token limit, say) becomes
//!   [`ModelError::InvalidResponse`].
//!
//! A model is loaded once per process and path ([`LocalModel::load`] returns the already loaded one);
//! one worker thread per model runs the requests one after the other.

pub mod decide;
mod emit;
pub mod format;
pub mod grammar;
pub mod pull;
mod worker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak, mpsc};

use futures::StreamExt;
use tokio::sync::{mpsc as async_mpsc, oneshot};
use toolgate_model::{LanguageModel, ModelError, ModelStream};
use toolgate_protocol::{FinishReason, ModelContent, ModelRequest, ModelResponse, ModelStreamPart, ToolChoice, Usage};

/// The default context length (tokens), capped by what the model was trained with.
pub const DEFAULT_CONTEXT_LENGTH: u32 = 8192;

/// How a local model runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// Context length in tokens (default [`DEFAULT_CONTEXT_LENGTH`], at most the model's training context).
    pub context_length: Option<u32>,
    /// CPU threads (default: `TOOLGATE_LOCAL_THREADS`, else all cores but one).
    pub threads: Option<usize>,
    /// Output token limit when the request sets none.
    pub max_output_tokens: u32,
    /// Sampling temperature when the request sets none; 0 samples greedily.
    pub temperature: f32,
    /// The sampling seed.
    pub seed: u32,
    /// Tool choice `auto` answers with a call when the model's log-probability of starting one is at least
    /// this (see [`decide`]); `None` leaves the choice to sampling alone. Default:
    /// `TOOLGATE_LOCAL_AUTO_CALL_THRESHOLD` (a number, or `off`), else
    /// [`decide::DEFAULT_AUTO_CALL_THRESHOLD`].
    pub auto_call_threshold: Option<f64>,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            context_length: None,
            threads: None,
            max_output_tokens: 512,
            temperature: 0.0,
            seed: 42,
            auto_call_threshold: decide::threshold_from_env(),
        }
    }
}

/// Why a model could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file is missing.
    #[error("no model file at {0}")]
    Missing(PathBuf),
    /// llama.cpp could not load it.
    #[error("{0}")]
    Llama(String),
}

struct Inner {
    jobs: Mutex<mpsc::Sender<(worker::Job, worker::Ready)>>,
    model_id: String,
    path: PathBuf,
    config: LocalConfig,
    info: worker::ModelInfo,
}

/// A GGUF model run in this process (see the crate docs). Cheap to clone.
#[derive(Clone)]
pub struct LocalModel {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("path", &self.inner.path)
            .field("context_length", &self.inner.info.context_length)
            .finish_non_exhaustive()
    }
}

type Loaded = Mutex<HashMap<(PathBuf, String), Weak<Inner>>>;

impl LocalModel {
    /// Loads a GGUF file with the default [`LocalConfig`] (or returns the copy already loaded).
    /// Blocks while loading (about a second for the default model).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        Self::load_with(path, LocalConfig::default())
    }

    /// Loads a GGUF file (or returns the copy already loaded with the same configuration).
    pub fn load_with(path: impl AsRef<Path>, config: LocalConfig) -> Result<Self, LoadError> {
        static LOADED: std::sync::OnceLock<Loaded> = std::sync::OnceLock::new();
        let path = path.as_ref();
        if !path.is_file() {
            return Err(LoadError::Missing(path.to_path_buf()));
        }
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let key = (path.clone(), format!("{config:?}"));
        let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(inner) = loaded.get(&key).and_then(Weak::upgrade) {
            return Ok(Self { inner });
        }
        let (jobs, info) = worker::spawn(path.clone(), config.clone()).map_err(LoadError::Llama)?;
        let model_id = path
            .file_name()
            .map(|name| name.to_string_lossy().trim_end_matches(".gguf").to_owned())
            .unwrap_or_else(|| "local".to_owned());
        let inner = Arc::new(Inner { jobs: Mutex::new(jobs), model_id, path, config, info });
        loaded.retain(|_, model| model.strong_count() > 0);
        loaded.insert(key, Arc::downgrade(&inner));
        Ok(Self { inner })
    }

    /// The context length in tokens.
    pub fn context_length(&self) -> u32 {
        self.inner.info.context_length
    }

    /// The chat template from the GGUF metadata, if it has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.inner.info.chat_template.as_deref()
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn open(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let tools = format::offered_tools(&request.tools, &request.tool_choice);
        if let ToolChoice::Tool { tool_name } = &request.tool_choice
            && tools.is_empty()
        {
            return Err(ModelError::Configuration {
                message: format!("tool_choice names `{tool_name}`, which is not among the request's function tools"),
            });
        }
        if request.tool_choice == ToolChoice::Required && tools.is_empty() {
            return Err(ModelError::Configuration {
                message: "tool_choice is `required`, but the request offers no function tools".into(),
            });
        }
        let grammar = grammar::grammar_for(&tools, &request.tool_choice)
            .map_err(|error| ModelError::Configuration { message: error.to_string() })?;
        let section = format::tools_prompt(&tools, &request.tool_choice);
        let messages = format::chat_messages(&request.prompt, &section);
        let (ready_tx, ready_rx) = oneshot::channel();
        let (parts_tx, mut parts_rx) = async_mpsc::unbounded_channel();
        let job = worker::Job {
            messages,
            tools,
            grammar,
            auto_call_threshold: self.inner.config.auto_call_threshold,
            // Only a call `auto` decides to make is checked against them.
            earlier_calls: if request.tool_choice == ToolChoice::Auto && self.inner.config.auto_call_threshold.is_some()
            {
                decide::earlier_calls(&request.prompt)
            } else {
                Vec::new()
            },
            max_output_tokens: request.max_output_tokens.unwrap_or(self.inner.config.max_output_tokens).max(1),
            temperature: request.temperature.unwrap_or(self.inner.config.temperature),
            stop_sequences: request.stop_sequences,
            parts: parts_tx,
        };
        let stopped = || ModelError::Configuration { message: "the local model's worker thread has stopped".into() };
        self.inner
            .jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .send((job, ready_tx))
            .map_err(|_| stopped())?;
        ready_rx.await.map_err(|_| stopped())??;
        Ok(futures::stream::poll_fn(move |cx| parts_rx.poll_recv(cx)).boxed())
    }
}

impl LanguageModel for LocalModel {
    fn provider(&self) -> &str {
        "local"
    }

    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        collect(self.open(request).await?).await
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        self.open(request).await
    }
}

/// Collects a stream into a response.
async fn collect(mut stream: ModelStream) -> Result<ModelResponse, ModelError> {
    let mut content: Vec<ModelContent> = Vec::new();
    let mut finish = None;
    while let Some(part) = stream.next().await {
        match part? {
            ModelStreamPart::TextDelta { delta, .. } => match content.last_mut() {
                Some(ModelContent::Text { text }) => text.push_str(&delta),
                _ => content.push(ModelContent::Text { text: delta }),
            },
            ModelStreamPart::ToolCall(call) => content.push(ModelContent::ToolCall(call)),
            ModelStreamPart::Finish { finish_reason, usage, .. } => finish = Some((finish_reason, usage)),
            _ => {}
        }
    }
    let (finish_reason, usage): (FinishReason, Usage) = finish
        .ok_or_else(|| ModelError::StreamInterrupted { message: "the local model stopped without finishing".into() })?;
    Ok(ModelResponse { content, finish_reason, usage, provider_metadata: None })
}
