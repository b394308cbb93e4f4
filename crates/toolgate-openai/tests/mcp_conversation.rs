//! The four-turn hosted MCP conversation of the fixtures (request, deny,
//! request again, approve and run) replayed end to end through
//! `toolgate::stream_text`.

mod common;

use std::collections::VecDeque;
use std::sync::Mutex;

use common::*;
use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{AssistantPart, ToolApprovalResponsePart, ToolPart, ToolResultOutput};
use toolgate::{ModelMessage, TextRequest, TextResult, Toolkit, stream_text};
use toolgate_openai::OpenAiResponsesModel;
use toolgate_openai::responses::{ApprovalMode, McpServer, RequireApproval};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const MCPR_1: &str = "mcpr_tg01d0f4b6c8e2a3";
const MCPR_3: &str = "mcpr_tg03f8b2d4a6c0e2";

/// Answers each request with the next turn of the fixture conversation.
struct Turns(Mutex<VecDeque<String>>);

impl Respond for Turns {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        match self.0.lock().unwrap().pop_front() {
            Some(body) => sse(body),
            None => ResponseTemplate::new(500).set_body_string("no more fixture turns"),
        }
    }
}

fn toolkit() -> Toolkit {
    let server = McpServer::new("files", "https://mcp.toolgate.test/files")
        .require_approval(RequireApproval::Mode(ApprovalMode::Always))
        .description("File manager");
    Toolkit::new([server.tool().into()]).unwrap()
}

/// Runs one turn; returns the engine's stream parts as JSON and the result.
async fn turn(model: &OpenAiResponsesModel, history: &[ModelMessage]) -> (Vec<Value>, TextResult) {
    let mut stream = stream_text(model, TextRequest::new(history.to_vec()).toolkit(toolkit())).await.unwrap();
    let mut parts = Vec::new();
    while let Some(part) = stream.next().await {
        parts.push(serde_json::to_value(part).unwrap());
    }
    (parts, stream.finish().await.unwrap())
}

fn of_type<'a>(parts: &'a [Value], kind: &str) -> Vec<&'a Value> {
    parts.iter().filter(|part| part["type"] == kind).collect()
}

fn answer(approval_id: &str, approved: bool) -> ModelMessage {
    ModelMessage::tool(vec![ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
        approval_id: approval_id.into(),
        approved,
        reason: None,
        provider_executed: Some(true),
        edited_input: None,
    })])
}

#[tokio::test]
async fn request_deny_request_again_approve_and_run() {
    let turns = (1..=4).map(|n| sse_fixture(&format!("responses-mcp-approval.{n}.chunks.txt"), false));
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(Turns(Mutex::new(turns.collect())))
        .mount(&server)
        .await;
    let model = OpenAiResponsesModel::new(config(&server), "gpt-5-mini").unwrap();
    let mut history = vec![ModelMessage::user("Delete reports/2025-q3.csv, it is outdated.")];

    // Turn 1: OpenAI asks for approval; nothing runs and the engine stops.
    let (parts, result) = turn(&model, &history).await;
    let requests = of_type(&parts, "tool-approval-request");
    assert_eq!(requests.len(), 1, "{parts:#?}");
    assert_eq!(requests[0]["approvalId"], MCPR_1);
    assert_eq!(requests[0]["toolCall"]["toolCallId"], "id-0");
    assert_eq!(requests[0]["toolCall"]["toolName"], "mcp.delete_file");
    assert_eq!(requests[0]["toolCall"]["providerExecuted"], true);
    assert_eq!(requests[0]["toolCall"]["input"]["path"], "reports/2025-q3.csv");
    assert_eq!(result.approval_requests().len(), 1);
    assert!(result.approval_requests()[0].provider_executed);
    assert_eq!(result.steps.len(), 1);
    history.extend(result.response_messages);

    // Turn 2: the person denies; OpenAI gets the denial and answers in text.
    history.push(answer(MCPR_1, false));
    let (parts, result) = turn(&model, &history).await;
    assert!(of_type(&parts, "tool-approval-request").is_empty());
    assert!(of_type(&parts, "tool-result").is_empty());
    assert!(result.text().contains("was not approved"), "{}", result.text());
    history.extend(result.response_messages);
    history.push(ModelMessage::user("Try again, I will approve it this time."));

    // Turn 3: a new approval request, under a new call id.
    let (parts, result) = turn(&model, &history).await;
    let requests = of_type(&parts, "tool-approval-request");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["approvalId"], MCPR_3);
    assert_eq!(requests[0]["toolCall"]["toolCallId"], "id-1");
    history.extend(result.response_messages);

    // Turn 4: approved; OpenAI runs the call, reported under the turn-3 call id.
    history.push(answer(MCPR_3, true));
    let (parts, result) = turn(&model, &history).await;
    let results = of_type(&parts, "tool-result");
    assert_eq!(results.len(), 1, "{parts:#?}");
    assert_eq!(results[0]["toolCallId"], "id-1");
    assert_eq!(results[0]["providerExecuted"], true);
    assert_eq!(results[0]["output"]["type"], "call");
    assert!(results[0]["output"]["output"].as_str().unwrap().contains("trash_tg7c21"));
    assert!(result.text().contains("trash_tg7c21"));
    let stored = &result.steps[0].content;
    assert!(stored.iter().any(|part| matches!(part, AssistantPart::ToolResult(result)
        if result.tool_call_id == "id-1" && matches!(result.output, ToolResultOutput::Json { .. }))));

    // What OpenAI received each turn.
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    let mcp_tool = json!([{"type": "mcp", "server_label": "files", "server_url": "https://mcp.toolgate.test/files",
                           "server_description": "File manager", "require_approval": "always"}]);
    for body in &bodies {
        assert_eq!(body["tools"], mcp_tool);
        assert_eq!(body["stream"], true);
    }
    let user = |text: &str| json!({"role": "user", "content": [{"type": "input_text", "text": text}]});
    let first = user("Delete reports/2025-q3.csv, it is outdated.");
    assert_eq!(bodies[0]["input"], json!([first]));
    let denial = [
        json!({"type": "item_reference", "id": MCPR_1}),
        json!({"type": "mcp_approval_response", "approval_request_id": MCPR_1, "approve": false}),
    ];
    assert_eq!(bodies[1]["input"], json!([first, denial[0], denial[1]]));
    let input = bodies[3]["input"].as_array().unwrap();
    assert_eq!(input.len(), 7, "{input:#?}");
    assert_eq!(input[..3], [first.clone(), denial[0].clone(), denial[1].clone()]);
    assert_eq!(input[3]["role"], "assistant");
    assert!(input[3]["content"][0]["text"].as_str().unwrap().contains("was not approved"));
    assert_eq!(input[4], user("Try again, I will approve it this time."));
    assert_eq!(input[5], json!({"type": "item_reference", "id": MCPR_3}));
    assert_eq!(input[6], json!({"type": "mcp_approval_response", "approval_request_id": MCPR_3, "approve": true}));
    assert_eq!(bodies[2]["input"].as_array().unwrap()[..5], input[..5]);
}
