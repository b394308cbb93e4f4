//! The inbox at scale: `cargo run --release -p toolgate-store --example inbox -- [SPEC] [APPROVALS] [CONVERSATIONS] [APPROVERS]`.
//!
//! Fills a store with APPROVALS pending approvals (default 100,000) over
//! CONVERSATIONS conversations (default 10,000, owned by 500 requesters),
//! each routed to one of APPROVERS approvers (default 50) and one of five
//! groups, then times the inbox listings the server runs: one approver's
//! first 50 pending approvals, a voter's with their groups, a requester's,
//! one conversation's for an approver, and everyone's (an admin's). SPEC is
//! a `--store` value (default: a fresh SQLite file in a temporary directory).
//! Prints a markdown table.

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::approval::lifecycle::Routing;
use toolgate::ledger::{ApprovalQuery, ApprovalRecord, ApprovalState, LedgerStore, StateFilter, conversation_key};
use toolgate_store::{StoreSpec, open_store};

/// Listings timed per measure.
const LISTINGS: usize = 1_000;
/// Approvals issued per call while filling.
const BATCH: usize = 2_000;
/// The requesters owning the conversations.
const REQUESTERS: usize = 500;
/// The groups approvals are also routed to.
const GROUPS: usize = 5;
/// An inbox page.
const PAGE: usize = 50;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = tempfile::tempdir()?;
    let spec = StoreSpec::parse(&args.next().unwrap_or_else(|| "sqlite".into()), dir.path())?;
    let approvals: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(100_000);
    let conversations: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(10_000).max(1);
    let approvers: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(50).max(1);
    let store = open_store(&spec).await?.ok_or("this example needs a store")?;
    let run = uuid::Uuid::now_v7().simple().to_string();

    let started = Instant::now();
    for start in (0..approvals).step_by(BATCH) {
        let records: Vec<ApprovalRecord> =
            (start..(start + BATCH).min(approvals)).map(|n| routed(&run, n, conversations, approvers)).collect();
        store.issue(&records, &[]).await?;
    }
    let fill = started.elapsed();

    let approver = |n: usize| vec![format!("approver{:02}", (n * 7) % approvers)];
    let voter = |n: usize| {
        let mut keys = approver(n);
        keys.extend([format!("group:team{}", n % GROUPS), format!("group:team{}", (n + 2) % GROUPS)]);
        keys
    };
    let requester = |n: usize| vec![format!("user{:03}", (n * 13) % REQUESTERS)];
    let pending = |keys: Option<Vec<String>>, conversation_id: Option<String>| ApprovalQuery {
        viewer_keys: keys,
        states: StateFilter::Pending,
        conversation_id,
        conversation_name: None,
        limit: PAGE,
    };
    let one_approver = time(store.as_ref(), |n| pending(Some(approver(n)), None)).await?;
    let with_groups = time(store.as_ref(), |n| pending(Some(voter(n)), None)).await?;
    let one_requester = time(store.as_ref(), |n| pending(Some(requester(n)), None)).await?;
    let one_conversation = time(store.as_ref(), |n| {
        let index = (n * 7_919) % conversations;
        let chat = conversation_key(Some(&format!("user{:03}", index % REQUESTERS)), &format!("chat-{run}-{index}"));
        // With APPROVERS dividing CONVERSATIONS (the defaults), all of a conversation's approvals share one approver.
        pending(Some(vec![format!("approver{:02}", index % approvers)]), Some(chat))
    })
    .await?;
    let everyone = time(store.as_ref(), |_| pending(None, None)).await?;

    println!(
        "store: {spec}; {approvals} pending approvals, {conversations} conversations, {approvers} approvers, \
         {GROUPS} groups; filled in {:.1} s",
        fill.as_secs_f64()
    );
    println!();
    println!("| first {PAGE} pending of | mean | p50 | p99 |");
    println!("|---|---:|---:|---:|");
    println!("| one approver | {} |", one_approver.row());
    println!("| one approver with two groups | {} |", with_groups.row());
    println!("| one requester | {} |", one_requester.row());
    println!("| one conversation, for one approver | {} |", one_conversation.row());
    println!("| everyone (an admin) | {} |", everyone.row());
    Ok(())
}

/// Approval `n`: in conversation `n % conversations` (owned by requester
/// `conversation % 500`), routed to approver `n % approvers` and group `n % 5`.
fn routed(run: &str, n: usize, conversations: usize, approvers: usize) -> ApprovalRecord {
    let conversation = n % conversations;
    let owner = format!("user{:03}", conversation % REQUESTERS);
    let approver = format!("approver{:02}", n % approvers);
    let at = i64::try_from(n).unwrap_or(i64::MAX);
    ApprovalRecord {
        approval_id: format!("ap-{run}-{n:07}"),
        conversation_id: conversation_key(Some(&owner), &format!("chat-{run}-{conversation}")),
        owner: Some(owner.clone()),
        client: None,
        tool_call_id: format!("call-{n}"),
        tool_name: "pay_invoice".into(),
        input: json!({"invoice": n}),
        input_digest: "digest".into(),
        issued_at: at,
        expires_at: i64::MAX,
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: at,
        routing: Some(Routing {
            approvers: vec![approver.clone(), format!("group:team{}", n % GROUPS)],
            members: vec![approver],
            quorum: 2,
            self_approval: false,
            ..Routing::default()
        }),
        votes: Vec::new(),
        reason: None,
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    }
}

/// LISTINGS listings, the `n`th as `query(n)` asks; every one shows a full page.
async fn time(
    store: &dyn LedgerStore,
    query: impl Fn(usize) -> ApprovalQuery,
) -> Result<Timings, Box<dyn std::error::Error>> {
    let mut timings = Vec::with_capacity(LISTINGS);
    for n in 0..LISTINGS {
        let query = query(n);
        let started = Instant::now();
        let found = store.list_approvals(&query).await?;
        timings.push(started.elapsed());
        assert!(!found.is_empty(), "every listing shows approvals: {query:?}");
    }
    Ok(Timings(timings))
}

/// Latencies, summarised.
struct Timings(Vec<Duration>);

impl Timings {
    fn row(&self) -> String {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
        let mean = sorted.iter().sum::<Duration>() / sorted.len().max(1) as u32;
        format!("{:.3} ms | {:.3} ms | {:.3} ms", ms(mean), ms(at(0.5)), ms(at(0.99)))
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
