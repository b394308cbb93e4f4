//! `--trace-prompts`: one JSON line per model call with exactly what the model received.
//!
//! Line shape: `{"prompt": [ModelMessage...], "tools": [{"name", "description",
//! "inputSchema"}], "toolChoice": ...}`. Provider-hosted tools appear with
//! their `id` and `args` instead of a schema. Works for any model: it is a
//! [`RequestObserver`] on the core's [`ObservedModel`].
//!
//! Contract: the request path only serializes the line into one buffer (no
//! copy of the prompt, no IO); a background thread writes the lines, in the
//! order they were observed, through one buffered writer and flushes whenever
//! it has nothing left to write, so each line reaches the file in a few large
//! writes. [`TraceFile::flush`] waits until every line observed so far is in
//! the file. Write errors are logged, never raised: tracing never fails a request.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::Serialize;
use serde_json::Value;
use toolgate::model::{ObservedModel, RequestObserver};
use toolgate_protocol::{ModelMessage, ModelRequest, ToolChoice, ToolSpec};

/// What the writer thread is asked to do.
enum Command {
    /// Append this line (it ends with a newline).
    Line(Vec<u8>),
    /// Flush, then acknowledge.
    Flush(mpsc::SyncSender<()>),
}

/// Appends each request to a file as one JSON line, off the request path. Clones share the file.
#[derive(Debug, Clone)]
pub struct TraceFile {
    path: PathBuf,
    commands: mpsc::Sender<Command>,
}

impl TraceFile {
    /// Opens (or creates) `path` for appending and starts its writer thread.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let (commands, queue) = mpsc::channel();
        let thread_path = path.to_owned();
        std::thread::Builder::new()
            .name("toolgate-trace".into())
            .spawn(move || write_lines(&thread_path, file, &queue))?;
        Ok(Self { path: path.to_owned(), commands })
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Blocks until every line observed before this call is written and flushed.
    pub fn flush(&self) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.commands.send(Command::Flush(done)).is_ok() {
            // The writer acknowledges every flush; it only stops once every sender is gone.
            let _ = wait.recv();
        }
    }
}

/// The writer thread: lines in order, one flush whenever the queue is empty.
fn write_lines(path: &Path, file: std::fs::File, queue: &mpsc::Receiver<Command>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
    let report = |error: std::io::Error| {
        tracing::error!(path = %path.display(), %error, "cannot write the prompt trace");
    };
    while let Ok(first) = queue.recv() {
        let mut next = Some(first);
        while let Some(command) = next.take() {
            match command {
                Command::Line(line) => out.write_all(&line).unwrap_or_else(report),
                Command::Flush(done) => {
                    out.flush().unwrap_or_else(report);
                    let _ = done.send(());
                }
            }
            next = queue.try_recv().ok();
        }
        out.flush().unwrap_or_else(report);
    }
    out.flush().unwrap_or_else(report);
}

/// One trace line, borrowing from the request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TraceLine<'r> {
    prompt: &'r [ModelMessage],
    tools: Vec<TracedTool<'r>>,
    tool_choice: &'r ToolChoice,
}

#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum TracedTool<'r> {
    Function { name: &'r str, description: &'r Option<String>, input_schema: &'r Value },
    Provider { name: &'r str, id: &'r str, args: &'r Value },
}

impl RequestObserver for TraceFile {
    fn observe(&self, request: &ModelRequest) {
        let tools = request
            .tools
            .iter()
            .map(|tool| match tool {
                ToolSpec::Function { name, description, input_schema } => {
                    TracedTool::Function { name, description, input_schema }
                }
                ToolSpec::Provider { name, id, args } => TracedTool::Provider { name, id, args },
            })
            .collect();
        let line = TraceLine { prompt: &request.prompt, tools, tool_choice: &request.tool_choice };
        match serde_json::to_vec(&line) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                if self.commands.send(Command::Line(bytes)).is_err() {
                    tracing::error!(path = %self.path.display(), "the prompt trace writer has stopped");
                }
            }
            Err(error) => tracing::error!(%error, "cannot serialize a prompt trace line"),
        }
    }
}

/// A model whose prompts are traced to a file.
pub type PromptTracer<M> = ObservedModel<M, TraceFile>;

/// Wraps `inner` so every request it receives is appended to `path`.
pub fn trace_prompts<M>(inner: M, path: &Path) -> std::io::Result<PromptTracer<M>> {
    Ok(ObservedModel::with_observer(inner, TraceFile::open(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_protocol::ModelMessage;

    fn request(prompt: Vec<ModelMessage>) -> ModelRequest {
        ModelRequest {
            prompt,
            tools: vec![
                ToolSpec::Function { name: "f".into(), description: None, input_schema: json!({"type": "object"}) },
                ToolSpec::Provider { name: "p".into(), id: "openai.mcp".into(), args: json!({"serverLabel": "x"}) },
            ],
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
            temperature: None,
            stop_sequences: Vec::new(),
            provider_options: None,
        }
    }

    #[test]
    fn every_observed_request_is_one_complete_line_in_order() {
        let dir = std::env::temp_dir().join(format!("toolgate-trace-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        let trace = TraceFile::open(&path).unwrap();
        let big: Vec<ModelMessage> = (0..5000).map(|i| ModelMessage::user(format!("message {i}"))).collect();
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let trace = trace.clone();
                scope.spawn(move || {
                    for i in 0..25 {
                        trace.observe(&request(vec![ModelMessage::user(format!("{thread}-{i}"))]));
                    }
                });
            }
        });
        trace.observe(&request(big));
        trace.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(lines.len(), 101);
        assert_eq!(
            lines[0]["tools"],
            json!([
                {"name": "f", "description": null, "inputSchema": {"type": "object"}},
                {"name": "p", "id": "openai.mcp", "args": {"serverLabel": "x"}}
            ])
        );
        assert_eq!(lines[0]["toolChoice"], json!({"type": "auto"}));
        for thread in 0..4 {
            let order: Vec<String> = lines[..100]
                .iter()
                .map(|line| line["prompt"][0]["content"].as_str().unwrap().to_owned())
                .filter(|text| text.starts_with(&format!("{thread}-")))
                .collect();
            assert_eq!(order, (0..25).map(|i| format!("{thread}-{i}")).collect::<Vec<_>>(), "in observed order");
        }
        assert_eq!(lines[100]["prompt"].as_array().unwrap().len(), 5000, "a large prompt is one whole line");
        std::fs::remove_dir_all(&dir).ok();
    }
}
