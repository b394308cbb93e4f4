//! The request bodies: `POST /api/chat` approval continuations over a history
//! of N UI messages, as `DefaultChatTransport` sends them.
//!
//! The history reads like a real chat. Before the last two messages it
//! cycles through three exchanges, each a user turn and a two-step assistant
//! turn (`step-start`, text, a tool part, `step-start`, text):
//!
//! 1. an automatic `get_weather` call in `output-available`;
//! 2. an approved `delete_file` in `output-available` with its `approval`
//!    object (`approved: true`);
//! 3. a denied `delete_file` in `output-denied` (`approved: false` and a reason).
//!
//! Then a user message asking to delete `notes.txt` and the assistant message
//! being continued: one `delete_file` call in `approval-responded`, approved.
//! Both servers run that call (pre-resolution) and then one model step.
//!
//! Every approval id is signed with [`ApprovalSigner::issue`] exactly as
//! `toolgate serve --approval-secret SECRET` issues them (`apr_<nonce>.<sig>`,
//! no held calls: each of those steps has one call), so toolgate's stateless
//! mode accepts the approved call. The AI SDK gets the same bytes: it does
//! not check approval ids (no `experimental_toolApprovalSecret`).

use anyhow::Context;
use bytes::Bytes;
use serde_json::{Value, json};
use toolgate::approval::{ApprovalSigner, HeldCalls, SignedCall};

/// The file the last, approved `delete_file` call deletes.
pub const APPROVED_PATH: &str = "notes.txt";

/// The tool call id of the last, approved `delete_file` call.
pub const APPROVED_CALL_ID: &str = "call_approved_delete_notes";

/// The fewest messages a history can have: the user's request and the approval.
pub const MIN_MESSAGES: usize = 2;

/// One approval continuation.
#[derive(Debug, Clone)]
pub struct ContinuationBody {
    /// UI messages in the history.
    pub messages: usize,
    /// The JSON body.
    pub json: Bytes,
}

/// Makes the ids of one history: deterministic, shaped like the real ones.
#[derive(Debug, Default)]
struct Ids {
    next: u128,
}

impl Ids {
    fn bump(&mut self) -> u128 {
        self.next += 1;
        self.next
    }

    /// A tool call id as providers write them (`call_` and 24 characters).
    fn call(&mut self) -> String {
        format!("call_{:024x}", self.bump())
    }

    /// An approval nonce like the server's (a UUID v7 in simple form).
    fn nonce(&mut self) -> String {
        format!("{:032x}", 0x019a_0000_0000_7000_8000_0000_0000_0000_u128 + self.bump())
    }
}

/// Signs approvals as the server would have issued them.
struct Approvals<'a> {
    signer: &'a ApprovalSigner,
}

impl Approvals<'_> {
    fn issue(&self, ids: &mut Ids, tool_call_id: &str, tool_name: &str, input: &Value) -> anyhow::Result<String> {
        let call = SignedCall { tool_call_id, tool_name, input };
        let issued = self.signer.issue(&ids.nonce(), call, &HeldCalls::none()).context("signing an approval")?;
        Ok(issued.approval_id)
    }
}

fn text(text: String) -> Value {
    json!({"type": "text", "text": text, "state": "done"})
}

fn user(index: usize, words: String) -> Value {
    json!({"id": format!("msg-user-{index:05}"), "role": "user", "parts": [{"type": "text", "text": words}]})
}

fn assistant(index: usize, parts: Vec<Value>) -> Value {
    json!({"id": format!("msg-assistant-{index:05}"), "role": "assistant", "parts": parts})
}

/// The UI messages of a history of exactly `n` messages (at least [`MIN_MESSAGES`]).
pub fn ui_messages(n: usize, signer: &ApprovalSigner) -> anyhow::Result<Vec<Value>> {
    anyhow::ensure!(n >= MIN_MESSAGES, "a history has at least {MIN_MESSAGES} messages, not {n}");
    let approvals = Approvals { signer };
    let mut ids = Ids::default();
    let mut messages = Vec::with_capacity(n);
    for index in 0..n - MIN_MESSAGES {
        let round = index / 6;
        let message = match index % 6 {
            0 => user(index, format!("What is the weather in City {round}?")),
            1 => {
                let city = format!("City {round}");
                assistant(
                    index,
                    vec![
                        json!({"type": "step-start"}),
                        text(format!("Let me check the weather in {city}.")),
                        json!({"type": "tool-get_weather", "toolCallId": ids.call(), "state": "output-available",
                               "input": {"city": city},
                               "output": {"city": city, "temperatureC": 21, "condition": "sunny"}}),
                        json!({"type": "step-start"}),
                        text(format!("It is 21 °C and sunny in {city}.")),
                    ],
                )
            }
            2 => user(index, format!("Please delete report-{round}.txt, I do not need it any more.")),
            3 => {
                let path = format!("report-{round}.txt");
                let call = ids.call();
                let input = json!({"path": path});
                let approval = approvals.issue(&mut ids, &call, "delete_file", &input)?;
                let part = json!({"type": "tool-delete_file", "toolCallId": call, "state": "output-available",
                    "input": input, "output": {"deleted": path}, "approval": {"id": approval, "approved": true}});
                assistant(index, decided_deletion(&path, part, format!("Deleted {path}.")))
            }
            4 => user(index, format!("And delete draft-{round}.txt too.")),
            _ => {
                let path = format!("draft-{round}.txt");
                let call = ids.call();
                let input = json!({"path": path});
                let approval = approvals.issue(&mut ids, &call, "delete_file", &input)?;
                let part = json!({"type": "tool-delete_file", "toolCallId": call, "state": "output-denied",
                    "input": input, "approval": {"id": approval, "approved": false, "reason": "I still need it."}});
                assistant(index, decided_deletion(&path, part, format!("All right, I kept {path}.")))
            }
        };
        messages.push(message);
    }
    messages.push(user(n - 2, format!("Delete {APPROVED_PATH}.")));
    let input = json!({"path": APPROVED_PATH});
    let approval = approvals.issue(&mut ids, APPROVED_CALL_ID, "delete_file", &input)?;
    messages.push(assistant(
        n - 1,
        vec![
            json!({"type": "step-start"}),
            text(format!("I will delete {APPROVED_PATH} once you approve.")),
            json!({"type": "tool-delete_file", "toolCallId": APPROVED_CALL_ID, "state": "approval-responded",
                   "input": input, "approval": {"id": approval, "approved": true}}),
        ],
    ));
    Ok(messages)
}

/// The `POST /api/chat` body continuing a history of `n` messages in chat `chat_id`.
pub fn continuation_body(n: usize, chat_id: &str, signer: &ApprovalSigner) -> anyhow::Result<ContinuationBody> {
    let messages = ui_messages(n, signer)?;
    let body = json!({"id": chat_id, "messages": messages, "trigger": "submit-message"});
    Ok(ContinuationBody { messages: n, json: Bytes::from(serde_json::to_vec(&body)?) })
}

/// The first turn of a fresh conversation (for the round trip with a store).
pub fn first_turn_body(chat_id: &str, user_id: &str) -> Bytes {
    let body = json!({"id": chat_id, "messages": [first_turn_user(user_id)], "trigger": "submit-message"});
    Bytes::from(body.to_string())
}

fn first_turn_user(user_id: &str) -> Value {
    json!({"id": user_id, "role": "user", "parts": [{"type": "text", "text": format!("Delete {APPROVED_PATH}.")}]})
}

/// What a first turn's response said: the message to continue and the approval it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct IssuedRequest {
    /// The assistant message id (`start.messageId`).
    pub message_id: String,
    /// The gated call.
    pub tool_call_id: String,
    /// Its input.
    pub input: Value,
    /// The approval id the server issued.
    pub approval_id: String,
}

/// The approved continuation of a first turn: the user message and the
/// assistant message the client built from the stream, the call approved.
pub fn round_trip_continuation(chat_id: &str, user_id: &str, issued: &IssuedRequest) -> Bytes {
    let assistant = json!({"id": issued.message_id, "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "tool-delete_file", "toolCallId": issued.tool_call_id, "state": "approval-responded",
         "input": issued.input, "approval": {"id": issued.approval_id, "approved": true}}]});
    let body = json!({"id": chat_id, "messages": [first_turn_user(user_id), assistant], "trigger": "submit-message"});
    Bytes::from(body.to_string())
}

/// An assistant turn that asked to delete `path`, the call as the person decided it, and the model's answer.
fn decided_deletion(path: &str, call: Value, answer: String) -> Vec<Value> {
    vec![
        json!({"type": "step-start"}),
        text(format!("I will delete {path} once you approve.")),
        call,
        json!({"type": "step-start"}),
        text(answer),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> ApprovalSigner {
        ApprovalSigner::new("test-secret").unwrap()
    }

    #[test]
    fn a_history_has_exactly_n_messages_alternating_from_the_user() {
        for n in [2, 3, 7, 10, 100] {
            let messages = ui_messages(n, &signer()).unwrap();
            assert_eq!(messages.len(), n);
            assert_eq!(messages[n - 1]["role"], "assistant");
            assert_eq!(messages[n - 1]["parts"][2]["state"], "approval-responded");
            assert_eq!(messages[n - 1]["parts"][2]["toolCallId"], APPROVED_CALL_ID);
        }
        assert!(ui_messages(1, &signer()).is_err());
    }

    #[test]
    fn every_approval_is_signed_and_ids_are_unique() {
        let messages = ui_messages(100, &signer()).unwrap();
        let mut approvals = Vec::new();
        let mut calls = Vec::new();
        for message in &messages {
            for part in message["parts"].as_array().unwrap() {
                if let Some(id) = part["toolCallId"].as_str() {
                    calls.push(id.to_owned());
                }
                if let Some(id) = part["approval"]["id"].as_str() {
                    assert!(id.starts_with("apr_") && id.contains('.'), "{id} is signed");
                    approvals.push(id.to_owned());
                }
            }
        }
        assert_eq!(approvals.len(), 2 * 16 + 1);
        for ids in [&mut approvals, &mut calls] {
            let count = ids.len();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), count);
        }
    }
}
