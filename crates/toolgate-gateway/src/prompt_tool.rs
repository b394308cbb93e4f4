//! `approval_prompt`: Claude Code's permission prompt (`claude -p
//! --permission-prompt-tool mcp__toolgate__approval_prompt`).
//!
//! Claude Code calls it before each of its own tool uses it would otherwise
//! ask about, with `{tool_name, input, tool_use_id}`, and reads one text
//! block holding `{"behavior": "allow", "updatedInput": {...}}` or
//! `{"behavior": "deny", "message": "..."}`. The gate decides it like any
//! call, with rules whose `tool` globs match Claude Code's tool names
//! (`Bash`, `Edit`, `Write`, `WebFetch`, `mcp__server__tool`): a deny
//! answers deny, an allow answers allow with the input unchanged, and
//! everything else (an `ask` rule, or no rule at all) goes to a person out
//! of band, held like any gateway call; an approval with an edit answers
//! with the edited input, once it passes the lifecycle's edit check. The
//! answer is recorded as the approval's outcome. Claude Code runs the tool
//! use itself on every `allow`, so an approval answers `allow` once only
//! ([`HeldCall::single_use`]): a later prompt, even with the same input, is a
//! new approval unless a rule or a standing decision allows it. A denial
//! stands: asking again within the retry window gets it again. A prompt
//! still pending when the hold ends is denied for now with a message saying
//! that asking again attaches to it. The tool itself is never gated.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use toolgate::approval::lifecycle::held::{self, Admitted, Attached, HeldCall, HeldError};
use toolgate::ledger::{ApprovalRecord, ApprovalState};
use toolgate::tool::GateAction;
use toolgate_protocol::ToolResultOutput;

use crate::gateway::{Gateway, Session};
use crate::hold::{Request, Settled, settle};
use crate::outcome;

/// The tool's name.
pub const NAME: &str = "approval_prompt";

/// Why a person is asked when no rule names a reason.
const DEFAULT_REASON: &str = "Claude Code asks permission to use this tool";

/// The tool as `tools/list` offers it.
pub fn definition() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "tool_name": {"type": "string", "description": "The tool Claude Code wants to use (Bash, Edit, mcp__server__tool, ...)"},
            "input": {"type": "object", "description": "Its input"},
            "tool_use_id": {"type": "string", "description": "Claude Code's id of the tool use"},
        },
        "required": ["tool_name", "input"],
    });
    let schema: JsonObject = serde_json::from_value(schema).unwrap_or_default();
    let mut tool = Tool::new(
        NAME,
        "Claude Code's permission prompt: decides whether a tool use may run (rules, sticky decisions, or a person through toolgate).",
        std::sync::Arc::new(schema),
    );
    tool.annotations = Some(ToolAnnotations::new().read_only(true).destructive(false).open_world(false));
    tool
}

/// An allow answer.
pub fn allow(input: &Value) -> Value {
    json!({"behavior": "allow", "updatedInput": input})
}

/// A deny answer.
pub fn deny(message: impl Into<String>) -> Value {
    json!({"behavior": "deny", "message": message.into()})
}

/// The answer as the text block Claude Code reads.
fn answer(value: &Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

/// Answers one permission prompt (see the module docs).
pub async fn call(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    arguments: &JsonObject,
) -> CallToolResult {
    let Some(tool_name) = arguments.get("tool_name").and_then(Value::as_str).filter(|name| !name.is_empty()) else {
        return outcome::error_text("approval_prompt needs `tool_name`, a non-empty string");
    };
    let input = arguments.get("input").cloned().unwrap_or_else(|| json!({}));
    let call_id = match held::call_id_of(&session.conversation_key(), tool_name, &input) {
        Ok(call_id) => call_id,
        Err(error) => return answer(&deny(error.to_string())),
    };
    let config_digest = gateway.config_digest();
    let held_call = HeldCall {
        tool_name,
        input: &input,
        reason: Some(DEFAULT_REASON),
        route: None,
        ttl: None,
        single_use: true,
        key: None,
        decided: None,
        note: None,
        input_schema: None,
        // A tool the gateway does not offer: its definition is unknown here.
        tool_digest: None,
        config_digest: config_digest.as_deref(),
    };
    // A stand-in for a tool the gateway does not offer: no policy of its own, so
    // a prompt nothing speaks to asks.
    let stand_in = toolgate::Tool::dynamic(tool_name, json!({})).needs_approval(true).approval_reason(DEFAULT_REASON);
    match gateway.admit(session, &stand_in, held_call, &call_id).await.map(|(admitted, _)| admitted) {
        Ok(Admitted::Decided(verdict)) if verdict.action == GateAction::Deny => {
            answer(&deny(format!("{}: {}", outcome::DENIED_BY_POLICY, verdict.reason.unwrap_or_default())))
        }
        Ok(Admitted::Decided(_)) => answer(&allow(&input)),
        Ok(Admitted::Refused(refusal)) => answer(&deny(refusal)),
        Ok(Admitted::Held(attached)) => match hold(gateway, session, request, &stand_in, *attached).await {
            Ok(value) => answer(&value),
            Err(error) => answer(&deny(format!("the approval could not be recorded: {error}"))),
        },
        Err(error) => answer(&deny(format!("the approval could not be recorded: {error}"))),
    }
}

/// Holds the prompt for a person out of band; the answer, recorded once.
async fn hold(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    stand_in: &toolgate::Tool,
    attached: Attached,
) -> Result<Value, HeldError> {
    let ledger = gateway.ledger(session);
    Ok(match settle(gateway, session, request, stand_in, attached, None, true).await? {
        Settled::Run(record) => {
            let edited = record.decision.as_ref().and_then(|decision| decision.edited_input.clone());
            let checked = match &edited {
                // Claude Code's own tools have no policy here: the rules judge the edit.
                Some(edit) => {
                    let stand_in = toolgate::Tool::dynamic(record.tool_name.clone(), json!({}));
                    gateway.check_edit(session, &stand_in, &record, edit).await
                }
                None => Ok(()),
            };
            let (value, failed) = match checked {
                Ok(()) => (allow(edited.as_ref().unwrap_or(&record.input)), false),
                Err(refusal) => (deny(format!("the approved edit does not run: {refusal}")), true),
            };
            let output = ToolResultOutput::Json { value: value.clone(), provider_options: None };
            if let Err(error) = held::finish(&ledger, &record, output, failed, value.clone()).await {
                tracing::error!(%error, approval = %record.approval_id, "cannot record a permission answer");
            }
            value
        }
        Settled::Final(record) => final_answer(&record),
        Settled::Waiting(record) => deny(pending_message(&record, gateway.options().public_url.as_deref())),
    })
}

/// The answer a final record gives. An `allow` already given is never
/// given again (a prompt that raced the one that took it is denied for now).
fn final_answer(record: &ApprovalRecord) -> Value {
    match &record.state {
        ApprovalState::Executed => deny(format!(
            "approval {} already allowed one use of `{}`; ask again for another",
            record.approval_id, record.tool_name
        )),
        _ => {
            let text = outcome::from_record(record)
                .and_then(|result| {
                    result.content.first().and_then(|block| block.as_text().map(|text| text.text.clone()))
                })
                .unwrap_or_else(|| format!("approval {} ended as {}", record.approval_id, record.state.as_str()));
            deny(text)
        }
    }
}

/// Why a prompt still pending is denied for now.
fn pending_message(record: &ApprovalRecord, public_url: Option<&str>) -> String {
    let mut text = format!(
        "Approval pending: a person has not decided approval {} yet, so this use of `{}` is not allowed now.",
        record.approval_id, record.tool_name
    );
    if let Some(url) = outcome::approval_url(public_url, &record.approval_id) {
        text.push_str(&format!(" It can be decided at {url}."));
    }
    text.push_str(" Asking again with the same input attaches to this approval and gets its outcome.");
    text
}
