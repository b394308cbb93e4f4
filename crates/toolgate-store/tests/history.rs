//! History terms on every store: the calls a window and scope read (the SQL
//! stores through their indexes, the same as the in-memory store), and the
//! race: 50 concurrent calls against a count limit of 10, half on each of
//! two handles (two replicas on Postgres), and exactly 10 run; and the
//! same race with questions among the calls: no question is issued on a
//! history that moved before it was recorded (one judged on 9 calls while
//! the 10th was recorded is denied, not asked), held calls and chat turns
//! alike; and 50 approved calls claimed at once (held calls started, and
//! answers in chats): exactly 10 run, each claim judged again on the history
//! in one conditional write with its entry. And the guard itself: it holds
//! until a call of its scope is recorded, identical requests for one call
//! count it once, and on Postgres it is checked after the log's lock, on
//! what the lock's holder committed.

#[macro_use]
mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use std::time::Duration;
use support::Stores;

use toolgate::approval::lifecycle::counted;
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::approval::lifecycle::held::{self, HeldCall};
use toolgate::ledger::{
    ApprovalState, AuditKind, AuditQuery, Guard, HistoryQuery, HistoryScope, LedgerConfig, LedgerStore, ManualClock,
    Transition, TransitionOutcome, Update, conversation_key,
};
use toolgate::tool::{ApprovalContext, Caller, GateAction};
use toolgate::{Tool, ToolError};
use toolgate_policy::{Policy, StoredGate};

const NOW: i64 = 1_700_000_000_000;

async fn reads_the_calls_of_a_scope_and_window(stores: &Stores) {
    let config = LedgerConfig::new(stores.a.clone());
    let ran = |who: Option<&str>, chat: &str, tool: &str, ago: i64| {
        let ledger = match who {
            Some(who) => config.owned(Some(who), chat).principal(who),
            None => config.conversation(chat),
        };
        let input = json!({"n": ago});
        direct::ran(&ledger, DirectCall { tool_call_id: "c", tool_name: tool, input: &input }, Ok(&json!(1)), NOW - ago)
    };
    let events = [
        ran(Some("alice"), "c1", "t", 10),
        ran(Some("alice"), "c2", "t", 20),
        ran(Some("bob"), "c1", "t", 30),
        ran(None, "c1", "t", 40),
        ran(Some("alice"), "c1", "t", 5_000),
    ];
    stores.b.append(&events).await.unwrap();
    let read = |scope: HistoryScope| {
        let store = stores.a.clone();
        async move {
            let query = HistoryQuery { since: NOW - 1_000, scope, include_pending: false };
            let read = store.history(&query).await.unwrap();
            read.entries.into_iter().map(|entry| entry.input["n"].as_i64().unwrap()).collect::<Vec<_>>()
        }
    };
    assert_eq!(read(HistoryScope::Principal(Some("alice".into()))).await, [10, 20]);
    assert_eq!(read(HistoryScope::Principal(None)).await, [40]);
    assert_eq!(read(HistoryScope::Conversation(conversation_key(Some("alice"), "c1"))).await, [10]);
    assert_eq!(read(HistoryScope::Conversation("c1".into())).await, [40]);
    assert_eq!(read(HistoryScope::Everyone).await, [10, 20, 30, 40]);
    assert_eq!(read(HistoryScope::Principals(vec!["bob".into(), "alice".into()])).await, [10, 20, 30]);
    assert_eq!(read(HistoryScope::Principals(Vec::new())).await, Vec::<i64>::new());
}

/// A guard made from a read holds while no call of its window and scope is
/// recorded: an event of another scope, or one that does not change what it
/// counts (the `executed` event of a call its `allowed` event counted
/// already), leaves it holding; a call of its scope moves it.
async fn a_guard_holds_until_a_call_of_its_scope_is_recorded(stores: &Stores) {
    let config = LedgerConfig::new(stores.a.clone());
    let alice = config.owned(Some("alice"), "c1").principal("alice");
    let bob = config.owned(Some("bob"), "c1").principal("bob");
    let input = json!({"n": 1});
    let call = |id| DirectCall { tool_call_id: id, tool_name: "t", input: &input };
    stores.b.append(&[direct::allowed(&alice, call("a1"), NOW - 10)]).await.unwrap();
    let scope = HistoryScope::Principal(Some("alice".into()));
    let query = HistoryQuery { since: NOW - 1_000, scope, include_pending: false };
    let read = stores.a.history(&query).await.unwrap();
    assert_eq!(read.entries.len(), 1);
    assert!(read.through > 0, "the read names the last event it saw");
    let guard = read.guard(query.clone());
    let mark = |id| [direct::allowed(&alice, call(id), NOW)];
    // Another principal's call, and alice's first call running: nothing alice's read counts changed.
    let others = [direct::allowed(&bob, call("b1"), NOW - 5), direct::ran(&alice, call("a1"), Ok(&json!(1)), NOW - 5)];
    stores.b.append(&others).await.unwrap();
    assert!(stores.a.append_if(std::slice::from_ref(&guard), &mark("a2")).await.unwrap());
    // alice's second call is recorded now: the same guard no longer holds, on either handle.
    assert!(!stores.b.append_if(std::slice::from_ref(&guard), &mark("a3")).await.unwrap());
    assert!(!stores.a.append_if(&[guard], &mark("a3")).await.unwrap());
    let again = stores.a.history(&query).await.unwrap();
    assert_eq!(again.entries.len(), 2, "a1 once (allowed, then executed), a2");
    assert!(stores.a.append_if(&[again.guard(query)], &mark("a3")).await.unwrap());
}

/// 50 calls at once, alternating between the two handles, against `count = { gte = 10 }`.
async fn fifty_calls_against_a_limit_of_ten(stores: &Stores) {
    let policy = Arc::new(
        Policy::from_toml_str(
            r#"
            [[rule]]
            name = "ten-a-day"
            action = "deny"
            tool = "transfer_money"
            history = { window = "24h", scope = "everyone", count = { gte = 10 } }
            "#,
        )
        .unwrap(),
    );
    let tool = Tool::function::<Value>("transfer_money").handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
    let tasks: Vec<_> = (0..50)
        .map(|index| {
            let store: Arc<dyn LedgerStore> = if index % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let (policy, tool) = (policy.clone(), tool.clone());
            tokio::spawn(async move {
                let chat = format!("chat-{index}");
                let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
                let ledger = config.owned(Some("alice"), &chat).principal("alice");
                let gate = StoredGate::new(policy, store.clone(), Some(ledger.conversation_id.clone()), None, NOW)
                    .with_history(store, Arc::default());
                let caller = Caller {
                    gate: Some(&gate),
                    conversation_id: Some(&ledger.conversation_id),
                    principal: Some("alice"),
                    groups: &[],
                };
                let input = json!({"amount": 1});
                let context = ApprovalContext::new(format!("call-{index}"), Vec::new());
                direct::admit(Some(&ledger), caller, &tool, &input, context).await.action
            })
        })
        .collect();
    let mut allowed = 0;
    for task in tasks {
        match task.await.unwrap() {
            GateAction::Allow => allowed += 1,
            GateAction::Deny => {}
            GateAction::Ask => panic!("no call should be left undecided"),
        }
    }
    assert_eq!(allowed, 10, "exactly ten calls pass");
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(events.iter().filter(|event| event.kind == AuditKind::Allowed).count(), 10);
}

/// 50 held calls at once, alternating between the two handles: the even ones
/// small (allowed), the odd ones large (asked), all denied from the 10th call
/// that ran. Each question is issued only on the history it was judged on.
async fn questions_are_issued_on_the_history_they_were_judged_on(stores: &Stores) {
    let policy = Arc::new(Policy::from_toml_str(TEN_A_DAY_LARGE_ASKED).unwrap());
    let tasks: Vec<_> = (0..50)
        .map(|index| {
            let store: Arc<dyn LedgerStore> = if index % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let policy = policy.clone();
            tokio::spawn(async move {
                let input = json!({"amount": if index % 2 == 0 { 1 } else { 1000 }});
                match admit_held(store, policy, &format!("chat-{index}"), &input, None).await {
                    held::Attached::Issued(record) => record.state,
                    held::Attached::Existing(record) => panic!("a new call attached to {}", record.approval_id),
                }
            })
        })
        .collect();
    let mut states = Vec::new();
    for task in tasks {
        states.push(task.await.unwrap());
    }
    let count = |state: ApprovalState| states.iter().filter(|found| **found == state).count();
    assert_eq!(count(ApprovalState::Approved), 10, "exactly ten calls pass");
    assert_eq!(count(ApprovalState::Approved) + count(ApprovalState::Pending) + count(ApprovalState::Denied), 50);
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    let allowed: Vec<i64> = events.iter().filter(|event| event.kind == AuditKind::Allowed).map(|e| e.seq).collect();
    let issued: Vec<i64> = events.iter().filter(|event| event.kind == AuditKind::Issued).map(|e| e.seq).collect();
    assert_eq!((allowed.len(), issued.len()), (10, count(ApprovalState::Pending)));
    let tenth = allowed.iter().max().copied().unwrap();
    assert!(
        issued.iter().all(|seq| *seq < tenth),
        "a question was issued after the tenth call was recorded: {issued:?} after {tenth}"
    );
}

/// Ten identical keyed requests for one held call at once (alternating
/// between the two handles), under a history term that lets it through:
/// one record is issued, every request attaches to it, and the call counts
/// once (one `allowed` event), not once per request that judged it.
async fn identical_requests_for_one_call_count_it_once(stores: &Stores) {
    let policy = Arc::new(Policy::from_toml_str(TEN_A_DAY_LARGE_ASKED).unwrap());
    let tasks: Vec<_> = (0..10)
        .map(|index| {
            let store: Arc<dyn LedgerStore> = if index % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let policy = policy.clone();
            tokio::spawn(async move {
                match admit_held(store, policy, "chat-twins", &json!({"amount": 1}), Some("pay-once")).await {
                    held::Attached::Issued(record) => (true, record.approval_id, record.state),
                    held::Attached::Existing(record) => (false, record.approval_id, record.state),
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    assert_eq!(answers.iter().filter(|(issued, ..)| *issued).count(), 1, "one request issues the call: {answers:?}");
    assert!(answers.iter().all(|(_, id, state)| *id == answers[0].1 && *state == ApprovalState::Approved));
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(events.iter().filter(|event| event.kind == AuditKind::Allowed).count(), 1, "{events:#?}");
    let query = HistoryQuery { since: NOW - 1_000, scope: HistoryScope::Everyone, include_pending: true };
    assert_eq!(stores.b.history(&query).await.unwrap().entries.len(), 1, "the call counts once");
}

/// alice's held call of `transfer_money` with `input` in `chat` (keyed when
/// `key` names one), admitted on `store` as the call-gating API admits it,
/// judged by `policy` at [`NOW`].
async fn admit_held(
    store: Arc<dyn LedgerStore>,
    policy: Arc<Policy>,
    chat: &str,
    input: &Value,
    key: Option<&str>,
) -> held::Attached {
    let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let ledger = config.owned(Some("alice"), chat).principal("alice");
    let gate = StoredGate::new(policy, store.clone(), Some(ledger.conversation_id.clone()), None, NOW)
        .with_history(store, Arc::default());
    let caller = Caller {
        gate: Some(&gate),
        conversation_id: Some(&ledger.conversation_id),
        principal: Some("alice"),
        groups: &[],
    };
    let call = HeldCall { key, ..HeldCall::new("transfer_money", input) };
    let call_id = match key {
        Some(key) => held::keyed_call_id(&ledger.conversation_id, key),
        None => held::call_id_of(&ledger.conversation_id, "transfer_money", input).unwrap(),
    };
    let context = ApprovalContext::new(call_id, Vec::new());
    let tool = Tool::dynamic("transfer_money", json!({}));
    held::admit(&ledger, caller, &tool, context, call, Duration::ZERO).await.unwrap()
}

/// The rules of the question races: ten transfers a day (everyone's), large
/// ones asked, small ones allowed.
const TEN_A_DAY_LARGE_ASKED: &str = r#"
    [[rule]]
    name = "ten-a-day"
    action = "deny"
    tool = "transfer_money"
    history = { window = "24h", scope = "everyone", count = { gte = 10 } }

    [[rule]]
    name = "large"
    action = "ask"
    tool = "transfer_money"
    input = { "/amount" = { gt = 100 } }

    [[rule]]
    name = "small"
    action = "allow"
    tool = "transfer_money"
"#;

/// What one chat turn of [`chat_questions_are_issued_on_the_history_they_were_judged_on`] ended with.
#[derive(Debug, PartialEq)]
enum Turn {
    Ran,
    Asked,
    Denied,
}

/// One chat turn through the engine: even turns transfer a small amount
/// (allowed); odd ones first call a slow tool (so each question is judged
/// well before the turn's other calls finished), then transfer a large one.
async fn chat_turn(index: usize, store: Arc<dyn LedgerStore>, policy: Arc<Policy>) -> Turn {
    use toolgate::protocol::{ModelMessage, ToolResultOutput};
    use toolgate::{ScriptedModel, TextRequest, Toolkit, generate_text};
    let transfer =
        Tool::function::<Value>("transfer_money").handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
    let slow = Tool::function::<Value>("look_up").handler(|_: Value, _| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok::<_, ToolError>(json!("found"))
    });
    let toolkit = Toolkit::new(vec![transfer, slow]).unwrap();
    let call = |id: &str, tool: &str, input: Value| json!({"type": "tool-call", "toolCallId": id, "toolName": tool, "input": input});
    let calls = if index.is_multiple_of(2) {
        json!([call("t", "transfer_money", json!({"amount": 1}))])
    } else {
        json!([call("l", "look_up", json!({})), call("t", "transfer_money", json!({"amount": 1000}))])
    };
    let script = json!({"turns": [calls, [{"type": "text", "text": "done"}]]});
    let model = ScriptedModel::from_json(&script.to_string()).unwrap();
    let chat = format!("chat-{index}");
    let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let ledger = config.owned(Some("alice"), &chat).principal("alice");
    let gate = StoredGate::new(policy, store.clone(), Some(ledger.conversation_id.clone()), Some("alice".into()), NOW)
        .with_history(store, Arc::default());
    let request = TextRequest::new(vec![ModelMessage::user("pay")])
        .toolkit(toolkit)
        .gate(Arc::new(gate))
        .principal("alice")
        .ledger(ledger);
    let result = generate_text(&model, request).await.unwrap();
    let step = &result.steps[0];
    if !step.approval_requests.is_empty() {
        return Turn::Asked;
    }
    let transfer = step.tool_results.iter().find(|result| result.tool_name == "transfer_money").unwrap();
    match &transfer.output {
        ToolResultOutput::ExecutionDenied { .. } => Turn::Denied,
        _ => Turn::Ran,
    }
}

/// 50 chat turns at once, alternating between the two handles: each
/// question the engine issues is recorded only on the history it was judged
/// on, so the questions match a sequential order (none after the tenth
/// transfer that ran: from then on, every transfer is denied).
async fn chat_questions_are_issued_on_the_history_they_were_judged_on(stores: &Stores) {
    let policy = Arc::new(Policy::from_toml_str(TEN_A_DAY_LARGE_ASKED).unwrap());
    let tasks: Vec<_> = (0..50)
        .map(|index| {
            let store: Arc<dyn LedgerStore> = if index % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            tokio::spawn(chat_turn(index, store, policy.clone()))
        })
        .collect();
    let mut turns = Vec::new();
    for task in tasks {
        turns.push(task.await.unwrap());
    }
    let count = |turn: Turn| turns.iter().filter(|found| **found == turn).count();
    assert_eq!(count(Turn::Ran), 10, "exactly ten transfers run");
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    let allowed: Vec<i64> = events.iter().filter(|event| event.kind == AuditKind::Allowed).map(|e| e.seq).collect();
    let issued: Vec<i64> = events.iter().filter(|event| event.kind == AuditKind::Issued).map(|e| e.seq).collect();
    assert_eq!((allowed.len(), issued.len()), (10, count(Turn::Asked)));
    let tenth = allowed.iter().max().copied().unwrap();
    assert!(
        issued.iter().all(|seq| *seq < tenth),
        "a question was issued after the tenth transfer was recorded: {issued:?} after {tenth}"
    );
}

/// 50 held calls a person approved, claimed at once (alternating between the
/// two handles) against `count = { gte = 10 }`: each claim is judged again on
/// the history as it starts, so exactly 10 start; the others are denied
/// with the rule's reason, and none runs.
async fn fifty_approved_calls_claimed_against_a_limit_of_ten(stores: &Stores) {
    let rules = r#"
        [[rule]]
        name = "ten-a-day"
        action = "deny"
        tool = "transfer_money"
        history = { window = "24h", scope = "everyone", count = { gte = 10 } }

        [[rule]]
        name = "asked"
        action = "ask"
        tool = "transfer_money"
    "#;
    let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
    let config = LedgerConfig::new(stores.a.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let mut approved = Vec::new();
    for index in 0..50 {
        let ledger = config.owned(Some("alice"), &format!("chat-{index}")).principal("alice");
        approved.push(approved_call(&ledger, index).await);
    }
    let tasks: Vec<_> = approved
        .into_iter()
        .enumerate()
        .map(|(index, record)| {
            let store: Arc<dyn LedgerStore> = if index.is_multiple_of(2) { stores.a.clone() } else { stores.b.clone() };
            let policy = policy.clone();
            tokio::spawn(async move {
                let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
                let ledger = config.owned(Some("alice"), &format!("chat-{index}")).principal("alice");
                let gate = StoredGate::new(policy, store.clone(), Some(ledger.conversation_id.clone()), None, NOW)
                    .with_history(store, Arc::default());
                let tool = Tool::dynamic("transfer_money", json!({}));
                let judge = counted::Rejudge {
                    caller: Caller {
                        gate: Some(&gate),
                        conversation_id: Some(&ledger.conversation_id),
                        principal: Some("alice"),
                        groups: &[],
                    },
                    tool: &tool,
                    context: ApprovalContext::new(record.tool_call_id.clone(), Vec::new()),
                };
                held::start(&ledger, &record, false, Some(&judge)).await.unwrap()
            })
        })
        .collect();
    let (mut started, mut denied) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            held::Started::Run(record) => {
                assert_eq!(record.state, ApprovalState::Executing);
                started += 1;
            }
            held::Started::Elsewhere(record) => {
                assert_eq!(record.state, ApprovalState::Denied, "{record:?}");
                let reason = record.decision.as_ref().and_then(|decision| decision.reason.clone()).unwrap();
                assert!(reason.starts_with("rule `ten-a-day` matched"), "{reason}");
                denied += 1;
            }
        }
    }
    assert_eq!((started, denied), (10, 40), "exactly ten approved calls start");
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    let claimed = events.iter().filter(|event| event.kind == AuditKind::Allowed).count();
    let refused = events.iter().filter(|event| event.kind == AuditKind::Denied && event.data["atClaim"] == true);
    assert_eq!((claimed, refused.count()), (10, 40));
}

/// One chat's request for a transfer of `amount`, with `history`.
fn chat_request(
    index: usize,
    store: &Arc<dyn LedgerStore>,
    policy: &Arc<Policy>,
    history: Vec<toolgate::protocol::ModelMessage>,
) -> toolgate::TextRequest {
    let transfer =
        Tool::function::<Value>("transfer_money").handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
    let chat = format!("chat-{index}");
    let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let ledger = config.owned(Some("alice"), &chat).principal("alice");
    let gate =
        StoredGate::new(policy.clone(), store.clone(), Some(ledger.conversation_id.clone()), Some("alice".into()), NOW)
            .with_history(store.clone(), Arc::default());
    toolgate::TextRequest::new(history)
        .toolkit(toolgate::Toolkit::new(vec![transfer]).unwrap())
        .gate(Arc::new(gate))
        .principal("alice")
        .ledger(ledger)
}

/// 50 chats each asked about a transfer, then the 50 approvals answered in
/// the chats at once (alternating between the two handles) against a
/// limit of 10: each claim holds the history its call was judged on again,
/// so exactly 10 transfers run; the others are denied by the rule.
async fn fifty_chat_approvals_claimed_against_a_limit_of_ten(stores: &Stores) {
    use toolgate::protocol::ModelMessage;
    let rules = r#"
        [[rule]]
        name = "ten-a-day"
        action = "deny"
        tool = "transfer_money"
        history = { window = "24h", scope = "everyone", count = { gte = 10 } }

        [[rule]]
        name = "asked"
        action = "ask"
        tool = "transfer_money"
    "#;
    let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
    let call = json!({"type": "tool-call", "toolCallId": "t", "toolName": "transfer_money", "input": {"amount": 1}});
    let script = json!({"turns": [[call], [{"type": "text", "text": "done"}]]});
    let model = toolgate::ScriptedModel::from_json(&script.to_string()).unwrap();
    let mut answered = Vec::new();
    for index in 0..50 {
        let store = stores.a.clone();
        let mut history = vec![ModelMessage::user("pay")];
        let asked =
            toolgate::generate_text(&model, chat_request(index, &store, &policy, history.clone())).await.unwrap();
        let approval_id = asked.steps[0].approval_requests[0].approval_id.clone();
        history.extend(asked.response_messages);
        let answer = json!([{"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": approval_id, "approved": true}
        ]}]);
        history.extend(toolgate::protocol::parse_messages(answer).unwrap());
        answered.push(history);
    }
    let tasks: Vec<_> = answered
        .into_iter()
        .enumerate()
        .map(|(index, history)| {
            let store: Arc<dyn LedgerStore> = if index.is_multiple_of(2) { stores.a.clone() } else { stores.b.clone() };
            let (policy, model) = (policy.clone(), model.clone());
            tokio::spawn(async move {
                toolgate::generate_text(&model, chat_request(index, &store, &policy, history)).await.unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    let ran = events.iter().filter(|event| event.kind == AuditKind::Executed).count();
    let denied: Vec<&str> = events
        .iter()
        .filter(|event| event.kind == AuditKind::Denied)
        .filter_map(|event| event.data["reason"].as_str())
        .collect();
    assert_eq!(denied.len(), 40, "{denied:?}");
    assert!(denied.iter().all(|reason| reason.starts_with("rule `ten-a-day` matched")), "{denied:?}");
    assert_eq!(ran, 10, "exactly ten approved transfers run");
}

/// A held call a rule let through as the 10th of a limit of 10 (judged and
/// counted as it was issued) starts: its claim is not judged again on a
/// history that already counts it.
#[tokio::test]
async fn a_call_the_rules_approved_is_not_judged_again_at_its_start() {
    let stores = Stores::memory();
    let rules = r#"
        [[rule]]
        name = "ten-a-day"
        action = "deny"
        tool = "transfer_money"
        history = { window = "24h", scope = "everyone", count = { gte = 10 } }

        [[rule]]
        name = "small"
        action = "allow"
        tool = "transfer_money"
    "#;
    let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
    let config = LedgerConfig::new(stores.a.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let earlier: Vec<_> = (0..9)
        .map(|n| {
            let ledger = config.owned(Some("bob"), &format!("earlier-{n}")).principal("bob");
            let input = json!({"amount": n});
            let call = DirectCall { tool_call_id: "e", tool_name: "transfer_money", input: &input };
            direct::ran(&ledger, call, Ok(&json!(1)), NOW - 1_000)
        })
        .collect();
    stores.a.append(&earlier).await.unwrap();
    let ledger = config.owned(Some("alice"), "chat").principal("alice");
    let gate = StoredGate::new(policy, stores.a.clone(), Some(ledger.conversation_id.clone()), None, NOW)
        .with_history(stores.a.clone(), Arc::default());
    let caller = Caller {
        gate: Some(&gate),
        conversation_id: Some(&ledger.conversation_id),
        principal: Some("alice"),
        groups: &[],
    };
    let tool = Tool::dynamic("transfer_money", json!({}));
    let input = json!({"amount": 5});
    let call = HeldCall::new("transfer_money", &input);
    let call_id = held::call_id_of(&ledger.conversation_id, "transfer_money", &input).unwrap();
    let context = ApprovalContext::new(call_id.clone(), Vec::new());
    let record = match held::admit(&ledger, caller, &tool, context.clone(), call, Duration::ZERO).await.unwrap() {
        held::Attached::Issued(record) => record,
        held::Attached::Existing(record) => panic!("attached to {}", record.approval_id),
    };
    assert_eq!(record.state, ApprovalState::Approved, "the 10th passes");
    let judge = counted::Rejudge { caller, tool: &tool, context };
    let started = held::start(&ledger, &record, false, Some(&judge)).await.unwrap();
    assert!(matches!(started, held::Started::Run(_)), "{started:?}");
    stores.finish().await;
}

/// A held call of `transfer_money` issued `pending` in `ledger`'s
/// conversation, then approved by a person (alice).
async fn approved_call(ledger: &toolgate::ledger::Ledger, index: usize) -> toolgate::ledger::ApprovalRecord {
    let input = json!({"amount": index});
    let call = HeldCall { reason: Some("asked"), ..HeldCall::new("transfer_money", &input) };
    let record = match held::attach(ledger, call, Duration::ZERO).await.unwrap() {
        held::Attached::Issued(record) => record,
        held::Attached::Existing(record) => panic!("attached to {}", record.approval_id),
    };
    let data = json!({"toolName": "transfer_money", "input": input});
    let event = ledger.event(AuditKind::Approved, &record.approval_id, &record.tool_call_id, NOW, data);
    let mut decision = support::decision(true, "alice", NOW);
    decision.edited_input = None;
    let approve = Transition {
        approval_id: record.approval_id.clone(),
        from: ApprovalState::Pending,
        to: ApprovalState::Approved,
        guard: Guard::None,
        update: Update { decision: Some(decision), ..Update::default() },
        at: NOW,
        events: vec![event],
    };
    match ledger.config.store.apply(&[approve], &[]).await.unwrap().pop() {
        Some(TransitionOutcome::Moved(record)) => record,
        other => panic!("not approved: {other:?}"),
    }
}

suite!(
    reads_the_calls_of_a_scope_and_window,
    a_guard_holds_until_a_call_of_its_scope_is_recorded,
    fifty_calls_against_a_limit_of_ten,
    questions_are_issued_on_the_history_they_were_judged_on,
    identical_requests_for_one_call_count_it_once,
    chat_questions_are_issued_on_the_history_they_were_judged_on,
    fifty_approved_calls_claimed_against_a_limit_of_ten,
    fifty_chat_approvals_claimed_against_a_limit_of_ten,
);

/// On Postgres a guarded append checks its guard after it holds the log's
/// lock, on what was committed before it got it: a call that another writer
/// appended while holding the lock, committed while the guarded append
/// waited, moves the guard (a check on a snapshot taken before the lock
/// would miss it and let both calls through).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_guarded_append_sees_the_call_committed_while_it_waited_for_the_lock() {
    use sqlx::Connection;
    use toolgate::ledger::HistoryStore;
    let Some((url, name, database)) = support::fresh_postgres_database("history_lock_order").await else {
        return;
    };
    let spec = toolgate_store::StoreSpec::Postgres(database.clone());
    let store = Arc::new(toolgate_store::SqlStore::open(&spec).await.unwrap());
    let config = LedgerConfig::new(store.clone());
    let alice = config.owned(Some("alice"), "c1").principal("alice");
    let query = HistoryQuery {
        since: NOW - 1_000,
        scope: HistoryScope::Principal(Some("alice".into())),
        include_pending: false,
    };
    let guard = store.history(&query).await.unwrap().guard(query.clone());
    // Another writer takes the log's lock (the advisory lock every append
    // takes, "toolgate" in ASCII) and appends alice's call, not committed yet.
    let mut other = sqlx::PgConnection::connect(&database).await.unwrap();
    let mut open = other.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(8390047142196114533)::text").execute(&mut *open).await.unwrap();
    sqlx::query(
        "INSERT INTO audit_events (at, kind, approval_id, tool_call_id, conversation_id, owner, principal, data) \
         VALUES ($1, 'allowed', '', 'a1', 'c1', 'alice', 'alice', $2)",
    )
    .bind(NOW - 10)
    .bind(json!({"toolName": "t", "input": {"n": 1}}).to_string())
    .execute(&mut *open)
    .await
    .unwrap();
    let input = json!({"n": 2});
    let event = direct::allowed(&alice, DirectCall { tool_call_id: "a2", tool_name: "t", input: &input }, NOW);
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.append_if(&[guard], &[event]).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the guarded append waits for the log's lock");
    open.commit().await.unwrap();
    assert!(!waiting.await.unwrap().unwrap(), "the call committed meanwhile moved the guard");
    let read = store.history(&query).await.unwrap();
    assert_eq!(read.entries.len(), 1, "only the other writer's call is on record");
    other.close().await.ok();
    store.close().await;
    support::drop_postgres_database(&url, &name).await;
}
