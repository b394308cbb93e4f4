//! `--trace-prompts`: one JSON line per model call with exactly what the model received.
//!
//! Line shape: `{"prompt": [ModelMessage...], "tools": [{"name", "description",
//! "inputSchema"}], "toolChoice": ...}`. Provider-hosted tools appear with
//! their `id` and `args` instead of a schema. Works for any model.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use toolgate::LanguageModel;
use toolgate::model::{ModelError, ModelStream};
use toolgate_protocol::{ModelRequest, ModelResponse, ToolSpec};

/// Wraps a model and appends every request it receives to a file.
#[derive(Debug, Clone)]
pub struct PromptTracer<M> {
    inner: M,
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
}

impl<M> PromptTracer<M> {
    /// Opens (or creates) `path` for appending.
    pub fn new(inner: M, path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { inner, path: path.to_owned(), file: Arc::new(Mutex::new(file)) })
    }

    fn record(&self, request: &ModelRequest) {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| match tool {
                ToolSpec::Function { name, description, input_schema } => {
                    json!({"name": name, "description": description, "inputSchema": input_schema})
                }
                ToolSpec::Provider { name, id, args } => json!({"name": name, "id": id, "args": args}),
            })
            .collect();
        let line = json!({"prompt": request.prompt, "tools": tools, "toolChoice": request.tool_choice});
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = writeln!(file, "{line}").and_then(|()| file.flush()) {
            tracing::error!(path = %self.path.display(), %error, "cannot write the prompt trace");
        }
    }
}

impl<M: LanguageModel> LanguageModel for PromptTracer<M> {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        self.record(&request);
        self.inner.generate(request).await
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        self.record(&request);
        self.inner.stream(request).await
    }
}
