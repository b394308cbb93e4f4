//! Routed approvals on replicas: `delete_file` needs two of finance's
//! approvers; alice asks, bob and carol vote at the same moment on different
//! replicas, and the server continues each conversation itself.
//!
//! - Two replicas, 200 approvals (60 on SQLite), both votes of each fired
//!   concurrently at both replicas: every vote 200, every call executed
//!   exactly once, one `continued` event per conversation, and every stored
//!   conversation ends with the tool's output.
//! - SIGKILL while a continuation runs a slow tool: a restarted replica takes
//!   the continuation over once its claim lapses; nothing ran twice (the call
//!   resolves as interrupted, or executed if it finished), and the
//!   conversation is stored with that outcome.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use toolgate::ledger::{ApprovalState, AuditKind, AuditQuery};

use super::support::*;
use super::{Violations, drop_database, fresh_database, postgres_url, run};

/// A request as `user` (the replicas believe the `x-user` header).
async fn send_as(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    user: &str,
    body: Option<Value>,
) -> Result<Reply, String> {
    let mut request = client.request(method, url).header("x-user", user);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    let response = request.send().await.map_err(|error| format!("{error:?}"))?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|error| format!("{error:?}"))?;
    Ok(Reply { status, body })
}

/// Alice's first turn of chat `key` on `base`: the approval id.
async fn alice_asks(client: &reqwest::Client, base: &str, key: &str) -> Result<String, String> {
    let url = format!("{base}/api/chat");
    let reply = send_as(client, reqwest::Method::POST, url, "alice", Some(first_turn(key))).await?;
    let chunks = reply.chunks().map_err(|error| format!("{} {error}", reply.status))?;
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request");
    request.and_then(|chunk| chunk["approvalId"].as_str()).map(str::to_owned).ok_or(reply.body)
}

async fn vote(client: &reqwest::Client, base: &str, id: &str, user: &str) -> Result<Reply, String> {
    let url = format!("{base}/api/approvals/{id}");
    send_as(client, reqwest::Method::POST, url, user, Some(json!({"decision": "approve"}))).await
}

/// Whether alice's stored chat `key` ends with an outcome of the call.
async fn continued(client: &reqwest::Client, base: &str, key: &str) -> bool {
    let url = format!("{base}/api/chats/{key}");
    let Ok(reply) = send_as(client, reqwest::Method::GET, url, "alice", None).await else { return false };
    let Ok(chat) = serde_json::from_str::<Value>(&reply.body) else { return false };
    let last = chat["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
    last["parts"].as_array().into_iter().flatten().any(|part| {
        part["toolCallId"] == CALL_ID && part["state"].as_str().is_some_and(|state| state.starts_with("output-"))
    })
}

async fn votes_at_both_replicas(label: &str, postgres: Option<String>, count: usize) {
    let fixture = Fixture::new(label, postgres).await;
    let replicas = [
        fixture.spawn_routed(Duration::ZERO, Duration::from_secs(30)),
        fixture.spawn_routed(Duration::ZERO, Duration::from_secs(30)),
    ];
    let bases: Vec<String> = replicas.iter().map(Replica::base).collect();
    let client = client();
    let limit = Arc::new(Semaphore::new(16));
    let asks = (0..count).map(|n| {
        let (client, base, limit) = (client.clone(), bases[n % 2].clone(), limit.clone());
        async move {
            let _permit = limit.acquire().await.expect("the semaphore");
            let key = format!("routed-{n}");
            let id = alice_asks(&client, &base, &key).await.unwrap_or_else(|error| panic!("{key}: {error}"));
            (key, id)
        }
    });
    let asked: HashMap<String, String> = futures::future::join_all(asks).await.into_iter().collect();

    // Both votes of every approval at once, bob's at one replica and carol's at the other.
    let limit = Arc::new(Semaphore::new(32));
    let votes = asked.iter().enumerate().flat_map(|(n, (key, id))| {
        [("bob", n % 2), ("carol", (n + 1) % 2)].map(|(user, replica)| {
            let (client, base, limit, key, id) =
                (client.clone(), bases[replica].clone(), limit.clone(), key.clone(), id.clone());
            async move {
                let _permit = limit.acquire().await.expect("the semaphore");
                (key, user, vote(&client, &base, &id, user).await)
            }
        })
    });
    let mut violations = Violations::default();
    for (key, user, reply) in futures::future::join_all(votes).await {
        match reply {
            Ok(reply) => violations.check(reply.status == 200, "a vote was refused", || {
                format!("{key} {user}: {} {}", reply.status, reply.body)
            }),
            Err(error) => violations.add("transport error", format!("{key} {user}: {error}")),
        }
    }
    let all_continued = wait_until(Duration::from_secs(120), Duration::from_millis(200), async || {
        let checks = asked.keys().enumerate().map(|(n, key)| continued(&client, &bases[n % 2], key));
        futures::future::join_all(checks).await.into_iter().all(|done| done)
    })
    .await;
    violations.check(all_continued, "not every conversation was continued within 2 minutes", String::new);

    let executions = fixture.executions();
    let continuations = fixture.store.audit(&AuditQuery::default()).await.expect("the audit log");
    let mut per_conversation: HashMap<String, usize> = HashMap::new();
    for event in continuations.iter().filter(|event| event.kind == AuditKind::Continued) {
        *per_conversation.entry(event.conversation_id.clone()).or_default() += 1;
    }
    for (key, id) in &asked {
        let runs = executions.count(key);
        violations.check(runs == 1, "a call did not run exactly once", || format!("{key}: {runs} runs"));
        let continued = per_conversation.get(key).copied().unwrap_or(0);
        violations.check(continued == 1, "not one continuation per conversation", || format!("{key}: {continued}"));
        let record = fixture.store.approvals(std::slice::from_ref(id)).await.expect("the store").pop();
        let state = record.map(|record| record.state);
        violations
            .check(state == Some(ApprovalState::Executed), "a record is not executed", || format!("{key}: {state:?}"));
    }
    violations.assert_none(label);
}

#[test]
fn votes_at_both_replicas_run_each_call_once_with_one_continuation() {
    run(async {
        votes_at_both_replicas("routed-sqlite", None, 60).await;
        if let Some(url) = postgres_url("votes_at_both_replicas_run_each_call_once_with_one_continuation") {
            let database = fresh_database(&url).await;
            votes_at_both_replicas("routed-postgres", Some(database.clone()), 200).await;
            drop_database(&url, &database).await;
        }
    });
}

async fn killed_mid_continuation(label: &str, postgres: Option<String>) {
    let fixture = Fixture::new(label, postgres).await;
    // The tool takes 3 s; execution leases last 1 s (renewed while it runs).
    let mut first = fixture.spawn_routed(Duration::from_secs(3), Duration::from_secs(1));
    let client = client();
    let key = "killed-1";
    let id = alice_asks(&client, &first.base(), key).await.expect("alice asks");
    let ask_other = alice_asks(&client, &first.base(), "killed-2").await.expect("a second approval");
    for user in ["bob", "carol"] {
        let reply = vote(&client, &first.base(), &id, user).await.expect("the vote");
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let started = wait_until(Duration::from_secs(20), Duration::from_millis(20), async || {
        fixture.started().iter().any(|started| started == key)
    })
    .await;
    assert!(started, "{label}: the continuation started the tool");
    first.kill9();

    let second = fixture.spawn_routed(Duration::from_secs(3), Duration::from_secs(1));
    let done = wait_until(Duration::from_secs(30), Duration::from_millis(100), async || {
        continued(&client, &second.base(), key).await
    })
    .await;
    assert!(done, "{label}: the restarted replica took the continuation over");
    let record = fixture.store.approvals(std::slice::from_ref(&id)).await.expect("the store").remove(0);
    let runs = fixture.executions().count(key);
    let starts = fixture.started().iter().filter(|started| *started == key).count();
    assert_eq!(starts, 1, "{label}: never started twice");
    match record.state {
        ApprovalState::Interrupted => assert_eq!(runs, 0, "{label}: killed before it finished"),
        ApprovalState::Executed => assert_eq!(runs, 1, "{label}"),
        other => panic!("{label}: the call ended {other:?}"),
    }
    // The other approval was not lost: still pending, and still decidable.
    let other = fixture.store.approvals(std::slice::from_ref(&ask_other)).await.expect("the store").remove(0);
    assert_eq!(other.state, ApprovalState::Pending, "{label}");
    let reply = vote(&client, &second.base(), &ask_other, "erin").await.expect("a vote");
    assert_eq!(reply.status, 200, "{label}: {}", reply.body);
}

#[test]
fn a_continuation_killed_mid_run_is_taken_over_and_runs_nothing_twice() {
    run(async {
        killed_mid_continuation("routed-kill-sqlite", None).await;
        if let Some(url) = postgres_url("a_continuation_killed_mid_run_is_taken_over_and_runs_nothing_twice") {
            let database = fresh_database(&url).await;
            killed_mid_continuation("routed-kill-postgres", Some(database.clone())).await;
            drop_database(&url, &database).await;
        }
    });
}
