//! Routed approvals through the public API: a gate routes `delete_file` to
//! approvers with a quorum; the engine records the routing; votes decide
//! through `lifecycle::cast`, never through an answer in the history; an
//! approval decided out of band runs once when its step continues.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::approval::ApprovalSigner;
use toolgate::approval::lifecycle::{self, Route, VoteError, VoteOptions, VoteRefusal, Voter, WITHDRAWN_REASON};
use toolgate::ledger::{
    ApprovalQuery, ApprovalState, ApprovalStore, AuditKind, AuditQuery, AuditStore, Clock, ContinuationStore,
    InboxStore, LedgerConfig, ManualClock, MemoryStore, StateFilter, conversation_key,
};
use toolgate::protocol::ModelMessage;
use toolgate::tool::{CallGate, GateCall, Verdict};
use toolgate::{Decision, EngineError, TextRequest, generate_text};

const T0: i64 = 1_700_000_000_000;

/// Routes every `delete_file` to `group:finance`, `quorum` of them.
struct Routed {
    quorum: u32,
}

impl CallGate for Routed {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        let route =
            Route { approvers: vec!["group:finance".into(), "dave".into()], quorum: self.quorum, ..Route::default() };
        let verdict =
            (call.tool_name == "delete_file").then(|| Verdict::ask().because("finance decides").routed(route));
        async move { verdict }.boxed()
    }
}

struct Fixture {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    config: LedgerConfig,
    log: Executions,
    key: String,
    /// The conversation's id (alice owns it; `key` is its ledger key).
    name: &'static str,
}

impl Fixture {
    fn new() -> Self {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(T0));
        let groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned(), "carol".to_owned()])]);
        let config = LedgerConfig::new(store.clone()).clock(clock.clone()).groups(groups);
        Self {
            store,
            clock,
            config,
            log: Executions::default(),
            key: conversation_key(Some("alice"), "c1"),
            name: "c1",
        }
    }

    fn request(&self, history: Vec<ModelMessage>, quorum: u32) -> TextRequest {
        TextRequest::new(history)
            .toolkit(toolkit(&self.log))
            .approval_signer(ApprovalSigner::new("votes-secret").unwrap())
            .gate(Arc::new(Routed { quorum }))
            .ledger(self.config.owned(Some("alice"), self.name).principal("alice"))
    }

    async fn asked(&self, quorum: u32) -> (Vec<ModelMessage>, String) {
        let history = messages(json!([{"role": "user", "content": "delete a.txt"}]));
        let result = generate_text(&model(), self.request(history.clone(), quorum)).await.unwrap();
        let approval_id = result.approval_requests()[0].approval_id.clone();
        let mut history = history;
        history.extend(result.response_messages);
        (history, approval_id)
    }

    async fn cast(&self, id: &str, voter: &Voter, decision: Decision) -> Result<ApprovalState, VoteError> {
        let options = VoteOptions { continuation: true, note: None };
        let record = lifecycle::cast(self.store.as_ref(), self.clock.as_ref(), id, voter, decision, options).await?;
        Ok(record.state)
    }
}

fn model() -> toolgate::ScriptedModel {
    script(json!([
        [{"type": "tool-call", "toolCallId": "d", "toolName": "delete_file", "input": {"path": "a.txt"}}],
        [{"type": "text", "text": "done"}]
    ]))
}

fn voter(principal: &str) -> Voter {
    Voter::new(Some(principal.to_owned()))
}

fn approve_in_history(history: &[ModelMessage], approval_id: &str) -> Vec<ModelMessage> {
    let mut history = history.to_vec();
    history.extend(messages(json!([{"role": "tool", "content": [
        {"type": "tool-approval-response", "approvalId": approval_id, "approved": true}]}])));
    history
}

fn refusal(result: Result<ApprovalState, VoteError>) -> String {
    match result {
        Err(VoteError::Refused(refusal)) => refusal.code().to_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn the_engine_records_the_routing_with_the_groups_members_at_issue() {
    let fixture = Fixture::new();
    let (_, id) = fixture.asked(2).await;
    let record = fixture.store.approvals(std::slice::from_ref(&id)).await.unwrap().remove(0);
    let routing = record.routing.expect("routed");
    assert_eq!(routing.approvers, ["group:finance", "dave"]);
    assert_eq!(routing.members, ["bob", "carol", "dave"]);
    assert_eq!((routing.quorum, routing.self_approval), (2, false));
    assert_eq!(record.reason.as_deref(), Some("finance decides"));
}

#[tokio::test]
async fn an_answer_in_the_history_never_decides_a_routed_approval() {
    let fixture = Fixture::new();
    let (history, id) = fixture.asked(1).await;
    let error = generate_text(&model(), fixture.request(approve_in_history(&history, &id), 1)).await.unwrap_err();
    assert!(matches!(error, EngineError::Vote(VoteRefusal::NotAnApprover { .. })), "{error}");
    assert_eq!(error.code(), "not_an_approver");
    assert!(fixture.log.all().is_empty());
    // A new message leaving it unanswered is refused too: alice cannot cancel finance's decision.
    let mut moved_on = history.clone();
    moved_on.extend(messages(json!([{"role": "user", "content": "never mind"}])));
    let error = generate_text(&model(), fixture.request(moved_on, 1)).await.unwrap_err();
    assert_eq!(error.code(), "approvals_pending", "{error}");
    assert_eq!(fixture.store.approvals(&[id]).await.unwrap()[0].state, ApprovalState::Pending);
}

#[tokio::test]
async fn votes_count_once_per_approver_and_the_quorum_decides_then_the_step_runs_once() {
    let fixture = Fixture::new();
    let (history, id) = fixture.asked(2).await;
    assert_eq!(refusal(fixture.cast(&id, &voter("alice"), Decision::APPROVE).await), "not_an_approver");
    assert_eq!(refusal(fixture.cast(&id, &voter("mallory"), Decision::APPROVE).await), "unknown_approval");
    let edit = Decision::Approve { edited_input: Some(json!({"path": "b.txt"})) };
    assert_eq!(refusal(fixture.cast(&id, &voter("bob"), edit).await), "edit_needs_single_approver");
    assert_eq!(fixture.cast(&id, &voter("bob"), Decision::APPROVE).await.unwrap(), ApprovalState::Pending);
    assert_eq!(refusal(fixture.cast(&id, &voter("bob"), Decision::APPROVE).await), "already_voted");
    // A group a sign-in names (not the config's) counts too.
    let signed_in = Voter {
        principal: Some("frank".into()),
        groups: vec!["finance".into()],
        admin: false,
        bearer_link: false,
        anonymous: false,
    };
    assert_eq!(fixture.cast(&id, &signed_in, Decision::APPROVE).await.unwrap(), ApprovalState::Approved);
    assert_eq!(refusal(fixture.cast(&id, &voter("dave"), Decision::APPROVE).await), "approval_already_decided");

    // Marked due in the decision's transaction.
    let due = fixture.store.due_continuations(fixture.clock.now(), 10).await.unwrap();
    assert_eq!(due, std::slice::from_ref(&fixture.key));
    // The step continues (the server writes the decisions on record as the answers): it runs once.
    let continued = approve_in_history(&history, &id);
    let result = generate_text(&model(), fixture.request(continued.clone(), 2)).await.unwrap();
    assert_eq!(result.preresolved[0].output, toolgate::ToolResultOutput::json(json!({"deleted": "a.txt"})));
    let again = generate_text(&model(), fixture.request(continued, 2)).await.unwrap();
    assert_eq!(again.preresolved[0].output, result.preresolved[0].output, "a replay gets the stored result");
    assert_eq!(fixture.log.call_ids(), ["d"]);
    let kinds: Vec<AuditKind> =
        fixture.store.audit(&AuditQuery::default()).await.unwrap().into_iter().map(|event| event.kind).collect();
    assert_eq!(kinds.iter().filter(|kind| **kind == AuditKind::Voted).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_votes_are_all_counted_and_exactly_one_decides() {
    for _ in 0..20 {
        let fixture = Arc::new(Fixture::new());
        let (_, id) = fixture.asked(3).await;
        let tasks: Vec<_> = ["bob", "carol", "dave"]
            .into_iter()
            .map(|who| {
                let (fixture, id) = (fixture.clone(), id.clone());
                tokio::spawn(async move { fixture.cast(&id, &voter(who), Decision::APPROVE).await.unwrap() })
            })
            .collect();
        let mut states = Vec::new();
        for task in tasks {
            states.push(task.await.unwrap());
        }
        assert_eq!(states.iter().filter(|state| **state == ApprovalState::Approved).count(), 1, "{states:?}");
        let record = fixture.store.approvals(&[id]).await.unwrap().remove(0);
        assert_eq!((record.state, record.votes.len()), (ApprovalState::Approved, 3));
    }
}

#[tokio::test]
async fn a_denial_decides_a_withdrawal_stands_and_expiry_ends_voting() {
    let fixture = Fixture::new();
    let (_, id) = fixture.asked(2).await;
    let deny = Decision::Deny { reason: Some("not today".into()) };
    assert_eq!(fixture.cast(&id, &voter("carol"), deny).await.unwrap(), ApprovalState::Denied);
    let record = fixture.store.approvals(std::slice::from_ref(&id)).await.unwrap().remove(0);
    assert_eq!(record.decision.unwrap().reason.as_deref(), Some("not today"));

    let fixture = Fixture::new();
    let (_, id) = fixture.asked(2).await;
    let withdraw = |who: &'static str| {
        let (store, clock, id) = (fixture.store.clone(), fixture.clock.clone(), id.clone());
        async move { lifecycle::withdraw(store.as_ref(), clock.as_ref(), &id, &voter(who)).await }
    };
    assert!(matches!(withdraw("bob").await, Err(VoteError::Refused(VoteRefusal::NotTheRequester(_)))));
    let withdrawn = withdraw("alice").await.unwrap();
    assert_eq!(withdrawn.state, ApprovalState::Withdrawn);
    assert_eq!(withdrawn.decision.unwrap().reason.as_deref(), Some(WITHDRAWN_REASON));
    assert_eq!(refusal(fixture.cast(&id, &voter("bob"), Decision::APPROVE).await), "approval_already_decided");

    let fixture = Fixture::new();
    let (_, id) = fixture.asked(2).await;
    fixture.clock.advance(std::time::Duration::from_secs(25 * 3600));
    assert_eq!(refusal(fixture.cast(&id, &voter("bob"), Decision::APPROVE).await), "approval_expired");
}

#[tokio::test]
async fn the_inbox_lists_what_a_viewer_may_see_newest_first() {
    let fixture = Fixture::new();
    let (_, first) = fixture.asked(2).await;
    fixture.clock.advance(std::time::Duration::from_secs(1));
    let (_, second) = {
        let other = Fixture { key: conversation_key(Some("alice"), "c2"), name: "c2", ..Fixture::new() };
        let other = Fixture {
            store: fixture.store.clone(),
            clock: fixture.clock.clone(),
            config: fixture.config.clone(),
            ..other
        };
        other.asked(2).await
    };
    let list = |keys: Option<Vec<String>>, states: StateFilter| {
        let store = fixture.store.clone();
        async move {
            let query =
                ApprovalQuery { viewer_keys: keys, states, conversation_id: None, conversation_name: None, limit: 10 };
            store.list_approvals(&query).await.unwrap().into_iter().map(|r| r.approval_id).collect::<Vec<_>>()
        }
    };
    assert_eq!(list(Some(voter("bob").keys()), StateFilter::Pending).await, [second.clone(), first.clone()]);
    assert_eq!(list(Some(voter("alice").keys()), StateFilter::All).await.len(), 2, "the requester sees hers");
    assert!(list(Some(voter("mallory").keys()), StateFilter::All).await.is_empty());
    let member = Voter {
        principal: Some("zed".into()),
        groups: vec!["finance".into()],
        admin: false,
        bearer_link: false,
        anonymous: false,
    };
    assert_eq!(list(Some(member.keys()), StateFilter::Pending).await.len(), 2, "found by its group");
    fixture.cast(&first, &voter("bob"), Decision::Deny { reason: None }).await.unwrap();
    assert_eq!(list(None, StateFilter::Decided).await, [first]);
}
