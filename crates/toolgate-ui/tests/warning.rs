//! Fatal errors and warnings reach `useChat` differently: an `error` chunk
//! ends the response, a warning is a transient data chunk and the stream goes on.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::StreamPart;
use toolgate::protocol::{FinishReason, Usage};
use toolgate_ui::{EncoderOptions, UiStreamEncoder};

fn encode(parts: &[StreamPart]) -> Vec<Value> {
    let mut encoder = UiStreamEncoder::new(EncoderOptions { message_id: "m".into(), signature_field: false });
    parts.iter().flat_map(|part| encoder.encode(part)).map(|chunk| serde_json::to_value(chunk).unwrap()).collect()
}

#[test]
fn a_warning_is_a_transient_data_chunk_and_an_error_an_error_chunk() {
    let finish = StreamPart::Finish { finish_reason: FinishReason::Stop, total_usage: Usage::default() };
    let chunks = encode(&[
        StreamPart::Start,
        StreamPart::Warning { code: "tool_call_not_found_for_approval".into(), message: "no such call".into() },
        finish.clone(),
    ]);
    assert_eq!(
        chunks,
        vec![
            json!({"type": "start", "messageId": "m"}),
            json!({"type": "data-toolgate-warning", "data": {"code": "tool_call_not_found_for_approval", "message": "no such call"}, "transient": true}),
            json!({"type": "finish", "finishReason": "stop"}),
        ]
    );
    let failed = encode(&[StreamPart::Start, StreamPart::Error { error: "cut off".into() }, finish]);
    assert_eq!(failed[1], json!({"type": "error", "errorText": "cut off"}));
}
