//! Turns collected answers into what happens before the model is called.
//!
//! Every check runs before anything executes, so a request either passes
//! all of them or runs nothing. Cheap checks run first, for every answer,
//! and only then the tools' policies (which may be slow):
//! 1. Local answers need a toolkit; the tool must exist and be run by toolgate.
//! 2. The call's input must pass the schema. An edit must be allowed by the
//!    tool ([`Tool::editable`]) and pass the schema too.
//! 3. With a signer, every approval request of a message with held
//!    candidates is verified against exactly those calls (see below), and
//!    every approved call that would run must carry a valid signature.
//! 4. Policies (the request's gate, then the tool's own; see
//!    [`CallGate`](crate::tool::CallGate)). With a signer, a valid signature proves the server gated
//!    the call itself, so an approved call runs unless its policy now denies
//!    it. Without one, the policy is the only guard: an approval for a call
//!    that needs none becomes a denial (a forged approval cannot run a tool
//!    that was never gated). An edit is a new input, judged by
//!    [`check_edit`] as the requester's own call: a policy that denies it
//!    fails the request with [`EngineError::EditDenied`], one that routes it
//!    to approvers the answer does not satisfy with
//!    [`EngineError::EditNeedsApprovers`].
//!
//! **Held calls.** Calls with neither a request nor a result next to a
//! request being resolved run only if the engine held them: with a signer,
//! when every request of the message carries a signature covering exactly
//! those calls; without one, only when this request holds batches too
//! (`hold_batch_for_approval`; unsigned histories are trusted, see the
//! book's threat model, `docs/src/threat-model.md`). Otherwise they are
//! not acted on and the prompt check reports
//! them as [`EngineError::MissingToolResults`]. A held call that now needs
//! approval itself, or that its policy denies, is denied.
//!
//! Provider-executed answers are not acted on here: the prompt forwards them.

use std::collections::HashMap;

use toolgate_protocol::{ToolApprovalRequestPart, ToolApprovalResponsePart, ToolCallPart};

use super::collect::{CallRef, Collected, DecisionRef, HeldCandidates};
use super::lifecycle::{EditCheck, EditRefusal, check_edit};
use super::signing::{HeldCalls, SignatureError, SignedCall};
use super::{ApprovalOutcome, ApprovalSigner, NO_ANSWER_REASON, ResolvedApproval};
use crate::EngineError;
use crate::tool::{ApprovalContext, Caller, GateAction, SharedMessages, Tool, Toolkit, Verdict, decide_call};

/// The denial reason for a held call that needs approval itself once the batch is decided.
pub const HELD_NEEDS_APPROVAL_REASON: &str =
    "This call was held while other calls awaited approval, and it now needs approval itself; it did not run.";

/// One thing to do before the model is called.
#[derive(Debug, Clone)]
pub(crate) enum Resolved {
    /// Run the call; `call.input` is the input to run with (edited if the
    /// person edited it). `approval_id` names the approval that let it run
    /// (none for a held call).
    Run { call: ToolCallPart, tool: Tool, messages: SharedMessages, approval_id: Option<String> },
    /// The call's outcome is already on record (a replayed answer, an expired
    /// or interrupted approval): its stored result, nothing runs.
    Stored { call: ToolCallPart, output: toolgate_protocol::ToolResultOutput },
    /// The call is denied; it gets an `execution-denied` result.
    Deny { call: ToolCallPart, reason: Option<String> },
    /// A provider-executed call nobody answered: forward a denial to the provider.
    ForwardDenial { call: ToolCallPart, response: ToolApprovalResponsePart },
}

impl Resolved {
    /// The call this is about.
    pub(crate) fn call(&self) -> &ToolCallPart {
        match self {
            Self::Run { call, .. }
            | Self::Stored { call, .. }
            | Self::Deny { call, .. }
            | Self::ForwardDenial { call, .. } => call,
        }
    }
}

/// What pre-resolution will do, in call order, and the record of each answer.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub actions: Vec<Resolved>,
    pub approvals: Vec<ResolvedApproval>,
    /// Approved edits the rules route to approvers the answer does not
    /// satisfy, by approval id (with a ledger only): the claim runs them only
    /// on a successor those approvers decided ([`super::lifecycle::supersede`]).
    pub routed_edits: HashMap<String, EditRefusal>,
    /// The history each approved call's verdict rested on, by approval id
    /// (with a ledger, when a rule's history term read it): the claim holds
    /// it ([`super::lifecycle::counted`]).
    pub history_guards: HashMap<String, Vec<crate::ledger::HistoryGuard>>,
}

/// What the resolver needs besides the history.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResolveOptions<'a> {
    pub toolkit: Option<&'a Toolkit>,
    pub signer: Option<&'a ApprovalSigner>,
    /// Whether this request holds batches (`hold_batch_for_approval`).
    pub hold_batch: bool,
    /// The request's gate and identity.
    pub caller: Caller<'a>,
    /// Whether the request has a ledger (approvals may then be decided out of band).
    pub ledger: bool,
}

/// An approved call that passed the cheap checks and waits for its policy.
struct Approved<'c, 'h> {
    request: &'h ToolApprovalRequestPart,
    call: CallRef<'h>,
    tool: &'c Tool,
    edited_input: Option<&'h serde_json::Value>,
}

/// Checks collected answers and decides what runs (see the module docs).
pub(crate) async fn resolve(
    collected: Collected<'_>,
    history: &SharedMessages,
    options: ResolveOptions<'_>,
) -> Result<Plan, EngineError> {
    if !collected.open.is_empty() {
        return Err(EngineError::UnansweredApprovals {
            approval_ids: collected.open.iter().map(|r| r.approval_id.clone()).collect(),
        });
    }
    let toolkit = required_toolkit(&collected, options.toolkit)?;
    let mut plan = PlanBuilder::default();
    // Cheap checks, for every answer, before any policy runs.
    let held = held_calls(&collected.held, toolkit, options)?;
    let approved = plan.check_answers(&collected, &held, toolkit, options)?;
    for approved in approved {
        plan.apply_policy(approved, history, options).await?;
    }
    plan.deny_unanswered(&collected);
    for (at, tool) in held.into_values().flat_map(|group| group.calls) {
        plan.settle_held(at, tool, history, options).await;
    }
    Ok(plan.finish())
}

/// The plan's actions and approval records, each with its call's position in the history.
#[derive(Default)]
struct PlanBuilder {
    entries: Vec<((usize, usize), Resolved)>,
    approvals: Vec<((usize, usize), ResolvedApproval)>,
    routed_edits: HashMap<String, EditRefusal>,
    history_guards: HashMap<String, Vec<crate::ledger::HistoryGuard>>,
}

impl PlanBuilder {
    /// The cheap checks of every answer (schemas, edits allowed, signatures):
    /// denials and provider-executed answers are planned here; the approved
    /// calls come back to have their policies checked.
    fn check_answers<'c, 'h>(
        &mut self,
        collected: &Collected<'h>,
        held: &HashMap<usize, HeldGroup<'h, 'c>>,
        toolkit: &'c Toolkit,
        options: ResolveOptions<'_>,
    ) -> Result<Vec<Approved<'c, 'h>>, EngineError> {
        let mut approved = Vec::new();
        for answered in &collected.answered {
            let call = answered.call.call;
            let record = |outcome| (position(answered.call), record(answered.request, call, outcome));
            if call.is_provider_executed() {
                let approved = matches!(answered.decision, DecisionRef::Approve { .. });
                self.approvals.push(record(ApprovalOutcome::Forwarded { approved }));
                continue;
            }
            let edited_input = match &answered.decision {
                DecisionRef::Deny { reason } => {
                    let reason = reason.map(str::to_owned);
                    self.entries.push(deny(answered.call, reason.clone()));
                    self.approvals.push(record(ApprovalOutcome::Denied { reason }));
                    continue;
                }
                DecisionRef::Approve { edited_input } => *edited_input,
            };
            let tool = runnable_tool(toolkit, call)?;
            check_input(tool, call, &call.input, "")?;
            if let Some(edited) = edited_input {
                if !tool.is_editable() {
                    return Err(EngineError::EditNotAllowed {
                        approval_id: answered.request.approval_id.clone(),
                        tool_name: call.tool_name.clone(),
                    });
                }
                check_input(tool, call, edited, "edited input: ")?;
            }
            if let Some(signer) = options.signer {
                let none = HeldCalls::none();
                let held_here = held.get(&answered.call.message_index).map_or(&none, |group| &group.signed);
                signer
                    .verify(answered.request, &call.tool_name, &call.input, held_here)
                    .map_err(|reason| invalid_signature(answered.request, reason))?;
            }
            approved.push(Approved { request: answered.request, call: answered.call, tool, edited_input });
        }
        Ok(approved)
    }

    /// An approved call's policy (and its edit's): run it, or refuse it.
    async fn apply_policy(
        &mut self,
        approved: Approved<'_, '_>,
        history: &SharedMessages,
        options: ResolveOptions<'_>,
    ) -> Result<(), EngineError> {
        let Approved { request, call: at, tool, edited_input } = approved;
        let call = at.call;
        let messages = history.prefix(at.message_index);
        let context = ApprovalContext::new(call.tool_call_id.clone(), messages.clone());
        let verdict = decide_call(options.caller, tool, &call.input, context).await;
        let guards = options.caller.gate.map(|gate| gate.guards(&call.tool_call_id)).unwrap_or_default();
        let refusal = match (verdict.action, options.signer.is_some()) {
            (GateAction::Deny, _) => Some(verdict.reason.unwrap_or_default()),
            (GateAction::Allow, false) => Some(format!("Tool \"{}\" does not require approval", call.tool_name)),
            (GateAction::Allow | GateAction::Ask, _) => None,
        };
        if let Some(reason) = refusal {
            self.entries.push(deny(at, Some(reason.clone())));
            self.approvals.push((position(at), record(request, call, ApprovalOutcome::Refused { reason })));
            return Ok(());
        }
        if options.ledger && !guards.is_empty() {
            self.history_guards.insert(request.approval_id.clone(), guards);
        }
        let mut run = call.clone();
        if let Some(edited) = edited_input {
            let check = EditCheck {
                tool,
                edit: edited,
                requester: options.caller,
                context: ApprovalContext::new(call.tool_call_id.clone(), messages.clone()),
                // With a ledger a routed approval is decided by votes, each checked when cast.
                routed: options.ledger && verdict.route.is_some(),
                voter: None,
                // A chat's calls carry no schema of their requester's; the tool's own is checked.
                input_schema: None,
            };
            match check_edit(check).await {
                Ok(()) => {}
                // With a ledger the claim decides: it runs only on a successor the route's approvers decided.
                Err(refusal @ EditRefusal::NeedsApprovers { .. }) if options.ledger => {
                    self.routed_edits.insert(request.approval_id.clone(), refusal);
                }
                Err(refusal) => return Err(edit_refused(request, call, refusal)),
            }
            run.input = edited.clone();
        }
        let outcome = ApprovalOutcome::Approved { edited_input: edited_input.cloned() };
        self.approvals.push((position(at), record(request, call, outcome)));
        let approval_id = Some(request.approval_id.clone());
        self.entries.push((position(at), Resolved::Run { call: run, tool: tool.clone(), messages, approval_id }));
        Ok(())
    }

    /// Requests nobody answered before the person spoke again: denied
    /// (forwarded as denials for provider-executed calls).
    fn deny_unanswered(&mut self, collected: &Collected<'_>) {
        for (request, at) in &collected.unanswered {
            let call = at.call;
            self.approvals.push((position(*at), record(request, call, ApprovalOutcome::Unanswered)));
            if call.is_provider_executed() {
                let response = ToolApprovalResponsePart {
                    approval_id: request.approval_id.clone(),
                    approved: false,
                    reason: Some(NO_ANSWER_REASON.to_owned()),
                    provider_executed: Some(true),
                    edited_input: None,
                };
                self.entries.push((position(*at), Resolved::ForwardDenial { call: call.clone(), response }));
            } else {
                self.entries.push(deny(*at, Some(NO_ANSWER_REASON.to_owned())));
            }
        }
    }

    /// A call held back while its batch awaited approval: its policy now says run, deny, or ask (denied).
    async fn settle_held(
        &mut self,
        at: CallRef<'_>,
        tool: &Tool,
        history: &SharedMessages,
        options: ResolveOptions<'_>,
    ) {
        let call = at.call;
        let messages = history.prefix(at.message_index);
        let verdict = match tool.validate_input(&call.input) {
            Ok(()) => {
                let context = ApprovalContext::new(call.tool_call_id.clone(), messages.clone());
                decide_call(options.caller, tool, &call.input, context).await
            }
            Err(_) => Verdict::ask(),
        };
        self.entries.push(match verdict.action {
            GateAction::Allow => {
                let run = Resolved::Run { call: call.clone(), tool: tool.clone(), messages, approval_id: None };
                (position(at), run)
            }
            GateAction::Ask => deny(at, Some(HELD_NEEDS_APPROVAL_REASON.to_owned())),
            GateAction::Deny => deny(at, verdict.reason),
        });
    }

    /// The plan, in call order.
    fn finish(mut self) -> Plan {
        self.entries.sort_by_key(|(position, _)| *position);
        self.approvals.sort_by_key(|(position, _)| *position);
        Plan {
            actions: self.entries.into_iter().map(|(_, resolved)| resolved).collect(),
            approvals: self.approvals.into_iter().map(|(_, record)| record).collect(),
            routed_edits: self.routed_edits,
            history_guards: self.history_guards,
        }
    }
}

/// The toolkit local answers are resolved against (an empty one when there are none).
fn required_toolkit<'t>(collected: &Collected<'_>, toolkit: Option<&'t Toolkit>) -> Result<&'t Toolkit, EngineError> {
    static EMPTY: std::sync::OnceLock<Toolkit> = std::sync::OnceLock::new();
    let local_answers: Vec<&str> = collected
        .answered
        .iter()
        .filter(|a| !a.call.call.is_provider_executed() && matches!(a.decision, DecisionRef::Approve { .. }))
        .map(|a| a.call.call.tool_name.as_str())
        .collect();
    match toolkit {
        Some(toolkit) if !toolkit.is_empty() => Ok(toolkit),
        _ if local_answers.is_empty() => Ok(EMPTY.get_or_init(Toolkit::default)),
        _ => {
            Err(EngineError::ToolkitRequired { pending_tools: local_answers.into_iter().map(str::to_owned).collect() })
        }
    }
}

/// The calls of one message the engine held, with their tools, and as its signatures bind them.
struct HeldGroup<'h, 't> {
    calls: Vec<(CallRef<'h>, &'t Tool)>,
    signed: HeldCalls,
}

/// The calls the engine provably held, by the index of the assistant message
/// holding them (see the module docs). One digest of the candidates per
/// message, however many requests share it.
fn held_calls<'h, 't>(
    groups: &[HeldCandidates<'h>],
    toolkit: &'t Toolkit,
    options: ResolveOptions<'_>,
) -> Result<HashMap<usize, HeldGroup<'h, 't>>, EngineError> {
    let mut held = HashMap::new();
    for group in groups {
        let calls: Vec<(CallRef<'h>, &'t Tool)> = group
            .calls
            .iter()
            .filter_map(|at| toolkit.get(&at.call.tool_name).filter(|tool| tool.is_local()).map(|tool| (*at, tool)))
            .collect();
        let Some(&(first, _)) = calls.first() else { continue };
        if group.requests.is_empty() {
            continue;
        }
        let claimed: Vec<SignedCall<'_>> = calls.iter().map(|(at, _)| signed(at.call)).collect();
        // A candidate whose input has no canonical form was never signed as held.
        let signed_calls = HeldCalls::of(&claimed).ok();
        let is_held = match (options.signer, &signed_calls) {
            (None, _) => options.hold_batch,
            (Some(signer), signed_calls) => {
                let verify = |held: &HeldCalls| {
                    group.requests.iter().try_for_each(|(request, at)| {
                        signer
                            .verify(request, &at.call.tool_name, &at.call.input, held)
                            .map_err(|reason| invalid_signature(request, reason))
                    })
                };
                // Covered by every request: held by us. Covered by none, while each request is
                // valid on its own: the calls were not held (a client added them). Else: tampered.
                signed_calls.as_ref().is_some_and(|held| verify(held).is_ok()) || {
                    verify(&HeldCalls::none())?;
                    false
                }
            }
        };
        if is_held {
            held.insert(first.message_index, HeldGroup { calls, signed: signed_calls.unwrap_or_default() });
        }
    }
    Ok(held)
}

fn signed(call: &ToolCallPart) -> SignedCall<'_> {
    SignedCall { tool_call_id: &call.tool_call_id, tool_name: &call.tool_name, input: &call.input }
}

fn invalid_signature(request: &ToolApprovalRequestPart, reason: SignatureError) -> EngineError {
    EngineError::InvalidApprovalSignature {
        approval_id: request.approval_id.clone(),
        tool_call_id: request.tool_call_id.clone(),
        reason,
    }
}

fn record(request: &ToolApprovalRequestPart, call: &ToolCallPart, outcome: ApprovalOutcome) -> ResolvedApproval {
    ResolvedApproval { approval_id: request.approval_id.clone(), tool_call: call.clone(), outcome }
}

/// Where a call is in the history: (message index, part index).
fn position(call: CallRef<'_>) -> (usize, usize) {
    (call.message_index, call.part_index)
}

fn deny(call: CallRef<'_>, reason: Option<String>) -> ((usize, usize), Resolved) {
    (position(call), Resolved::Deny { call: call.call.clone(), reason })
}

fn runnable_tool<'t>(toolkit: &'t Toolkit, call: &ToolCallPart) -> Result<&'t Tool, EngineError> {
    toolkit.get(&call.tool_name).filter(|tool| tool.is_local()).ok_or_else(|| EngineError::ToolNotFound {
        tool_name: call.tool_name.clone(),
        tool_call_id: call.tool_call_id.clone(),
        tool_input: Box::new(call.input.clone()),
        available_tools: toolkit
            .tools()
            .iter()
            .filter(|tool| tool.is_local())
            .map(|tool| crate::error::AvailableTool {
                name: tool.name().to_owned(),
                input_schema: tool.input_schema().clone(),
            })
            .collect(),
    })
}

fn check_input(tool: &Tool, call: &ToolCallPart, input: &serde_json::Value, what: &str) -> Result<(), EngineError> {
    tool.validate_input(input).map_err(|detail| EngineError::InvalidToolInput {
        tool_name: call.tool_name.clone(),
        tool_call_id: call.tool_call_id.clone(),
        detail: format!("{what}{detail}"),
    })
}

/// An edit refused by [`check_edit`], as the engine's error.
fn edit_refused(request: &ToolApprovalRequestPart, call: &ToolCallPart, refusal: EditRefusal) -> EngineError {
    let approval_id = request.approval_id.clone();
    let tool_name = call.tool_name.clone();
    match refusal {
        EditRefusal::Denied(reason) => EngineError::EditDenied { approval_id, tool_name, reason },
        EditRefusal::NotEditable(_) => EngineError::EditNotAllowed { approval_id, tool_name },
        EditRefusal::InvalidInput(detail) => {
            EngineError::InvalidToolInput { tool_name, tool_call_id: call.tool_call_id.clone(), detail }
        }
        refusal => EngineError::EditNeedsApprovers { approval_id, tool_name, refusal },
    }
}
