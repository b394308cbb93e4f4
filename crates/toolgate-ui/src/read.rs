//! The fast path of [`ChatRequest::from_json`](crate::ChatRequest::from_json):
//! a well-formed body read straight into typed messages, without building a
//! `serde_json::Value` of the whole conversation first.
//!
//! One pass over the body records each part as a borrowed slice of it
//! (`RawValue`); a second pass reads each part into one struct with every
//! field any part type uses, ignoring the rest. Only the values that stay JSON
//! (tool inputs and outputs, metadata, `data-*` and `source-*` parts) become
//! `Value`s.
//!
//! Contract: this path returns exactly what the strict path returns for the
//! same body, or `None`. It returns `None` on anything it does not expect
//! (a missing or mistyped field, an unknown part type, invalid JSON), and the
//! strict path then reads the body again and names what is wrong. So errors
//! cost two reads; valid bodies cost one.

use std::fmt;

use serde::Deserialize;
use serde::de::value::StrDeserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::ToolState;
use crate::message::{ChatRequest, ToolFields, UiApproval, UiMessage, UiPart, UiRole, build_tool};

/// The body, with each part left as a slice of the input.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    trigger: Option<String>,
    #[serde(default)]
    message_id: Option<String>,
    #[serde(borrow)]
    messages: Vec<Message<'a>>,
}

/// A message: the known fields, its parts as slices, every other field kept.
struct Message<'a> {
    id: Option<String>,
    role: Option<UiRole>,
    parts: Option<Vec<&'a RawValue>>,
    metadata: Option<Value>,
    extra: Map<String, Value>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Message<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MessageVisitor(std::marker::PhantomData))
    }
}

struct MessageVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for MessageVisitor<'a> {
    type Value = Message<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a UI message")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Message<'a>, M::Error> {
        let mut message = Message { id: None, role: None, parts: None, metadata: None, extra: Map::new() };
        while let Some(key) = map.next_key::<String>()? {
            // A later duplicate replaces an earlier one, as in a `Value` object.
            match key.as_str() {
                "id" => message.id = map.next_value()?,
                "role" => message.role = Some(map.next_value()?),
                "parts" => message.parts = Some(map.next_value()?),
                "metadata" => message.metadata = Some(map.next_value()?),
                _ => {
                    let value = map.next_value()?;
                    message.extra.insert(key, value);
                }
            }
        }
        Ok(message)
    }
}

/// Every field a part of any type may have; unknown fields are skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(rename = "type")]
    part_type: String,
    text: Option<String>,
    url: Option<String>,
    media_type: Option<String>,
    filename: Option<String>,
    tool_call_id: Option<String>,
    /// A tool part's state; text and reasoning parts have states of their own (`streaming`, `done`).
    state: Option<String>,
    tool_name: Option<String>,
    input: Option<Value>,
    output: Option<Value>,
    error_text: Option<String>,
    raw_input: Option<Value>,
    provider_executed: Option<bool>,
    approval: Option<UiApproval>,
    call_provider_metadata: Option<Map<String, Value>>,
    preliminary: Option<bool>,
    approved: Option<bool>,
    reason: Option<String>,
}

/// The request, when the body is well formed; `None` sends it to the strict path.
pub(crate) fn chat_request(body: &[u8]) -> Option<ChatRequest> {
    let text = std::str::from_utf8(body).ok()?;
    let body: Body<'_> = serde_json::from_str(text).ok()?;
    let messages = body.messages.into_iter().map(message).collect::<Option<Vec<_>>>()?;
    Some(ChatRequest { id: body.id.unwrap_or_default(), messages, trigger: body.trigger, message_id: body.message_id })
}

fn message(raw: Message<'_>) -> Option<UiMessage> {
    let role = raw.role?;
    let parts = raw.parts?.into_iter().map(|part| self::part(role, part)).collect::<Option<Vec<_>>>()?;
    Some(UiMessage { id: raw.id.unwrap_or_default(), role, parts, metadata: raw.metadata, extra: raw.extra })
}

fn part(role: UiRole, raw: &RawValue) -> Option<UiPart> {
    let part: Part = serde_json::from_str(raw.get()).ok()?;
    let kept = || serde_json::from_str::<Value>(raw.get()).ok().map(UiPart::Other);
    match part.part_type.as_str() {
        "text" => Some(UiPart::Text { text: part.text? }),
        "reasoning" => Some(UiPart::Reasoning { text: part.text? }),
        "step-start" => Some(UiPart::StepStart),
        "file" => Some(UiPart::File { url: part.url?, media_type: part.media_type?, filename: part.filename }),
        "source-url" | "source-document" => kept(),
        other if other.starts_with("data-") => kept(),
        "tool-approval" if role == UiRole::User => Some(UiPart::ToolApproval {
            tool_call_id: part.tool_call_id?,
            approved: part.approved?,
            reason: part.reason,
        }),
        "dynamic-tool" => tool(None, part),
        other => match other.strip_prefix("tool-") {
            Some(name) if !name.is_empty() => {
                let name = name.to_owned();
                tool(Some(name), part)
            }
            _ => None,
        },
    }
}

fn tool(static_name: Option<String>, part: Part) -> Option<UiPart> {
    let fields = ToolFields {
        tool_call_id: part.tool_call_id?,
        state: ToolState::deserialize(StrDeserializer::<serde::de::value::Error>::new(&part.state?)).ok()?,
        tool_name: part.tool_name,
        input: part.input,
        output: part.output,
        error_text: part.error_text,
        raw_input: part.raw_input,
        provider_executed: part.provider_executed,
        approval: part.approval,
        call_provider_metadata: part.call_provider_metadata,
        preliminary: part.preliminary,
    };
    build_tool(static_name, fields).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;
    use serde_json::json;

    use super::chat_request;
    use crate::ChatRequest;

    /// A body with every kind of part, field orders as the AI SDK writes them and not.
    fn body() -> Value {
        json!({"id": "chat-1", "trigger": "submit-message", "messageId": "a1", "extraBody": {"x": 1}, "messages": [
            {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be careful."}]},
            {"role": "user", "id": "u1", "createdAt": "2026-01-01", "parts": [
                {"type": "text", "text": "hi", "state": "done"},
                {"type": "file", "url": "data:text/plain;base64,aGk=", "mediaType": "text/plain"},
                {"text": "type last", "type": "text"}]},
            {"id": "a0", "role": "assistant", "metadata": null, "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "hmm", "providerMetadata": {"a": 1}},
                {"type": "tool-get_weather", "toolCallId": "w1", "state": "output-available", "input": {"city": "Oslo"},
                 "output": {"temperature": 3}, "callProviderMetadata": {"p": {"q": 1}}},
                {"type": "dynamic-tool", "toolName": "fs__read", "toolCallId": "r1", "state": "output-error",
                 "input": null, "errorText": "boom", "rawInput": "{oops"},
                {"type": "tool-delete_file", "toolCallId": "d0", "state": "output-denied", "input": {"path": "x"},
                 "approval": {"id": "apr-0", "approved": false, "reason": "no"}},
                {"type": "data-toolgate-reason", "id": "d0", "data": {"decision": "deny", "reason": "no"}},
                {"type": "source-url", "sourceId": "s1", "url": "https://x", "title": "X"},
                {"type": "step-start"},
                {"type": "text", "text": "Done."}]},
            {"id": "u2", "role": "user", "parts": [{"type": "tool-approval", "toolCallId": "d9", "approved": true}]},
            {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"},
                {"type": "tool-delete_file", "toolCallId": "d1", "state": "approval-responded", "input": {"path": "y"},
                 "approval": {"id": "apr-1", "approved": true, "signature": "sig", "editedInput": {"path": "z"}}},
                {"type": "tool-approval", "toolCallId": "t1", "state": "input-available", "input": {}}]}
        ]})
    }

    fn both(body: &Value) -> (Option<ChatRequest>, Result<ChatRequest, String>) {
        let bytes = serde_json::to_vec(body).unwrap();
        (chat_request(&bytes), ChatRequest::from_json_strictly(&bytes).map_err(|e| e.to_string()))
    }

    #[test]
    fn a_well_formed_body_reads_the_same_on_both_paths() {
        let (fast, strict) = both(&body());
        let fast = fast.expect("the fast path reads a well-formed body");
        pretty_assertions::assert_eq!(fast, strict.unwrap());
    }

    /// Every JSON path of `value` (object keys and array indices), for mutating one place.
    fn paths(value: &Value, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        match value {
            Value::Object(map) => map.iter().for_each(|(key, child)| {
                let mut path = prefix.clone();
                path.push(key.clone());
                out.push(path.clone());
                paths(child, path, out);
            }),
            Value::Array(items) => items.iter().enumerate().for_each(|(index, child)| {
                let mut path = prefix.clone();
                path.push(index.to_string());
                out.push(path.clone());
                paths(child, path, out);
            }),
            _ => {}
        }
    }

    fn mutate(mut body: Value, path: &[String], replacement: Option<Value>) -> Value {
        let (last, parents) = path.split_last().unwrap();
        let mut node = &mut body;
        for key in parents {
            node = match node {
                Value::Object(map) => map.get_mut(key).unwrap(),
                Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
                _ => unreachable!(),
            };
        }
        match (node, replacement) {
            (Value::Object(map), Some(value)) => {
                map.insert(last.clone(), value);
            }
            (Value::Object(map), None) => {
                map.shift_remove(last);
            }
            (Value::Array(items), Some(value)) => items[last.parse::<usize>().unwrap()] = value,
            (Value::Array(items), None) => {
                items.remove(last.parse::<usize>().unwrap());
            }
            _ => unreachable!(),
        }
        body
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Whatever one field becomes (removed, null, another type), the fast path
        /// either declines or agrees with the strict path, which stays the authority.
        #[test]
        fn the_fast_path_never_disagrees_with_the_strict_path(pick in any::<prop::sample::Index>(), kind in 0..6usize) {
            let base = body();
            let mut all = Vec::new();
            paths(&base, Vec::new(), &mut all);
            let path = pick.get(&all).clone();
            let replacement = match kind {
                0 => None,
                1 => Some(Value::Null),
                2 => Some(json!(7)),
                3 => Some(json!("text")),
                4 => Some(json!({"type": "text"})),
                _ => Some(json!([true])),
            };
            let (fast, strict) = both(&mutate(base, &path, replacement));
            if let Some(fast) = fast {
                prop_assert_eq!(Ok(fast), strict, "at {:?}", path);
            }
        }
    }
}
