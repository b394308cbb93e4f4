//! The bench's bodies through the real engine, in process: the signed
//! approval of the last call verifies with the server's secret (and only with
//! it), and the call runs before the one model step.

use serde_json::json;
use toolgate::approval::ApprovalSigner;
use toolgate::model::ScriptPart;
use toolgate::{EngineError, ScriptedModel, TextRequest, TextResult, ToolResultOutput, generate_text};
use toolgate_bench::bodies::{APPROVED_CALL_ID, continuation_body};
use toolgate_ui::{ChatRequest, convert_to_model_messages};

const SECRET: &str = "the-server-secret";

async fn continue_with(size: usize, server_secret: &str) -> Result<TextResult, EngineError> {
    let body = continuation_body(size, "chat", &ApprovalSigner::new(SECRET).unwrap()).unwrap();
    let request = ChatRequest::from_json(&body.json).expect("the body is a chat request");
    assert_eq!(request.messages.len(), size);
    let messages = convert_to_model_messages(&request.messages).expect("the UI messages convert");
    let model = ScriptedModel::new(vec![vec![ScriptPart::Text { text: "Done.".into() }]]).unwrap();
    let request = TextRequest::new(messages)
        .toolkit(toolgate::demo::toolkit())
        .approval_signer(ApprovalSigner::new(server_secret).unwrap());
    generate_text(&model, request).await
}

#[tokio::test]
async fn the_approved_call_runs_then_the_model_answers() {
    for size in [2, 10, 101] {
        let result = continue_with(size, SECRET).await.expect("the continuation succeeds");
        assert_eq!(result.preresolved.len(), 1, "N = {size}");
        assert_eq!(result.preresolved[0].tool_call_id, APPROVED_CALL_ID);
        assert_eq!(result.preresolved[0].output, ToolResultOutput::json(json!({"deleted": "notes.txt"})));
        assert_eq!(result.text(), "Done.");
    }
}

#[tokio::test]
async fn another_secret_refuses_the_approval() {
    let error = continue_with(10, "another-secret").await.expect_err("the signature does not verify");
    assert!(error.to_string().contains("signature"), "{error}");
}
