//! Calls decided without an approval: those a rule or the tool's own policy
//! allows (they run at once) and those it denies (they never run).
//!
//! No approval is issued for them, so no record moves; with a ledger each is
//! still on record, as one audit event, so the log holds every call that ran
//! and every call a policy refused, not only those somebody was asked about:
//!
//! | what happened | kind | data |
//! |---|---|---|
//! | the call ran | `executed` | `toolName`, `input`, `result`, `decidedBy` |
//! | the call ran and failed | `failed` | `toolName`, `input`, `error`, `decidedBy` |
//! | a rule or policy refused it | `denied` | `toolName`, `input`, `reason`, `decidedBy` |
//!
//! `decidedBy` is [`DECIDED_BY_POLICY`]. The event's approval id is empty
//! (none was issued); its tool call id, conversation, owner and principal are
//! the ledger's and the call's. An approved call's own `executed` event (see
//! [`super::held::finish`] and the engine's outcomes) carries `toolName` and
//! `input` too, so one query over `executed` events finds every call that ran.
//!
//! A call that a gate lets run on the strength of the history it read (a
//! rule's history term) is also an `allowed` event, written by [`admit`]
//! before the call runs, in one conditional write with that history: if a
//! call was recorded meanwhile that the history read would count, nothing is
//! written and the call is decided again. So parallel calls cannot all slip
//! under a limit. A call it asks about on that history is to be issued on
//! it too: [`judge`] hands back the history read with the question
//! ([`Judged::guards`]) and the issue checks it ([`super::held::admit`]).
//!
//! A call that would ask but that a grant covers runs on it ([`lift`]): one
//! use of the grant spent, atomically with its `granted` event (`toolName`,
//! `input`, `grant`, `grantedBy`, `decidedBy`: `grant`). A held call (the
//! call-gating API's, the gateway's) is judged by [`judge_held`] instead: a
//! grant with a use limit is spent by the issue of the call's record, in the
//! same write ([`super::held::admit`]), so concurrent requests for one call
//! spend one use; and the `allowed` event of a held call a history term let
//! through is written with its record, so they count it once.
//!
//! A rule in shadow mode decides nothing; when one matches a call that
//! [`admit`] decides, what it would have decided is a `shadowed` event
//! ([`shadowed`]: the rule, its action and reason, and what was decided).
//!
//! Where the recording path knows them, each of these events also names the
//! tool's definition digest (`toolDigest`, [`crate::receipt::tool_digest`])
//! and the gate's config digest (`configDigest`), as an approval's `issued`
//! event does, and an allowed call's the rule that allowed it (`rule`,
//! [`crate::tool::CallGate::allowed_by`]) ([`Described`]): the event's receipt
//! ([`crate::receipt::CallReceipt`]) carries them.
//!
//! Every path that runs or refuses calls without an approval (the engine's
//! step loop and its pre-resolution of held batches, a gateway's allowed and
//! denied calls, and any edge built on the held-call path) writes these
//! events through [`ran`], [`refused`] and [`record`].

use serde_json::{Value, json};
use toolgate_protocol::ToolCallPart;

use super::grant::GrantOffer;
use crate::ledger::{AuditEvent, AuditKind, HistoryGuard, Ledger, Millis, StoreError};
use crate::tool::{ApprovalContext, Caller, GateAction, Shadowed, Tool, Verdict, decide_call};

/// How often [`admit`] decides a call again when the history moved under it.
pub const MAX_ADMITS: usize = 64;

/// Why a call is asked without a guard after [`MAX_ADMITS`] judgements on a
/// history that kept moving: a person decides (fail closed).
pub const HISTORY_CHURN_REASON: &str = "the history kept changing while this call was judged; approval required";

/// The `decidedBy` of an event recorded here: no person decided, a rule or the tool's policy did.
pub const DECIDED_BY_POLICY: &str = "policy";

/// One call decided without an approval.
#[derive(Debug, Clone, Copy)]
pub struct DirectCall<'a> {
    /// The call's id (a gateway's held call id).
    pub tool_call_id: &'a str,
    /// The tool's name.
    pub tool_name: &'a str,
    /// The input it ran (or would have run) with.
    pub input: &'a Value,
}

impl<'a> DirectCall<'a> {
    /// The call a model's tool call part names.
    pub fn of(part: &'a ToolCallPart) -> Self {
        Self { tool_call_id: &part.tool_call_id, tool_name: &part.tool_name, input: &part.input }
    }
}

/// What a call's events name besides the call, for its receipts: the
/// digest of the tool's definition as offered and of the config that
/// decided, and the rule that allowed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Described {
    /// `toolDigest`: the tool's definition ([`crate::receipt::tool_digest`]).
    pub tool_digest: Option<String>,
    /// `configDigest`: the deciding gate's ([`crate::tool::CallGate::config_digest`]).
    pub config_digest: Option<String>,
    /// `rule`: the rule that allowed the call ([`crate::tool::CallGate::allowed_by`]).
    pub rule: Option<String>,
}

impl Described {
    /// The digests of `tool` and of `gate`'s config.
    pub fn of(tool: Option<&Tool>, gate: Option<&dyn crate::tool::CallGate>) -> Self {
        Self {
            tool_digest: tool.and_then(crate::receipt::tool_digest),
            config_digest: gate.and_then(|gate| gate.config_digest()),
            rule: None,
        }
    }

    /// These digests, and the rule `gate` says allowed the call `tool_call_id`.
    pub fn allowed_by(&self, gate: Option<&dyn crate::tool::CallGate>, tool_call_id: &str) -> Self {
        Self { rule: gate.and_then(|gate| gate.allowed_by(tool_call_id)), ..self.clone() }
    }

    /// Writes the digests known into `event`'s data (an object).
    pub fn describe(&self, event: &mut AuditEvent) {
        let Some(data) = event.data.as_object_mut() else { return };
        let fields = [("toolDigest", &self.tool_digest), ("configDigest", &self.config_digest), ("rule", &self.rule)];
        for (key, value) in fields {
            if let Some(value) = value {
                data.insert(key.to_owned(), Value::String(value.clone()));
            }
        }
    }

    /// `event`, described.
    pub fn described(&self, mut event: AuditEvent) -> AuditEvent {
        self.describe(&mut event);
        event
    }
}

/// The `executed` event of a call that ran (`Ok`: its result) or the
/// `failed` event of one that ran and failed (`Err`: its error), at `at`.
pub fn ran(ledger: &Ledger, call: DirectCall<'_>, outcome: Result<&Value, &Value>, at: Millis) -> AuditEvent {
    let (kind, key, detail) = match outcome {
        Ok(result) => (AuditKind::Executed, "result", result),
        Err(error) => (AuditKind::Failed, "error", error),
    };
    let data = json!({
        "toolName": call.tool_name,
        "input": call.input,
        key: detail,
        "decidedBy": DECIDED_BY_POLICY,
    });
    ledger.event(kind, "", call.tool_call_id, at, data)
}

/// The `denied` event of a call a rule or the tool's policy refused, with why.
pub fn refused(ledger: &Ledger, call: DirectCall<'_>, reason: &str, at: Millis) -> AuditEvent {
    let data = json!({
        "toolName": call.tool_name,
        "input": call.input,
        "reason": reason,
        "decidedBy": DECIDED_BY_POLICY,
    });
    ledger.event(AuditKind::Denied, "", call.tool_call_id, at, data)
}

/// The `allowed` event of a call a gate let run, judged on the history.
pub fn allowed(ledger: &Ledger, call: DirectCall<'_>, at: Millis) -> AuditEvent {
    let data = json!({"toolName": call.tool_name, "input": call.input, "decidedBy": DECIDED_BY_POLICY});
    ledger.event(AuditKind::Allowed, "", call.tool_call_id, at, data)
}

/// Decides a call as [`decide_call`] does; when that asks and a grant the
/// caller's gate found may lift it, lets it run on one use of the grant
/// ([`lift`]). When the caller's gate let it
/// run on the history it read ([`crate::tool::CallGate::guards`]) and there
/// is a ledger, records its `allowed` event only if that history still
/// stands, atomically ([`crate::ledger::HistoryStore::append_if`]), and
/// decides again when it does not (at most [`MAX_ADMITS`] times, then asks).
/// A store that fails asks too (fails closed). A call that asks on the
/// history it read is to be issued on it: see [`judge`].
pub async fn admit(
    ledger: Option<&Ledger>,
    caller: Caller<'_>,
    tool: &Tool,
    input: &Value,
    context: ApprovalContext,
) -> Verdict {
    judge(ledger, caller, tool, input, context).await.verdict
}

/// What [`judge`] decided about a call, and the history a question rested on.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The verdict, as [`admit`] returns it.
    pub verdict: Verdict,
    /// When the verdict asks and a rule's history term read the history
    /// (with a ledger): the history it was judged on. The approval is to be
    /// issued only while it stands ([`crate::ledger::HistoryStore::issue_if`],
    /// [`super::held::attach_if`]), and the call decided again when it does
    /// not. Empty otherwise (an allowed call's history was checked as it was
    /// recorded; a denial needs none).
    pub guards: Vec<HistoryGuard>,
    /// When the verdict asks and was judged by [`judge_held`]: the grants
    /// with a use limit that may lift it, none of their uses spent yet. The
    /// issue spends one with the call's record
    /// ([`crate::ledger::ConversationStore::use_decision_issuing`],
    /// [`super::held::admit`]), so a use is bound to the call. Empty
    /// otherwise.
    pub offers: Vec<GrantOffer>,
    /// When the verdict allows a held call that a rule's history term let
    /// through, judged for an issue ([`judge_held`] with `issued`): its
    /// `allowed` event, not yet recorded. The call's record is issued with
    /// it while [`Self::guards`] stand, in one conditional write
    /// ([`super::held::admit`]), so a request that attaches to a racing
    /// twin's record instead counts nothing. `None` otherwise.
    pub allowed: Option<AuditEvent>,
}

/// [`admit`], keeping the history an `ask` verdict rested on ([`Judged::guards`]).
/// Its events name `tool`'s definition digest and the gate's config digest
/// ([`Described::of`]).
pub async fn judge(
    ledger: Option<&Ledger>,
    caller: Caller<'_>,
    tool: &Tool,
    input: &Value,
    context: ApprovalContext,
) -> Judged {
    let described = Described::of(Some(tool), caller.gate);
    judge_with(ledger, caller, tool, input, context, &described, Deferred::default()).await
}

/// [`judge`] for a held call, whose approval record a grant's use is bound
/// to: a question that a grant with a use limit may lift is handed back
/// with those grants ([`Judged::offers`]) instead of spending one here (an
/// unlimited grant, which has no use to spend, lifts it here). With
/// `issued` (the caller issues the call's record decided, as
/// [`super::held::admit`] does), a call a history term let through is
/// handed back with its `allowed` event ([`Judged::allowed`]) instead of
/// recorded here. With a ledger only; without one, as [`judge`]. Its events
/// name the digests in `described` (the definition the call's caller
/// offered, not the stand-in `tool` it is judged as).
pub async fn judge_held(
    ledger: Option<&Ledger>,
    caller: Caller<'_>,
    tool: &Tool,
    input: &Value,
    context: ApprovalContext,
    (described, issued): (&Described, bool),
) -> Judged {
    let deferred = Deferred { grants: ledger.is_some(), allowed: ledger.is_some() && issued };
    judge_with(ledger, caller, tool, input, context, described, deferred).await
}

/// What [`judge_with`] leaves to the issue of a held call's record.
#[derive(Debug, Clone, Copy, Default)]
struct Deferred {
    /// Limited grants are handed back, not spent.
    grants: bool,
    /// A call a history term let through is handed back with its `allowed` event, not recorded.
    allowed: bool,
}

/// [`judge`] and [`judge_held`] (`deferred`: what is handed back to the issue).
async fn judge_with(
    ledger: Option<&Ledger>,
    caller: Caller<'_>,
    tool: &Tool,
    input: &Value,
    context: ApprovalContext,
    described: &Described,
    deferred: Deferred,
) -> Judged {
    let unguarded = |verdict| Judged { verdict, guards: Vec::new(), offers: Vec::new(), allowed: None };
    for _ in 0..MAX_ADMITS {
        let verdict = decide_call(caller, tool, input, context.clone()).await;
        let Some(gate) = caller.gate else { return unguarded(verdict) };
        let call = DirectCall { tool_call_id: context.tool_call_id(), tool_name: tool.name(), input };
        let (offers, later): (Vec<GrantOffer>, Vec<GrantOffer>) = match verdict.action {
            GateAction::Ask => gate
                .grants(call.tool_call_id)
                .into_iter()
                .filter(|offer| super::grant::may_lift(offer, &verdict, caller.principal))
                .partition(|offer| offer.unlimited || !deferred.grants),
            _ => (Vec::new(), Vec::new()),
        };
        let lifted = match offers.is_empty() {
            false => {
                let decided = lift_described(ledger, &offers, verdict.clone(), call, caller.principal, described).await;
                (decided.action == GateAction::Allow).then_some(decided)
            }
            true => None,
        };
        let Some(ledger) = ledger else { return unguarded(lifted.unwrap_or(verdict)) };
        let (shadow, guards) = (gate.shadowed(call.tool_call_id), gate.guards(call.tool_call_id));
        if let Some(verdict) = lifted {
            record_shadowed(ledger, call, &shadow, verdict.action).await;
            return unguarded(verdict);
        }
        if !later.is_empty() {
            // What a grant would decide; the issue spends its use, or asks when none is left.
            record_shadowed(ledger, call, &shadow, GateAction::Allow).await;
            return Judged { verdict, guards, offers: later, allowed: None };
        }
        let admitted = match verdict.action {
            GateAction::Ask => Some(Judged { verdict, guards, offers: Vec::new(), allowed: None }),
            GateAction::Allow if !guards.is_empty() => {
                let described = described.allowed_by(Some(gate), call.tool_call_id);
                let event = described.described(allowed(ledger, call, ledger.config.clock.now()));
                match deferred.allowed {
                    true => Some(Judged { verdict, guards, offers: Vec::new(), allowed: Some(event) }),
                    false => record_allowed(ledger, call.tool_name, &guards, verdict, event).await,
                }
            }
            _ => Some(unguarded(verdict)),
        };
        if let Some(judged) = admitted {
            record_shadowed(ledger, call, &shadow, judged.verdict.action).await;
            return judged;
        }
    }
    unguarded(Verdict::ask().because(HISTORY_CHURN_REASON))
}

/// Records an allowed call's `allowed` event (`event`) if `guards` hold:
/// `None` when they do not (decide again); a store that fails asks.
async fn record_allowed(
    ledger: &Ledger,
    tool_name: &str,
    guards: &[HistoryGuard],
    verdict: Verdict,
    event: AuditEvent,
) -> Option<Judged> {
    let verdict = match ledger.config.store.append_if(guards, std::slice::from_ref(&event)).await {
        Ok(true) => verdict,
        Ok(false) => return None,
        Err(error) => {
            tracing::warn!(tool = tool_name, %error, "cannot record the call with its history; approval required");
            Verdict::ask().because(format!("the call could not be recorded with its history ({error})"))
        }
    };
    Some(Judged { verdict, guards: Vec::new(), offers: Vec::new(), allowed: None })
}

/// The `shadowed` event of a rule in shadow mode that matched `call`: what it
/// would have decided, and what was decided (`decided`).
pub fn shadowed(ledger: &Ledger, call: DirectCall<'_>, rule: &Shadowed, decided: GateAction, at: Millis) -> AuditEvent {
    let data = json!({
        "toolName": call.tool_name,
        "input": call.input,
        "rule": rule.rule,
        "action": rule.action,
        "reason": rule.reason,
        "decided": decided,
    });
    ledger.event(AuditKind::Shadowed, "", call.tool_call_id, at, data)
}

/// Records what the shadow rules that matched would have decided; a store
/// that fails is logged (shadow rules never change what happens to a call).
async fn record_shadowed(ledger: &Ledger, call: DirectCall<'_>, rules: &[Shadowed], decided: GateAction) {
    let now = ledger.config.clock.now();
    let events: Vec<AuditEvent> = rules.iter().map(|rule| shadowed(ledger, call, rule, decided, now)).collect();
    if let Err(error) = record(ledger, &events).await {
        tracing::warn!(tool = call.tool_name, %error, "cannot record what shadow rules would have decided");
    }
}

/// Appends the events in one transaction (nothing when there are none).
pub async fn record(ledger: &Ledger, events: &[AuditEvent]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    ledger.config.store.append(events).await
}

/// The `granted` event of a call that runs on `offer`.
pub fn granted(ledger: &Ledger, call: DirectCall<'_>, offer: &GrantOffer, at: Millis) -> AuditEvent {
    let data = json!({
        "toolName": call.tool_name,
        "input": call.input,
        "grant": offer.id,
        "grantedBy": offer.granted_by,
        "decidedBy": super::grant::DECIDED_BY_GRANT,
    });
    ledger.event(AuditKind::Granted, "", call.tool_call_id, at, data)
}

/// `verdict`, or a yes when one of `offers` may lift it ([`super::grant::may_lift`]) and
/// a use of it is spent, atomically with its `granted` event. Offers are
/// tried in order; one spent meanwhile by another call is skipped; a store
/// that fails is logged and skipped (the call is asked, fail closed).
pub async fn lift(
    ledger: Option<&Ledger>,
    offers: &[GrantOffer],
    verdict: Verdict,
    call: DirectCall<'_>,
    requester: Option<&str>,
) -> Verdict {
    lift_described(ledger, offers, verdict, call, requester, &Described::default()).await
}

/// [`lift`], its `granted` event naming the digests in `described`.
pub async fn lift_described(
    ledger: Option<&Ledger>,
    offers: &[GrantOffer],
    verdict: Verdict,
    call: DirectCall<'_>,
    requester: Option<&str>,
    described: &Described,
) -> Verdict {
    for offer in offers.iter().filter(|offer| super::grant::may_lift(offer, &verdict, requester)) {
        let Some(ledger) = ledger else {
            if offer.unlimited {
                return Verdict::allow().because(offer.description.clone());
            }
            continue;
        };
        let now = ledger.config.clock.now();
        let event = described.described(granted(ledger, call, offer, now));
        match ledger.config.store.use_decision(&offer.id, now, std::slice::from_ref(&event)).await {
            Ok(Some(_)) => return Verdict::allow().because(offer.description.clone()),
            Ok(None) => {}
            Err(error) => tracing::warn!(grant = %offer.id, %error, "cannot spend a grant; approval required"),
        }
    }
    verdict
}
