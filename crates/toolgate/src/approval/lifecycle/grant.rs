//! Grants: bounded approvals. An approver approves one call and, with it,
//! "the next N like this, within this time, with inputs like these"; a later
//! call the grant covers runs without asking, and spends one use.
//!
//! # The contract
//!
//! - **Made with an approval.** A [`GrantSpec`] (`{"uses": 5, "within":
//!   "1h", "input": {"/amount": {"le": 1000}}, "scope": "conversation"}`)
//!   travels with an approving decision (the inbox and the page, a chat's
//!   answer, a channel's approve links, the CLI); [`issue`] turns it into the stored row, authored by
//!   the approver with their groups as fields. A quorum approval cannot be
//!   granted away by one person ([`GrantRefusal::Quorum`]). The inbox and
//!   the CLI check the grant, cast the vote ([`super::cast`]) and save the
//!   grant only once the vote counted; a chat's answer keeps it with the
//!   answer, for an approval still pending that the answer may decide
//!   ([`super::check_vote`]).
//! - **One concept with sticky decisions.** A grant is a sticky decision
//!   that allows (`action = "allow"`) with an optional use limit (its
//!   `uses_left` column) and optional input predicates; an "always allow"
//!   decision is a grant without a use limit (migration 0012 keeps every
//!   stored one as such). A sticky `deny` is not a grant.
//! - **What it lifts.** A grant only turns a question into a yes: a verdict
//!   that asks ([`may_lift`]). It never lifts a deny (a rule's or the
//!   tool's), never lifts an ask routed to approvers unless its granter is
//!   one of them (by principal or by a group recorded with the grant, and not
//!   the requester where the rule forbids self-approval), never lifts an ask
//!   whose quorum is above 1, and lifts an unrouted ask only when its granter
//!   is the requester, who would have been asked.
//! - **Spent atomically.** [`super::direct::lift`] spends one use with
//!   [`ConversationStore::use_decision`]: one conditional write that also
//!   appends the `granted` audit event naming the grant, so of concurrent
//!   calls on a grant with `n` uses left exactly `n` run without asking; the
//!   others are asked as if there were no grant. An expired, exhausted or
//!   revoked grant lifts nothing. Without a ledger only a grant without a use
//!   limit lifts (nothing could count its uses).
//!
//! Which stored grants cover a call (tool, scope, input predicates, expiry)
//! is the gate's judgement ([`crate::tool::CallGate::grants`], the
//! `toolgate-policy` crate); whether one may lift the verdict is here
//! ([`may_lift`]), for every path, and so is what spends it: the engine's step loop and held calls through
//! [`super::direct::admit`], the call-gating API and the gateway's prompt
//! tool through [`super::direct::lift`] (a call run on a grant is decided
//! without an approval, so its record is `direct`'s: the `granted` event).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::route::{GROUP_PREFIX, Voter, requester};
use crate::ledger::{ApprovalRecord, ConversationStore, DecisionScope, Millis, StoreError, StoredDecision};
use crate::tool::{GateAction, Verdict};

/// The `decidedBy` of a `granted` event.
pub const DECIDED_BY_GRANT: &str = "grant";

/// The prefix of a grant's id.
pub const GRANT_ID_PREFIX: &str = "grant_";

/// The most uses one grant may hold.
pub const MAX_USES: u32 = 10_000;

/// The most input predicates one grant may hold.
pub const MAX_PREDICATES: usize = 32;

/// Where a grant applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum GrantScope {
    /// The approval's conversation (the default).
    #[default]
    Conversation,
    /// Every conversation of the approval's requester.
    Principal,
}

/// What an approver asks for with an approval (the wire's `grant` object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantSpec {
    /// How many later calls it lets run (none: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<u32>,
    /// How long it lasts from now, such as `30m`, `1h` or `7d` (none: until revoked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// JSON pointer → predicate (the rules' operators: `le`, `equals`, ...),
    /// all of which a later call's input must satisfy (none: any input).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input: BTreeMap<String, Value>,
    /// Where it applies.
    #[serde(default)]
    pub scope: GrantScope,
}

/// Why a grant was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantRefusal {
    /// The spec is malformed (says what is wrong).
    #[error("invalid grant: {0}")]
    Invalid(String),
    /// The approval needs more than one approval.
    #[error("approval `{approval_id}` needs {quorum} approvals: a quorum cannot be granted away by one person")]
    Quorum {
        /// The approval.
        approval_id: String,
        /// Its quorum.
        quorum: u32,
    },
    /// A grant was sent with a denial.
    #[error("a grant goes with an approval, not a denial")]
    NotApproving,
}

impl GrantRefusal {
    /// The API's error code: `invalid_grant` or `grant_not_allowed`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) | Self::NotApproving => "invalid_grant",
            Self::Quorum { .. } => "grant_not_allowed",
        }
    }
}

/// Parses a duration such as `90s`, `30m`, `1h`, `7d` or `1h30m` into milliseconds.
pub fn parse_within(text: &str) -> Result<Millis, GrantRefusal> {
    let bad = |why: &str| GrantRefusal::Invalid(format!("`within` = {text:?}: {why} (e.g. `30m`, `1h`, `7d`)"));
    let (mut total, mut digits) = (0i64, String::new());
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit: i64 = match ch {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => return Err(bad("an unknown unit")),
        };
        let count: i64 = digits.parse().map_err(|_| bad("a unit without a number"))?;
        total = count.checked_mul(unit).and_then(|ms| total.checked_add(ms)).ok_or_else(|| bad("too long"))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad("a number without a unit"));
    }
    if total <= 0 {
        return Err(bad("it must be longer than zero"));
    }
    Ok(total)
}

impl GrantSpec {
    /// Checks what can be checked without the approval: a use limit of at
    /// least 1, a valid `within`, pointers that are JSON pointers, each
    /// predicate an object. (The policy crate checks the operators.)
    pub fn check(&self) -> Result<(), GrantRefusal> {
        match self.uses {
            Some(0) => return Err(GrantRefusal::Invalid("`uses` must be at least 1".into())),
            Some(uses) if uses > MAX_USES => {
                return Err(GrantRefusal::Invalid(format!("`uses` may be at most {MAX_USES}")));
            }
            _ => {}
        }
        if let Some(within) = &self.within {
            parse_within(within)?;
        }
        if self.input.len() > MAX_PREDICATES {
            return Err(GrantRefusal::Invalid(format!("`input` may hold at most {MAX_PREDICATES} predicates")));
        }
        for (pointer, predicate) in &self.input {
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(GrantRefusal::Invalid(format!("`input` key {pointer:?} is not a JSON pointer")));
            }
            if !predicate.is_object() {
                return Err(GrantRefusal::Invalid(format!("`input` {pointer:?} must be a table of operators")));
            }
        }
        Ok(())
    }
}

/// The stored grant `voter` makes with their approval of `record` at `now`
/// (see the module docs), with id `id`. Checks the spec and that the
/// approval may be granted away by one person; saves nothing.
pub fn issue(
    record: &ApprovalRecord,
    voter: &Voter,
    spec: &GrantSpec,
    now: Millis,
    id: String,
) -> Result<StoredDecision, GrantRefusal> {
    spec.check()?;
    let quorum = record.routing.as_ref().map_or(1, |routing| routing.quorum);
    if quorum > 1 {
        return Err(GrantRefusal::Quorum { approval_id: record.approval_id.clone(), quorum });
    }
    let scope = match (spec.scope, requester(record)) {
        (GrantScope::Conversation, _) => {
            DecisionScope::Conversation { conversation_id: record.conversation_id.clone() }
        }
        (GrantScope::Principal, Some(owner)) => DecisionScope::Principal { principal: owner.to_owned() },
        (GrantScope::Principal, None) => {
            let why = "`scope = \"principal\"` needs an approval with a requester; this one has none";
            return Err(GrantRefusal::Invalid(why.into()));
        }
    };
    let expires_at = spec.within.as_deref().map(parse_within).transpose()?.map(|ms| now.saturating_add(ms));
    let mut body = json!({
        "id": id,
        "action": "allow",
        "tool": record.tool_name,
        "scope": scope,
        "createdAt": now,
        "approvalId": record.approval_id,
    });
    let fields = body.as_object_mut().expect("an object");
    if let Some(expires_at) = expires_at {
        fields.insert("expiresAt".into(), json!(expires_at));
    }
    if let Some(author) = &voter.principal {
        fields.insert("createdBy".into(), json!(author));
    }
    if let Some(owner) = requester(record) {
        fields.insert("requester".into(), json!(owner));
    }
    if !voter.groups.is_empty() {
        fields.insert("granterGroups".into(), json!(voter.groups));
    }
    if let Some(uses) = spec.uses {
        fields.insert("uses".into(), json!(uses));
    }
    if !spec.input.is_empty() {
        fields.insert("inputMatch".into(), json!(spec.input));
    }
    Ok(StoredDecision {
        id,
        scope,
        tool_name: record.tool_name.clone(),
        created_at: now,
        expires_at,
        body,
        uses_left: spec.uses.map(i64::from),
        created_by: voter.principal.clone(),
    })
}

/// A new grant id.
pub fn new_id() -> String {
    format!("{GRANT_ID_PREFIX}{}", uuid::Uuid::now_v7().simple())
}

/// Saves a grant [`issue`] made; an id already stored fails.
pub async fn save(store: &dyn ConversationStore, grant: &StoredDecision) -> Result<(), StoreError> {
    store.save_decision(grant).await
}

/// A stored grant that covers one call, as the gate found it (tool, scope,
/// input, expiry checked): what [`may_lift`] and [`super::direct::lift`] need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantOffer {
    /// The grant's id.
    pub id: String,
    /// Who granted it (`None`: a server without principals).
    pub granted_by: Option<String>,
    /// The granter's groups when they granted it (without `group:`).
    pub granter_groups: Vec<String>,
    /// False when it has a use limit.
    pub unlimited: bool,
    /// How it reads in a reason, e.g. ``grant `grant_…` by bob``.
    pub description: String,
}

/// Whether `offer` may turn `verdict` for a call by `requester` into a yes
/// (see the module docs): only an ask; an ask routed to approvers only when
/// its granter is one of them and one approval suffices; an unrouted ask
/// only when its granter is the requester.
pub fn may_lift(offer: &GrantOffer, verdict: &Verdict, requester: Option<&str>) -> bool {
    if verdict.action != GateAction::Ask {
        return false;
    }
    let granter = offer.granted_by.as_deref();
    let Some(route) = &verdict.route else { return granter == requester };
    let Some(granter) = granter else { return false };
    if route.quorum > 1 || (!route.self_approval && Some(granter) == requester) {
        return false;
    }
    route.approvers.iter().any(|approver| match approver.strip_prefix(GROUP_PREFIX) {
        Some(group) => offer.granter_groups.iter().any(|own| own == group),
        None => approver == granter,
    })
}
