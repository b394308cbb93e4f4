//! The fast path of [`ChatRequest::from_json`](crate::ChatRequest::from_json):
//! a well-formed body read straight into typed messages in one pass, without
//! building a `serde_json::Value` of the whole conversation first.
//!
//! Each part is read into one struct with every field any part type uses,
//! ignoring the rest; its `type` and `state` are borrowed from the body. A
//! part kept as JSON (`data-*` and `source-*`) is read into its `Value` as it
//! goes, which needs its `type` to come first (as every AI SDK client writes
//! it). Only the values that stay JSON (tool inputs and outputs, metadata,
//! kept parts) become `Value`s.
//!
//! Contract: this path returns exactly what the strict path returns for the
//! same body, or `None`. It returns `None` on anything it does not expect
//! (a missing or mistyped field, an unknown part type, a kept part whose
//! `type` is not its first field, a repeated `type`, invalid JSON), and the
//! strict path then reads the body again and names what is wrong. So errors
//! and unusual bodies cost two reads; valid bodies cost one.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::StrDeserializer;
use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::ToolState;
use crate::error::ConvertError;
use crate::message::{ChatRequest, ToolFields, UiApproval, UiMessage, UiPart, UiRole, build_tool};

impl ChatRequest {
    /// Parses a request body: straight into typed messages when it is well
    /// formed (the parts as borrowed slices of the body, no `Value` of the
    /// whole conversation), else through the strict path, whose errors name
    /// the message, the part and the field. Both give the same result.
    pub fn from_json(body: &[u8]) -> Result<Self, ConvertError> {
        match chat_request(body) {
            Some(request) => Ok(request),
            None => Self::from_json_strictly(body),
        }
    }
}

/// The body, its messages read in the same pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    trigger: Option<String>,
    #[serde(default)]
    message_id: Option<String>,
    messages: Vec<Message>,
}

/// A string borrowed from the body unless it has escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// A message: the known fields, its parts, every other field kept.
struct Message {
    id: Option<String>,
    role: Option<UiRole>,
    parts: Option<Vec<UiPart>>,
    metadata: Option<Value>,
    extra: Map<String, Value>,
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MessageVisitor;
        impl<'de> Visitor<'de> for MessageVisitor {
            type Value = Message;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a UI message")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Message, M::Error> {
                let mut message = Message { id: None, role: None, parts: None, metadata: None, extra: Map::new() };
                while let Some(Text(key)) = map.next_key()? {
                    // A later duplicate replaces an earlier one, as in a `Value` object.
                    match key.as_ref() {
                        "id" => message.id = map.next_value()?,
                        "role" => {
                            let role = map.next_value()?;
                            if message.parts.is_some() && message.role.is_some_and(|read_as| read_as != role) {
                                return Err(M::Error::custom("parts read under another role"));
                            }
                            message.role = Some(role);
                        }
                        "parts" => message.parts = Some(map.next_value_seed(PartsSeed { role: message.role })?),
                        "metadata" => message.metadata = Some(map.next_value()?),
                        _ => {
                            let value = map.next_value()?;
                            message.extra.insert(key.into_owned(), value);
                        }
                    }
                }
                Ok(message)
            }
        }
        deserializer.deserialize_map(MessageVisitor)
    }
}

/// A message's parts, typed as they are read. The role decides what a
/// `tool-approval` part is; when the role is not known yet (it comes after
/// the parts), such a part sends the body to the strict path.
#[derive(Clone, Copy)]
struct PartsSeed {
    role: Option<UiRole>,
}

impl<'de> DeserializeSeed<'de> for PartsSeed {
    type Value = Vec<UiPart>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for PartsSeed {
    type Value = Vec<UiPart>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of UI message parts")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Vec<UiPart>, S::Error> {
        let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(part) = seq.next_element_seed(PartSeed { role: self.role })? {
            parts.push(part);
        }
        Ok(parts)
    }
}

/// One part, read into every field any typed part may have (unknown fields
/// skipped), or into its JSON when it is kept as it came.
#[derive(Clone, Copy)]
struct PartSeed {
    role: Option<UiRole>,
}

/// Every field a typed part may have.
#[derive(Default)]
struct Fields<'a> {
    text: Option<String>,
    url: Option<String>,
    media_type: Option<String>,
    filename: Option<String>,
    tool_call_id: Option<String>,
    /// A tool part's state; text and reasoning parts have states of their own (`streaming`, `done`).
    state: Option<Cow<'a, str>>,
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

/// True for the part types kept as JSON, in [`UiPart::Other`].
fn is_kept(part_type: &str) -> bool {
    matches!(part_type, "source-url" | "source-document") || part_type.starts_with("data-")
}

impl<'de> DeserializeSeed<'de> for PartSeed {
    type Value = UiPart;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PartSeed {
    type Value = UiPart;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a UI message part")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<UiPart, M::Error> {
        let mut part_type: Option<Cow<'de, str>> = None;
        let mut fields = Fields::default();
        let mut first = true;
        while let Some(Text(key)) = map.next_key()? {
            match key.as_ref() {
                "type" if part_type.is_some() => return Err(M::Error::custom("a repeated `type`")),
                "type" => {
                    let Text(name) = map.next_value()?;
                    if is_kept(&name) {
                        return if first { kept(name, map) } else { Err(M::Error::custom("`type` is not first")) };
                    }
                    part_type = Some(name);
                }
                "text" => fields.text = map.next_value()?,
                "url" => fields.url = map.next_value()?,
                "mediaType" => fields.media_type = map.next_value()?,
                "filename" => fields.filename = map.next_value()?,
                "toolCallId" => fields.tool_call_id = map.next_value()?,
                "state" => fields.state = map.next_value::<Option<Text<'de>>>()?.map(|Text(state)| state),
                "toolName" => fields.tool_name = map.next_value()?,
                "input" => fields.input = map.next_value()?,
                "output" => fields.output = map.next_value()?,
                "errorText" => fields.error_text = map.next_value()?,
                "rawInput" => fields.raw_input = map.next_value()?,
                "providerExecuted" => fields.provider_executed = map.next_value()?,
                "approval" => fields.approval = map.next_value()?,
                "callProviderMetadata" => fields.call_provider_metadata = map.next_value()?,
                "preliminary" => fields.preliminary = map.next_value()?,
                "approved" => fields.approved = map.next_value()?,
                "reason" => fields.reason = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            first = false;
        }
        let part_type = part_type.ok_or_else(|| M::Error::missing_field("type"))?;
        typed(self.role, &part_type, fields).ok_or_else(|| M::Error::custom("not a part the fast path reads"))
    }
}

/// The rest of a kept part whose `type` came first, into its JSON as a `Value` would hold it.
fn kept<'de, M: MapAccess<'de>>(part_type: Cow<'de, str>, mut map: M) -> Result<UiPart, M::Error> {
    let mut part = Map::new();
    part.insert("type".to_owned(), Value::String(part_type.into_owned()));
    while let Some(Text(key)) = map.next_key()? {
        if key == "type" {
            return Err(M::Error::custom("a repeated `type`"));
        }
        let value = map.next_value()?;
        part.insert(key.into_owned(), value);
    }
    Ok(UiPart::Other(Value::Object(part)))
}

/// The request, when the body is well formed; `None` sends it to the strict path.
pub(crate) fn chat_request(body: &[u8]) -> Option<ChatRequest> {
    let text = std::str::from_utf8(body).ok()?;
    let body: Body = serde_json::from_str(text).ok()?;
    let messages = body.messages.into_iter().map(message).collect::<Option<Vec<_>>>()?;
    Some(ChatRequest { id: body.id.unwrap_or_default(), messages, trigger: body.trigger, message_id: body.message_id })
}

fn message(raw: Message) -> Option<UiMessage> {
    Some(UiMessage {
        id: raw.id.unwrap_or_default(),
        role: raw.role?,
        parts: raw.parts?,
        metadata: raw.metadata,
        extra: raw.extra,
    })
}

/// A typed part from its fields; `role` is `None` when the message's role comes after its parts.
fn typed(role: Option<UiRole>, part_type: &str, fields: Fields<'_>) -> Option<UiPart> {
    match part_type {
        "text" => Some(UiPart::Text { text: fields.text? }),
        "reasoning" => Some(UiPart::Reasoning { text: fields.text? }),
        "step-start" => Some(UiPart::StepStart),
        "file" => Some(UiPart::File { url: fields.url?, media_type: fields.media_type?, filename: fields.filename }),
        "tool-approval" if role? == UiRole::User => Some(UiPart::ToolApproval {
            tool_call_id: fields.tool_call_id?,
            approved: fields.approved?,
            reason: fields.reason,
        }),
        "dynamic-tool" => tool(None, fields),
        other => match other.strip_prefix("tool-") {
            Some(name) if !name.is_empty() => tool(Some(name.to_owned()), fields),
            _ => None,
        },
    }
}

fn tool(static_name: Option<String>, part: Fields<'_>) -> Option<UiPart> {
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
    use crate::{ChatRequest, UiPart};

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

    #[test]
    fn escaped_keys_and_types_read_the_same_on_both_paths() {
        let body = br#"{"messages": [{"id": "u", "r\u006fle": "user", "parts": [
            {"typ\u0065": "t\u0065xt", "text": "caf\u00e9"},
            {"type": "data-x\u0079", "id": "d", "data": {"k": 1}}]},
            {"id": "a", "role": "assistant", "parts": [{"type": "tool-get_w\u0065ather", "toolCallId": "w",
             "st\u0061te": "output-\u0061vailable", "input": {}, "output": 1}]}]}"#;
        let fast = chat_request(body).expect("the fast path reads escaped strings");
        pretty_assertions::assert_eq!(fast, ChatRequest::from_json_strictly(body).unwrap());
        let UiPart::Other(kept) = &fast.messages[0].parts[1] else { panic!("a kept part: {fast:?}") };
        assert_eq!(kept["type"], "data-xy");
        let UiPart::Tool(tool) = &fast.messages[1].parts[0] else { panic!("a tool part: {fast:?}") };
        assert_eq!((tool.tool_name.as_str(), tool.state), ("get_weather", crate::ToolState::OutputAvailable));
    }

    #[test]
    fn a_kept_part_whose_type_is_not_first_goes_to_the_strict_path() {
        for (part, kept) in [
            (
                r#"{"id": "d", "type": "data-x", "data": {"k": 1}}"#,
                json!({"id": "d", "type": "data-x", "data": {"k": 1}}),
            ),
            (r#"{"type": "data-x", "data": 1, "type": "data-y"}"#, json!({"type": "data-y", "data": 1})),
        ] {
            let body = format!(r#"{{"messages": [{{"id": "a", "role": "assistant", "parts": [{part}]}}]}}"#);
            assert_eq!(chat_request(body.as_bytes()), None, "{body}");
            let strict = ChatRequest::from_json(body.as_bytes()).expect("the strict path keeps the part");
            assert_eq!(strict.messages[0].parts, vec![UiPart::Other(kept)]);
        }
    }

    #[test]
    fn parts_before_the_role_read_on_the_fast_path_unless_the_role_decides_them() {
        let body = br#"{"messages": [{"parts": [{"type": "text", "text": "hi"}], "id": "u", "role": "user"}]}"#;
        let fast = chat_request(body).expect("no part here depends on the role");
        pretty_assertions::assert_eq!(fast, ChatRequest::from_json_strictly(body).unwrap());

        for role in ["user", "assistant"] {
            let body = format!(
                r#"{{"messages": [{{"parts": [{{"type": "tool-approval", "toolCallId": "c", "approved": true,
                "state": "input-available", "input": {{}}}}], "id": "m", "role": "{role}"}}]}}"#
            );
            assert_eq!(chat_request(body.as_bytes()), None, "a tool-approval part is what the role makes it");
            let read = ChatRequest::from_json(body.as_bytes()).expect("the strict path reads it");
            let is_answer = matches!(read.messages[0].parts[0], UiPart::ToolApproval { .. });
            assert_eq!(is_answer, role == "user", "{read:?}");
        }
        let body = br#"{"messages": [{"role": "user", "parts": [{"type": "tool-approval", "toolCallId": "c",
            "approved": true}], "role": "assistant"}]}"#;
        assert_eq!(chat_request(body), None, "parts read under one role, then another");
    }

    #[test]
    fn a_repeated_type_goes_to_the_strict_path() {
        let body =
            br#"{"messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "type": "text", "text": "x"}]}]}"#;
        assert_eq!(chat_request(body), None);
        assert!(ChatRequest::from_json(body).is_ok());
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
