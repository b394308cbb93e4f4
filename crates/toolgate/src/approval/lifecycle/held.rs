//! Calls held for approval outside a chat: the path of a gateway that sits
//! in front of tools the engine does not run itself (`toolgate mcp-gateway`),
//! and of the server's call-gating API (`POST /api/calls`), whose agents run
//! their tools themselves.
//!
//! A chat binds an approval to a tool call the model made in a stored
//! conversation; a gateway sees only a stream of `tools/call` requests, each
//! of which may be a retry of an earlier one (the client timed out, the
//! gateway restarted). So a held call is identified by what it asks, not by
//! a transport id: its conversation key (the gateway's
//! `mcp:<principal>:<client>`, the API's `api:<conversation>` of its
//! principal), its tool and its canonical input, or the caller's own name for
//! it ([`HeldCall::key`], [`keyed_call_id`]). Its [`held_call_id`] is a digest
//! of them, and every approval issued for it carries that id as its tool call id.
//!
//! The contract, in the order a gateway uses it:
//! 1. [`attach`] finds the newest approval of the same call: one still open
//!    (`pending`, `approved`, `executing`) is attached to, and so is one that
//!    reached a final state within the retry window (its stored outcome is
//!    the answer). Otherwise it issues a new one, `pending`, with its
//!    `issued` event ([`HeldCall::single_use`]: never to one that executed).
//!    Two gateways attaching at once issue one approval: the
//!    id of the next approval of a call is fixed (`<call id>_<n>`), so the
//!    second insert fails and reads the first.
//! 2. A person decides, either through the gateway's client
//!    ([`decide`]: `pending → executing | denied` by the ledger's principal,
//!    claiming the call at once, like an answer in a chat, judged again on
//!    the history as it claims it) or out of band
//!    (votes through the inbox, the CLI, links: [`super::cast`]), which
//!    leaves it `approved`. [`wait`] polls the store until it leaves a state.
//! 3. [`start`] claims an `approved` call (`approved → executing`, under this
//!    process's lease); only one claimant wins, so however many retries race,
//!    the call runs once. A call found `executing` with its lease lapsed (the
//!    gateway died while running it) resolves as `interrupted`, or is run
//!    again when the tool is idempotent.
//! 4. [`finish`] records the outcome (`executing → executed | failed`); a
//!    retry within the window reads it from the record.
//!
//! [`drive`] is steps 2 and 3 for a call decided out of band: it walks the
//! state table until this process may run the call, the record is final, or
//! the hold is over. A gateway calls it and never matches on states itself.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_protocol::ToolResultOutput;

use super::grant::GrantOffer;
use super::route::Route;
use super::{ApprovalState, Decision, transition};
use crate::approval::{CanonicalError, canonical_digest, canonical_json};
use crate::ledger::{
    ApprovalRecord, AuditEvent, AuditKind, HistoryGuard, Ledger, Millis, StoreError, Transition, TransitionOutcome,
    millis,
};
use crate::tool::{ApprovalContext, Caller, GateAction, Tool, Verdict};

/// How many times [`attach`] reads again after losing an issue race.
const MAX_ATTEMPTS: usize = 4;

/// The prefix of a held call's id.
pub const HELD_CALL_PREFIX: &str = "held_";

/// One call a gateway holds: what it asks, and why a person must decide.
#[derive(Debug, Clone, Copy)]
pub struct HeldCall<'a> {
    /// The tool's name as the client sees it.
    pub tool_name: &'a str,
    /// The input the client sent.
    pub input: &'a Value,
    /// Why a person is asked (the rule or the tool's default).
    pub reason: Option<&'a str>,
    /// Who must decide, when a rule named approvers.
    pub route: Option<&'a Route>,
    /// How long the approval stays answerable (`None`: the ledger's TTL).
    pub ttl: Option<Duration>,
    /// Each approval lets the call through once: [`attach`] never attaches to
    /// one that already `executed`, so a later identical call is a new
    /// approval (a permission prompt, whose "allow" lets the client run the
    /// call itself each time it is given).
    pub single_use: bool,
    /// The caller's name for this call (the call-gating API's
    /// `idempotencyKey`): the call is identified by it instead of by its
    /// tool and input ([`keyed_call_id`]), and [`attach`] attaches to its
    /// approval whatever its age; a key sent again with another tool or
    /// input is [`HeldError::KeyReused`].
    pub key: Option<&'a str>,
    /// Decided before anyone is asked (a rule allowed or denied it, as the
    /// call-gating API records every call it answers): the record is issued
    /// `approved` or `denied` at once, decided by [`RULES_PRINCIPAL`], so
    /// its claim and outcome take the same moves as a person's approval.
    pub decided: Option<&'a Decision>,
    /// What the caller said of the call besides its input (the API's
    /// `description` and `inputSchema`), kept as `call` in the data of its
    /// first audit event.
    pub note: Option<&'a Value>,
    /// The JSON Schema the caller said the input must pass (the API's
    /// `inputSchema`), kept with the record: an approver's edit must pass it
    /// too ([`super::check_edit`]).
    pub input_schema: Option<&'a Value>,
    /// The digest of the tool's definition as offered (description and
    /// input schema: [`crate::receipt::tool_digest`], or a caller's own),
    /// kept as `toolDigest` in the data of its first audit event, which its
    /// receipts name.
    pub tool_digest: Option<&'a str>,
    /// The digest of the configuration that held the rule that asked
    /// ([`crate::CallGate::config_digest`]), kept as `configDigest` beside it.
    pub config_digest: Option<&'a str>,
}

impl<'a> HeldCall<'a> {
    /// A call of `tool_name` with `input` and nothing else said of it: no
    /// reason, route, TTL, key, decision, note, schema or digests, not single-use.
    pub fn new(tool_name: &'a str, input: &'a Value) -> Self {
        Self {
            tool_name,
            input,
            reason: None,
            route: None,
            ttl: None,
            single_use: false,
            key: None,
            decided: None,
            note: None,
            input_schema: None,
            tool_digest: None,
            config_digest: None,
        }
    }

    /// Writes what the call's receipts name (`toolDigest`, `configDigest`)
    /// into the data of its first audit event.
    fn provenance(&self, data: &mut Value) {
        if let Some(digest) = self.tool_digest {
            data["toolDigest"] = json!(digest);
        }
        if let Some(digest) = self.config_digest {
            data["configDigest"] = json!(digest);
        }
    }
}

/// Who decides a call that a rule decided before anyone was asked
/// ([`HeldCall::decided`]), as its recorded decision names it. A name only:
/// a person may be called so too, so whether a rule decided is read from the
/// event's [`BY_RULE`] field ([`decided_by_rule`]), never from this name.
pub const RULES_PRINCIPAL: &str = super::counted::RULES;

/// The field (`true`) of the one event of a call a rule decided as it was
/// issued ([`HeldCall::decided`]); history terms read it too
/// ([`crate::ledger::entries_in`]).
pub const BY_RULE: &str = crate::ledger::BY_RULE;

/// Whether `event` records a call a rule decided when it was issued (nobody
/// was asked, so nobody is told): its data's [`BY_RULE`] is `true`, which
/// only [`attach`] writes.
pub fn decided_by_rule(event: &AuditEvent) -> bool {
    event.data.get(BY_RULE) == Some(&Value::Bool(true))
}

/// Why a held call could not be recorded or moved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HeldError {
    /// The input has no canonical form (a number JSON cannot carry exactly, …).
    #[error("the input of `{tool_name}` cannot be recorded: {source}")]
    Input {
        /// The tool.
        tool_name: String,
        /// What is wrong.
        source: CanonicalError,
    },
    /// The store failed; nothing was recorded.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The approval disappeared from the store (pruned, or never issued).
    #[error("approval `{0}` is not in the store")]
    Missing(String),
    /// An idempotency key already names a call of another tool or input.
    #[error("the idempotency key `{key}` already names another call (another tool or input)")]
    KeyReused {
        /// The key.
        key: String,
    },
}

/// What [`attach`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Attached {
    /// No approval of this call was open or recent: this one was just issued (`pending`).
    Issued(ApprovalRecord),
    /// An approval of the same call, open or decided within the retry window.
    Existing(ApprovalRecord),
}

impl Attached {
    /// The record, however it was found.
    pub fn record(&self) -> &ApprovalRecord {
        match self {
            Self::Issued(record) | Self::Existing(record) => record,
        }
    }

    /// The record, however it was found.
    pub fn into_record(self) -> ApprovalRecord {
        match self {
            Self::Issued(record) | Self::Existing(record) => record,
        }
    }
}

/// What [`start`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Started {
    /// This process holds the call's claim: run it, then [`finish`].
    Run(ApprovalRecord),
    /// Someone else holds or held it: the record as it is (executing under
    /// another lease, or already final, `interrupted` included).
    Elsewhere(ApprovalRecord),
}

/// The id of a held call: `held_` and 32 hex digits of the SHA-256 of its
/// conversation key, tool name and input digest (each length-prefixed, so
/// no two triples collide by concatenation).
pub fn held_call_id(conversation_key: &str, tool_name: &str, input_digest: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [conversation_key, tool_name, input_digest] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut id = String::with_capacity(HELD_CALL_PREFIX.len() + 32);
    id.push_str(HELD_CALL_PREFIX);
    for byte in &digest[..16] {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// The held call id of the call named `key` in the conversation
/// `conversation_key` (whatever its tool and input): [`held_call_id`] with
/// no tool name and `key:` and the key for the digest (which no input
/// digest, all hex, can equal).
pub fn keyed_call_id(conversation_key: &str, key: &str) -> String {
    held_call_id(conversation_key, "", &format!("key:{key}"))
}

/// The held call id of `tool_name` called with `input` in the conversation
/// `conversation_key` ([`held_call_id`] of the input's canonical digest).
pub fn call_id_of(conversation_key: &str, tool_name: &str, input: &Value) -> Result<String, HeldError> {
    let canonical =
        canonical_json(input).map_err(|source| HeldError::Input { tool_name: tool_name.to_owned(), source })?;
    Ok(held_call_id(conversation_key, tool_name, &canonical_digest(&canonical)))
}

/// Finds the approval of this call in the ledger's conversation, or issues
/// one (see the module docs). `retry_window` is how long after a final state
/// an identical call still gets that outcome (a keyed call gets it always).
pub async fn attach(ledger: &Ledger, call: HeldCall<'_>, retry_window: Duration) -> Result<Attached, HeldError> {
    let attached = attach_if(ledger, call, &[], retry_window).await?;
    attached.ok_or_else(|| StoreError::Unavailable("an unguarded issue missed its guards".to_owned()).into())
}

/// [`attach`], issuing a new approval only while `guards` hold (the history
/// the call was judged on, [`super::direct::Judged::guards`]), atomically
/// with that check ([`crate::ledger::HistoryStore::issue_if`]): `None` when
/// they no longer do and nothing was written (decide the call again). An
/// approval attached to is attached to whatever the guards say.
pub async fn attach_if(
    ledger: &Ledger,
    call: HeldCall<'_>,
    guards: &[HistoryGuard],
    retry_window: Duration,
) -> Result<Option<Attached>, HeldError> {
    attach_guarded(ledger, call, Guarded { guards, allowed: None }, retry_window).await
}

/// The history a new approval is issued on, and the `allowed` event of a
/// call a history term let through ([`super::direct::Judged::allowed`]).
#[derive(Debug, Clone, Copy)]
struct Guarded<'a> {
    guards: &'a [HistoryGuard],
    allowed: Option<&'a AuditEvent>,
}

/// [`attach_if`], the new approval's events led by `allowed` when there is
/// one: it is written with the record or not at all (a request that
/// attaches to its racing twin's record counts nothing).
async fn attach_guarded(
    ledger: &Ledger,
    call: HeldCall<'_>,
    Guarded { guards, allowed }: Guarded<'_>,
    retry_window: Duration,
) -> Result<Option<Attached>, HeldError> {
    let (canonical, digest, call_id) = identify(ledger, call)?;
    let store = &ledger.config.store;
    for _ in 0..MAX_ATTEMPTS {
        let (next, now) = match existing_or_next(ledger, call, (&call_id, &digest), retry_window).await? {
            Ok(record) => return Ok(Some(Attached::Existing(record))),
            Err(next) => next,
        };
        let input = serde_json::from_str(&canonical).unwrap_or_else(|_| call.input.clone());
        let ids = (format!("{call_id}_{next}"), call_id.clone());
        let mut record = pending_record(ledger, ids, call, (input, digest.clone()), now);
        let mut events = match call.decided {
            Some(decision) => decided_by_rule_now(ledger, &mut record, decision, now),
            None => vec![issued_event(ledger, &record, now)],
        };
        if let Some(event) = events.first_mut() {
            if let Some(note) = call.note {
                event.data["call"] = note.clone();
            }
            call.provenance(&mut event.data);
        }
        if let Some(allowed) = allowed {
            events.insert(0, allowed.clone());
        }
        let records = std::slice::from_ref(&record);
        let issued = match guards {
            [] => store.issue(records, &events).await.map(|()| true),
            guards => store.issue_if(guards, records, &events).await,
        };
        match issued {
            Ok(true) => return Ok(Some(Attached::Issued(record))),
            Ok(false) => return Ok(None),
            Err(StoreError::DuplicateApproval(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(StoreError::Unavailable(format!("call `{call_id}`: too many gateways issuing it at once; try again")).into())
}

/// Decides a new held call as every call a rule decides without an
/// approval ([`super::direct::judge`]) and attaches it as decided
/// ([`attach_if`]): allowed or denied, it is issued decided by the rules
/// ([`HeldCall::decided`]); asked on the history a rule's term read, it is
/// issued `pending` only while that history stands, and decided again when
/// it does not (at most [`super::direct::MAX_ADMITS`] times, then asked
/// without a guard: a person decides). `call`'s reason, route and decision
/// are the verdict's.
pub async fn admit(
    ledger: &Ledger,
    caller: Caller<'_>,
    tool: &Tool,
    context: ApprovalContext,
    call: HeldCall<'_>,
    retry_window: Duration,
) -> Result<Attached, HeldError> {
    let judging = Judging { caller, tool, context, issue_decided: true };
    match admit_with(ledger, judging, call, retry_window, || std::future::ready(Ok(()))).await? {
        Admitted::Held(attached) => Ok(*attached),
        // Neither is returned when decided calls are issued and there is always room.
        Admitted::Decided(_) | Admitted::Refused(_) => {
            Err(StoreError::Unavailable("a decided call was not issued".to_owned()).into())
        }
    }
}

/// What [`admit_asked`] made of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Admitted {
    /// Decided without a person (a rule, the tool's policy, a grant): allowed
    /// (a history term's `allowed` entry already recorded with the history it
    /// read) or denied. Nothing was issued: the caller runs or refuses it, and
    /// puts it on record ([`super::direct::ran`], [`super::direct::refused`]).
    Decided(Verdict),
    /// Asked: the approval of this call attached to, or one issued while the
    /// history the question rested on stood.
    Held(Box<Attached>),
    /// Asked, but the caller's `room` refused to hold one more approval: why.
    Refused(String),
}

/// Decides a call a gateway holds only when a person must answer (the MCP
/// gateway's calls and permission prompts): as [`admit`] does, except that a
/// call allowed or denied without a person is returned
/// ([`Admitted::Decided`]) instead of issued, and that `room` is asked before
/// a question is attached or issued (a gateway's cap on calls waiting; its
/// refusal is [`Admitted::Refused`]). A question is issued only while the
/// history it was judged on stands, atomically with that check, and judged
/// again when it does not, as in [`admit`].
pub async fn admit_asked<R, F>(
    ledger: &Ledger,
    caller: Caller<'_>,
    tool: &Tool,
    context: ApprovalContext,
    call: HeldCall<'_>,
    retry_window: Duration,
    room: R,
) -> Result<Admitted, HeldError>
where
    R: FnMut() -> F,
    F: std::future::Future<Output = Result<(), String>>,
{
    let judging = Judging { caller, tool, context, issue_decided: false };
    admit_with(ledger, judging, call, retry_window, room).await
}

/// What [`admit_with`] judges a call with.
struct Judging<'a, 'c> {
    caller: Caller<'c>,
    tool: &'a Tool,
    context: ApprovalContext,
    /// Issue a call allowed or denied without a person decided ([`admit`]),
    /// or hand its verdict back ([`admit_asked`]).
    issue_decided: bool,
}

/// [`admit`] and [`admit_asked`]: judge, then attach or issue on the history judged.
async fn admit_with<R, F>(
    ledger: &Ledger,
    judging: Judging<'_, '_>,
    mut call: HeldCall<'_>,
    retry_window: Duration,
    mut room: R,
) -> Result<Admitted, HeldError>
where
    R: FnMut() -> F,
    F: std::future::Future<Output = Result<(), String>>,
{
    let Judging { caller, tool, context, issue_decided } = judging;
    let described = described_of(call);
    for _ in 0..super::direct::MAX_ADMITS {
        let judged = super::direct::judge_held(
            Some(ledger),
            caller,
            tool,
            call.input,
            context.clone(),
            (&described, issue_decided),
        )
        .await;
        if !judged.offers.is_empty()
            && let Some(attached) = attach_granted(ledger, call, &judged.offers, retry_window).await?
        {
            return Ok(Admitted::Held(Box::new(attached)));
        }
        let verdict = judged.verdict;
        let decided = match verdict.action {
            GateAction::Allow => Some(Decision::APPROVE),
            GateAction::Deny => Some(Decision::Deny { reason: verdict.reason.clone() }),
            _ => None,
        };
        match &decided {
            Some(_) if !issue_decided => return Ok(Admitted::Decided(verdict)),
            None => {
                if let Err(refusal) = room().await {
                    return Ok(Admitted::Refused(refusal));
                }
            }
            Some(_) => {}
        }
        let decided_call = HeldCall {
            reason: verdict.reason.as_deref().or(call.reason),
            route: verdict.route.as_ref(),
            decided: decided.as_ref(),
            ..call
        };
        let guarded = Guarded { guards: &judged.guards, allowed: judged.allowed.as_ref() };
        if let Some(attached) = attach_guarded(ledger, decided_call, guarded, retry_window).await? {
            return Ok(Admitted::Held(Box::new(attached)));
        }
    }
    call.reason = Some(super::direct::HISTORY_CHURN_REASON);
    (call.route, call.decided) = (None, None);
    if let Err(refusal) = room().await {
        return Ok(Admitted::Refused(refusal));
    }
    Ok(Admitted::Held(Box::new(attach(ledger, call, retry_window).await?)))
}

/// Attaches to this call's approval as [`attach`] does, or issues it
/// approved on a use of one of `offers` (grants that may lift its question,
/// tried in order), the use spent and the record issued in one conditional
/// write ([`crate::ledger::ConversationStore::use_decision_issuing`]): two
/// requests for the same call race for the same next approval id, so one
/// spends a use and the other attaches to its record. The record is decided
/// by [`RULES_PRINCIPAL`] (its `approved` event by rule, then a `granted`
/// event naming the grant). `None` when no offer has a use left (ask); a
/// store that fails on an offer is logged and the next one tried (fail closed).
async fn attach_granted(
    ledger: &Ledger,
    call: HeldCall<'_>,
    offers: &[GrantOffer],
    retry_window: Duration,
) -> Result<Option<Attached>, HeldError> {
    let (canonical, digest, call_id) = identify(ledger, call)?;
    let store = &ledger.config.store;
    'attempts: for _ in 0..MAX_ATTEMPTS {
        let (next, now) = match existing_or_next(ledger, call, (&call_id, &digest), retry_window).await? {
            Ok(record) => return Ok(Some(Attached::Existing(record))),
            Err(next) => next,
        };
        let input: Value = serde_json::from_str(&canonical).unwrap_or_else(|_| call.input.clone());
        for offer in offers {
            let granted_call = HeldCall { reason: Some(&offer.description), route: None, ..call };
            let ids = (format!("{call_id}_{next}"), call_id.clone());
            let mut record = pending_record(ledger, ids, granted_call, (input.clone(), digest.clone()), now);
            let mut events = decided_by_rule_now(ledger, &mut record, &Decision::APPROVE, now);
            if let Some(event) = events.first_mut() {
                if let Some(note) = call.note {
                    event.data["call"] = note.clone();
                }
                call.provenance(&mut event.data);
            }
            let direct = super::direct::DirectCall { tool_call_id: &call_id, tool_name: call.tool_name, input: &input };
            let mut granted = described_of(call).described(super::direct::granted(ledger, direct, offer, now));
            granted.approval_id.clone_from(&record.approval_id);
            events.push(granted);
            let records = std::slice::from_ref(&record);
            match store.use_decision_issuing(&offer.id, now, records, &events).await {
                Ok(Some(_)) => return Ok(Some(Attached::Issued(record))),
                Ok(None) => {}
                Err(StoreError::DuplicateApproval(_)) => continue 'attempts,
                Err(error) => tracing::warn!(grant = %offer.id, %error, "cannot spend a grant; approval required"),
            }
        }
        return Ok(None);
    }
    Err(StoreError::Unavailable(format!("call `{call_id}`: too many gateways issuing it at once; try again")).into())
}

/// What a held call's grant uses and allowed events name: what its issued event would.
fn described_of(call: HeldCall<'_>) -> super::direct::Described {
    super::direct::Described {
        tool_digest: call.tool_digest.map(str::to_owned),
        config_digest: call.config_digest.map(str::to_owned),
        rule: None,
    }
}

/// The approval [`attach`] would attach this call to now, if any, without
/// issuing one: what a caller reads before it decides a new call (a retry
/// is not decided again, nor counted again by a history term).
pub async fn attachable(
    ledger: &Ledger,
    call: HeldCall<'_>,
    retry_window: Duration,
) -> Result<Option<ApprovalRecord>, HeldError> {
    let (_, digest, call_id) = identify(ledger, call)?;
    Ok(existing_or_next(ledger, call, (&call_id, &digest), retry_window).await?.ok())
}

/// The approval of this call to attach to now, or the number of the next
/// one to issue and the time it was read at (`(call id, input digest)`).
async fn existing_or_next(
    ledger: &Ledger,
    call: HeldCall<'_>,
    (call_id, digest): (&str, &str),
    retry_window: Duration,
) -> Result<Result<ApprovalRecord, (u64, Millis)>, HeldError> {
    let records = ledger.config.store.approvals_for_calls(&ledger.conversation_id, &[call_id.to_owned()]).await?;
    let now = ledger.config.clock.now();
    Ok(attachable_among(&records, call, digest, now, retry_window)?.cloned().map_err(|next| (next, now)))
}

/// A call's canonical input, its digest and its held call id.
fn identify(ledger: &Ledger, call: HeldCall<'_>) -> Result<(String, String, String), HeldError> {
    let canonical = canonical_json(call.input)
        .map_err(|source| HeldError::Input { tool_name: call.tool_name.to_owned(), source })?;
    let digest = canonical_digest(&canonical);
    let call_id = match call.key {
        Some(key) => keyed_call_id(&ledger.conversation_id, key),
        None => held_call_id(&ledger.conversation_id, call.tool_name, &digest),
    };
    Ok((canonical, digest, call_id))
}

/// Among a call's approvals so far: the one to attach to (`Ok(Ok)`), else
/// the generation of the next one to issue (`Ok(Err)`); a key that names
/// another tool or input is [`HeldError::KeyReused`].
fn attachable_among<'r>(
    records: &'r [ApprovalRecord],
    call: HeldCall<'_>,
    digest: &str,
    now: Millis,
    retry_window: Duration,
) -> Result<Result<&'r ApprovalRecord, u64>, HeldError> {
    if let Some(key) = call.key
        && !records.is_empty()
        && !records.iter().any(|record| record.tool_name == call.tool_name && record.input_digest == digest)
    {
        return Err(HeldError::KeyReused { key: key.to_owned() });
    }
    let newest = records.iter().max_by_key(|record| (record.issued_at, generation(&record.approval_id)));
    let used = |record: &ApprovalRecord| call.single_use && record.state == ApprovalState::Executed;
    let recent = |record: &ApprovalRecord| now.saturating_sub(record.updated_at) <= millis(retry_window);
    if let Some(record) = newest
        && (!record.state.is_final() || call.key.is_some() || recent(record))
        && !used(record)
    {
        return Ok(Ok(record));
    }
    Ok(Err(records.iter().map(|record| generation(&record.approval_id)).max().unwrap_or(0) + 1))
}

/// Makes a new record one a rule decided as it was issued
/// (`(none) → approved | denied`, by [`RULES_PRINCIPAL`]); its one event,
/// `approved` or `denied`, holds what `issued` would and `"byRule": true`.
fn decided_by_rule_now(
    ledger: &Ledger,
    record: &mut ApprovalRecord,
    decision: &Decision,
    now: Millis,
) -> Vec<AuditEvent> {
    let mut data = json!({"toolName": record.tool_name, "input": record.input, BY_RULE: true});
    if let Some(reason) = &record.reason {
        data["reason"] = json!(reason);
    }
    let kind = match decision {
        Decision::Approve { .. } => {
            record.state = ApprovalState::Approved;
            AuditKind::Approved
        }
        Decision::Deny { .. } => {
            record.state = ApprovalState::Denied;
            record.output = Some(ToolResultOutput::error_text(record.reason.clone().unwrap_or_default()));
            AuditKind::Denied
        }
    };
    let recorded = crate::ledger::RecordedDecision::new(decision.clone(), Some(RULES_PRINCIPAL.to_owned()), now);
    record.decision = Some(recorded);
    vec![ledger.event(kind, &record.approval_id, &record.tool_call_id, now, data)]
}

/// Settles what time alone decides about `record`, as a reader finds it: a
/// pending approval past `expires_at` is `expired`, a call `executing` whose
/// lease lapsed with no outcome is `interrupted` (a held call is never run
/// again by a reader). Returns the record as it is after.
pub async fn observe(ledger: &Ledger, record: ApprovalRecord) -> Result<ApprovalRecord, HeldError> {
    let now = ledger.config.clock.now();
    let lapsed = record.lease.as_ref().is_none_or(|lease| lease.until <= now);
    match record.state {
        ApprovalState::Pending if record.expires_at <= now => expire(ledger, &record).await,
        ApprovalState::Executing if lapsed => match start(ledger, &record, false, None).await? {
            Started::Run(record) | Started::Elsewhere(record) => Ok(record),
        },
        _ => Ok(record),
    }
}

/// The generation of a held approval id (`<call id>_<n>`; 0 when it has none).
fn generation(approval_id: &str) -> u64 {
    approval_id.rsplit_once('_').and_then(|(_, n)| n.parse().ok()).unwrap_or(0)
}

/// A new pending record: `call` in the ledger's conversation, as approval
/// `approval_id` of tool call `tool_call_id`, its input already canonical.
/// The engine issues a chat's approvals with it too.
pub(crate) fn pending_record(
    ledger: &Ledger,
    (approval_id, tool_call_id): (String, String),
    call: HeldCall<'_>,
    (input, input_digest): (Value, String),
    now: Millis,
) -> ApprovalRecord {
    let ttl = call.ttl.unwrap_or(ledger.config.ttl);
    ApprovalRecord {
        approval_id,
        conversation_id: ledger.conversation_id.clone(),
        owner: ledger.owner.clone(),
        client: ledger.client.clone(),
        tool_call_id,
        tool_name: call.tool_name.to_owned(),
        input,
        input_digest,
        issued_at: now,
        expires_at: now.saturating_add(millis(ttl)),
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: now,
        routing: call.route.map(|route| route.resolve(|group| ledger.config.group_members(group))),
        votes: Vec::new(),
        reason: call.reason.map(str::to_owned),
        supersedes: None,
        superseded_by: None,
        origin: ledger.origin,
        input_schema: call.input_schema.cloned(),
        lineage: ledger.sub_run.as_ref().map(|place| place.lineage.clone()).unwrap_or_default(),
    }
}

/// The `issued` event of `call`'s record, as the engine writes it for a chat's approvals.
pub(crate) fn issued_event_of(
    ledger: &Ledger,
    record: &ApprovalRecord,
    call: &HeldCall<'_>,
    now: Millis,
) -> AuditEvent {
    let mut event = issued_event(ledger, record, now);
    call.provenance(&mut event.data);
    event
}

/// The `issued` event of a record (without what [`HeldCall::provenance`] adds).
fn issued_event(ledger: &Ledger, record: &ApprovalRecord, now: Millis) -> AuditEvent {
    let mut data = json!({"toolName": record.tool_name, "input": record.input, "expiresAt": record.expires_at});
    if let Some(reason) = &record.reason {
        data["reason"] = json!(reason);
    }
    if let Some(routing) = &record.routing {
        data["approvers"] = json!(routing.approvers);
        data["quorum"] = json!(routing.quorum);
    }
    if let Some(place) = &ledger.sub_run {
        // A sub-agent's call: where it comes from, and the conversation it is answered in.
        data["lineage"] = json!(place.lineage);
        data["rootConversation"] = json!(crate::ledger::conversation_name(&place.root, ledger.owner.as_deref()));
    }
    ledger.event(AuditKind::Issued, &record.approval_id, &record.tool_call_id, now, data)
}

/// The ledger's principal decides a pending held call (the answer the
/// gateway's client gave): an approval claims it at once (`executing`, under
/// this process's lease), a denial ends it. With `judge`, an approval is
/// judged again on the history as it claims the call, as [`start`] judges
/// one decided out of band ([`super::counted`]): claimed only while that
/// history stands, and `denied` by the rules (after the person's `approved`
/// event) when a rule refuses it now. Returns the record as it is after:
/// when it did not move (decided meanwhile, or expired), as it is.
pub async fn decide(
    ledger: &Ledger,
    record: &ApprovalRecord,
    decision: Decision,
    judge: Option<&super::counted::Rejudge<'_>>,
) -> Result<TransitionOutcome, HeldError> {
    if let (Some(judge), Decision::Approve { edited_input }) = (judge, &decision) {
        return Ok(super::counted::answer(ledger, record, edited_input.clone(), judge).await?);
    }
    let now = ledger.config.clock.now();
    let events = transition::decision_events(ledger, record, &decision, false, now);
    let moved = transition::decide(record, decision, ledger, now, events);
    apply(ledger, moved).await
}

/// Claims an `approved` held call for this process (see the module docs),
/// or settles one whose executor died. `idempotent`: a lapsed execution runs
/// again instead of resolving as `interrupted`. With `judge`, a call a
/// person approved is judged again on the history as it is claimed
/// ([`super::counted`]): claimed only while that history stands, and
/// `denied` (returned as [`Started::Elsewhere`]) when a rule refuses it now.
pub async fn start(
    ledger: &Ledger,
    record: &ApprovalRecord,
    idempotent: bool,
    judge: Option<&super::counted::Rejudge<'_>>,
) -> Result<Started, HeldError> {
    let now = ledger.config.clock.now();
    let lapsed = record.lease.as_ref().is_none_or(|lease| lease.until <= now);
    let moved = match record.state {
        ApprovalState::Approved => match judge.filter(|_| !super::counted::decided_by_rules(record)) {
            Some(judge) => return started(super::counted::start(ledger, record, judge).await?, record),
            None => transition::start_execution(record, ledger, now, ApprovalState::Approved, vec![]),
        },
        ApprovalState::Executing if lapsed && idempotent => {
            transition::start_execution(record, ledger, now, ApprovalState::Executing, vec![])
        }
        ApprovalState::Executing if lapsed => {
            let data = json!({"lease": record.lease});
            let events =
                vec![ledger.event(AuditKind::Interrupted, &record.approval_id, &record.tool_call_id, now, data)];
            let interrupted = transition::interrupt(record, now, events);
            return Ok(match apply(ledger, interrupted).await? {
                TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) => Started::Elsewhere(record),
                TransitionOutcome::Missing => return Err(HeldError::Missing(record.approval_id.clone())),
            });
        }
        _ => return Ok(Started::Elsewhere(record.clone())),
    };
    started(apply(ledger, moved).await?, record)
}

/// What a claim's outcome means: run it when it moved to `executing`.
fn started(outcome: TransitionOutcome, record: &ApprovalRecord) -> Result<Started, HeldError> {
    match outcome {
        TransitionOutcome::Moved(record) if record.state == ApprovalState::Executing => Ok(Started::Run(record)),
        TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) => Ok(Started::Elsewhere(record)),
        TransitionOutcome::Missing => Err(HeldError::Missing(record.approval_id.clone())),
    }
}

/// Records the outcome of a held call this process ran:
/// `executing → executed` (`failed` false) or `failed`, with an `executed`
/// or `failed` event whose data holds the tool's name, the input and `detail` (the result, or
/// the error).
pub async fn finish(
    ledger: &Ledger,
    record: &ApprovalRecord,
    output: ToolResultOutput,
    failed: bool,
    detail: Value,
) -> Result<TransitionOutcome, HeldError> {
    let now = ledger.config.clock.now();
    let (kind, key) = if failed { (AuditKind::Failed, "error") } else { (AuditKind::Executed, "result") };
    let data = json!({"toolName": record.tool_name, "input": record.input, key: detail});
    let events = vec![ledger.event(kind, &record.approval_id, &record.tool_call_id, now, data)];
    apply(ledger, transition::finish(&record.approval_id, output, failed, now, events)).await
}

/// Reads the approval every `poll` until it is in none of `leave` (or has
/// expired while pending) or `deadline` (the ledger clock's time) passes;
/// returns it as last read.
pub async fn wait(
    ledger: &Ledger,
    approval_id: &str,
    leave: &[ApprovalState],
    deadline: Millis,
    poll: Duration,
) -> Result<ApprovalRecord, HeldError> {
    let ids = [approval_id.to_owned()];
    loop {
        let record = ledger.config.store.approvals(&ids).await?.pop();
        let Some(record) = record else { return Err(HeldError::Missing(approval_id.to_owned())) };
        let now = ledger.config.clock.now();
        let expired = record.state == ApprovalState::Pending && record.expires_at <= now;
        if !leave.contains(&record.state) || expired || now >= deadline {
            return Ok(record);
        }
        let left = Duration::from_millis(u64::try_from(deadline.saturating_sub(now)).unwrap_or(0));
        tokio::time::sleep(poll.min(left).max(Duration::from_millis(1))).await;
    }
}

/// Settles a pending held call whose time is up as `expired`; returns the
/// record as it is after.
pub async fn expire(ledger: &Ledger, record: &ApprovalRecord) -> Result<ApprovalRecord, HeldError> {
    let now = ledger.config.clock.now();
    let data = json!({"expiresAt": record.expires_at});
    let events = vec![ledger.event(AuditKind::Expired, &record.approval_id, &record.tool_call_id, now, data)];
    match apply(ledger, transition::expire(record, now, events)).await? {
        TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) => Ok(record),
        TransitionOutcome::Missing => Err(HeldError::Missing(record.approval_id.clone())),
    }
}

/// Where [`drive`] left a held call (the three ways a hold ends; complete).
#[derive(Debug, Clone, PartialEq)]
pub enum Driven {
    /// Approved, and this process holds the claim: run it now (the record's
    /// decision may carry an edited input), then [`finish`] it.
    Run(ApprovalRecord),
    /// Final: denied, withdrawn, expired, interrupted, or run (its outcome
    /// stored); superseded only when its successor is gone.
    Final(ApprovalRecord),
    /// Still pending (or running elsewhere) when the hold ended.
    Waiting(ApprovalRecord),
}

/// How [`drive`] holds a call.
#[derive(Debug, Clone, Copy)]
pub struct Hold {
    /// When the hold ends (the ledger clock's time).
    pub deadline: Millis,
    /// A call whose lease lapsed may run again (else it is `interrupted`).
    pub idempotent: bool,
    /// How often the store is read while the call waits.
    pub poll: Duration,
    /// How often `progress` is told that the call still waits.
    pub progress_every: Duration,
}

/// Drives a held call decided out of band (see the module docs): waits while
/// it is pending or running elsewhere, claims it once approved (or once a
/// lapsed lease frees it), settles a pending one whose time is up as
/// `expired`, and stops at a final state or the hold's deadline. While it
/// waits, `progress` hears the record and how long it has waited, every
/// [`Hold::progress_every`]. With `judge`, a call a person approved is
/// judged again on the history as it is claimed, as [`start`] does.
pub async fn drive<P, F>(
    ledger: &Ledger,
    mut record: ApprovalRecord,
    hold: Hold,
    judge: Option<&super::counted::Rejudge<'_>>,
    mut progress: P,
) -> Result<Driven, HeldError>
where
    P: FnMut(ApprovalRecord, Millis) -> F,
    F: std::future::Future<Output = ()>,
{
    let started = ledger.config.clock.now();
    let mut next_progress = started.saturating_add(millis(hold.progress_every));
    loop {
        let now = ledger.config.clock.now();
        let lapsed = record.lease.as_ref().is_none_or(|lease| lease.until <= now);
        match record.state {
            ApprovalState::Pending if record.expires_at <= now => record = expire(ledger, &record).await?,
            ApprovalState::Approved => match start(ledger, &record, hold.idempotent, judge).await? {
                Started::Run(claimed) => return Ok(Driven::Run(claimed)),
                Started::Elsewhere(current) => record = current,
            },
            ApprovalState::Executing if lapsed => match start(ledger, &record, hold.idempotent, None).await? {
                Started::Run(claimed) => return Ok(Driven::Run(claimed)),
                Started::Elsewhere(current) if current == record => return Ok(Driven::Waiting(current)),
                Started::Elsewhere(current) => record = current,
            },
            ApprovalState::Pending | ApprovalState::Executing => {
                if now >= hold.deadline {
                    return Ok(Driven::Waiting(record));
                }
                if now >= next_progress {
                    progress(record.clone(), now - started).await;
                    next_progress = now.saturating_add(millis(hold.progress_every));
                }
                let until = hold.deadline.min(next_progress);
                let state = record.state;
                record = wait(ledger, &record.approval_id, &[state], until, hold.poll).await?;
            }
            // An edit made it a new approval: hold that one (same call, the edited input).
            ApprovalState::Superseded => match successor(ledger, &record).await? {
                Some(successor) => record = successor,
                None => return Ok(Driven::Final(record)),
            },
            ApprovalState::Denied
            | ApprovalState::Withdrawn
            | ApprovalState::Expired
            | ApprovalState::Executed
            | ApprovalState::Failed
            | ApprovalState::Interrupted => return Ok(Driven::Final(record)),
        }
    }
}

/// The approval that superseded `record`, if it names one the store has.
pub async fn successor(ledger: &Ledger, record: &ApprovalRecord) -> Result<Option<ApprovalRecord>, HeldError> {
    let Some(id) = &record.superseded_by else { return Ok(None) };
    Ok(ledger.config.store.approvals(std::slice::from_ref(id)).await?.pop())
}

/// Runs `work` while renewing this process's execution leases every third
/// of a lease, so a long call is not taken for an orphan (the engine runs
/// approved calls under it too).
pub async fn with_renewed_leases<F: std::future::Future>(ledger: &Ledger, work: F) -> F::Output {
    let config = &ledger.config;
    let period = (config.lease / 3).max(Duration::from_millis(10));
    let renew = async {
        loop {
            tokio::time::sleep(period).await;
            let until = config.clock.now().saturating_add(millis(config.lease));
            if let Err(error) = config.store.renew_leases(&config.executor, until).await {
                tracing::warn!(%error, "cannot renew execution leases");
            }
        }
    };
    tokio::select! {
        output = work => output,
        () = renew => unreachable!("the renewal loop never ends"),
    }
}

async fn apply(ledger: &Ledger, moved: Transition) -> Result<TransitionOutcome, HeldError> {
    let outcome = ledger.config.store.apply(std::slice::from_ref(&moved), &[]).await?.pop();
    Ok(outcome.unwrap_or(TransitionOutcome::Missing))
}
