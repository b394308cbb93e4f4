//! `--trace-prompts`: one JSON line per model call with exactly what the model received.
//!
//! Line shape: `{"prompt": [ModelMessage...], "tools": [{"name", "description",
//! "inputSchema"}], "toolChoice": ...}`. Provider-hosted tools appear with
//! their `id` and `args` instead of a schema. Works for any model: it is a
//! [`RequestObserver`] on the core's [`ObservedModel`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use toolgate::model::{ObservedModel, RequestObserver};
use toolgate_protocol::{ModelRequest, ToolSpec};

/// Appends each request to a file as one JSON line.
#[derive(Debug, Clone)]
pub struct TraceFile {
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
}

impl TraceFile {
    /// Opens (or creates) `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { path: path.to_owned(), file: Arc::new(Mutex::new(file)) })
    }
}

impl RequestObserver for TraceFile {
    fn observe(&self, request: &ModelRequest) {
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

/// A model whose prompts are traced to a file.
pub type PromptTracer<M> = ObservedModel<M, TraceFile>;

/// Wraps `inner` so every request it receives is appended to `path`.
pub fn trace_prompts<M>(inner: M, path: &Path) -> std::io::Result<PromptTracer<M>> {
    Ok(ObservedModel::with_observer(inner, TraceFile::open(path)?))
}
