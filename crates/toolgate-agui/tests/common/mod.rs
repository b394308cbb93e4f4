//! Helpers for the adapter's integration tests: a scripted server run and a
//! small client that applies events the way `@ag-ui/client` does.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::approval::ApprovalSigner;
use toolgate::demo::DeleteFileInput;
use toolgate::protocol::ModelMessage;
use toolgate::{RecordingModel, ScriptedModel, TextRequest, Tool, ToolError, Toolkit, demo};
use toolgate_agui::{EncoderOptions, RunAgentInput, run_events};

/// Ids `{prefix}1`, `{prefix}2`, ...
pub fn counter(prefix: &'static str) -> impl Fn() -> String + Send + Sync + 'static {
    let next = AtomicUsize::new(0);
    move || format!("{prefix}{}", next.fetch_add(1, Ordering::SeqCst) + 1)
}

/// A scripted model from its turns as JSON.
pub fn script(turns: Value) -> ScriptedModel {
    ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).expect("test script parses")
}

/// The inputs `delete_file` ran with.
#[derive(Clone, Default)]
pub struct Deletions(Arc<Mutex<Vec<String>>>);

impl Deletions {
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// The demo toolkit, with a `delete_file` that records what it deleted.
pub fn toolkit(deletions: &Deletions) -> Toolkit {
    let log = deletions.clone();
    let delete = Tool::function::<DeleteFileInput>("delete_file").needs_approval(true).handler(
        move |input: DeleteFileInput, _| {
            let log = log.clone();
            async move {
                log.0.lock().unwrap().push(input.path.clone());
                Ok::<_, ToolError>(json!({"deleted": input.path}))
            }
        },
    );
    let tools = demo::tools().into_iter().map(|tool| if tool.name() == "delete_file" { delete.clone() } else { tool });
    Toolkit::new(tools).expect("toolkit builds")
}

/// A server: one model, one toolkit, optional signing; deterministic ids.
pub struct Server {
    pub model: RecordingModel<ScriptedModel>,
    pub deletions: Deletions,
    pub signer: Option<ApprovalSigner>,
    runs: AtomicUsize,
}

impl Server {
    pub fn new(turns: Value) -> Self {
        Self {
            model: RecordingModel::new(script(turns)),
            deletions: Deletions::default(),
            signer: None,
            runs: AtomicUsize::new(0),
        }
    }

    pub fn signed(mut self) -> Self {
        self.signer = Some(ApprovalSigner::new("test secret").unwrap());
        self
    }

    /// Runs one AG-UI run and returns its events as JSON. Message ids are
    /// `r{run}m{n}`, approval nonces `n{n}`.
    pub async fn run(&self, input: Value) -> Vec<Value> {
        let input = RunAgentInput::from_value(input).expect("test input decodes");
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let prefix: &'static str = Box::leak(format!("r{run}m").into_boxed_str());
        let options = EncoderOptions::default().id_generator(counter(prefix));
        let toolkit = toolkit(&self.deletions);
        let signer = self.signer.clone();
        let events = run_events(&self.model, input, options, move |messages| {
            let request = TextRequest::new(messages).toolkit(toolkit).id_generator(counter("n"));
            match signer {
                Some(signer) => request.approval_signer(signer),
                None => request,
            }
        });
        events.map(|event| serde_json::to_value(event).unwrap()).collect().await
    }

    /// The prompts the model received, as JSON.
    pub fn prompts(&self) -> Vec<Value> {
        self.model.prompts().iter().map(|prompt| serde_json::to_value(prompt).unwrap()).collect()
    }

    /// The last prompt the model received.
    pub fn last_prompt(&self) -> Value {
        self.prompts().pop().expect("the model was called")
    }
}

/// A minimal AG-UI client: applies events to its messages and state the way
/// `@ag-ui/client` does (snapshots replace, results go after their call).
pub struct Client {
    pub thread_id: String,
    pub messages: Vec<Value>,
    pub state: Value,
    pub interrupts: Vec<Value>,
    runs: usize,
}

impl Client {
    pub fn new() -> Self {
        Self { thread_id: "t1".into(), messages: Vec::new(), state: json!({}), interrupts: Vec::new(), runs: 0 }
    }

    pub fn say(&mut self, text: &str) {
        let id = format!("u{}", self.messages.len() + 1);
        self.messages.push(json!({"id": id, "role": "user", "content": text}));
    }

    /// The next run's input.
    pub fn input(&mut self, resume: Option<Value>) -> Value {
        self.runs += 1;
        let mut input = json!({
            "threadId": self.thread_id, "runId": format!("run{}", self.runs), "tools": [], "context": [],
            "forwardedProps": {}, "state": self.state, "messages": self.messages
        });
        if let Some(resume) = resume {
            input["resume"] = resume;
        }
        input
    }

    /// Applies a run's events; returns the messages built from the streaming
    /// events alone (before any MESSAGES_SNAPSHOT replaced them).
    pub fn apply(&mut self, events: &[Value]) -> Vec<Value> {
        let mut streamed = None;
        for event in events {
            match event["type"].as_str().unwrap() {
                "TEXT_MESSAGE_START" => {
                    self.assistant(&event["messageId"]);
                }
                "TEXT_MESSAGE_CONTENT" => {
                    let message = self.assistant(&event["messageId"]);
                    let text =
                        format!("{}{}", message["content"].as_str().unwrap_or(""), event["delta"].as_str().unwrap());
                    message["content"] = json!(text);
                }
                "TOOL_CALL_START" => {
                    let call = json!({"id": event["toolCallId"], "type": "function",
                        "function": {"name": event["toolCallName"], "arguments": ""}});
                    let message = self.assistant(&event["parentMessageId"]);
                    match message.get_mut("toolCalls") {
                        Some(calls) => calls.as_array_mut().unwrap().push(call),
                        None => message["toolCalls"] = json!([call]),
                    }
                }
                "TOOL_CALL_ARGS" => {
                    let call = self.call(&event["toolCallId"]);
                    let args = format!(
                        "{}{}",
                        call["function"]["arguments"].as_str().unwrap(),
                        event["delta"].as_str().unwrap()
                    );
                    call["function"]["arguments"] = json!(args);
                }
                "TOOL_CALL_RESULT" => {
                    let message = json!({"id": event["messageId"], "toolCallId": event["toolCallId"], "role": "tool",
                        "content": event["content"]});
                    let owner = self.messages.iter().position(|m| {
                        m["toolCalls"]
                            .as_array()
                            .is_some_and(|calls| calls.iter().any(|c| c["id"] == event["toolCallId"]))
                    });
                    match owner {
                        None => self.messages.push(message),
                        Some(owner) => {
                            let mut at = owner + 1;
                            while self.messages.get(at).is_some_and(|m| m["role"] == "tool") {
                                at += 1;
                            }
                            self.messages.insert(at, message);
                        }
                    }
                }
                "REASONING_MESSAGE_START" => {
                    self.messages.push(json!({"id": event["messageId"], "role": "reasoning", "content": ""}));
                }
                "REASONING_MESSAGE_CONTENT" => {
                    let message = self.messages.iter_mut().find(|m| m["id"] == event["messageId"]).unwrap();
                    let text = format!("{}{}", message["content"].as_str().unwrap(), event["delta"].as_str().unwrap());
                    message["content"] = json!(text);
                }
                "MESSAGES_SNAPSHOT" => {
                    streamed.get_or_insert_with(|| self.messages.clone());
                    self.messages = event["messages"].as_array().unwrap().clone();
                }
                "STATE_SNAPSHOT" => self.state = event["snapshot"].clone(),
                "RUN_FINISHED" => {
                    self.interrupts = match event["outcome"]["type"].as_str() {
                        Some("interrupt") => event["outcome"]["interrupts"].as_array().unwrap().clone(),
                        _ => Vec::new(),
                    };
                }
                _ => {}
            }
        }
        streamed.unwrap_or_else(|| self.messages.clone())
    }

    fn assistant(&mut self, id: &Value) -> &mut Value {
        let position = match self.messages.iter().position(|m| &m["id"] == id) {
            Some(position) => position,
            None => {
                self.messages.push(json!({"id": id, "role": "assistant"}));
                self.messages.len() - 1
            }
        };
        &mut self.messages[position]
    }

    fn call(&mut self, id: &Value) -> &mut Value {
        self.messages
            .iter_mut()
            .flat_map(|m| m.get_mut("toolCalls").and_then(Value::as_array_mut).into_iter().flatten())
            .find(|call| &call["id"] == id)
            .unwrap()
    }

    /// The interrupt ids of the last run.
    pub fn interrupt_ids(&self) -> Vec<String> {
        self.interrupts.iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
    }
}

/// The `type`s of a run's events.
pub fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

/// The first event of this type.
pub fn first<'e>(events: &'e [Value], kind: &str) -> &'e Value {
    events.iter().find(|event| event["type"] == kind).unwrap_or_else(|| panic!("no {kind} in {events:#?}"))
}

/// The engine's prompt messages, as JSON, for comparisons.
pub fn model_messages(messages: &[ModelMessage]) -> Value {
    serde_json::to_value(messages).unwrap()
}
