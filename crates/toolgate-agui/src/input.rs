//! `RunAgentInput`: the body of an AG-UI run request.
//!
//! Decoding is tolerant where AG-UI is (unknown fields are kept in `extra`,
//! `tools`, `context` and `state` may be absent, a `null` state is no state)
//! and strict where the adapter depends on the shape: every message must
//! have a known role and decode, every resume entry must name its interrupt.
//! Errors name the message or resume entry index ([`InputError`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::InputError;
use crate::messages::{Extra, Message};

/// A request to run the agent (AG-UI `RunAgentInput`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation thread.
    pub thread_id: String,
    /// This run.
    pub run_id: String,
    /// The run this one continues, if the client says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The AG-UI protocol version the client speaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The agent state the client holds (any JSON; toolgate needs an object or nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The whole conversation.
    pub messages: Vec<Message>,
    /// Tools the client declares (accepted; the server's toolkit decides what runs).
    pub tools: Vec<Tool>,
    /// Ambient context the client provides.
    pub context: Vec<Context>,
    /// Opaque properties for the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts of the previous run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<ResumeEntry>>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInput {
    thread_id: String,
    run_id: String,
    #[serde(default)]
    parent_run_id: Option<String>,
    #[serde(default)]
    protocol_version: Option<String>,
    #[serde(default)]
    state: Option<Value>,
    messages: Vec<Value>,
    #[serde(default)]
    tools: Vec<Tool>,
    #[serde(default)]
    context: Vec<Context>,
    #[serde(default)]
    forwarded_props: Option<Value>,
    #[serde(default)]
    resume: Option<Vec<Value>>,
    #[serde(flatten)]
    extra: Extra,
}

impl RunAgentInput {
    /// A minimal input: a thread, a run and the messages.
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            parent_run_id: None,
            protocol_version: None,
            state: None,
            messages,
            tools: Vec::new(),
            context: Vec::new(),
            forwarded_props: None,
            resume: None,
            extra: Extra::new(),
        }
    }

    /// Decodes a request body.
    pub fn from_json(body: &[u8]) -> Result<Self, InputError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| InputError::Invalid(e.to_string()))?;
        Self::from_value(value)
    }

    /// Decodes a JSON value; errors name the message or resume entry index.
    pub fn from_value(value: Value) -> Result<Self, InputError> {
        let raw: RawInput = serde_json::from_value(value).map_err(|e| InputError::Invalid(e.to_string()))?;
        let messages = raw
            .messages
            .into_iter()
            .enumerate()
            .map(|(index, message)| Message::from_value(index, message))
            .collect::<Result<_, _>>()?;
        let resume = raw
            .resume
            .map(|entries| {
                entries
                    .into_iter()
                    .enumerate()
                    .map(|(index, entry)| ResumeEntry::from_value(index, entry))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        Ok(Self {
            thread_id: raw.thread_id,
            run_id: raw.run_id,
            parent_run_id: raw.parent_run_id,
            protocol_version: raw.protocol_version,
            state: raw.state.filter(|state| !state.is_null()),
            messages,
            tools: raw.tools,
            context: raw.context,
            forwarded_props: raw.forwarded_props,
            resume,
            extra: raw.extra,
        })
    }
}

impl<'de> Deserialize<'de> for RunAgentInput {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

/// A tool the client declares. Accepted and exposed; toolgate runs only the
/// server's toolkit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its JSON Schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A named piece of context for the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// What it is.
    pub description: String,
    /// The value.
    pub value: String,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An answer to one interrupt (AG-UI `ResumeEntry`). Only `interruptId` is
/// required to decode; a bad `status` or `payload` is judged later and
/// resolves as a denial (see [`crate::resume`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt answered (toolgate: the approval id).
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub status: ResumeStatus,
    /// The answer: `{approved, editedArgs?, reason?}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Fields the adapter does not read (`metadata`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl ResumeEntry {
    /// A `resolved` entry with this payload.
    pub fn resolved(interrupt_id: impl Into<String>, payload: Value) -> Self {
        Self {
            interrupt_id: interrupt_id.into(),
            status: ResumeStatus::Resolved,
            payload: Some(payload),
            extra: Extra::new(),
        }
    }

    /// A `cancelled` entry.
    pub fn cancelled(interrupt_id: impl Into<String>) -> Self {
        Self { interrupt_id: interrupt_id.into(), status: ResumeStatus::Cancelled, payload: None, extra: Extra::new() }
    }

    /// Decodes resume entry `index`; errors name the index.
    pub fn from_value(index: usize, value: Value) -> Result<Self, InputError> {
        let invalid = |detail: &str| InputError::InvalidResumeEntry { index, detail: detail.to_owned() };
        let Value::Object(mut object) = value else {
            return Err(invalid("a resume entry must be a JSON object"));
        };
        let interrupt_id = match object.remove("interruptId") {
            Some(Value::String(id)) => id,
            Some(_) => return Err(invalid("`interruptId` must be a string")),
            None => return Err(invalid("`interruptId` is missing")),
        };
        let status = match object.remove("status") {
            Some(Value::String(status)) if status == "resolved" => ResumeStatus::Resolved,
            Some(Value::String(status)) if status == "cancelled" => ResumeStatus::Cancelled,
            Some(other) => ResumeStatus::Other(other),
            None => ResumeStatus::Other(Value::Null),
        };
        let payload = object.remove("payload").filter(|payload| !payload.is_null());
        Ok(Self { interrupt_id, status, payload, extra: object })
    }
}

impl<'de> Deserialize<'de> for ResumeEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(0, value).map_err(|error| serde::de::Error::custom(error.detail()))
    }
}

/// The status of a resume entry.
#[derive(Debug, Clone, PartialEq)]
pub enum ResumeStatus {
    /// The interrupt was answered; the payload says how.
    Resolved,
    /// The person dismissed it; toolgate denies the call.
    Cancelled,
    /// Anything else (missing is `Null`); resolves as a denial.
    Other(Value),
}

impl Serialize for ResumeStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Resolved => serializer.serialize_str("resolved"),
            Self::Cancelled => serializer.serialize_str("cancelled"),
            Self::Other(value) => value.serialize(serializer),
        }
    }
}
