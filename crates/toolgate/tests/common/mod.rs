//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate::protocol::{AssistantPart, ModelMessage, ToolPart, ToolResultOutput, parse_messages};
use toolgate::{EngineError, ScriptedModel, StreamPart, TextResult, TextStream, Tool, ToolError, Toolkit};

/// Parses AI SDK ModelMessage JSON.
pub fn messages(value: Value) -> Vec<ModelMessage> {
    parse_messages(value).expect("test history parses")
}

/// A scripted model from its turns as JSON.
pub fn script(turns: Value) -> ScriptedModel {
    ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).expect("test script parses")
}

/// Records every tool execution: (tool name, tool call id, input).
#[derive(Clone, Default)]
pub struct Executions(Arc<Mutex<Vec<(String, String, Value)>>>);

impl Executions {
    pub fn record(&self, tool: &str, call_id: &str, input: Value) {
        self.0.lock().unwrap().push((tool.into(), call_id.into(), input));
    }
    pub fn all(&self) -> Vec<(String, String, Value)> {
        self.0.lock().unwrap().clone()
    }
    pub fn call_ids(&self) -> Vec<String> {
        self.all().into_iter().map(|(_, id, _)| id).collect()
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct PathInput {
    pub path: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct CityInput {
    pub city: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct TransferInput {
    pub amount: f64,
    pub to: String,
}

/// delete_file (always gated), get_weather (never), transfer_money (gated above 1000), ask_user (client).
pub fn tools(log: &Executions) -> Vec<Tool> {
    let (a, b, c) = (log.clone(), log.clone(), log.clone());
    vec![
        Tool::function::<PathInput>("delete_file").needs_approval(true).handler(move |input: PathInput, ctx| {
            let log = a.clone();
            async move {
                log.record("delete_file", ctx.tool_call_id(), json!({"path": input.path}));
                Ok::<_, ToolError>(json!({"deleted": input.path}))
            }
        }),
        Tool::function::<CityInput>("get_weather").handler(move |input: CityInput, ctx| {
            let log = b.clone();
            async move {
                log.record("get_weather", ctx.tool_call_id(), json!({"city": input.city}));
                Ok::<_, ToolError>(json!({"city": input.city, "temperatureC": 21}))
            }
        }),
        Tool::function::<TransferInput>("transfer_money")
            .approval_when(|input: &TransferInput, _| input.amount > 1000.0)
            .handler(move |input: TransferInput, ctx| {
                let log = c.clone();
                async move {
                    log.record("transfer_money", ctx.tool_call_id(), json!({"amount": input.amount, "to": input.to}));
                    Ok::<_, ToolError>(json!({"transferred": input.amount}))
                }
            }),
        Tool::function::<Value>("ask_user").client_executed(),
    ]
}

pub fn toolkit(log: &Executions) -> Toolkit {
    Toolkit::new(tools(log)).expect("test toolkit builds")
}

/// A history where the model called delete_file(notes.txt) as call-1 and asked approval apr_1.
pub fn asked_to_delete() -> Value {
    json!([
        {"role": "user", "content": "delete notes.txt"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}},
            {"type": "tool-approval-request", "approvalId": "apr_1", "toolCallId": "call-1"}
        ]}
    ])
}

/// `asked_to_delete` plus an answer.
pub fn answered(response: Value) -> Vec<ModelMessage> {
    let mut history = asked_to_delete();
    history.as_array_mut().unwrap().push(json!({"role": "tool", "content": [response]}));
    messages(history)
}

/// A model that answers every turn with "ok".
pub fn ok_model() -> ScriptedModel {
    script(json!([[{"type": "text", "text": "ok"}, {"type": "finish", "finishReason": "stop"}]]))
}

/// Drains a stream into its parts and outcome.
pub async fn drain(mut stream: TextStream<'_>) -> (Vec<StreamPart>, Result<TextResult, EngineError>) {
    let mut parts = Vec::new();
    while let Some(part) = stream.next().await {
        parts.push(part);
    }
    (parts, stream.finish().await)
}

/// The `type` tags of parts, for order checks.
pub fn kinds(parts: &[StreamPart]) -> Vec<String> {
    parts.iter().map(|p| serde_json::to_value(p).unwrap()["type"].as_str().unwrap().to_owned()).collect()
}

/// Every tool result in a list of messages, as (tool call id, output).
pub fn results(messages: &[ModelMessage]) -> Vec<(String, ToolResultOutput)> {
    let mut out = Vec::new();
    for message in messages {
        match message {
            ModelMessage::Tool(tool) => {
                for part in &tool.content {
                    if let ToolPart::ToolResult(result) = part {
                        out.push((result.tool_call_id.clone(), result.output.clone()));
                    }
                }
            }
            ModelMessage::Assistant(assistant) => {
                for part in assistant.part_slice() {
                    if let AssistantPart::ToolResult(result) = part {
                        out.push((result.tool_call_id.clone(), result.output.clone()));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The messages as JSON, for whole-value comparisons.
pub fn to_json(messages: &[ModelMessage]) -> Value {
    serde_json::to_value(messages).unwrap()
}
