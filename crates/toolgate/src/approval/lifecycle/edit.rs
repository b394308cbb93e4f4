//! An edit is a new input, gated as one.
//!
//! A person who approves with an edit asks for a call nobody has judged yet.
//! Every path that takes an edit (the chat's `tool-approval-response`, AG-UI,
//! the inbox, the CLI, a signed link, the gateway before it runs a decided
//! edit) calls [`check_edit`], which judges the edited input as the
//! requester's own call, at the moment of the vote:
//!
//! 1. the tool must take edits ([`Tool::is_editable`]) and the input must pass
//!    its schema, and the schema its requester gave with the call, when they
//!    gave one ([`EditCheck::input_schema`], the call-gating API's
//!    `inputSchema`): an edit that breaks it is [`EditRefusal::OutsideSchema`],
//!    naming where;
//! 2. the rules and the tool's policy decide the edited input under the
//!    requester's identity ([`decide_call`]): `deny` refuses the edit
//!    ([`EditRefusal::Denied`], the engine's `EditDenied`); `allow`, or an `ask`
//!    that its requester may answer, lets it through;
//! 3. an `ask` that names approvers ([`Route`]) lets it through only when the
//!    approval being decided already satisfies that route: the person
//!    approving with the edit is one of the route's approvers (the requester
//!    only where the route allows self-approval), and the route needs one
//!    approval. Otherwise the edit may not run on this approval
//!    ([`EditRefusal::NeedsApprovers`], naming the rule, whom it waits for,
//!    and the route): with a ledger it becomes a new approval routed that way
//!    ([`super::supersede`]); without one it is refused (`edit_not_allowed`).
//!    An edit never lowers the bar the rules set for its input.
//!
//! Where the approver is not known (the engine settling an approval that was
//! decided out of band by votes), only a routed approval can be in that
//! state, and its deciding vote passed this check when it was cast.

use serde_json::Value;

use super::route::{GROUP_PREFIX, Route, Voter, approvers_in_words};
use crate::tool::{ApprovalContext, Caller, GateAction, Tool, decide_call};

/// Everything [`check_edit`] judges an edit by.
#[derive(Debug)]
pub struct EditCheck<'a> {
    /// The tool the call names.
    pub tool: &'a Tool,
    /// The edited input.
    pub edit: &'a Value,
    /// The requester: their gate, conversation, principal and groups (the
    /// edited input is judged as their own call).
    pub requester: Caller<'a>,
    /// The call's id and the conversation before it.
    pub context: ApprovalContext,
    /// Whether the approval being decided is routed to named approvers
    /// (`false`: its requester decides it).
    pub routed: bool,
    /// Who approves with the edit, when known; `None` only where a routed
    /// approval's deciding vote was checked when cast (see the module docs).
    pub voter: Option<&'a Voter>,
    /// The JSON Schema the requester gave with the call, kept with its record
    /// ([`crate::ledger::ApprovalRecord::input_schema`]): the edit must pass it too.
    pub input_schema: Option<&'a Value>,
}

/// Why an edit may not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditRefusal {
    /// The tool does not take edited inputs.
    #[error("tool `{0}` does not allow edited inputs")]
    NotEditable(String),
    /// The edited input fails the tool's schema.
    #[error("the edited input is invalid: {0}")]
    InvalidInput(String),
    /// The edited input fails the JSON Schema the requester gave with the call.
    #[error("the edited input breaks the call's input schema at {}: {message}", pointer_in_words(path))]
    OutsideSchema {
        /// Where in the input (a JSON Pointer; empty: the input itself).
        path: String,
        /// What the schema says there.
        message: String,
    },
    /// The rules or the tool's policy deny the edited input.
    #[error("the policy denies the edited input: {0}")]
    Denied(String),
    /// The edited input needs approvers this approval does not have.
    #[error(
        "the edited input needs the approval of {waiting_for} ({reason}), which this approval does not have: \
         ask for it as a new call instead"
    )]
    NeedsApprovers {
        /// Why the rules ask for the edited input (names the rule).
        reason: String,
        /// Whom the edited input would wait for, in words.
        waiting_for: String,
        /// The route the rules give the edited input.
        route: Box<Route>,
    },
}

impl EditRefusal {
    /// The route and reason of an edit that needs other approvers: what a
    /// new approval of it is routed by ([`super::supersede`]).
    pub fn edit_route(&self) -> Option<super::EditRoute<'_>> {
        match self {
            Self::NeedsApprovers { reason, route, .. } => Some(super::EditRoute { route, reason }),
            _ => None,
        }
    }

    /// The stable code: `edit_not_allowed`, `invalid_tool_input` or `edit_denied`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotEditable(_) | Self::NeedsApprovers { .. } => "edit_not_allowed",
            Self::InvalidInput(_) | Self::OutsideSchema { .. } => "invalid_tool_input",
            Self::Denied(_) => "edit_denied",
        }
    }
}

/// Judges an edit as the module docs say; `Ok` when it may run.
pub async fn check_edit(check: EditCheck<'_>) -> Result<(), EditRefusal> {
    let EditCheck { tool, edit, requester, context, routed, voter, input_schema } = check;
    if !tool.is_editable() {
        return Err(EditRefusal::NotEditable(tool.name().to_owned()));
    }
    tool.validate_input(edit).map_err(EditRefusal::InvalidInput)?;
    if let Some(schema) = input_schema {
        within_schema(schema, edit)?;
    }
    let verdict = decide_call(requester, tool, edit, context).await;
    let reason = || verdict.reason.clone().unwrap_or_default();
    match (verdict.action, &verdict.route) {
        (GateAction::Deny, _) => Err(EditRefusal::Denied(reason())),
        (GateAction::Allow, _) | (GateAction::Ask, None) => Ok(()),
        (GateAction::Ask, Some(route)) => {
            let approver = match (routed, voter) {
                // Its requester decides: they approve with the edit.
                (false, _) => Voter {
                    principal: requester.principal.map(str::to_owned),
                    groups: requester.groups.to_vec(),
                    ..Voter::default()
                },
                (true, Some(voter)) => voter.clone(),
                (true, None) => return Ok(()),
            };
            if satisfies(route, &approver, requester.principal) {
                Ok(())
            } else {
                let waiting_for = route_in_words(route);
                Err(EditRefusal::NeedsApprovers { reason: reason(), waiting_for, route: Box::new(route.clone()) })
            }
        }
    }
}

/// Whether `edit` passes `schema`; the first place it fails otherwise. A
/// schema that does not compile refuses every edit (fails closed).
fn within_schema(schema: &Value, edit: &Value) -> Result<(), EditRefusal> {
    let validator = jsonschema::validator_for(schema).map_err(|error| EditRefusal::OutsideSchema {
        path: String::new(),
        message: format!("the schema itself is invalid ({error})"),
    })?;
    match validator.iter_errors(edit).next() {
        None => Ok(()),
        Some(error) => {
            Err(EditRefusal::OutsideSchema { path: error.instance_path().to_string(), message: error.to_string() })
        }
    }
}

/// `` `/to` `` for a JSON Pointer, `the input itself` for the empty one.
fn pointer_in_words(path: &str) -> String {
    if path.is_empty() { "the input itself".to_owned() } else { format!("`{path}`") }
}

/// Whether one approval by `voter` satisfies `route`: it needs one approval,
/// and the voter is one of its approvers (by name or group), the requester
/// only where it allows self-approval. A voter without a principal, or a
/// link's holder, is nobody's approver here.
fn satisfies(route: &Route, voter: &Voter, requester: Option<&str>) -> bool {
    let Some(principal) = voter.principal.as_deref() else { return false };
    if voter.bearer_link || route.quorum > 1 || (!route.self_approval && requester == Some(principal)) {
        return false;
    }
    route.approvers.iter().any(|approver| match approver.strip_prefix(GROUP_PREFIX) {
        Some(group) => voter.groups.iter().any(|own| own == group),
        None => approver == principal,
    })
}

/// ``group `finance` (1 approval)`` for a route.
fn route_in_words(route: &Route) -> String {
    let quorum = route.quorum.max(1);
    format!("{} ({quorum} approval{})", approvers_in_words(&route.approvers), if quorum == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool::{CallGate, GateCall, Verdict};

    /// Transfers above 10,000 need group `finance`; above 1,000,000 two of them.
    struct Rules;

    impl CallGate for Rules {
        fn check<'a>(&'a self, call: GateCall<'a>) -> futures::future::BoxFuture<'a, Option<Verdict>> {
            let amount = call.input["amount"].as_i64().unwrap_or(0);
            let route = |quorum| Route { approvers: vec!["group:finance".into()], quorum, ..Route::default() };
            let verdict = match amount {
                ..=10_000 => None,
                10_001..=1_000_000 => Some(Verdict::ask().because("rule `big-transfers` matched").routed(route(1))),
                _ => Some(Verdict::ask().because("rule `huge-transfers` matched").routed(route(2))),
            };
            Box::pin(async move { verdict })
        }
    }

    fn transfer() -> Tool {
        Tool::dynamic("transfer_money", json!({"type": "object", "required": ["amount"]}))
            .approval_when(|input: &Value, _: &ApprovalContext| input["amount"].as_i64().unwrap_or(0) > 1000)
            .handler(|_input: Value, _| async { Ok::<_, crate::ToolError>(json!("sent")) })
    }

    async fn check(edit: Value, routed: bool, voter: Option<Voter>) -> Result<(), EditRefusal> {
        let tool = transfer();
        let requester = Caller { gate: Some(&Rules), principal: Some("alice"), ..Caller::default() };
        let context = ApprovalContext::new("call-1", Vec::new());
        let voter = voter.as_ref();
        check_edit(EditCheck { tool: &tool, edit: &edit, requester, context, routed, voter, input_schema: None }).await
    }

    fn finance(name: &str) -> Voter {
        Voter { principal: Some(name.into()), groups: vec!["finance".into()], ..Voter::default() }
    }

    #[tokio::test]
    async fn an_edit_past_a_routed_rule_is_refused_naming_the_rule() {
        let refused = check(json!({"amount": 5_000_000}), false, None).await.unwrap_err();
        assert_eq!(refused.code(), "edit_not_allowed");
        assert!(refused.to_string().contains("huge-transfers") && refused.to_string().contains("group `finance`"));
        let refused = check(json!({"amount": 50_000}), false, None).await.unwrap_err();
        assert!(refused.to_string().contains("big-transfers"), "{refused}");
        // Within what the requester may approve herself.
        assert_eq!(check(json!({"amount": 9_000}), false, None).await, Ok(()));
    }

    #[tokio::test]
    async fn a_routed_approver_may_edit_within_their_route_only() {
        assert_eq!(check(json!({"amount": 50_000}), true, Some(finance("bob"))).await, Ok(()));
        assert!(check(json!({"amount": 5_000_000}), true, Some(finance("bob"))).await.is_err(), "needs two");
        let outsider = Voter::new(Some("mallory".into()));
        assert!(check(json!({"amount": 50_000}), true, Some(outsider)).await.is_err());
        let link = Voter { bearer_link: true, ..finance("link:email") };
        assert!(check(json!({"amount": 50_000}), true, Some(link)).await.is_err(), "a link holder is no approver");
        // The requester, even in the group, may not approve her own routed call without self_approval.
        assert!(check(json!({"amount": 50_000}), true, Some(finance("alice"))).await.is_err());
    }

    #[tokio::test]
    async fn schema_editability_and_denials_come_first() {
        let refused = check(json!({"to": "x"}), false, None).await.unwrap_err();
        assert_eq!(refused.code(), "invalid_tool_input");
        let tool = Tool::dynamic("fixed", json!({"type": "object"})).editable(false);
        let requester = Caller::default();
        let context = ApprovalContext::new("call-1", Vec::new());
        let edit = json!({});
        let check =
            EditCheck { tool: &tool, edit: &edit, requester, context, routed: false, voter: None, input_schema: None };
        assert_eq!(check_edit(check).await, Err(EditRefusal::NotEditable("fixed".into())));
    }

    #[tokio::test]
    async fn an_edit_must_pass_the_schema_its_requester_gave() {
        let tool = Tool::dynamic("send", json!({}));
        let schema = json!({"type": "object", "properties": {"to": {"type": "string", "maxLength": 5}}});
        let judge = |edit: Value| {
            let (tool, schema) = (tool.clone(), schema.clone());
            async move {
                let context = ApprovalContext::new("call-1", Vec::new());
                let requester = Caller::default();
                let input_schema = Some(&schema);
                let check = EditCheck {
                    tool: &tool,
                    edit: &edit,
                    requester,
                    context,
                    routed: false,
                    voter: None,
                    input_schema,
                };
                check_edit(check).await
            }
        };
        let refused = judge(json!({"to": "everyone"})).await.unwrap_err();
        assert!(matches!(&refused, EditRefusal::OutsideSchema { path, .. } if path == "/to"), "{refused:?}");
        assert_eq!(refused.code(), "invalid_tool_input");
        assert!(refused.to_string().contains("at `/to`"), "{refused}");
        let refused = judge(json!(["not", "an", "object"])).await.unwrap_err();
        assert!(refused.to_string().contains("the input itself"), "{refused}");
        assert_eq!(judge(json!({"to": "bob"})).await, Ok(()));
    }
}
