//! Schemas of bodies whose types live in other crates (the AI SDK's UI
//! messages, AG-UI's `RunAgentInput`, the ledger's audit events, sticky
//! decisions): written here, for the API reference only. The server never
//! builds these types; the tests check live responses against them.

#![allow(dead_code)]

use serde_json::Value;
use toolgate::ledger::AuditKind;
use toolgate_policy::StickyAction;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// The body `DefaultChatTransport` of the AI SDK (v6) posts: the chat and its messages.
#[derive(ToSchema)]
#[schema(as = ChatRequest)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatRequestDoc {
    /// The chat id (may not start with `ag-ui:`; required with a store).
    id: Option<String>,
    /// The conversation as the client holds it, oldest first. With a store,
    /// the client may send only its newest messages.
    messages: Vec<UiMessageDoc>,
    /// `submit-message` or `regenerate-message`.
    trigger: Option<String>,
    /// The id of the message the request is about.
    message_id: Option<String>,
}

/// One AI SDK `UIMessage`.
#[derive(ToSchema)]
#[schema(as = UIMessage)]
pub(crate) struct UiMessageDoc {
    /// The message id.
    id: String,
    /// Who wrote it.
    role: UiRoleDoc,
    /// Its parts (`text`, `reasoning`, `step-start`, `tool-NAME` / `dynamic-tool`
    /// with `toolCallId`, `state`, `input`, `approval`, ..., and data parts such
    /// as `data-toolgate-reason` and `data-toolgate-approval`).
    parts: Vec<UiPartDoc>,
    /// Application metadata, kept as is.
    #[schema(nullable = false)]
    metadata: Option<Value>,
}

/// Who wrote a UI message.
#[derive(ToSchema)]
#[schema(as = UIRole)]
#[serde(rename_all = "lowercase")]
pub(crate) enum UiRoleDoc {
    /// Instructions.
    System,
    /// The person.
    User,
    /// The assistant.
    Assistant,
}

/// One part of a UI message, tagged by `type`.
#[derive(ToSchema)]
#[schema(as = UIMessagePart)]
pub(crate) struct UiPartDoc {
    /// The kind of part.
    #[serde(rename = "type")]
    kind: String,
}

/// AG-UI 1.0 `RunAgentInput`: a run of the agent on a thread.
#[derive(ToSchema)]
#[schema(as = RunAgentInput)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAgentInputDoc {
    /// The thread (the conversation).
    thread_id: String,
    /// This run.
    run_id: String,
    /// The run this one continues.
    #[schema(nullable = false)]
    parent_run_id: Option<String>,
    /// The AG-UI protocol version the client speaks.
    #[schema(nullable = false)]
    protocol_version: Option<String>,
    /// The agent state the client holds (an object; toolgate keeps its pending approvals under `toolgate`).
    #[schema(nullable = false)]
    state: Option<Value>,
    /// The whole conversation: AG-UI messages tagged by `role`.
    messages: Vec<AguiMessageDoc>,
    /// Tools the client declares (accepted; the server's toolkit decides what runs).
    #[schema(nullable = false)]
    tools: Option<Vec<Value>>,
    /// Ambient context.
    #[schema(nullable = false)]
    context: Option<Vec<Value>>,
    /// Opaque properties for the agent.
    #[schema(nullable = false)]
    forwarded_props: Option<Value>,
    /// Answers to the previous run's interrupts.
    #[schema(nullable = false)]
    resume: Option<Vec<ResumeEntryDoc>>,
}

/// One AG-UI message (`developer`, `system`, `user`, `assistant`, `tool`, `reasoning` or `activity`).
#[derive(ToSchema)]
#[schema(as = AguiMessage)]
pub(crate) struct AguiMessageDoc {
    /// The message id.
    id: String,
    /// Who wrote it.
    role: String,
}

/// An answer to one interrupt of the previous run.
#[derive(ToSchema)]
#[schema(as = ResumeEntry)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntryDoc {
    /// The interrupt answered (toolgate: the approval id).
    interrupt_id: String,
    /// `resolved` or `cancelled` (anything else denies).
    status: Option<String>,
    /// The answer: `{approved, editedArgs?, reason?}`.
    #[schema(nullable = false)]
    payload: Option<Value>,
}

/// A sticky decision: a person's lasting allow or deny of a tool.
#[derive(ToSchema)]
#[schema(as = StickyDecision)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StickyDecisionDoc {
    /// Its id (`dec_...`).
    id: String,
    /// Allow or deny.
    #[schema(schema_with = sticky_action)]
    action: StickyAction,
    /// The tool.
    tool: String,
    /// Only exactly this input (absent: any input).
    #[schema(nullable = false)]
    input: Option<Value>,
    /// Where it applies.
    scope: DecisionScopeDoc,
    /// Unix milliseconds from which on it no longer applies (absent: until revoked).
    #[schema(nullable = false)]
    expires_at: Option<i64>,
    /// Unix milliseconds when it was made.
    created_at: i64,
    /// Who made it.
    #[schema(nullable = false)]
    created_by: Option<String>,
    /// Free text from the person.
    #[schema(nullable = false)]
    note: Option<String>,
}

/// A grant (a bounded approval) or an "always allow" sticky decision, as `GET /api/grants` lists it.
#[derive(ToSchema)]
#[schema(as = Grant)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GrantDoc {
    /// Its id (`grant_...`, or `dec_...` for a sticky decision).
    id: String,
    /// Always `allow`.
    #[schema(schema_with = sticky_action)]
    action: StickyAction,
    /// The tool.
    tool: String,
    /// Only exactly this input (absent: any input).
    #[schema(nullable = false)]
    input: Option<Value>,
    /// Predicates by JSON pointer the input must all satisfy (the rules' operators).
    #[schema(nullable = false)]
    input_match: Option<Value>,
    /// Where it applies.
    scope: DecisionScopeDoc,
    /// Unix milliseconds from which on it no longer applies (absent: until revoked).
    #[schema(nullable = false)]
    expires_at: Option<i64>,
    /// Unix milliseconds when it was made.
    created_at: i64,
    /// Who granted it.
    #[schema(nullable = false)]
    created_by: Option<String>,
    /// The granter's groups when they granted it.
    #[schema(nullable = false)]
    granter_groups: Option<Vec<String>>,
    /// Whose calls it lets run (the approval's requester).
    #[schema(nullable = false)]
    requester: Option<String>,
    /// The approval it was granted with.
    #[schema(nullable = false)]
    approval_id: Option<String>,
    /// How many calls it let run when made (absent: no limit).
    #[schema(nullable = false)]
    uses: Option<u32>,
    /// How many it still lets run (absent: no limit).
    #[schema(nullable = false)]
    uses_left: Option<i64>,
    /// Free text from the person.
    #[schema(nullable = false)]
    note: Option<String>,
}

/// What an approver grants with an approval: the next calls like it run without asking.
#[derive(ToSchema)]
#[schema(as = GrantSpec)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GrantSpecDoc {
    /// How many later calls it lets run, 1 to 10000 (absent: no limit).
    #[schema(nullable = false, minimum = 1, maximum = 10000)]
    uses: Option<u32>,
    /// How long it lasts, such as `30m`, `1h` or `7d` (absent: until revoked).
    #[schema(nullable = false)]
    within: Option<String>,
    /// JSON pointer to predicate (`lt`, `le`, `gt`, `ge`, `equals`, `one_of`, `regex`, `glob`), all of which a
    /// later call's input must satisfy, e.g. `{"/amount": {"le": 1000}}` (absent: any input).
    #[schema(nullable = false)]
    input: Option<Value>,
    /// `conversation` (the default: the approval's chat) or `principal` (every chat of its requester).
    #[schema(nullable = false, pattern = "^(conversation|principal)$")]
    scope: Option<String>,
}

/// Where a sticky decision applies, tagged by `kind`.
#[derive(ToSchema)]
#[schema(as = DecisionScope)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum DecisionScopeDoc {
    /// One conversation (its chat id).
    #[serde(rename_all = "camelCase")]
    Conversation {
        /// The chat id.
        conversation_id: String,
    },
    /// Every conversation of one principal.
    Principal {
        /// The principal.
        principal: String,
    },
    /// Everyone, everywhere.
    Global,
}

/// One audit event (a line of `GET /api/audit`).
#[derive(ToSchema)]
#[schema(as = AuditEvent)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AuditEventDoc {
    /// Its position in the log.
    seq: i64,
    /// When it happened (Unix milliseconds).
    at: i64,
    /// What happened.
    #[schema(schema_with = audit_kind)]
    kind: AuditKind,
    /// The approval concerned.
    approval_id: String,
    /// Its tool call.
    tool_call_id: String,
    /// Its conversation (as the client named it; see `owner`).
    conversation_id: String,
    /// Who owns that conversation, when it has an owner.
    #[schema(nullable = false)]
    owner: Option<String>,
    /// Who caused it, when known.
    #[schema(nullable = false)]
    principal: Option<String>,
    /// The details: reason, inputs, result or error, why an answer was rejected.
    data: Value,
}

/// The names a list of serializable values has on the wire.
fn wire_names<T: serde::Serialize>(values: &[T]) -> Vec<String> {
    values.iter().filter_map(|value| serde_json::to_value(value).ok()?.as_str().map(str::to_owned)).collect()
}

/// The schema of a [`StickyAction`]: `allow` or `deny`.
pub(crate) fn sticky_action() -> RefOr<Schema> {
    let names = wire_names(&[StickyAction::Allow, StickyAction::Deny]);
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names)).into()
}

/// The schema of an [`AuditKind`]: one of [`AuditKind::ALL`].
pub(crate) fn audit_kind() -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(wire_names(&AuditKind::ALL))).into()
}
