//! Sticky decisions kept in a ledger store ([`toolgate::ledger::ConversationStore`]):
//! [`StoredGate`] reads the ones that apply to a request, [`decode_stored`]
//! and [`to_stored`] convert between a [`StickyDecision`] and its stored row,
//! and [`visible_to`] says which decisions a principal may list or revoke.
//!
//! A row keeps the decision's scope, tool and times in columns (what the
//! store filters on) and the whole decision as JSON in `body`. A body that
//! does not decode, or disagrees with its columns, is corrupt.
//!
//! [`StoredGate`] fails closed: when the store cannot be read, every call is
//! asked about (a file `deny` still denies), and a corrupt row asks about
//! the calls it could have decided (same tool, scope covering the call), so a
//! person's "never allow" is never lost silently.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use tokio::sync::OnceCell;

use toolgate::approval::lifecycle::grant::GrantOffer;
use toolgate::ledger::{
    ConversationStore, DecisionQuery, HistoryGuard, HistoryQuery, HistoryScope, HistoryStore, Millis, StoreError,
    StoreFuture, StoredDecision,
};
use toolgate::tool::{CallGate, GateAction, GateCall, Shadowed, Verdict};

use crate::compile::Policy;
use crate::evaluate::{self, Facts};
use crate::explain::Explanation;
use crate::history::HistoryTerm;
use crate::sticky::{StickyDecision, scope_covers};

/// Decodes one stored row; a body that does not decode or disagrees with the
/// row's columns is [`StoreError::Corrupt`].
pub fn decode(stored: &StoredDecision) -> Result<StickyDecision, StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt(format!("sticky decision `{}`: {detail}", stored.id));
    let decision: StickyDecision = serde_json::from_value(stored.body.clone()).map_err(|e| corrupt(e.to_string()))?;
    if decision.id != stored.id {
        return Err(corrupt(format!("the body's id is `{}`", decision.id)));
    }
    if decision.tool != stored.tool_name {
        return Err(corrupt(format!("the body's tool is `{}`, the row's `{}`", decision.tool, stored.tool_name)));
    }
    if decision.scope != stored.scope {
        return Err(corrupt("the body's scope differs from the row's".into()));
    }
    if decision.expires_at != stored.expires_at {
        return Err(corrupt("the body's expiry differs from the row's".into()));
    }
    if stored.created_by.is_some() && decision.created_by != stored.created_by {
        return Err(corrupt("the body's author differs from the row's".into()));
    }
    let mut decision = decision;
    decision.uses_left = stored.uses_left;
    Ok(decision)
}

/// Decodes stored rows, in order; the first corrupt row fails them all.
pub fn decode_stored(stored: Vec<StoredDecision>) -> Result<Vec<StickyDecision>, StoreError> {
    stored.iter().map(decode).collect()
}

/// The row that stores `decision`.
pub fn to_stored(decision: &StickyDecision) -> StoredDecision {
    StoredDecision {
        id: decision.id.clone(),
        scope: decision.scope.clone(),
        tool_name: decision.tool.clone(),
        created_at: decision.created_at,
        expires_at: decision.expires_at,
        body: serde_json::to_value(decision).expect("a sticky decision serializes"),
        uses_left: decision.uses_left.or(decision.uses.map(i64::from)),
        created_by: decision.created_by.clone(),
    }
}

/// Whether `principal` may see (list, revoke) `decision`: its own and
/// unowned decisions. Without a principal (no principal source: everyone is
/// the same person) every decision is visible.
pub fn visible_to(decision: &StickyDecision, principal: Option<&str>) -> bool {
    match (principal, decision.created_by.as_deref()) {
        (None, _) | (_, None) => true,
        (Some(principal), Some(author)) => principal == author,
    }
}

/// Where [`StoredGate`] reads sticky decisions: every
/// [`ConversationStore`] is one (the gate needs nothing else from it).
pub trait DecisionSource: Send + Sync {
    /// The live decisions that apply to the query's conversation or principal, and the global ones.
    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>>;
}

impl<S: ConversationStore + ?Sized> DecisionSource for S {
    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        ConversationStore::decisions(self, query)
    }
}

/// Holds any shared source, sized or not, as one trait object.
struct Shared<S: ?Sized>(Arc<S>);

impl<S: DecisionSource + ?Sized> DecisionSource for Shared<S> {
    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        self.0.decisions(query)
    }
}

/// Holds any shared history store, sized or not, as one trait object.
struct SharedHistory<S: ?Sized>(Arc<S>);

impl<S: HistoryStore + ?Sized> HistoryStore for SharedHistory<S> {
    fn history<'a>(&'a self, query: &'a HistoryQuery) -> StoreFuture<'a, toolgate::ledger::HistoryRead> {
        self.0.history(query)
    }

    fn append_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        events: &'a [toolgate::ledger::AuditEvent],
    ) -> StoreFuture<'a, bool> {
        self.0.append_if(guards, events)
    }

    fn issue_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        records: &'a [toolgate::ledger::ApprovalRecord],
        events: &'a [toolgate::ledger::AuditEvent],
    ) -> StoreFuture<'a, bool> {
        self.0.issue_if(guards, records, events)
    }

    fn apply_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        transitions: &'a [toolgate::ledger::Transition],
    ) -> StoreFuture<'a, Option<Vec<toolgate::ledger::TransitionOutcome>>> {
        self.0.apply_if(guards, transitions)
    }
}

/// The decisions that apply to one request, as read from the store.
#[derive(Debug)]
struct Loaded {
    decisions: Vec<StickyDecision>,
    /// Rows that did not decode, with why.
    corrupt: Vec<(StoredDecision, String)>,
}

/// A [`CallGate`] over a policy snapshot and the sticky decisions a store
/// keeps for one request's conversation and principal. Build one per
/// request; it reads the store once (at the first call) and evaluates like a
/// [`PolicyGate`](crate::PolicyGate). Fails closed (module docs).
pub struct StoredGate {
    policy: Arc<Policy>,
    store: Box<dyn DecisionSource>,
    conversation_id: Option<String>,
    principal: Option<String>,
    now: Millis,
    loaded: OnceCell<Result<Loaded, StoreError>>,
    history: Option<HistorySource>,
    /// Where history terms read the time at each decision ([`Self::with_clock`]); `None`: `now`.
    clock: Option<Arc<dyn toolgate::ledger::Clock>>,
    /// The history each call's last verdict rested on, by tool call id (see [`CallGate::guards`]).
    judged: std::sync::Mutex<std::collections::HashMap<String, Vec<HistoryGuard>>>,
    /// The shadow rules each call's last verdict found matching, by tool call id.
    shadows: std::sync::Mutex<std::collections::HashMap<String, Vec<Shadowed>>>,
    /// The grants that covered each call at its last verdict, by tool call id.
    offers: std::sync::Mutex<std::collections::HashMap<String, Vec<GrantOffer>>>,
    /// Per call, the reason of its last verdict when that allowed it (see `allowed_by`).
    allowed: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// Where a [`StoredGate`] reads the calls history terms count, and the configured groups.
#[derive(Clone)]
struct HistorySource {
    store: Arc<dyn HistoryStore>,
    groups: Arc<BTreeMap<String, Vec<String>>>,
}

impl std::fmt::Debug for StoredGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredGate")
            .field("rules", &self.policy.rules().len())
            .field("conversation_id", &self.conversation_id)
            .field("principal", &self.principal)
            .field("now", &self.now)
            .field("history", &self.history.is_some())
            .finish_non_exhaustive()
    }
}

impl StoredGate {
    /// A gate over `policy` and the decisions `store` keeps for this
    /// conversation and principal (and the global ones), judged at `now`.
    /// A call that names no conversation or principal is taken to be this one's.
    pub fn new<S: DecisionSource + ?Sized + 'static>(
        policy: Arc<Policy>,
        store: Arc<S>,
        conversation_id: Option<String>,
        principal: Option<String>,
        now: Millis,
    ) -> Self {
        let store = Box::new(Shared(store));
        let (loaded, judged, shadows) = (OnceCell::new(), Default::default(), Default::default());
        let (offers, allowed) = (Default::default(), Default::default());
        let (history, clock) = (None, None);
        Self {
            policy,
            store,
            conversation_id,
            principal,
            now,
            loaded,
            history,
            clock,
            judged,
            shadows,
            offers,
            allowed,
        }
    }

    /// This gate with the ledger's history: its rules' history terms count
    /// the calls `store` recorded, a `group:NAME` scope the members `groups`
    /// lists. Without it, every history term is unknown (fails closed).
    pub fn with_history<S: HistoryStore + ?Sized + 'static>(
        mut self,
        store: Arc<S>,
        groups: Arc<BTreeMap<String, Vec<String>>>,
    ) -> Self {
        self.history = Some(HistorySource { store: Arc::new(SharedHistory(store)), groups });
        self
    }

    /// This gate judging its history terms at `clock`'s time at each decision
    /// instead of at the `now` it was made with: a call decided again on the
    /// same gate, as the lifecycle decides one whose history moved before it
    /// was recorded, counts the calls recorded meanwhile (without it they are
    /// later than `now`, outside every window).
    pub fn with_clock(mut self, clock: Arc<dyn toolgate::ledger::Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// This gate with its own decisions already read: what the store returned
    /// for [`Self::query`] (as [`ConversationStore::conversation_with_decisions`]
    /// reads them with the conversation), so the gate reads nothing more for
    /// its conversation and principal. An error fails closed as a failed read would.
    pub fn with_decisions(mut self, decisions: Result<Vec<StoredDecision>, StoreError>) -> Self {
        self.loaded = OnceCell::new_with(Some(decisions.map(loaded)));
        self
    }

    /// The query that reads the decisions of this gate's conversation and principal at its `now`.
    pub fn query(&self) -> DecisionQuery {
        DecisionQuery {
            conversation_id: self.conversation_id.clone(),
            principal: self.principal.clone(),
            now: self.now,
        }
    }

    /// The verdict for one call (what [`CallGate::check`] returns).
    pub async fn decide(&self, call: &GateCall<'_>) -> Option<Verdict> {
        let verdict = self.decide_now(call).await;
        let mut allowed = lock(&self.allowed);
        match verdict.as_ref().filter(|verdict| verdict.action == GateAction::Allow).and_then(|v| v.reason.clone()) {
            Some(reason) => allowed.insert(call.tool_call_id.to_owned(), reason),
            None => allowed.remove(call.tool_call_id),
        };
        verdict
    }

    async fn decide_now(&self, call: &GateCall<'_>) -> Option<Verdict> {
        let call = self.complete(call);
        let loaded = match self.load(&call).await {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::warn!(tool = call.tool_name, %error, "sticky decisions unreadable; approval required");
                let facts = self.facts(&call).await;
                return fail_closed(evaluate::decide(&self.policy, &[], &call, self.now, &facts), &error.to_string());
            }
        };
        let facts = self.facts(&call).await;
        let shadows = evaluate::shadowed(&self.policy, &call, &facts);
        if !shadows.is_empty() {
            lock(&self.shadows).insert(call.tool_call_id.to_owned(), shadows);
        }
        let verdict = evaluate::decide(&self.policy, &loaded.decisions, &call, self.now, &facts);
        let offers = crate::grants::covering(&loaded.decisions, &call, self.now);
        match offers.is_empty() {
            true => lock(&self.offers).remove(call.tool_call_id),
            false => lock(&self.offers).insert(call.tool_call_id.to_owned(), offers),
        };
        match loaded.corrupt.iter().find(|(row, _)| could_decide(row, &call, self.now)) {
            Some((_, error)) => {
                tracing::warn!(tool = call.tool_name, %error, "corrupt sticky decision; approval required");
                fail_closed(verdict, error)
            }
            None => verdict,
        }
    }

    /// Every rule and sticky decision that matches the call; fails when the store cannot be read.
    pub async fn explain(&self, call: &GateCall<'_>) -> Result<Explanation, StoreError> {
        let call = self.complete(call);
        let loaded = self.load(&call).await?;
        let facts = self.facts(&call).await;
        Ok(evaluate::explain(&self.policy, &loaded.decisions, &call, self.now, &facts))
    }

    /// What each history term whose rule's matchers match the call finds,
    /// from one read of the store (the widest window and scope they need).
    async fn facts(&self, call: &GateCall<'_>) -> Facts {
        let rules = self.policy.rules();
        let wanted: Vec<(usize, &HistoryTerm)> = rules
            .iter()
            .enumerate()
            .filter_map(|(index, rule)| rule.history().filter(|_| rule.matches(call)).map(|term| (index, term)))
            .collect();
        if wanted.is_empty() {
            return Facts::default();
        }
        let Some(source) = &self.history else {
            return Facts::unknown(&self.policy, call, "no store keeps the calls that ran");
        };
        let members = |group: &str| source.groups.get(group).cloned().unwrap_or_default();
        let now = self.clock.as_ref().map_or(self.now, |clock| clock.now());
        let queries: Vec<HistoryQuery> = wanted.iter().map(|(_, term)| term.query(call, now, members)).collect();
        let read = HistoryQuery {
            since: queries.iter().map(|query| query.since).min().unwrap_or(now),
            scope: common_scope(&queries),
            include_pending: queries.iter().any(|query| query.include_pending),
        };
        let entries = match source.store.history(&read).await {
            Ok(found) => {
                // The one read every term judged from: a call recorded in it later moves them all.
                lock(&self.judged).insert(call.tool_call_id.to_owned(), vec![found.guard(read)]);
                found.entries
            }
            Err(error) => {
                tracing::warn!(tool = call.tool_name, %error, "history unreadable; approval required");
                return Facts::unknown(&self.policy, call, &format!("the history could not be read: {error}"));
            }
        };
        let mut facts = vec![None; rules.len()];
        for ((index, term), query) in wanted.into_iter().zip(&queries) {
            facts[index] = Some(term.evaluate(rules[index].tool_matcher(), call, query, &entries));
        }
        Facts::new(facts)
    }

    /// The call with this gate's conversation and principal where it names none.
    fn complete<'a>(&'a self, call: &GateCall<'a>) -> GateCall<'a> {
        GateCall {
            conversation_id: call.conversation_id.or(self.conversation_id.as_deref()),
            principal: call.principal.or(self.principal.as_deref()),
            ..*call
        }
    }

    /// The decisions for the call's conversation and principal: read once when
    /// they are this gate's, else read for the call.
    async fn load(&self, call: &GateCall<'_>) -> Result<LoadedRef<'_>, StoreError> {
        if call.conversation_id == self.conversation_id.as_deref() && call.principal == self.principal.as_deref() {
            let loaded = self.loaded.get_or_init(|| read(self.store.as_ref(), self.query_for(call))).await;
            return loaded.as_ref().map(LoadedRef::Shared).map_err(Clone::clone);
        }
        read(self.store.as_ref(), self.query_for(call)).await.map(LoadedRef::Owned)
    }

    fn query_for(&self, call: &GateCall<'_>) -> DecisionQuery {
        DecisionQuery {
            conversation_id: call.conversation_id.map(str::to_owned),
            principal: call.principal.map(str::to_owned),
            now: self.now,
        }
    }
}

enum LoadedRef<'a> {
    Shared(&'a Loaded),
    Owned(Loaded),
}

impl std::ops::Deref for LoadedRef<'_> {
    type Target = Loaded;

    fn deref(&self) -> &Loaded {
        match self {
            Self::Shared(loaded) => loaded,
            Self::Owned(loaded) => loaded,
        }
    }
}

async fn read(store: &dyn DecisionSource, query: DecisionQuery) -> Result<Loaded, StoreError> {
    Ok(loaded(store.decisions(&query).await?))
}

/// The rows decoded, the corrupt ones set apart.
fn loaded(rows: Vec<StoredDecision>) -> Loaded {
    let mut loaded = Loaded { decisions: Vec::with_capacity(rows.len()), corrupt: Vec::new() };
    for row in rows {
        match decode(&row) {
            Ok(decision) => loaded.decisions.push(decision),
            Err(error) => loaded.corrupt.push((row, error.to_string())),
        }
    }
    loaded
}

/// Whether a corrupt row could have decided the call (its columns match it).
fn could_decide(row: &StoredDecision, call: &GateCall<'_>, now: Millis) -> bool {
    row.is_live(now)
        && row.tool_name == call.tool_name
        && scope_covers(&row.scope, call.conversation_id, call.principal)
}

/// A lock that a panic elsewhere did not poison for good.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The one scope that covers every query: theirs when they agree, else everyone.
fn common_scope(queries: &[HistoryQuery]) -> HistoryScope {
    match queries.split_first() {
        Some((first, rest)) if rest.iter().all(|query| query.scope == first.scope) => first.scope.clone(),
        _ => HistoryScope::Everyone,
    }
}

/// A file or sticky deny stands; anything else becomes a question.
fn fail_closed(verdict: Option<Verdict>, error: &str) -> Option<Verdict> {
    match verdict {
        Some(verdict) if verdict.action == GateAction::Deny => Some(verdict),
        // Asking keeps the file rules' approvers, if an `ask` rule named them.
        other => Some(Verdict {
            route: other.and_then(|verdict| verdict.route),
            ..Verdict::ask().because(format!("sticky decisions could not be read ({error}); approval required"))
        }),
    }
}

impl CallGate for StoredGate {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        async move { self.decide(&call).await }.boxed()
    }

    fn guards(&self, tool_call_id: &str) -> Vec<HistoryGuard> {
        lock(&self.judged).remove(tool_call_id).unwrap_or_default()
    }

    fn shadowed(&self, tool_call_id: &str) -> Vec<Shadowed> {
        lock(&self.shadows).remove(tool_call_id).unwrap_or_default()
    }

    fn grants(&self, tool_call_id: &str) -> Vec<GrantOffer> {
        lock(&self.offers).remove(tool_call_id).unwrap_or_default()
    }

    fn allowed_by(&self, tool_call_id: &str) -> Option<String> {
        lock(&self.allowed).get(tool_call_id).cloned()
    }

    fn config_digest(&self) -> Option<String> {
        self.policy.digest().map(str::to_owned)
    }
}
