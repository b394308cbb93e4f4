//! Reading UI message streams: the chunks of a server-sent-events body, and
//! the checks that a response did what the bench measures.

use serde_json::Value;

use crate::bodies::{APPROVED_CALL_ID, APPROVED_PATH, IssuedRequest};

/// The JSON chunks of a UI message stream body (`data: {...}` frames; `[DONE]` and other lines skipped).
pub fn chunks(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.trim_start_matches('\n').strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect()
}

/// True when the body ends the stream (`data: [DONE]`).
pub fn is_complete(body: &[u8]) -> bool {
    body.trim_ascii_end().ends_with(b"data: [DONE]")
}

/// Checks that a continuation's response ran the approved `delete_file` call
/// (its output is available), then answered and finished without an error.
pub fn check_continuation(body: &str) -> Result<(), String> {
    let chunks = chunks(body);
    let ran = chunks.iter().any(|chunk| {
        chunk["type"] == "tool-output-available"
            && chunk["toolCallId"] == APPROVED_CALL_ID
            && chunk["output"]["deleted"] == APPROVED_PATH
    });
    if !ran {
        return Err(format!(
            "no tool-output-available for `{APPROVED_CALL_ID}` with {{\"deleted\": \"{APPROVED_PATH}\"}}"
        ));
    }
    check_answered(&chunks)?;
    if !is_complete(body.as_bytes()) {
        return Err("the stream does not end with `data: [DONE]`".into());
    }
    Ok(())
}

/// Checks that the model answered (a text delta) and the stream finished, without an error chunk.
fn check_answered(chunks: &[Value]) -> Result<(), String> {
    if let Some(error) = chunks.iter().find(|chunk| chunk["type"] == "error") {
        return Err(format!("an error chunk: {error}"));
    }
    if !chunks.iter().any(|chunk| chunk["type"] == "text-delta") {
        return Err("no text from the model".into());
    }
    if !chunks.iter().any(|chunk| chunk["type"] == "finish") {
        return Err("no finish chunk".into());
    }
    Ok(())
}

/// The approval request of a first turn's response.
pub fn issued_request(body: &str) -> Result<IssuedRequest, String> {
    let chunks = chunks(body);
    let message_id = chunks
        .iter()
        .find(|chunk| chunk["type"] == "start")
        .and_then(|chunk| chunk["messageId"].as_str())
        .ok_or("no start chunk with a messageId")?;
    let request =
        chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request").ok_or("no tool-approval-request chunk")?;
    let tool_call_id = request["toolCallId"].as_str().ok_or("the approval request has no toolCallId")?;
    let approval_id = request["approvalId"].as_str().ok_or("the approval request has no approvalId")?;
    let input = chunks
        .iter()
        .find(|chunk| chunk["type"] == "tool-input-available" && chunk["toolCallId"] == tool_call_id)
        .map(|chunk| chunk["input"].clone())
        .ok_or("no tool-input-available for the gated call")?;
    Ok(IssuedRequest {
        message_id: message_id.to_owned(),
        tool_call_id: tool_call_id.to_owned(),
        input,
        approval_id: approval_id.to_owned(),
    })
}

/// Checks that a round trip's continuation ran the call `issued` asked about.
pub fn check_round_trip(body: &str, issued: &IssuedRequest) -> Result<(), String> {
    let chunks = chunks(body);
    let ran = chunks.iter().any(|chunk| {
        chunk["type"] == "tool-output-available"
            && chunk["toolCallId"] == issued.tool_call_id.as_str()
            && chunk["output"]["deleted"] == APPROVED_PATH
    });
    if !ran {
        return Err(format!("no tool-output-available for `{}`", issued.tool_call_id));
    }
    check_answered(&chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTINUED: &str = concat!(
        "data: {\"type\":\"start\",\"messageId\":\"a4\"}\n\n",
        "data: {\"type\":\"tool-output-available\",\"toolCallId\":\"call_approved_delete_notes\",\"output\":{\"deleted\":\"notes.txt\"}}\n\n",
        "data: {\"type\":\"start-step\"}\n\n",
        "data: {\"type\":\"text-start\",\"id\":\"t\"}\n\n",
        "data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"Done.\"}\n\n",
        "data: {\"type\":\"text-end\",\"id\":\"t\"}\n\n",
        "data: {\"type\":\"finish-step\"}\n\n",
        "data: {\"type\":\"finish\",\"finishReason\":\"stop\"}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn a_continuation_that_ran_the_call_passes() {
        assert_eq!(chunks(CONTINUED).len(), 8);
        assert_eq!(check_continuation(CONTINUED), Ok(()));
    }

    #[test]
    fn a_continuation_without_the_output_or_the_end_fails() {
        let without_output = CONTINUED.replace("tool-output-available", "tool-output-error");
        assert!(check_continuation(&without_output).is_err());
        let cut = CONTINUED.replace("data: [DONE]\n\n", "");
        assert!(check_continuation(&cut).is_err());
        let error = CONTINUED.replace("{\"type\":\"start-step\"}", "{\"type\":\"error\",\"errorText\":\"x\"}");
        assert!(check_continuation(&error).is_err());
    }

    #[test]
    fn the_issued_request_is_read_from_a_first_turn() {
        let body = concat!(
            "data: {\"type\":\"start\",\"messageId\":\"m1\"}\n\n",
            "data: {\"type\":\"tool-input-available\",\"toolCallId\":\"c1\",\"toolName\":\"delete_file\",\"input\":{\"path\":\"notes.txt\"}}\n\n",
            "data: {\"type\":\"tool-approval-request\",\"approvalId\":\"apr_1.sig\",\"toolCallId\":\"c1\"}\n\n",
            "data: {\"type\":\"finish\",\"finishReason\":\"tool-calls\"}\n\ndata: [DONE]\n\n",
        );
        let issued = issued_request(body).unwrap();
        assert_eq!(issued.message_id, "m1");
        assert_eq!(issued.approval_id, "apr_1.sig");
        assert_eq!(issued.input, serde_json::json!({"path": "notes.txt"}));
    }
}
