//! Designated approvers on every `ApprovalStore`: routing, votes and reasons
//! stored with their approvals, votes counted under races, the inbox listing,
//! the marks of conversations due to continue, and `withdrawn` approvals
//! pruned. Run against the in-memory reference store, SQLite, and Postgres
//! when `TOOLGATE_TEST_POSTGRES_URL` is set
//! (`scripts/with-postgres.sh cargo test -p toolgate-store`).

#[macro_use]
mod support;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use support::{Stores, check, decision, event, lease, moved, record, record_of, transition, unsequenced};
use tokio::sync::Barrier;
use toolgate::Decision;
use toolgate::approval::lifecycle::{Routing, Vote, VoteOptions, Voter, cast};
use toolgate::ledger::ApprovalState::{Approved, Denied, Executing, Expired, Failed, Pending, Withdrawn};
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalState, ApprovalStore, AuditKind, AuditQuery, Guard, InboxStore, LedgerStore,
    ManualClock, MemoryStore, Pruned, StateFilter, Transition, TransitionOutcome, conversation_key,
};

/// The key of `owner`'s conversation `id`.
/// The keys [`owned`] made, with their owners: the fixtures record an
/// approval's owner as the engine does, from what made the key, never by splitting it.
static OWNERS: std::sync::LazyLock<std::sync::Mutex<HashMap<String, String>>> =
    std::sync::LazyLock::new(Default::default);

/// The key of `owner`'s conversation `id`.
fn owned(owner: &str, id: &str) -> String {
    let key = conversation_key(Some(owner), id);
    OWNERS.lock().unwrap().insert(key.clone(), owner.to_owned());
    key
}

/// A pending approval in the conversation `key`, with its owner when [`owned`] made the key.
fn in_conversation(id: &str, key: &str) -> ApprovalRecord {
    ApprovalRecord { owner: OWNERS.lock().unwrap().get(key).cloned(), ..record(id, key) }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// A pending approval issued at `issued_at`, routed to `approvers` (resolved to `members`).
fn routed(id: &str, conversation: &str, issued_at: i64, approvers: &[&str], members: &[&str]) -> ApprovalRecord {
    let mut routed = in_conversation(id, conversation);
    routed.issued_at = issued_at;
    routed.updated_at = issued_at;
    routed.routing =
        Some(Routing { approvers: strings(approvers), members: strings(members), quorum: 2, ..Routing::default() });
    routed
}

/// An unrouted pending approval issued at `issued_at`.
fn plain(id: &str, conversation: &str, issued_at: i64) -> ApprovalRecord {
    let mut plain = in_conversation(id, conversation);
    plain.issued_at = issued_at;
    plain.updated_at = issued_at;
    plain
}

/// `principal`'s vote (a denial's reason is the vote's own).
fn vote(principal: &str, approve: bool, at: i64) -> Vote {
    let decision = if approve { Decision::APPROVE } else { Decision::Deny { reason: None } };
    Vote {
        principal: Some(principal.to_owned()),
        decision,
        reason: (!approve).then(|| format!("no, says {principal}")),
        at,
    }
}

/// An inbox listing.
fn inbox(keys: Option<&[&str]>, states: StateFilter, conversation: Option<&str>, limit: usize) -> ApprovalQuery {
    ApprovalQuery {
        viewer_keys: keys.map(strings),
        states,
        conversation_id: conversation.map(str::to_owned),
        conversation_name: None,
        limit,
    }
}

/// The ids a listing shows, in its order (checking each record reads back whole).
async fn listed(store: &dyn LedgerStore, query: &ApprovalQuery) -> Vec<String> {
    let found = store.list_approvals(query).await.unwrap();
    let ids: Vec<String> = found.iter().map(|record| record.approval_id.clone()).collect();
    assert_eq!(store.approvals(&ids).await.unwrap(), found, "listed records read back whole");
    ids
}

/// A transition that marks its conversation due when it moves.
fn continuing(id: &str, from: ApprovalState, to: ApprovalState, at: i64) -> Transition {
    let mut change = transition(id, from, to, Guard::None, at);
    change.update.continuation = true;
    change
}

async fn routing_votes_and_reasons_read_back(stores: &Stores) {
    let store = &*stores.a;
    let chat = owned("alice", "chat");
    let mut alone = routed("r1", &chat, 10, &["group:finance", "dave"], &["bob", "carol", "dave"]);
    alone.votes = vec![vote("bob", true, 11)];
    alone.reason = Some("rule `payments` asks: ü ✓ \"q\"".to_owned());
    // One approval alone (the fused insert), then several (the transactional one).
    store.issue(std::slice::from_ref(&alone), &[event(AuditKind::Issued, "r1", "chat", 10, json!({}))]).await.unwrap();
    let mut voted = routed("r2", &chat, 12, &["carol"], &["carol"]);
    voted.votes = vec![vote("carol", false, 13), vote("erin", true, 14)];
    voted.routing.as_mut().unwrap().self_approval = true;
    let batch = [voted.clone(), plain("r3", &chat, 15)];
    store.issue(&batch, &[]).await.unwrap();
    let ids = strings(&["r3", "r1", "r2"]);
    assert_eq!(stores.b.approvals(&ids).await.unwrap(), vec![batch[1].clone(), alone.clone(), voted.clone()]);
    let calls = strings(&["call_r1", "call_r2"]);
    let mut found = stores.b.approvals_for_calls(&chat, &calls).await.unwrap();
    found.sort_by(|a, b| a.approval_id.cmp(&b.approval_id));
    assert_eq!(found, vec![alone.clone(), voted]);

    // A vote replaces the votes; none keeps them; an empty list clears them (and their count).
    let mut counted = transition("r1", Pending, Pending, Guard::Votes { count: 1, at: 20 }, 20);
    counted.update.votes = Some(vec![vote("bob", true, 11), vote("carol", true, 20)]);
    let now = record_of(&check(store, counted).await).clone();
    assert_eq!((now.votes.len(), now.reason.as_deref()), (2, alone.reason.as_deref()), "the reason is kept");
    let now = record_of(&check(store, transition("r1", Pending, Pending, Guard::None, 21)).await).clone();
    assert_eq!(now.votes.len(), 2, "a transition without votes keeps them");
    let mut cleared = transition("r1", Pending, Pending, Guard::None, 22);
    cleared.update.votes = Some(Vec::new());
    assert!(record_of(&check(store, cleared).await).votes.is_empty());
    let recount = transition("r1", Pending, Pending, Guard::Votes { count: 0, at: 23 }, 23);
    assert!(moved(&check(store, recount).await), "the count went back to 0 with the votes");
}

async fn the_votes_guard_refuses_a_stale_count_and_an_expired_record(stores: &Stores) {
    let store = &*stores.a;
    store.issue(&[routed("g", "conv", 10, &["bob", "carol"], &["bob", "carol"])], &[]).await.unwrap();
    let voting = |count: u32, at: i64, votes: Vec<Vote>, to: ApprovalState| {
        let mut change = transition("g", Pending, to, Guard::Votes { count, at }, at);
        change.update.votes = Some(votes);
        change.events = vec![event(AuditKind::Voted, "g", "conv", at, json!({"count": count, "at": at}))];
        change
    };
    let bob = vote("bob", true, 20);
    assert!(!moved(&check(store, voting(1, 20, vec![bob.clone()], Pending)).await), "a count it never had");
    assert!(!moved(&check(store, voting(0, 1000, vec![bob.clone()], Pending)).await), "expires_at == at: expired");
    assert!(moved(&check(store, voting(0, 999, vec![bob.clone()], Pending)).await), "pending stays pending");
    assert!(!moved(&check(store, voting(0, 30, vec![vote("carol", true, 30)], Approved)).await), "a stale count");
    // In a batch with another approval's transition (the transactional path).
    store.issue(&[record("other", "conv")], &[]).await.unwrap();
    let both = [
        voting(1, 40, vec![bob.clone(), vote("carol", true, 40)], Approved),
        transition("other", Pending, Denied, Guard::None, 40),
    ];
    let outcomes = stores.b.apply(&both, &[]).await.unwrap();
    assert!(outcomes.iter().all(moved), "{outcomes:?}");
    let decided = record_of(&outcomes[0]);
    assert_eq!((decided.state, decided.votes.len()), (Approved, 2));
    let again =
        [voting(2, 50, vec![], Denied), transition("other", Denied, Failed, Guard::Votes { count: 0, at: 50 }, 50)];
    let outcomes = store.apply(&again, &[]).await.unwrap();
    assert!(!moved(&outcomes[0]), "decided: no longer pending");
    assert!(moved(&outcomes[1]), "a record without votes has a count of 0");
    let logged: Vec<_> =
        store.audit(&AuditQuery::default()).await.unwrap().iter().map(|e| e.data["at"].clone()).collect();
    assert_eq!(logged, [json!(999), json!(40)], "only the votes that moved are logged");
}

/// Each voter reads the record, adds their vote and applies it on the
/// votes read, reading again when another vote came first.
async fn vote_with_retries(store: Arc<dyn LedgerStore>, voter: String, voters: usize) -> (bool, usize) {
    for attempt in 1..=200 {
        let read = store.approvals(&["contested".to_owned()]).await.unwrap().remove(0);
        let mut votes = read.votes.clone();
        votes.push(vote(&voter, true, 100));
        let decides = votes.len() == voters;
        let count = u32::try_from(read.votes.len()).unwrap();
        let mut change = transition(
            "contested",
            Pending,
            if decides { Approved } else { Pending },
            Guard::Votes { count, at: 100 },
            100,
        );
        change.update.votes = Some(votes);
        change.events = vec![event(AuditKind::Voted, "contested", "race", 100, json!({"voter": voter}))];
        if decides {
            change.update.decision = Some(decision(true, &voter, 100));
            change.events.push(event(AuditKind::Approved, "contested", "race", 100, json!({"voter": voter})));
        }
        match store.apply(std::slice::from_ref(&change), &[]).await.unwrap().remove(0) {
            TransitionOutcome::Moved(_) => return (decides, attempt),
            TransitionOutcome::Unmoved(_) => continue,
            TransitionOutcome::Missing => panic!("missing"),
        }
    }
    panic!("{voter} never got a vote in")
}

async fn racing_votes_are_all_counted_and_one_decides(stores: &Stores) {
    const VOTERS: usize = 6;
    let members: Vec<String> = (0..VOTERS).map(|n| format!("voter{n}")).collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut contested = routed("contested", "race", 10, &["group:ops"], &members);
    contested.routing.as_mut().unwrap().quorum = VOTERS as u32;
    stores.a.issue(&[contested], &[]).await.unwrap();
    let start = Arc::new(Barrier::new(VOTERS));
    let tasks: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(n, voter)| {
            let store = if n % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let (voter, start) = ((*voter).to_owned(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                vote_with_retries(store, voter, VOTERS).await
            })
        })
        .collect();
    let results: Vec<(bool, usize)> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(results.iter().filter(|(decided, _)| *decided).count(), 1, "exactly one vote decides: {results:?}");
    let after = stores.b.approvals(&["contested".to_owned()]).await.unwrap().remove(0);
    assert_eq!(after.state, Approved);
    let mut voters: Vec<String> = after.votes.iter().filter_map(|vote| vote.principal.clone()).collect();
    voters.sort();
    assert_eq!(voters, members, "every vote counted, once");
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    let kinds = |kind| events.iter().filter(|event| event.kind == kind).count();
    assert_eq!((kinds(AuditKind::Voted), kinds(AuditKind::Approved)), (VOTERS, 1));
}

/// The core's `cast` (what the inbox runs): three votes at once on a quorum
/// of three, one of them deciding and marking the conversation due.
async fn cast_votes_race_and_the_deciding_one_marks_the_conversation_due(stores: &Stores) {
    let chat = owned("alice", "chat");
    let mut approval = routed("cast", &chat, 10, &["group:finance"], &["bob", "carol", "dave"]);
    approval.routing.as_mut().unwrap().quorum = 3;
    stores.a.issue(&[approval], &[]).await.unwrap();
    let clock = Arc::new(ManualClock::new(20));
    let start = Arc::new(Barrier::new(3));
    let tasks: Vec<_> = ["bob", "carol", "dave"]
        .into_iter()
        .enumerate()
        .map(|(n, principal)| {
            let store = if n % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let (clock, start) = (clock.clone(), start.clone());
            let voter = Voter::new(Some(principal.to_owned()));
            tokio::spawn(async move {
                start.wait().await;
                let options = VoteOptions { continuation: true, ..VoteOptions::default() };
                cast(store.as_ref(), clock.as_ref(), "cast", &voter, Decision::APPROVE, options).await.unwrap()
            })
        })
        .collect();
    let records: Vec<ApprovalRecord> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(records.iter().filter(|record| record.state == Approved).count(), 1, "{records:?}");
    let after = stores.b.approvals(&["cast".to_owned()]).await.unwrap().remove(0);
    assert_eq!((after.state, after.votes.len()), (Approved, 3));
    assert_eq!(stores.b.due_continuations(20, 10).await.unwrap(), [chat]);
}

async fn continuation_marks_a_conversation_due_only_when_it_moves(stores: &Stores) {
    let store = &*stores.a;
    let (a, b) = (owned("alice", "a"), owned("bob", "b"));
    store.issue(&[record("m1", &a), record("m2", &b), record("m3", "c3")], &[]).await.unwrap();
    assert!(!moved(&check(store, continuing("m1", Approved, Executing, 10)).await));
    assert_eq!(
        store.apply(&[continuing("nobody", Pending, Denied, 10)], &[]).await.unwrap(),
        [TransitionOutcome::Missing]
    );
    let mut expired = continuing("m3", Pending, Expired, 10);
    expired.guard = Guard::ExpiredAt(10);
    assert!(!moved(&check(store, expired).await), "the guard failed");
    assert!(store.due_continuations(0, 10).await.unwrap().is_empty(), "nothing moved, nothing is due");

    let mut denied = continuing("m1", Pending, Denied, 20);
    denied.events = vec![event(AuditKind::Denied, "m1", "a", 20, json!({}))];
    assert!(moved(&check(store, denied).await));
    assert_eq!(stores.b.due_continuations(0, 10).await.unwrap(), std::slice::from_ref(&a));
    // In a batch: the one that moves marks, the one that does not, does not.
    let batch = [continuing("m2", Pending, Approved, 30), continuing("m3", Approved, Executing, 30)];
    let always = [event(AuditKind::Rejected, "m3", "c3", 30, json!({}))];
    let outcomes = store.apply(&batch, &always).await.unwrap();
    assert_eq!(outcomes.iter().map(moved).collect::<Vec<_>>(), [true, false]);
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), [a.clone(), b.clone()], "oldest mark first");
    assert_eq!(unsequenced(&store.audit(&AuditQuery::default()).await.unwrap()).len(), 2);

    // A claim and its start of execution (a pair the SQL stores may fuse) moves and marks as the reference does.
    store.issue(&[record("m4", "c4")], &[]).await.unwrap();
    let reference = MemoryStore::new();
    reference.issue(&[record("m4", "c4")], &[]).await.unwrap();
    let mut start_execution = transition("m4", Approved, Executing, Guard::None, 41);
    start_execution.update.lease = Some(lease("exe", 500));
    let pair = [continuing("m4", Pending, Approved, 40), start_execution];
    assert_eq!(store.apply(&pair, &[]).await.unwrap(), reference.apply(&pair, &[]).await.unwrap());
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), [a.clone(), b.clone(), "c4".to_owned()]);
    // Marking a conversation already due moves it last.
    store.issue(&[record("m5", &a)], &[]).await.unwrap();
    assert!(moved(&check(store, continuing("m5", Pending, Approved, 50)).await));
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), [b, "c4".to_owned(), a]);
}

/// Alice's conversation holds a plain approval and two routed ones (one to
/// finance and Dave, one to Carol), Bob's a plain one, and a conversation
/// without owner one; Alice also has a denied one.
async fn issue_inbox(store: &dyn LedgerStore) {
    let (alice, bob) = (owned("alice", "c1"), owned("bob", "c2"));
    let mut denied = plain("a4", &alice, 50);
    denied.state = Denied;
    let records = [
        plain("a1", &alice, 10),
        routed("a2", &alice, 20, &["group:finance", "dave"], &["bob", "carol", "dave"]),
        // Issued at the same time as a2: the later id comes first.
        routed("a3", &alice, 20, &["carol"], &["carol"]),
        plain("b1", &bob, 30),
        plain("n1", "c3", 40),
        denied,
    ];
    for record in &records[..3] {
        store.issue(std::slice::from_ref(record), &[]).await.unwrap();
    }
    store.issue(&records[3..], &[]).await.unwrap();
}

async fn the_inbox_lists_what_each_viewer_may_see_newest_first(stores: &Stores) {
    issue_inbox(&*stores.a).await;
    let store = &*stores.b;
    let pending = |keys: Option<&[&str]>| inbox(keys, StateFilter::Pending, None, 50);
    let ids = |query: ApprovalQuery| async move { listed(store, &query).await };
    assert_eq!(ids(pending(Some(&["alice"]))).await, ["a3", "a2", "a1"], "the requester's, newest first");
    assert_eq!(ids(pending(Some(&["carol"]))).await, ["a3", "a2"], "an approver's and a member's");
    assert_eq!(ids(pending(Some(&["group:finance", "carol"]))).await, ["a3", "a2"], "each approval once");
    assert_eq!(ids(pending(Some(&["carol", "carol"]))).await, ["a3", "a2"], "a key given twice");
    assert_eq!(ids(pending(Some(&["group:finance"]))).await, ["a2"]);
    assert_eq!(ids(pending(Some(&["bob"]))).await, ["b1", "a2"], "a requester and a member");
    assert_eq!(ids(pending(Some(&[""]))).await, ["n1"], "conversations without owner");
    assert_eq!(ids(pending(Some(&["mallory"]))).await, Vec::<String>::new());
    assert_eq!(ids(pending(Some(&[]))).await, Vec::<String>::new(), "no keys see nothing");
    assert_eq!(ids(pending(None)).await, ["n1", "b1", "a3", "a2", "a1"], "everyone's");
    assert_eq!(ids(inbox(Some(&["alice"]), StateFilter::Decided, None, 50)).await, ["a4"]);
    assert_eq!(ids(inbox(Some(&["alice"]), StateFilter::All, None, 50)).await, ["a4", "a3", "a2", "a1"]);
    assert_eq!(ids(inbox(None, StateFilter::Decided, None, 50)).await, ["a4"]);
    let alice = owned("alice", "c1");
    let in_chat = |keys: Option<&[&str]>, limit| inbox(keys, StateFilter::All, Some(&alice), limit);
    assert_eq!(ids(in_chat(Some(&["carol", "group:finance"]), 50)).await, ["a3", "a2"], "one conversation's");
    assert_eq!(ids(in_chat(None, 50)).await, ["a4", "a3", "a2", "a1"]);
    assert_eq!(ids(in_chat(None, 2)).await, ["a4", "a3"], "the newest first, up to the limit");
    assert_eq!(ids(in_chat(Some(&["bob"]), 50)).await, ["a2"], "a member sees only what names them");
    assert_eq!(ids(inbox(Some(&["carol"]), StateFilter::Pending, Some("c3"), 50)).await, Vec::<String>::new());
    assert_eq!(ids(inbox(Some(&["alice", "carol"]), StateFilter::Pending, None, 2)).await, ["a3", "a2"]);
    assert_eq!(ids(inbox(Some(&["alice"]), StateFilter::Pending, None, 0)).await, Vec::<String>::new());
    // A decision moves an approval from one listing to the other.
    assert!(moved(&check(store, transition("a3", Pending, Approved, Guard::None, 60)).await));
    assert_eq!(ids(pending(Some(&["carol"]))).await, ["a2"]);
    assert_eq!(ids(inbox(Some(&["carol"]), StateFilter::Decided, None, 50)).await, ["a3"]);
}

/// The inbox's conversation filter names a conversation as its approvals do
/// (the id the requester chose), whoever owns it: an approver filtering by
/// Alice's `c1` finds her routed approvals; an id that merely ends like it
/// does not match.
async fn the_inbox_filters_by_the_conversation_as_its_approvals_name_it(stores: &Stores) {
    issue_inbox(&*stores.a).await;
    let extra = [plain("x1", &owned("alice", "xc1"), 70), plain("x2", "c1", 80), plain("x3", "xc1", 90)];
    stores.a.issue(&extra, &[]).await.unwrap();
    let store = &*stores.b;
    let named = |keys: Option<&[&str]>, name: &str| ApprovalQuery {
        conversation_name: Some(name.to_owned()),
        ..inbox(keys, StateFilter::All, None, 50)
    };
    assert_eq!(listed(store, &named(Some(&["carol"]), "c1")).await, ["a3", "a2"], "an approver of Alice's");
    assert_eq!(listed(store, &named(Some(&["alice"]), "c1")).await, ["a4", "a3", "a2", "a1"]);
    assert_eq!(listed(store, &named(Some(&[""]), "c1")).await, ["x2"], "the conversation without owner");
    assert_eq!(listed(store, &named(None, "c1")).await, ["x2", "a4", "a3", "a2", "a1"]);
    assert_eq!(listed(store, &named(None, "xc1")).await, ["x3", "x1"]);
    assert_eq!(listed(store, &named(Some(&["bob"]), "c1")).await, ["a2"], "a member sees only what names them");
    assert_eq!(listed(store, &named(Some(&["carol"]), "1")).await, Vec::<String>::new(), "no suffix match");
}

/// A small deterministic generator (no dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Many approvals with many ties in their issue times: every listing gives
/// what the reference store gives.
async fn the_inbox_lists_as_the_reference_store_does(stores: &Stores) {
    let mut random = Lcg(7);
    let (owners, approvers, members) = (
        ["alice", "bob", "carol", ""],
        ["dave", "erin", "group:finance", "group:ops", "frank"],
        ["dave", "erin", "frank", "gina", "carol"],
    );
    let records: Vec<ApprovalRecord> = (0..300)
        .map(|n| {
            let owner = random.pick(&owners);
            let id = format!("c{}", random.below(4));
            let conversation = if owner.is_empty() { id } else { owned(owner, &id) };
            let issued_at = i64::try_from(random.below(40)).unwrap();
            let mut record = if random.below(2) == 0 {
                plain(&format!("ap_{:03}", random.below(1000) * 1000 + n), &conversation, issued_at)
            } else {
                let named = [random.pick(&approvers), random.pick(&approvers)];
                let resolved = [random.pick(&members)];
                routed(&format!("ap_{:03}", random.below(1000) * 1000 + n), &conversation, issued_at, &named, &resolved)
            };
            // Half pending, half in any state.
            if random.below(2) == 0 {
                record.state = ApprovalState::ALL[random.below(ApprovalState::ALL.len() as u64) as usize];
            }
            // A superseded approval names its successor (the stores' CHECK).
            if record.state == ApprovalState::Superseded {
                record.superseded_by = Some(format!("{}_next", record.approval_id));
            }
            record
        })
        .collect();
    let reference = MemoryStore::new();
    reference.issue(&records, &[]).await.unwrap();
    for chunk in records.chunks(7) {
        stores.a.issue(chunk, &[]).await.unwrap();
    }
    let keys: [Option<&[&str]>; 7] = [
        None,
        Some(&["alice"]),
        Some(&["dave"]),
        Some(&["group:finance", "dave"]),
        Some(&[""]),
        Some(&["erin", "frank", "gina", "group:ops"]),
        Some(&["carol", "alice", "bob", "", "dave"]),
    ];
    // More keys than the SQL stores walk one by one.
    let many: Vec<String> = (0..100).map(|n| format!("nobody{n}")).chain(["dave".to_owned()]).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let conversations = [None, Some(owned("alice", "c1")), Some("c2".to_owned())];
    for keys in keys.into_iter().chain([Some(many.as_slice())]) {
        for states in [StateFilter::Pending, StateFilter::Decided, StateFilter::All] {
            for conversation in &conversations {
                for limit in [1, 7, 50, 1000] {
                    let query = inbox(keys, states, conversation.as_deref(), limit);
                    let expected = reference.list_approvals(&query).await.unwrap();
                    assert_eq!(stores.b.list_approvals(&query).await.unwrap(), expected, "{query:?}");
                }
            }
        }
    }
}

async fn continuations_are_claimed_finished_and_listed(stores: &Stores) {
    let (store, other) = (&*stores.a, &*stores.b);
    assert_eq!(store.claim_continuation("c1", "exe_a", 100, 50, false).await.unwrap(), None, "not due");
    assert!(store.finish_continuation(&claim_of("c1", 1), "exe_a").await.unwrap(), "no mark: nothing to do");
    let first = store.claim_continuation("c1", "exe_a", 100, 50, true).await.unwrap().expect("marked and claimed");
    assert_eq!(first.conversation_id, "c1");
    assert!(store.due_continuations(50, 10).await.unwrap().is_empty(), "held until 100");
    assert_eq!(other.claim_continuation("c1", "exe_b", 150, 99, false).await.unwrap(), None, "held by exe_a");
    assert_eq!(other.claim_continuation("c1", "exe_b", 150, 99, true).await.unwrap(), None, "held, marked again");
    let renewed = store.claim_continuation("c1", "exe_a", 120, 99, false).await.unwrap().unwrap();
    assert!(renewed.generation > first.generation, "the mark was bumped by exe_b's request");
    // The holder's first claim is stale: finishing it releases the mark, which is due again.
    assert!(!other.finish_continuation(&renewed, "exe_b").await.unwrap(), "exe_b does not hold it");
    assert!(store.due_continuations(110, 10).await.unwrap().is_empty(), "still held");
    assert!(!store.finish_continuation(&first, "exe_a").await.unwrap(), "a decision came since the claim");
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), ["c1"], "released");
    let again = other.claim_continuation("c1", "exe_b", 150, 60, false).await.unwrap().unwrap();
    assert_eq!(again.generation, renewed.generation, "claiming does not bump");
    // exe_b's claim lapses at 150: exe_a takes it over, and exe_b cannot clear it.
    assert_eq!(store.claim_continuation("c1", "exe_a", 300, 149, false).await.unwrap(), None);
    assert_eq!(store.due_continuations(150, 10).await.unwrap(), ["c1"], "lapsed");
    let taken = store.claim_continuation("c1", "exe_a", 300, 150, false).await.unwrap().unwrap();
    assert!(!other.finish_continuation(&again, "exe_b").await.unwrap());
    assert!(store.finish_continuation(&taken, "exe_a").await.unwrap(), "cleared");
    assert!(store.due_continuations(0, 10).await.unwrap().is_empty());
    assert_eq!(store.claim_continuation("c1", "exe_a", 100, 50, false).await.unwrap(), None, "no longer due");
    // A new mark on a conversation whose mark was cleared takes a new generation.
    let later = other.claim_continuation("c1", "exe_b", 100, 50, true).await.unwrap().unwrap();
    assert!(later.generation > taken.generation, "generations are never reused");
    assert!(other.finish_continuation(&later, "exe_b").await.unwrap());
}

fn claim_of(conversation_id: &str, generation: i64) -> toolgate::ledger::ContinuationClaim {
    toolgate::ledger::ContinuationClaim { conversation_id: conversation_id.to_owned(), generation }
}

async fn due_continuations_come_oldest_mark_first(stores: &Stores) {
    let store = &*stores.a;
    let key = owned("alice", "c2");
    store.issue(&[record("d1", "c1"), record("d2", &key), record("d3", "c3"), record("d4", "c1")], &[]).await.unwrap();
    for id in ["d1", "d2", "d3"] {
        assert!(moved(&check(store, continuing(id, Pending, Denied, 10)).await));
    }
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), ["c1", key.as_str(), "c3"]);
    assert_eq!(store.due_continuations(0, 2).await.unwrap(), ["c1", key.as_str()]);
    assert!(store.due_continuations(0, 0).await.unwrap().is_empty());
    assert!(moved(&check(store, continuing("d4", Pending, Approved, 20)).await));
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), [key.as_str(), "c3", "c1"], "c1 marked again");
    // A held mark is left out until it lapses; its holder's claim keeps its place.
    let claim = stores.b.claim_continuation("c3", "exe", 100, 0, false).await.unwrap().unwrap();
    assert_eq!(store.due_continuations(99, 10).await.unwrap(), [key.as_str(), "c1"]);
    assert_eq!(store.due_continuations(100, 10).await.unwrap(), [key.as_str(), "c3", "c1"]);
    assert!(stores.b.finish_continuation(&claim, "exe").await.unwrap());
    assert_eq!(store.due_continuations(100, 10).await.unwrap(), [key.as_str(), "c1"]);
}

/// Executors race for one mark, on both handles: exactly one claims it.
async fn claims_race_and_one_wins(stores: &Stores) {
    for create in [false, true] {
        let conversation = format!("race-{create}");
        if !create {
            stores.a.issue(&[record("raced", &conversation)], &[]).await.unwrap();
            assert!(moved(&check(&*stores.a, continuing("raced", Pending, Denied, 10)).await));
        }
        let start = Arc::new(Barrier::new(16));
        let tasks: Vec<_> = (0..16)
            .map(|n| {
                let store = if n % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
                let (start, conversation) = (start.clone(), conversation.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    store.claim_continuation(&conversation, &format!("exe_{n}"), 1000, 10, create).await.unwrap()
                })
            })
            .collect();
        let claims: Vec<_> = futures::future::join_all(tasks).await.into_iter().filter_map(Result::unwrap).collect();
        assert_eq!(claims.len(), 1, "create: {create}");
        assert!(stores.a.due_continuations(10, 10).await.unwrap().is_empty(), "held by the winner");
    }
}

/// `withdrawn` is final: pruned like a denial, with its place in the inbox;
/// open approvals stay.
async fn withdrawn_approvals_are_pruned_and_leave_the_inbox(stores: &Stores) {
    let store = &*stores.a;
    let (old, open) = (owned("alice", "old"), owned("alice", "open"));
    store.issue(&[record("w1", &old)], &[event(AuditKind::Issued, "w1", "old", 10, json!({}))]).await.unwrap();
    let mut withdraw = continuing("w1", Pending, Withdrawn, 50);
    withdraw.guard = Guard::NotExpiredAt(50);
    withdraw.events = vec![event(AuditKind::Withdrawn, "w1", "old", 50, json!({}))];
    assert_eq!(record_of(&check(store, withdraw).await).state, Withdrawn);
    assert_eq!(store.due_continuations(0, 10).await.unwrap(), std::slice::from_ref(&old), "a withdrawal continues");
    let bulk: Vec<ApprovalRecord> = (0..5_001)
        .map(|n| {
            let mut done = routed(&format!("bulk{n:05}"), &owned("bob", "bulk"), 10, &["carol"], &["carol"]);
            done.state = Withdrawn;
            done
        })
        .collect();
    store.issue(&bulk, &[]).await.unwrap();
    let kept: Vec<ApprovalRecord> = [("p", Pending), ("a", Approved), ("e", Executing)]
        .into_iter()
        .map(|(id, state)| {
            let mut record = plain(id, &open, 10);
            record.state = state;
            record
        })
        .collect();
    store.issue(&kept, &[]).await.unwrap();
    let all = |key: &str| inbox(Some(&[key]), StateFilter::All, None, 10_000);
    assert_eq!(listed(store, &all("carol")).await.len(), 5_001);

    let pruned = store.prune(100).await.unwrap();
    assert_eq!(pruned, Pruned { approvals: 5_002, events: 2, conversations: 0 });
    assert_eq!(listed(&*stores.b, &all("alice")).await, ["p", "e", "a"], "open ones stay");
    assert!(listed(store, &all("carol")).await.is_empty());
    assert!(listed(store, &all("bob")).await.is_empty());
    // The id issued again elsewhere is listed under its new viewers only.
    store.issue(&[plain("w1", &owned("erin", "new"), 200)], &[]).await.unwrap();
    assert_eq!(listed(store, &all("alice")).await, ["p", "e", "a"], "nothing of w1 left under Alice");
    assert_eq!(listed(store, &all("erin")).await, ["w1"]);
    assert_eq!(store.prune(100).await.unwrap(), Pruned::default());
}

suite!(
    routing_votes_and_reasons_read_back,
    the_votes_guard_refuses_a_stale_count_and_an_expired_record,
    racing_votes_are_all_counted_and_one_decides,
    cast_votes_race_and_the_deciding_one_marks_the_conversation_due,
    continuation_marks_a_conversation_due_only_when_it_moves,
    the_inbox_lists_what_each_viewer_may_see_newest_first,
    the_inbox_lists_as_the_reference_store_does,
    the_inbox_filters_by_the_conversation_as_its_approvals_name_it,
    continuations_are_claimed_finished_and_listed,
    due_continuations_come_oldest_mark_first,
    claims_race_and_one_wins,
    withdrawn_approvals_are_pruned_and_leave_the_inbox,
);
