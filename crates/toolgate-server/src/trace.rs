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
///
/// Lines are written in the background: call `tracer.observer().flush()` before
/// reading the file or exiting the process.
pub fn trace_prompts<M>(inner: M, path: &Path) -> std::io::Result<PromptTracer<M>> {
    Ok(ObservedModel::with_observer(inner, TraceFile::open(path)?))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;

    /// What the model received, exactly as the trace wrote it before the writer thread (`json!` of the request).
    fn expected_line(request: &ModelRequest) -> String {
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
        json!({"prompt": request.prompt, "tools": tools, "toolChoice": request.tool_choice}).to_string()
    }

    fn request(prompt: Vec<ModelMessage>) -> ModelRequest {
        ModelRequest {
            prompt: prompt.into(),
            tools: vec![
                ToolSpec::Function { name: "f".into(), description: None, input_schema: json!({"type": "object"}) },
                ToolSpec::Function {
                    name: "g".into(),
                    description: Some("does g".into()),
                    input_schema: json!({"type": "object", "properties": {"x": {"type": "number"}}}),
                },
                ToolSpec::Provider { name: "p".into(), id: "openai.mcp".into(), args: json!({"serverLabel": "x"}) },
            ],
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
            temperature: None,
            stop_sequences: Vec::new(),
            provider_options: None,
        }
    }

    /// A fresh directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let dir = std::env::temp_dir().join(format!("toolgate-trace-{}", uuid::Uuid::now_v7().simple()));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn trace(&self) -> PathBuf {
            self.0.join("trace.jsonl")
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            std::fs::remove_dir_all(&self.0).ok();
        }
    }

    #[test]
    fn a_trace_handle_is_clone_debug_send_and_sync() {
        fn shareable<T: Clone + std::fmt::Debug + Send + Sync + 'static>() {}
        shareable::<TraceFile>();
    }

    #[test]
    fn requests_from_many_threads_are_each_one_exact_line_in_observed_order() {
        let dir = TempDir::new();
        let trace = TraceFile::open(&dir.trace()).unwrap();
        assert_eq!(trace.path(), dir.trace());
        let requests: Vec<Vec<(String, ModelRequest)>> = (0..4)
            .map(|thread| {
                (0..25)
                    .map(|i| format!("{thread}-{i}"))
                    .map(|text| (text.clone(), request(vec![ModelMessage::user(text)])))
                    .collect()
            })
            .collect();
        std::thread::scope(|scope| {
            for batch in &requests {
                let trace = trace.clone();
                scope.spawn(move || batch.iter().for_each(|(_, request)| trace.observe(request)));
            }
        });
        trace.flush();

        let text = std::fs::read_to_string(dir.trace()).unwrap();
        assert!(text.ends_with('\n'), "every line is terminated");
        let mut expected: HashMap<String, String> =
            requests.iter().flatten().map(|(text, request)| (text.clone(), expected_line(request))).collect();
        let mut seen = Vec::new();
        for line in text.lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["prompt", "tools", "toolChoice"]);
            let content = value["prompt"][0]["content"].as_str().unwrap().to_owned();
            let want = expected.remove(&content).unwrap_or_else(|| panic!("{content} traced once"));
            assert_eq!(line, want, "the same bytes json! wrote");
            seen.push(content);
        }
        assert!(expected.is_empty(), "every request was traced: {:?} missing", expected.keys());
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(
            first["tools"],
            json!([
                {"name": "f", "description": null, "inputSchema": {"type": "object"}},
                {"name": "g", "description": "does g", "inputSchema": {"type": "object", "properties": {"x": {"type": "number"}}}},
                {"name": "p", "id": "openai.mcp", "args": {"serverLabel": "x"}}
            ])
        );
        assert_eq!(first["toolChoice"], json!({"type": "auto"}));
        for thread in 0..4 {
            let order: Vec<&String> = seen.iter().filter(|text| text.starts_with(&format!("{thread}-"))).collect();
            let want: Vec<String> = (0..25).map(|i| format!("{thread}-{i}")).collect();
            assert_eq!(order, want.iter().collect::<Vec<_>>(), "each thread's lines in the order it observed them");
        }
    }

    #[test]
    fn a_large_prompt_is_one_complete_line() {
        let dir = TempDir::new();
        let trace = TraceFile::open(&dir.trace()).unwrap();
        let small = request(vec![ModelMessage::user("before")]);
        let big = request((0..5000).map(|i| ModelMessage::user(format!("message {i}"))).collect());
        trace.observe(&small);
        trace.observe(&big);
        trace.observe(&small);
        trace.flush();

        let text = std::fs::read_to_string(dir.trace()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, [expected_line(&small), expected_line(&big), expected_line(&small)]);
        let big_line: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(big_line["prompt"].as_array().unwrap().len(), 5000);
        assert_eq!(big_line["prompt"][4999]["content"], "message 4999");
    }

    #[test]
    fn lines_observed_after_a_flush_are_appended_by_the_next_flush() {
        let dir = TempDir::new();
        let trace = TraceFile::open(&dir.trace()).unwrap();
        trace.flush();
        assert_eq!(std::fs::read_to_string(dir.trace()).unwrap(), "", "nothing observed, nothing written");
        let first = request(vec![ModelMessage::user("one")]);
        trace.observe(&first);
        trace.flush();
        assert_eq!(std::fs::read_to_string(dir.trace()).unwrap(), expected_line(&first) + "\n");
        let second = request(vec![ModelMessage::user("two")]);
        trace.clone().observe(&second);
        trace.flush();
        trace.flush();
        assert_eq!(
            std::fs::read_to_string(dir.trace()).unwrap(),
            expected_line(&first) + "\n" + &expected_line(&second) + "\n"
        );
    }

    #[test]
    fn dropping_every_handle_writes_out_the_queued_lines() {
        let dir = TempDir::new();
        let trace = TraceFile::open(&dir.trace()).unwrap();
        let requests: Vec<ModelRequest> =
            (0..50).map(|i| request(vec![ModelMessage::user(format!("queued {i}"))])).collect();
        requests.iter().for_each(|request| trace.observe(request));
        drop(trace);

        let want: String = requests.iter().map(|request| expected_line(request) + "\n").collect();
        // No handle is left to flush with: the writer drains and flushes on its own. Poll for it.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut text = std::fs::read_to_string(dir.trace()).unwrap();
        while text != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            text = std::fs::read_to_string(dir.trace()).unwrap();
        }
        assert_eq!(text, want);
    }

    #[test]
    fn an_existing_trace_is_appended_to() {
        let dir = TempDir::new();
        std::fs::write(dir.trace(), "earlier\n").unwrap();
        let trace = TraceFile::open(&dir.trace()).unwrap();
        let request = request(vec![ModelMessage::user("later")]);
        trace.observe(&request);
        trace.flush();
        assert_eq!(std::fs::read_to_string(dir.trace()).unwrap(), format!("earlier\n{}\n", expected_line(&request)));
    }

    /// `/dev/full` fails every write with ENOSPC: the error is logged, observing and flushing still return.
    #[cfg(target_os = "linux")]
    #[test]
    fn write_errors_never_fail_the_caller() {
        let trace = TraceFile::open(Path::new("/dev/full")).unwrap();
        let big = request((0..5000).map(|i| ModelMessage::user(format!("message {i}"))).collect());
        trace.observe(&big);
        trace.flush();
        trace.observe(&request(vec![ModelMessage::user("after the error")]));
        trace.flush();
    }
}
