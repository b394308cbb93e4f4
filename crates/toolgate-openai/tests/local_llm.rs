//! A real OpenAI-compatible server: an approval round trip against
//! llama-cpp-python serving SmolLM2-135M-Instruct.
//!
//! Ignored by a plain `cargo test` (listed as such, with the reason):
//! `scripts/e2e-local-llm.sh` installs and starts the server, sets
//! `TOOLGATE_E2E_OPENAI_BASE_URL` (and `TOOLGATE_E2E_MODEL`) and runs it with
//! `--ignored`; run that way without the variable, it fails. Assertions are on structure only (tool
//! names, ids, results, approval states), never on the model's prose.

use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{AssistantPart, ModelMessage, ToolApprovalResponsePart, ToolPart, ToolResultOutput};
use toolgate::{RecordingModel, TextRequest, TextResult, ToolChoice, demo, stream_text};
use toolgate_openai::{OpenAiChatModel, OpenAiConfig};

fn base_url() -> String {
    std::env::var("TOOLGATE_E2E_OPENAI_BASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .expect("set TOOLGATE_E2E_OPENAI_BASE_URL (scripts/e2e-local-llm.sh starts a server and sets it)")
}

async fn run(model: &RecordingModel<OpenAiChatModel>, request: TextRequest) -> (Vec<Value>, TextResult) {
    let mut stream = stream_text(model, request).await.expect("the history is valid");
    let mut parts = Vec::new();
    while let Some(part) = stream.next().await {
        parts.push(serde_json::to_value(part).unwrap());
    }
    (parts, stream.finish().await.expect("the local model answers"))
}

fn of_type<'a>(parts: &'a [Value], kind: &str) -> Vec<&'a Value> {
    parts.iter().filter(|part| part["type"] == kind).collect()
}

#[tokio::test]
#[ignore = "needs an OpenAI-compatible server: scripts/e2e-local-llm.sh"]
async fn approval_round_trip_through_the_openai_compatible_provider() {
    let base_url = base_url();
    let model_id = std::env::var("TOOLGATE_E2E_MODEL").unwrap_or_else(|_| "local".to_owned());
    let model = RecordingModel::new(OpenAiChatModel::new(OpenAiConfig::compatible(base_url), model_id).unwrap());
    let system = "You manage files. Use the tools to do what the user asks.";
    let history = vec![ModelMessage::user("Please delete the file notes.txt")];

    // 1. The model must call delete_file (forced); the engine asks for approval and runs nothing.
    let first = TextRequest::new(history.clone())
        .system(system)
        .toolkit(demo::toolkit())
        .tool_choice(ToolChoice::Tool { tool_name: "delete_file".into() })
        .max_output_tokens(64)
        .temperature(0.0);
    let (parts, result) = run(&model, first).await;
    assert!(of_type(&parts, "tool-result").is_empty(), "nothing may run before approval: {parts:#?}");
    let requests = result.approval_requests();
    assert_eq!(requests.len(), 1, "one approval request: {parts:#?}");
    let request = &requests[0];
    assert!(!request.provider_executed);
    assert_eq!(request.tool_call.tool_name, "delete_file");
    let path = request.tool_call.input["path"].as_str().expect("the grammar forces a string path").to_owned();
    let call_id = request.tool_call.tool_call_id.clone();
    let streamed = of_type(&parts, "tool-approval-request");
    assert_eq!(streamed.len(), 1);
    assert_eq!(streamed[0]["approvalId"], request.approval_id.as_str());
    assert_eq!(streamed[0]["toolCall"]["toolCallId"], call_id.as_str());

    // 2. Approve; the continuation runs the tool first, then calls the model with its result.
    let mut continuation = history;
    continuation.extend(result.response_messages.clone());
    continuation.push(ModelMessage::tool(vec![ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
        approval_id: request.approval_id.clone(),
        approved: true,
        reason: None,
        provider_executed: None,
        edited_input: None,
    })]));
    let second = TextRequest::new(continuation)
        .system(system)
        .toolkit(demo::toolkit())
        .tool_choice(ToolChoice::None)
        .max_steps(1)
        .max_output_tokens(48)
        .temperature(0.0);
    let (parts, result) = run(&model, second).await;
    assert_eq!(result.preresolved.len(), 1, "the approved call ran once");
    let ran = &result.preresolved[0];
    assert_eq!((ran.tool_call_id.as_str(), ran.tool_name.as_str()), (call_id.as_str(), "delete_file"));
    assert_eq!(ran.output, ToolResultOutput::json(json!({"deleted": path})));
    let results = of_type(&parts, "tool-result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["toolCallId"], call_id.as_str());
    assert!(result.approval_requests().is_empty());

    // 3. The second model request holds the call followed by its result.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let prompt = &requests[1].prompt;
    let call_at = prompt
        .iter()
        .position(|message| {
            matches!(message, ModelMessage::Assistant(assistant) if assistant.part_slice().iter().any(
                |part| matches!(part, AssistantPart::ToolCall(call) if call.tool_call_id == call_id)))
        })
        .expect("the call is in the prompt");
    let ModelMessage::Tool(tool) = &prompt[call_at + 1] else {
        panic!("the call's result follows it: {prompt:#?}");
    };
    assert!(matches!(&tool.content[..], [ToolPart::ToolResult(result)]
        if result.tool_call_id == call_id && result.output == ToolResultOutput::json(json!({"deleted": path}))));
    eprintln!("e2e: delete_file({path}) approved, ran, and its result reached the model: {:?}", result.text());
}
