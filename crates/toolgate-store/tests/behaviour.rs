//! One behavioural suite for every `ApprovalStore`: run against the in-memory
//! reference store, SQLite, and Postgres when `TOOLGATE_TEST_POSTGRES_URL`
//! is set (`scripts/with-postgres.sh cargo test -p toolgate-store`).

#[macro_use]
mod support;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Barrier;

use serde_json::json;
use support::{
    Stores, check, decision, decision_ids, decision_query, event, in_conversation, lease, moved, of_principal, record,
    record_of, sticky, transition, unsequenced,
};
use toolgate::ledger::ApprovalState::{Approved, Denied, Executed, Executing, Expired, Failed, Interrupted, Pending};
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, ApprovalStore, AuditEvent, AuditKind, AuditQuery, AuditStore, AuditView,
    DecisionScope, Guard, LedgerStore, LineageStep, Pruned, StoreError, Transition, TransitionOutcome,
};
use toolgate_protocol::ToolResultOutput;

async fn all_events(store: &dyn LedgerStore) -> Vec<toolgate::ledger::AuditEvent> {
    store.audit(&AuditQuery::default()).await.unwrap()
}

async fn issue_and_read_back(stores: &Stores) {
    let store = &*stores.a;
    let input_text = r#"{"zeta":1,"alpha":{"b":[1,2.5,"x",true],"a":null},"mid":"ü ✓ \"q\""}"#;
    let mut plain = record("ap_1", "conv");
    plain.input = serde_json::from_str(input_text).unwrap();
    let mut full = record("ap_2", "conv");
    full.owner = Some("ünï ✓".to_owned());
    full.client = Some("claude-code".to_owned());
    full.state = Executing;
    full.decision = Some(decision(true, "bob", 20));
    full.output = Some(ToolResultOutput::Json { value: json!({"z": 1, "a": [2]}), provider_options: None });
    full.lease = Some(lease("exe_1", 500));
    // A sub-agent's call: the agent calls from the root down, kept in order.
    let step = |agent: &str, call: &str| LineageStep { agent: agent.to_owned(), tool_call_id: call.to_owned() };
    full.lineage = vec![step("researcher", "call-1"), step("accountant ✓", "call-2")];
    let issued = [
        event(AuditKind::Issued, "ap_1", "conv", 10, json!({"z": "last", "a": "first"})),
        event(AuditKind::Issued, "ap_2", "conv", 10, json!(null)),
    ];
    store.issue(&[plain.clone(), full.clone()], &issued).await.unwrap();

    let ids = ["ap_2".to_owned(), "unknown".to_owned(), "ap_1".to_owned()];
    let mut found = store.approvals(&ids).await.unwrap();
    found.sort_by(|a, b| a.approval_id.cmp(&b.approval_id));
    assert_eq!(found, vec![plain.clone(), full.clone()], "unknown ids left out");
    assert_eq!(serde_json::to_string(&found[0].input).unwrap(), input_text, "key order and text kept");
    assert_eq!(store.approvals(&[]).await.unwrap(), vec![]);
    // The other handle (another connection or process) reads the same.
    assert_eq!(stores.b.approvals(&ids[2..]).await.unwrap(), vec![plain]);

    let events = all_events(store).await;
    assert_eq!(unsequenced(&events), issued.to_vec());
    assert!(events[0].seq > 0 && events[1].seq > events[0].seq, "{events:?}");
    assert_eq!(serde_json::to_string(&events[0].data).unwrap(), r#"{"z":"last","a":"first"}"#);
}

async fn duplicate_issue_is_rejected_and_nothing_is_inserted(stores: &Stores) {
    let store = &*stores.a;
    let first = record("dup", "conv");
    store.issue(std::slice::from_ref(&first), &[event(AuditKind::Issued, "dup", "conv", 10, json!({}))]).await.unwrap();
    let mut again = record("dup", "conv");
    again.tool_name = "other".to_owned();
    let batch = [record("fresh", "conv"), again];
    let events = [event(AuditKind::Issued, "fresh", "conv", 11, json!({}))];
    let error = stores.b.issue(&batch, &events).await.unwrap_err();
    assert_eq!(error, StoreError::DuplicateApproval("dup".to_owned()));
    assert_eq!(store.approvals(&["fresh".to_owned()]).await.unwrap(), vec![], "rolled back");
    assert_eq!(store.approvals(&["dup".to_owned()]).await.unwrap(), vec![first.clone()]);
    assert_eq!(all_events(store).await.len(), 1, "no event of the failed issue");
    // One approval alone (a single statement on Postgres) fails the same way.
    let alone = [event(AuditKind::Issued, "dup", "conv", 12, json!({"again": true}))];
    let error = stores.b.issue(std::slice::from_ref(&batch[1]), &alone).await.unwrap_err();
    assert_eq!(error, StoreError::DuplicateApproval("dup".to_owned()));
    assert_eq!(store.approvals(&["dup".to_owned()]).await.unwrap(), vec![first]);
    assert_eq!(all_events(store).await.len(), 1, "no event of the failed issue");
}

async fn guards_hold_and_fail(stores: &Stores) {
    let store = &*stores.a;
    let mut records: Vec<ApprovalRecord> =
        ["ne_yes", "ne_no", "ex_yes", "ex_no", "wrong_state"].iter().map(|id| record(id, "conv")).collect();
    for (id, until) in [("lease_no", Some(500)), ("lease_yes", Some(500)), ("lease_none", None)] {
        let mut running = record(id, "conv");
        running.state = Executing;
        running.lease = until.map(|until| lease("exe_1", until));
        records.push(running);
    }
    store.issue(&records, &[]).await.unwrap();

    let cases = [
        ("ne_yes", Pending, Guard::NotExpiredAt(999), true),
        ("ne_no", Pending, Guard::NotExpiredAt(1000), false),
        ("ex_yes", Pending, Guard::ExpiredAt(1000), true),
        ("ex_no", Pending, Guard::ExpiredAt(999), false),
        ("wrong_state", Approved, Guard::None, false),
        ("lease_no", Executing, Guard::LeaseLapsedAt(499), false),
        ("lease_yes", Executing, Guard::LeaseLapsedAt(500), true),
        ("lease_none", Executing, Guard::LeaseLapsedAt(0), true),
    ];
    for (id, from, guard, moves) in cases {
        let to = if from == Executing { Interrupted } else { Expired };
        let mut change = transition(id, from, to, guard, 2000);
        change.events = vec![event(AuditKind::Expired, id, "conv", 2000, json!({"id": id}))];
        let outcome = check(store, change).await;
        assert_eq!(moved(&outcome), moves, "{id}");
        let issued_in = if id == "wrong_state" { Pending } else { from };
        assert_eq!(record_of(&outcome).state, if moves { to } else { issued_in }, "{id}");
    }
    let logged: Vec<String> = all_events(store).await.iter().map(|event| event.approval_id.clone()).collect();
    assert_eq!(logged, ["ne_yes", "ex_yes", "lease_yes", "lease_none"], "only moves log their events");
}

async fn updates_keep_overwrite_and_clear(stores: &Stores) {
    let store = &*stores.a;
    store.issue(&[record("up", "conv")], &[]).await.unwrap();
    let first = decision(true, "alice", 20);
    let ok = ToolResultOutput::Text { value: "sent".to_owned(), provider_options: None };

    let mut approve = transition("up", Pending, Approved, Guard::NotExpiredAt(20), 20);
    approve.update.decision = Some(first.clone());
    let now = record_of(&check(store, approve).await).clone();
    assert_eq!((now.decision.as_ref(), now.output.as_ref(), now.lease.as_ref()), (Some(&first), None, None));

    // Entering executing without a lease keeps none; with one sets it.
    let now = record_of(&check(store, transition("up", Approved, Executing, Guard::None, 30)).await).clone();
    assert_eq!(now.lease, None);
    let mut claim = transition("up", Executing, Executing, Guard::LeaseLapsedAt(30), 31);
    claim.update.lease = Some(lease("exe_1", 100));
    let now = record_of(&check(store, claim).await).clone();
    assert_eq!(now.lease, Some(lease("exe_1", 100)));
    assert_eq!(now.decision, Some(first.clone()), "a None decision keeps the stored one");

    // Staying in executing without a lease keeps it.
    let now = record_of(&check(store, transition("up", Executing, Executing, Guard::None, 40)).await).clone();
    assert_eq!((now.lease, now.updated_at), (Some(lease("exe_1", 100)), 40));

    // Leaving executing clears the lease; the output is written, the decision kept.
    let mut done = transition("up", Executing, Executed, Guard::None, 50);
    done.update.output = Some(ok.clone());
    let now = record_of(&check(store, done).await).clone();
    assert_eq!((now.decision.as_ref(), now.output.as_ref(), now.lease.as_ref()), (Some(&first), Some(&ok), None));

    // Some overwrites both; None keeps the output.
    let second = decision(false, "carol", 60);
    let failed = ToolResultOutput::ErrorJson { value: json!({"code": 7, "a": 1}), provider_options: None };
    let mut overwrite = transition("up", Executed, Failed, Guard::None, 60);
    overwrite.update = toolgate::ledger::Update {
        decision: Some(second.clone()),
        output: Some(failed.clone()),
        lease: Some(lease("exe_2", 70)),
        votes: None,
        continuation: false,
        superseded_by: None,
    };
    let now = record_of(&check(store, overwrite).await).clone();
    assert_eq!((now.decision, now.output.as_ref(), now.lease), (Some(second), Some(&failed), Some(lease("exe_2", 70))));
    let now = record_of(&check(store, transition("up", Failed, Denied, Guard::None, 70)).await).clone();
    assert_eq!((now.output, now.lease, now.updated_at), (Some(failed), None, 70));
}

async fn missing_approvals(stores: &Stores) {
    let store = &*stores.a;
    let mut change = transition("nobody", Pending, Approved, Guard::None, 5);
    change.events = vec![event(AuditKind::Approved, "nobody", "conv", 5, json!({}))];
    let always = [event(AuditKind::Rejected, "nobody", "conv", 5, json!({"why": "unknown"}))];
    let outcomes = store.apply(&[change], &always).await.unwrap();
    assert_eq!(outcomes, vec![TransitionOutcome::Missing]);
    assert_eq!(unsequenced(&all_events(store).await), always.to_vec());
    assert_eq!(store.approvals(&["nobody".to_owned()]).await.unwrap(), vec![]);
}

async fn approvals_are_found_by_their_calls_within_one_conversation(stores: &Stores) {
    let store = &*stores.a;
    let records = [record("a1", "conv-1"), record("a2", "conv-1"), record("b1", "conv-2")];
    store.issue(&records, &[]).await.unwrap();
    let calls: Vec<String> = ["call_a1", "call_a2", "call_b1", "call_none"].map(str::to_owned).to_vec();
    let mut found: Vec<String> =
        stores.b.approvals_for_calls("conv-1", &calls).await.unwrap().into_iter().map(|r| r.approval_id).collect();
    found.sort();
    assert_eq!(found, ["a1", "a2"], "only this conversation's calls");
    let many: Vec<String> = (0..1200).map(|n| format!("call_x{n}")).chain(["call_b1".to_owned()]).collect();
    let found = store.approvals_for_calls("conv-2", &many).await.unwrap();
    assert_eq!(found, vec![records[2].clone()], "long lists are read in chunks");
    assert!(store.approvals_for_calls("conv-2", &[]).await.unwrap().is_empty());
}

async fn events_are_appended_with_their_transitions(stores: &Stores) {
    let store = &*stores.a;
    store.issue(&[record("e1", "conv"), record("e2", "conv"), record("e3", "conv")], &[]).await.unwrap();
    let mut first = transition("e1", Pending, Approved, Guard::None, 20);
    first.events = vec![
        event(AuditKind::Approved, "e1", "conv", 20, json!({"n": 1})),
        event(AuditKind::Edited, "e1", "conv", 20, json!({"n": 2})),
    ];
    let mut second = transition("e2", Approved, Executing, Guard::None, 20);
    second.events = vec![event(AuditKind::Executed, "e2", "conv", 20, json!({"n": "never"}))];
    let mut third = transition("e3", Pending, Denied, Guard::None, 20);
    third.events = vec![event(AuditKind::Denied, "e3", "conv", 20, json!({"n": 3}))];
    // A later transition sees an earlier one of the same batch.
    let mut fourth = transition("e1", Approved, Executing, Guard::None, 21);
    fourth.events = vec![event(AuditKind::Executed, "e1", "conv", 21, json!({"n": 4}))];
    let always = [event(AuditKind::Rejected, "e2", "conv", 20, json!({"n": 5}))];
    let outcomes = store.apply(&[first.clone(), second, third.clone(), fourth.clone()], &always).await.unwrap();
    assert_eq!(outcomes.iter().map(moved).collect::<Vec<_>>(), [true, false, true, true]);

    let events = all_events(store).await;
    let expected: Vec<_> = [first.events, third.events, fourth.events, always.to_vec()].concat();
    assert_eq!(unsequenced(&events), expected);
    assert!(events.windows(2).all(|pair| pair[0].seq < pair[1].seq), "{events:?}");
    store.append(&[event(AuditKind::Rejected, "e3", "conv", 30, json!({}))]).await.unwrap();
    let after = all_events(store).await;
    assert_eq!(after.len(), 6);
    assert!(after[5].seq > after[4].seq);
}

/// A claim and its start of execution (a pair the SQL stores run as one
/// update) give what the reference store gives, transition by transition,
/// from every state the record can be in, with and without extra events.
async fn claim_pairs_move_as_the_reference_store_moves_them(stores: &Stores) {
    let store = &*stores.a;
    let starts = [Some((Pending, 1000)), Some((Pending, 15)), Some((Approved, 1000)), Some((Denied, 1000)), None];
    for (case, start) in starts.into_iter().enumerate() {
        for with_events in [false, true] {
            let id = format!("pair{case}_{with_events}");
            let reference = toolgate::ledger::MemoryStore::new();
            if let Some((state, expires_at)) = start {
                let mut issued = record(&id, "conv");
                issued.state = state;
                issued.expires_at = expires_at;
                store.issue(std::slice::from_ref(&issued), &[]).await.unwrap();
                reference.issue(&[issued], &[]).await.unwrap();
            }
            let mut claim = transition(&id, Pending, Approved, Guard::NotExpiredAt(20), 20);
            claim.update.decision = Some(decision(true, "alice", 20));
            claim.events = vec![
                event(AuditKind::Approved, &id, "conv", 20, json!({"n": 1})),
                event(AuditKind::Edited, &id, "conv", 20, json!({"n": 2})),
            ];
            let mut start_execution = transition(&id, Approved, Executing, Guard::None, 21);
            start_execution.update.lease = Some(lease("me", 500));
            start_execution.events = vec![event(AuditKind::Executed, &id, "conv", 21, json!({"n": 3}))];
            let pair = [claim, start_execution];
            let extra = if with_events { vec![event(AuditKind::Rejected, &id, "conv", 22, json!({}))] } else { vec![] };

            let outcomes = store.apply(&pair, &extra).await.unwrap();
            let expected = reference.apply(&pair, &extra).await.unwrap();
            assert_eq!(outcomes, expected, "{id}: outcomes");
            let ids = [id.clone()];
            assert_eq!(store.approvals(&ids).await.unwrap(), reference.approvals(&ids).await.unwrap(), "{id}");
            let query = AuditQuery { conversation_id: Some("conv".into()), ..AuditQuery::default() };
            let logged: Vec<_> =
                store.audit(&query).await.unwrap().into_iter().filter(|e| e.approval_id == id).collect();
            assert_eq!(unsequenced(&logged), unsequenced(&reference.audit(&query).await.unwrap()), "{id}: events");
        }
    }
}

async fn audit_filters(stores: &Stores) {
    let store = &*stores.a;
    let events: Vec<_> = (0..10)
        .map(|n| {
            event(
                AuditKind::Rejected,
                &format!("a{n}"),
                if n % 2 == 0 { "even" } else { "odd" },
                100 + n,
                json!({"n": n}),
            )
        })
        .collect();
    store.append(&events[..4]).await.unwrap();
    store.append(&events[4..]).await.unwrap();
    let all = all_events(store).await;
    assert_eq!(unsequenced(&all), events);
    let ns = |query: AuditQuery| async move {
        let found = store.audit(&query).await.unwrap();
        found.iter().map(|event| event.data["n"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    let conversation = || Some("even".to_owned());
    assert_eq!(ns(AuditQuery { conversation_id: conversation(), ..Default::default() }).await, [0, 2, 4, 6, 8]);
    assert_eq!(ns(AuditQuery { since: Some(107), ..Default::default() }).await, [7, 8, 9]);
    assert_eq!(ns(AuditQuery { after_seq: Some(all[5].seq), ..Default::default() }).await, [6, 7, 8, 9]);
    assert_eq!(ns(AuditQuery { limit: Some(3), ..Default::default() }).await, [0, 1, 2]);
    assert_eq!(ns(AuditQuery { limit: Some(0), ..Default::default() }).await, Vec::<i64>::new());
    let combined = AuditQuery {
        conversation_id: conversation(),
        since: Some(102),
        after_seq: Some(all[2].seq),
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(ns(combined).await, [4, 6]);
    let nobody = AuditQuery { conversation_id: Some("none".to_owned()), ..Default::default() };
    assert_eq!(ns(nobody).await, Vec::<i64>::new());
}

/// Each view sees its own: a principal the events of conversations they own
/// and of approvals they answered, the anonymous view those of conversations
/// without owner, an admin's view everything; the owner reads back as stored.
async fn audit_views(stores: &Stores) {
    let store = &*stores.a;
    let owned = |kind, approval: &str, owner: Option<&str>, principal: Option<&str>, n: i64| AuditEvent {
        owner: owner.map(str::to_owned),
        principal: principal.map(str::to_owned),
        ..event(kind, approval, "chat", 100 + n, json!({"n": n}))
    };
    let events = vec![
        owned(AuditKind::Issued, "a-alice", Some("alice"), Some("alice"), 0),
        owned(AuditKind::Issued, "a-bob", Some("bob"), Some("bob"), 1),
        // Carol approves Alice's request (an approver of someone else's conversation).
        owned(AuditKind::Approved, "a-alice", Some("alice"), Some("carol"), 2),
        owned(AuditKind::Executed, "a-alice", Some("alice"), None, 3),
        owned(AuditKind::Issued, "a-none", None, None, 4),
        // A `rejected` answer by Carol on Bob's approval is not an answer she gave.
        owned(AuditKind::Rejected, "a-bob", Some("bob"), Some("carol"), 5),
    ];
    store.append(&events).await.unwrap();
    assert_eq!(unsequenced(&all_events(store).await), events, "owners read back as stored");
    let seen = |view: AuditView| async move {
        let found = store.audit(&AuditQuery { view, ..Default::default() }).await.unwrap();
        found.iter().map(|event| event.data["n"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(seen(AuditView::Principal("alice".into())).await, [0, 2, 3]);
    assert_eq!(seen(AuditView::Principal("bob".into())).await, [1, 5]);
    assert_eq!(seen(AuditView::Principal("carol".into())).await, [0, 2, 3], "the approvals Carol answered");
    assert_eq!(seen(AuditView::Principal("mallory".into())).await, Vec::<i64>::new());
    assert_eq!(seen(AuditView::Anonymous).await, [4]);
    assert_eq!(seen(AuditView::All).await, [0, 1, 2, 3, 4, 5]);
    let filtered = AuditQuery {
        conversation_id: Some("chat".into()),
        since: Some(101),
        limit: Some(1),
        view: AuditView::Principal("alice".into()),
        ..Default::default()
    };
    assert_eq!(store.audit(&filtered).await.unwrap()[0].data["n"], 2, "the view combines with the other filters");
}

/// Retention: what finished before the cutoff goes, nothing open does.
async fn prune_removes_what_finished_and_keeps_what_is_open(stores: &Stores) {
    let store = &*stores.a;
    let at = |mut record: ApprovalRecord, state: ApprovalState, updated_at: i64| {
        record.state = state;
        record.updated_at = updated_at;
        record
    };
    let records = [
        at(record("old-done", "c-old"), ApprovalState::Pending, 10),
        at(record("old-open", "c-open"), ApprovalState::Pending, 10),
        at(record("new-done", "c-new"), ApprovalState::Pending, 10),
    ];
    store.issue(&records, &[]).await.unwrap();
    // Move the two finished ones to final states, at 50 and 500.
    for (id, time) in [("old-done", 50), ("new-done", 500)] {
        let outcome =
            check(store, transition(id, ApprovalState::Pending, ApprovalState::Denied, Guard::None, time)).await;
        assert!(matches!(outcome, TransitionOutcome::Moved(_)), "{outcome:?}");
    }
    let events = [
        event(AuditKind::Issued, "old-done", "c-old", 20, json!({"n": 0})),
        event(AuditKind::Issued, "old-open", "c-open", 20, json!({"n": 1})),
        event(AuditKind::Rejected, "never-issued", "c-old", 30, json!({"n": 2})),
        event(AuditKind::Denied, "new-done", "c-new", 500, json!({"n": 3})),
    ];
    store.append(&events).await.unwrap();
    for (conversation, time) in [("c-old", 40), ("c-open", 40), ("c-new", 40), ("c-recent", 300)] {
        store.save_conversation(conversation, None, &json!([]), None, time).await.unwrap();
    }

    let pruned = store.prune(100).await.unwrap();
    assert_eq!(pruned, Pruned { approvals: 1, events: 2, conversations: 2 });
    let left: Vec<String> = store
        .approvals(&["old-done".into(), "old-open".into(), "new-done".into()])
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.approval_id)
        .collect();
    assert_eq!(left, ["old-open", "new-done"], "a pending approval is never removed, however old");
    let kept: Vec<i64> = all_events(store).await.iter().map(|event| event.data["n"].as_i64().unwrap()).collect();
    assert_eq!(kept, [1, 3], "the open approval's events stay");
    assert!(store.conversation("c-old").await.unwrap().is_none());
    assert!(store.conversation("c-new").await.unwrap().is_none(), "finished and old, whatever its approvals' age");
    assert!(store.conversation("c-open").await.unwrap().is_some(), "it holds an open approval");
    assert!(store.conversation("c-recent").await.unwrap().is_some());
    assert_eq!(store.prune(100).await.unwrap(), Pruned::default(), "pruning again removes nothing");
}

/// A prune larger than the SQL stores' chunk removes everything it should, across chunks.
async fn prune_goes_on_past_one_chunk(stores: &Stores) {
    let store = &*stores.a;
    let old: Vec<AuditEvent> =
        (0..12_001).map(|n| event(AuditKind::Rejected, "gone", "c", 10, json!({"n": n}))).collect();
    store.append(&old).await.unwrap();
    store.append(&[event(AuditKind::Rejected, "gone", "c", 200, json!({"n": -1}))]).await.unwrap();
    assert_eq!(store.prune(100).await.unwrap(), Pruned { approvals: 0, events: 12_001, conversations: 0 });
    let kept: Vec<i64> = all_events(store).await.iter().map(|event| event.data["n"].as_i64().unwrap()).collect();
    assert_eq!(kept, [-1]);
}

async fn renew_leases_touches_only_the_executors_running_calls(stores: &Stores) {
    let store = &*stores.a;
    let with = |id: &str, state, holder: Option<&str>| {
        let mut record = record(id, "conv");
        record.state = state;
        record.lease = holder.map(|holder| lease(holder, 100));
        record
    };
    let records = [
        with("mine", Executing, Some("exe_a")),
        with("mine_too", Executing, Some("exe_a")),
        with("theirs", Executing, Some("exe_b")),
        with("not_running", Approved, Some("exe_a")),
        with("no_lease", Executing, None),
    ];
    store.issue(&records, &[]).await.unwrap();
    assert_eq!(store.renew_leases("exe_a", 900).await.unwrap(), 2);
    assert_eq!(store.renew_leases("exe_c", 900).await.unwrap(), 0);
    let ids: Vec<String> = records.iter().map(|record| record.approval_id.clone()).collect();
    let now: HashMap<String, ApprovalRecord> =
        store.approvals(&ids).await.unwrap().into_iter().map(|record| (record.approval_id.clone(), record)).collect();
    for mut expected in records {
        if expected.approval_id.starts_with("mine") {
            expected.lease = Some(lease("exe_a", 900));
        }
        assert_eq!(now[&expected.approval_id], expected, "updated_at and the rest unchanged");
    }
}

async fn conversations_save_optimistically(stores: &Stores) {
    let (store, other) = (&*stores.a, &*stores.b);
    assert_eq!(store.conversation("c1").await.unwrap(), None);
    let first = json!([{"role": "user", "parts": [{"type": "text", "text": "hi"}], "id": "m1"}]);
    assert_eq!(store.save_conversation("c1", None, &first, None, 10).await.unwrap(), Some(1));
    assert_eq!(other.save_conversation("c1", None, &json!([]), None, 11).await.unwrap(), None, "second create loses");
    let stored = other.conversation("c1").await.unwrap().unwrap();
    assert_eq!((stored.conversation_id.as_str(), stored.version, stored.updated_at), ("c1", 1, 10));
    assert_eq!(serde_json::to_string(&stored.messages).unwrap(), serde_json::to_string(&first).unwrap());

    let second = json!([{"z": 1, "a": 2}]);
    assert_eq!(other.save_conversation("c1", None, &second, Some(1), 20).await.unwrap(), Some(2));
    assert_eq!(store.save_conversation("c1", None, &json!([]), Some(1), 21).await.unwrap(), None, "stale version");
    assert_eq!(store.save_conversation("c1", None, &json!([]), Some(3), 21).await.unwrap(), None, "future version");
    assert_eq!(store.save_conversation("c2", None, &json!([]), Some(1), 21).await.unwrap(), None, "not created");
    assert_eq!(store.conversation("c2").await.unwrap(), None);
    let stored = store.conversation("c1").await.unwrap().unwrap();
    assert_eq!((stored.version, stored.updated_at), (2, 20));
    assert_eq!(serde_json::to_string(&stored.messages).unwrap(), r#"[{"z":1,"a":2}]"#);
}

/// A racer's answer to `id`: approve (even racers) or deny (odd ones).
fn answer(id: &str, racer: usize) -> Transition {
    let approve = racer.is_multiple_of(2);
    let mut change = transition(id, Pending, if approve { Approved } else { Denied }, Guard::NotExpiredAt(500), 100);
    change.update.decision = Some(decision(approve, &format!("racer_{racer}"), 100));
    let kind = if approve { AuditKind::Approved } else { AuditKind::Denied };
    change.events = vec![event(kind, id, "race", 100, json!({"racer": racer}))];
    change
}

/// Races the racers' answers on both handles; checks one wins per approval.
async fn race(stores: &Stores, ids: &[String], racers: usize) {
    let records: Vec<_> = ids.iter().map(|id| record(id, "race")).collect();
    stores.a.issue(&records, &[]).await.unwrap();
    // Open the pools' connections first, so that racers do not wait for new ones.
    let warm = (0..32).map(|n| {
        let store = if n % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
        let ids = ids.to_vec();
        tokio::spawn(async move { store.approvals(&ids).await.unwrap() })
    });
    futures::future::join_all(warm).await;
    // Every racer starts at once.
    let start = Arc::new(Barrier::new(racers * ids.len()));
    let mut tasks = Vec::new();
    for racer in 0..racers {
        for id in ids {
            let store = if (racer / 2).is_multiple_of(2) { stores.a.clone() } else { stores.b.clone() };
            let change = answer(id, racer);
            let start = start.clone();
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let outcome = store.apply(std::slice::from_ref(&change), &[]).await.unwrap().remove(0);
                (change, outcome)
            }));
        }
    }
    let mut winners: HashMap<String, Transition> = HashMap::new();
    let mut outcomes = Vec::new();
    for task in tasks {
        let (change, outcome) = task.await.unwrap();
        if moved(&outcome) {
            let previous = winners.insert(change.approval_id.clone(), change.clone());
            assert!(previous.is_none(), "two answers won {}", change.approval_id);
        }
        outcomes.push((change, outcome));
    }
    assert_eq!(winners.len(), ids.len(), "every approval has exactly one winner");
    for (change, outcome) in &outcomes {
        let winner = &winners[&change.approval_id];
        let record = record_of(outcome);
        assert_eq!((record.state, &record.decision), (winner.to, &winner.update.decision), "{outcome:?}");
    }
    let unmoved = outcomes.iter().filter(|(_, outcome)| matches!(outcome, TransitionOutcome::Unmoved(_))).count();
    assert_eq!(unmoved, ids.len() * (racers - 1));
    let events = all_events(&*stores.a).await;
    assert_eq!(events.len(), ids.len(), "one event per winner");
    for event in events {
        assert_eq!(event.data["racer"], json!(winners[&event.approval_id].events[0].data["racer"]));
    }
}

async fn sixty_four_answers_race_for_one_approval(stores: &Stores) {
    race(stores, &["contested".to_owned()], 64).await;
}

async fn two_hundred_approvals_race_four_ways(stores: &Stores) {
    let ids: Vec<String> = (0..200).map(|n| format!("ap_{n:03}")).collect();
    race(stores, &ids, 4).await;
    let found = stores.b.approvals(&ids).await.unwrap();
    assert_eq!(found.len(), 200);
    assert!(found.iter().all(|record| matches!(record.state, Approved | Denied)));
}

async fn decisions_are_listed_by_scope(stores: &Stores) {
    let (store, other) = (&*stores.a, &*stores.b);
    let saved = [
        sticky("conv_1", in_conversation("c1"), 10),
        sticky("conv_2", in_conversation("c2"), 11),
        sticky("alice", of_principal("alice"), 12),
        sticky("bob", of_principal("bob"), 13),
        sticky("everyone", DecisionScope::Global, 14),
        // Named like a principal, scoped to a conversation: principals never see it.
        sticky("conv_alice", in_conversation("alice"), 15),
    ];
    for decision in &saved {
        store.save_decision(decision).await.unwrap();
    }
    let ids = |conversation, principal| async move {
        decision_ids(other, &decision_query(conversation, principal, 20)).await
    };
    assert_eq!(ids(Some("c1"), Some("alice")).await, ["conv_1", "alice", "everyone"]);
    assert_eq!(ids(Some("c2"), None).await, ["conv_2", "everyone"], "only this conversation's");
    assert_eq!(ids(None, Some("bob")).await, ["bob", "everyone"], "only this principal's");
    assert_eq!(ids(None, Some("alice")).await, ["alice", "everyone"], "a conversation is not a principal");
    assert_eq!(ids(Some("alice"), None).await, ["everyone", "conv_alice"], "a principal is not a conversation");
    assert_eq!(ids(Some("c9"), Some("carol")).await, ["everyone"], "global ones apply to everyone");
    assert_eq!(ids(None, None).await, ["everyone"]);
    // The records read back whole.
    let found = other.decisions(&decision_query(Some("c1"), Some("alice"), 20)).await.unwrap();
    assert_eq!(found, vec![saved[0].clone(), saved[2].clone(), saved[4].clone()]);
}

async fn decisions_expire_at_their_expiry_time(stores: &Stores) {
    let store = &*stores.a;
    let mut expiring = sticky("expiring", in_conversation("c"), 10);
    expiring.expires_at = Some(100);
    let mut global = sticky("global", DecisionScope::Global, 11);
    global.expires_at = Some(50);
    let mut far = sticky("far", of_principal("p"), 12);
    far.expires_at = Some(i64::MAX);
    let standing = sticky("standing", in_conversation("c"), 13);
    for decision in [&expiring, &global, &far, &standing] {
        store.save_decision(decision).await.unwrap();
    }
    let at = |now| async move { decision_ids(store, &decision_query(Some("c"), Some("p"), now)).await };
    assert_eq!(at(49).await, ["expiring", "global", "far", "standing"]);
    assert_eq!(at(50).await, ["expiring", "far", "standing"], "expires_at == now is not live");
    assert_eq!(at(99).await, ["expiring", "far", "standing"]);
    assert_eq!(at(100).await, ["far", "standing"], "expires_at == now is not live");
    assert_eq!(at(i64::MAX - 1).await, ["far", "standing"]);
    assert_eq!(at(i64::MAX).await, ["standing"], "none: never expires");
    // Expired decisions are left out, not removed.
    assert_eq!(store.revoke_decision("expiring").await.unwrap(), Some(expiring));
}

async fn duplicate_decision_is_rejected_and_nothing_changes(stores: &Stores) {
    let (store, other) = (&*stores.a, &*stores.b);
    let first = sticky("dup", in_conversation("c1"), 10);
    store.save_decision(&first).await.unwrap();
    let mut again = sticky("dup", DecisionScope::Global, 20);
    again.tool_name = "delete_file".to_owned();
    again.body = json!({"other": true});
    let error = other.save_decision(&again).await.unwrap_err();
    assert_eq!(error, StoreError::DuplicateDecision("dup".to_owned()));
    assert_eq!(store.save_decision(&first).await.unwrap_err(), StoreError::DuplicateDecision("dup".to_owned()));
    let everything = decision_query(Some("c1"), Some("p"), 30);
    assert_eq!(store.decisions(&everything).await.unwrap(), vec![first.clone()], "the first is kept as it was");
    assert_eq!(decision_ids(store, &decision_query(None, None, 30)).await, Vec::<String>::new(), "no global one");
    // The id is free again once revoked.
    assert_eq!(store.revoke_decision("dup").await.unwrap(), Some(first));
    other.save_decision(&again).await.unwrap();
    assert_eq!(store.decisions(&everything).await.unwrap(), vec![again]);
}

async fn sixteen_saves_of_one_decision_race(stores: &Stores) {
    let start = Arc::new(Barrier::new(16));
    let tasks: Vec<_> = (0..16i64)
        .map(|n| {
            let store = if n % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let start = start.clone();
            tokio::spawn(async move {
                let mut decision = sticky("contested", in_conversation("race"), 10);
                decision.body = json!({"racer": n});
                start.wait().await;
                store.save_decision(&decision).await.map(|()| decision)
            })
        })
        .collect();
    let mut saved = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(decision) => saved.push(decision),
            Err(error) => assert_eq!(error, StoreError::DuplicateDecision("contested".to_owned())),
        }
    }
    assert_eq!(saved.len(), 1, "exactly one save wins");
    assert_eq!(stores.a.decisions(&decision_query(Some("race"), None, 0)).await.unwrap(), saved);
}

async fn revoking_returns_the_decision_once(stores: &Stores) {
    let (store, other) = (&*stores.a, &*stores.b);
    let mut kept = sticky("kept", in_conversation("c"), 10);
    kept.expires_at = Some(1000);
    let revoked = sticky("revoked", DecisionScope::Global, 11);
    store.save_decision(&kept).await.unwrap();
    store.save_decision(&revoked).await.unwrap();
    assert_eq!(other.revoke_decision("revoked").await.unwrap(), Some(revoked.clone()));
    assert_eq!(store.revoke_decision("revoked").await.unwrap(), None, "only once");
    assert_eq!(other.revoke_decision("revoked").await.unwrap(), None);
    assert_eq!(store.revoke_decision("unknown").await.unwrap(), None);
    assert_eq!(store.decisions(&decision_query(Some("c"), None, 20)).await.unwrap(), vec![kept.clone()]);
    assert_eq!(store.revoke_decision("kept").await.unwrap(), Some(kept));
    assert_eq!(store.decisions(&decision_query(Some("c"), None, 20)).await.unwrap(), vec![]);
}

async fn decision_bodies_read_back_exactly(stores: &Stores) {
    let store = &*stores.a;
    let text = r#"{"zeta":1,"alpha":{"b":[1,2.5,-3e-7,"x",true,null],"a":{}},"mid":"ü ✓ \"q\" \\ \n","empty":[]}"#;
    let mut decision = sticky("body", of_principal("ünï ✓"), -5);
    decision.body = serde_json::from_str(text).unwrap();
    decision.tool_name = "tool.with/odd chars".to_owned();
    decision.expires_at = Some(i64::MAX);
    store.save_decision(&decision).await.unwrap();
    let mut scalar = sticky("scalar", DecisionScope::Global, 0);
    scalar.body = json!("just a string");
    store.save_decision(&scalar).await.unwrap();

    let found = stores.b.decisions(&decision_query(None, Some("ünï ✓"), 0)).await.unwrap();
    assert_eq!(found, vec![decision.clone(), scalar.clone()]);
    assert_eq!(serde_json::to_string(&found[0].body).unwrap(), text, "key order and text kept");
    let revoked = store.revoke_decision("body").await.unwrap().unwrap();
    assert_eq!(serde_json::to_string(&revoked.body).unwrap(), text, "as revoked too");
    assert_eq!(revoked, decision);
}

async fn decisions_are_listed_oldest_first(stores: &Stores) {
    let store = &*stores.a;
    // Ids in reverse order, scopes mixed, two made at the same time (listed as saved).
    let saved = [
        sticky("z", in_conversation("c"), 10),
        sticky("y", DecisionScope::Global, 20),
        sticky("x", of_principal("p"), 20),
        sticky("w", in_conversation("c"), 20),
        sticky("v", of_principal("p"), 30),
    ];
    for decision in &saved {
        store.save_decision(decision).await.unwrap();
    }
    let query = decision_query(Some("c"), Some("p"), 40);
    assert_eq!(decision_ids(store, &query).await, ["z", "y", "x", "w", "v"]);
    // A decision saved after a revocation comes last.
    store.revoke_decision("v").await.unwrap();
    store.revoke_decision("x").await.unwrap();
    store.save_decision(&sticky("x", of_principal("p"), 35)).await.unwrap();
    store.save_decision(&sticky("a", DecisionScope::Global, 35)).await.unwrap();
    assert_eq!(decision_ids(&*stores.b, &query).await, ["z", "y", "w", "x", "a"]);
}

async fn a_conversation_and_its_decisions_are_read_together(stores: &Stores) {
    let (store, other) = (&*stores.a, &*stores.b);
    let mut expiring = sticky("expiring", in_conversation("c1"), 5);
    expiring.expires_at = Some(30);
    let saved = [
        sticky("conv_1", in_conversation("c1"), 20),
        sticky("conv_2", in_conversation("c2"), 11),
        sticky("alice", of_principal("alice"), 10),
        sticky("everyone", DecisionScope::Global, 20),
        expiring,
    ];
    for decision in &saved {
        store.save_decision(decision).await.unwrap();
    }
    let messages = json!([{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]);
    store.save_conversation("c1", Some("alice"), &messages, None, 7).await.unwrap();
    store.save_conversation("c1", Some("mallory"), &messages, Some(1), 9).await.unwrap();
    for (conversation, principal, now) in [
        ("c1", Some("alice"), 20),
        ("c1", Some("alice"), 30),
        ("c1", None, 0),
        ("c2", Some("bob"), 20),
        ("c9", None, 20),
    ] {
        let query = decision_query(Some(conversation), principal, now);
        let read = other.conversation_with_decisions(conversation, &query).await.unwrap();
        let apart = (other.conversation(conversation).await.unwrap(), other.decisions(&query).await.unwrap());
        assert_eq!((read.conversation, read.decisions.unwrap()), apart, "{conversation} {principal:?} at {now}");
    }
    let query = decision_query(Some("c1"), Some("alice"), 20);
    let read = other.conversation_with_decisions("c1", &query).await.unwrap();
    let ids: Vec<String> = read.decisions.unwrap().into_iter().map(|decision| decision.id).collect();
    assert_eq!(ids, ["expiring", "alice", "conv_1", "everyone"], "oldest first, expired ones left out");
    let stored = read.conversation.unwrap();
    assert_eq!((stored.version, stored.updated_at, stored.messages), (2, 9, messages));
    assert_eq!(stored.owner.as_deref(), Some("alice"), "the owner is recorded at creation and never changed");
}

/// An inbox filter by conversation name matches an approval by its stored
/// owner and the name, never by the shape of its key: a key that merely ends
/// with the separator and the name, without an owner on record, is not it.
/// A sub-agent's approval (with a lineage) is found under its root conversation.
async fn a_conversation_name_matches_by_the_stored_owner(stores: &Stores) {
    let store = &*stores.a;
    let key = toolgate::ledger::conversation_key;
    let mut owned = record("owned", &key(Some("alice"), "c1"));
    owned.owner = Some("alice".to_owned());
    let plain = record("plain", "c1");
    let lookalike = record("lookalike", &key(Some("bob"), "c1"));
    let mut other = record("other", &key(Some("alice"), "c2"));
    other.owner = Some("alice".to_owned());
    // Sub-agents' approvals are found under their root conversation: alice's c1, and the owner-less c1.
    let step =
        |call: &str| toolgate::ledger::LineageStep { agent: "janitor".to_owned(), tool_call_id: call.to_owned() };
    let sub_key = |root: String, calls: &[&str]| {
        calls.iter().fold(root, |key, call| format!("{key}{}{call}", toolgate::ledger::SUB_RUN_SEPARATOR))
    };
    let mut nested = record("nested", &sub_key(key(Some("alice"), "c1"), &["k1", "k2"]));
    nested.owner = Some("alice".to_owned());
    nested.lineage = vec![step("k1"), step("k2")];
    let mut plain_nested = record("plain-nested", &sub_key("c1".to_owned(), &["k1"]));
    plain_nested.lineage = vec![step("k1")];
    let mut elsewhere = record("elsewhere", &sub_key(key(Some("alice"), "c11"), &["k1"]));
    elsewhere.owner = Some("alice".to_owned());
    elsewhere.lineage = vec![step("k1")];
    store.issue(&[owned, plain, lookalike, other, nested, plain_nested, elsewhere], &[]).await.unwrap();
    let query = toolgate::ledger::ApprovalQuery {
        conversation_name: Some("c1".to_owned()),
        states: toolgate::ledger::StateFilter::All,
        limit: 10,
        ..toolgate::ledger::ApprovalQuery::default()
    };
    let mut ids: Vec<String> =
        stores.b.list_approvals(&query).await.unwrap().into_iter().map(|record| record.approval_id).collect();
    ids.sort();
    assert_eq!(ids, ["nested", "owned", "plain", "plain-nested"]);
}

/// An edit that needs other approvers: the successor is issued with the
/// edited input and its route, the original ends `superseded` naming it,
/// both links read back through the other handle, and the call's approval
/// is read as the successor. A vote that raced the edit wins: the successor
/// is withdrawn and nothing is superseded.
async fn an_edit_supersedes_its_approval_and_the_link_is_followed(stores: &Stores) {
    use toolgate::approval::lifecycle::{self, EditRoute, Route, VoteOptions, VoteRefusal, Voter};
    let groups = std::collections::BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned()])]);
    let config = toolgate::ledger::LedgerConfig::new(stores.a.clone()).groups(groups);
    let mut original = record("ap_orig", "conv");
    original.owner = Some("alice".to_owned());
    original.expires_at = i64::MAX / 2;
    let mut raced = record("ap_raced", "conv");
    raced.expires_at = i64::MAX / 2;
    config.store.issue(&[original.clone(), raced.clone()], &[]).await.unwrap();
    let route = Route { approvers: vec!["group:finance".to_owned()], quorum: 1, ..Route::default() };
    let why = EditRoute { route: &route, reason: "rule `big-transfers` matched" };
    let alice = Voter::new(Some("alice".to_owned()));
    let edit = json!({"to": "mallory@example.com", "body": "all of it"});

    let done = lifecycle::supersede(&config, &original, &alice, &edit, why).await.unwrap();
    let successor_id = done.successor.approval_id.clone();
    let read = stores.b.approvals(&["ap_orig".to_owned(), successor_id.clone()]).await.unwrap();
    assert_eq!(read, vec![done.original.clone(), done.successor.clone()], "both read back as written");
    let (old, new) = (&read[0], &read[1]);
    assert_eq!((old.state, old.superseded_by.as_deref()), (ApprovalState::Superseded, Some(successor_id.as_str())));
    assert_eq!((new.state, new.supersedes.as_deref()), (Pending, Some("ap_orig")));
    assert_eq!((&new.input, &new.tool_call_id, &new.conversation_id), (&edit, &old.tool_call_id, &old.conversation_id));
    assert_eq!(new.owner.as_deref(), Some("alice"));
    assert_eq!(new.routing.as_ref().map(|routing| routing.members.clone()), Some(vec!["bob".to_owned()]));
    let current = lifecycle::current(&*stores.b, &["ap_orig".to_owned(), "ap_raced".to_owned()]).await.unwrap();
    assert_eq!(current["ap_orig"].approval_id, successor_id, "the call's approval is the successor");
    assert_eq!(current["ap_raced"].approval_id, "ap_raced");
    let kinds: Vec<(AuditKind, String)> =
        all_events(&*stores.a).await.into_iter().map(|event| (event.kind, event.approval_id)).collect();
    assert_eq!(kinds, [(AuditKind::Issued, successor_id.clone()), (AuditKind::Superseded, "ap_orig".to_owned())]);
    let again = lifecycle::supersede(&config, &done.original, &alice, &edit, why).await.unwrap_err();
    assert!(matches!(again, lifecycle::VoteError::Refused(VoteRefusal::AlreadyDecided { .. })), "{again:?}");

    // A vote decides the original after the edit read it: the vote stands.
    let options = VoteOptions::default();
    lifecycle::cast(
        &*config.store,
        &*config.clock,
        "ap_raced",
        &Voter::new(None),
        toolgate::Decision::APPROVE,
        options,
    )
    .await
    .unwrap();
    let lost = lifecycle::supersede(&config, &raced, &alice, &edit, why).await.unwrap_err();
    assert!(matches!(lost, lifecycle::VoteError::Refused(VoteRefusal::AlreadyDecided { .. })), "{lost:?}");
    let current = lifecycle::current(&*stores.b, &["ap_raced".to_owned()]).await.unwrap();
    assert_eq!(current["ap_raced"].state, Approved, "nothing superseded");
    let events = all_events(&*stores.a).await;
    let orphan = events.iter().rev().find(|event| event.kind == AuditKind::Issued).unwrap().approval_id.clone();
    let orphan = stores.b.approvals(&[orphan]).await.unwrap().pop().unwrap();
    assert_eq!((orphan.state, orphan.supersedes.as_deref()), (ApprovalState::Withdrawn, Some("ap_raced")));
}

/// A superseded approval is pruned like any final one, but not while its
/// successor is open: the call is found through it.
async fn a_superseded_approval_stays_while_its_successor_is_open(stores: &Stores) {
    let store = &*stores.a;
    let superseded = |id: &str, successor: &str| {
        let mut record = record(id, "conv");
        record.state = ApprovalState::Superseded;
        record.superseded_by = Some(successor.to_owned());
        record
    };
    let mut open = record("ap_open", "conv");
    open.supersedes = Some("ap_a".to_owned());
    let mut done = record("ap_done", "conv");
    done.state = Denied;
    done.supersedes = Some("ap_b".to_owned());
    store.issue(&[superseded("ap_a", "ap_open"), superseded("ap_b", "ap_done"), open, done], &[]).await.unwrap();
    let pruned = store.prune(10_000).await.unwrap();
    assert_eq!(pruned.approvals, 2, "ap_b and ap_done");
    let ids = ["ap_a", "ap_b", "ap_open", "ap_done"].map(str::to_owned);
    let left: Vec<String> = stores.b.approvals(&ids).await.unwrap().into_iter().map(|r| r.approval_id).collect();
    assert_eq!(left, ["ap_a", "ap_open"]);
}

/// The pending approvals are counted in the store, whoever owns them.
async fn pending_approvals_are_counted(stores: &Stores) {
    let store = &*stores.a;
    assert_eq!(store.count_pending().await.unwrap(), 0);
    let mut denied = record("ap_3", "c2");
    denied.state = Denied;
    let mut owned = record("ap_2", "alice\u{1f}c1");
    owned.owner = Some("alice".to_owned());
    store.issue(&[record("ap_1", "c1"), owned, denied], &[]).await.unwrap();
    assert_eq!(stores.b.count_pending().await.unwrap(), 2);
}

/// A store just opened (and migrated) is ready, through either handle.
async fn a_migrated_store_is_ready(stores: &Stores) {
    stores.a.ready().await.unwrap();
    stores.b.ready().await.unwrap();
}

suite!(
    issue_and_read_back,
    a_migrated_store_is_ready,
    pending_approvals_are_counted,
    a_superseded_approval_stays_while_its_successor_is_open,
    a_conversation_name_matches_by_the_stored_owner,
    duplicate_issue_is_rejected_and_nothing_is_inserted,
    guards_hold_and_fail,
    updates_keep_overwrite_and_clear,
    missing_approvals,
    approvals_are_found_by_their_calls_within_one_conversation,
    events_are_appended_with_their_transitions,
    claim_pairs_move_as_the_reference_store_moves_them,
    audit_filters,
    audit_views,
    prune_removes_what_finished_and_keeps_what_is_open,
    prune_goes_on_past_one_chunk,
    renew_leases_touches_only_the_executors_running_calls,
    conversations_save_optimistically,
    sixty_four_answers_race_for_one_approval,
    two_hundred_approvals_race_four_ways,
    decisions_are_listed_by_scope,
    decisions_expire_at_their_expiry_time,
    duplicate_decision_is_rejected_and_nothing_changes,
    sixteen_saves_of_one_decision_race,
    revoking_returns_the_decision_once,
    decision_bodies_read_back_exactly,
    decisions_are_listed_oldest_first,
    a_conversation_and_its_decisions_are_read_together,
    an_edit_supersedes_its_approval_and_the_link_is_followed,
);
