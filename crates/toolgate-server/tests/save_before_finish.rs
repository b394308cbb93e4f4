//! A client may answer as soon as a response says `finish` (before the body
//! ends): the server stores the conversation before it sends `finish`, so the
//! answer always finds its calls on record, even when the store is slow.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::approval::lifecycle::TimerAdvance;
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalStore, AttemptEnd, AuditEvent, AuditQuery, AuditStore, ContinuationClaim,
    ContinuationStore, ConversationStore, DecisionQuery, Delivery, InboxStore, LedgerConfig, LinkStore, MemoryStore,
    Millis, Outbound, OutboxQuery, OutboxStore, Pruned, StoreFuture, StoredConversation, StoredDecision, Transition,
    TransitionOutcome,
};

/// A memory store whose conversation saves take a while.
#[derive(Debug, Default)]
struct SlowSaves(MemoryStore);

impl ApprovalStore for SlowSaves {
    fn issue<'a>(&'a self, records: &'a [ApprovalRecord], events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        self.0.issue(records, events)
    }

    fn approvals<'a>(&'a self, ids: &'a [String]) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        self.0.approvals(ids)
    }

    fn approvals_for_calls<'a>(&'a self, id: &'a str, calls: &'a [String]) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        self.0.approvals_for_calls(id, calls)
    }

    fn apply<'a>(
        &'a self,
        moves: &'a [Transition],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Vec<TransitionOutcome>> {
        self.0.apply(moves, events)
    }

    fn append<'a>(&'a self, events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        self.0.append(events)
    }

    fn renew_leases<'a>(&'a self, executor: &'a str, until: Millis) -> StoreFuture<'a, u64> {
        self.0.renew_leases(executor, until)
    }

    fn due_timers(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<ApprovalRecord>> {
        self.0.due_timers(now, limit)
    }

    fn advance_timer<'a>(&'a self, advance: &'a TimerAdvance) -> StoreFuture<'a, bool> {
        self.0.advance_timer(advance)
    }
}

impl AuditStore for SlowSaves {
    fn audit<'a>(&'a self, query: &'a AuditQuery) -> StoreFuture<'a, Vec<AuditEvent>> {
        self.0.audit(query)
    }

    fn prune(&self, before: Millis) -> StoreFuture<'_, Pruned> {
        self.0.prune(before)
    }

    fn ready(&self) -> StoreFuture<'_, ()> {
        self.0.ready()
    }
}

impl toolgate::ledger::HistoryStore for SlowSaves {
    fn history<'a>(
        &'a self,
        query: &'a toolgate::ledger::HistoryQuery,
    ) -> StoreFuture<'a, toolgate::ledger::HistoryRead> {
        self.0.history(query)
    }

    fn append_if<'a>(
        &'a self,
        guards: &'a [toolgate::ledger::HistoryGuard],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool> {
        self.0.append_if(guards, events)
    }

    fn issue_if<'a>(
        &'a self,
        guards: &'a [toolgate::ledger::HistoryGuard],
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool> {
        self.0.issue_if(guards, records, events)
    }

    fn apply_if<'a>(
        &'a self,
        guards: &'a [toolgate::ledger::HistoryGuard],
        transitions: &'a [toolgate::ledger::Transition],
    ) -> StoreFuture<'a, Option<Vec<toolgate::ledger::TransitionOutcome>>> {
        self.0.apply_if(guards, transitions)
    }
}

impl ConversationStore for SlowSaves {
    fn conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        self.0.conversation(id)
    }

    fn save_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        messages: &'a Value,
        expected: Option<i64>,
        at: Millis,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.0.save_conversation(id, owner, messages, expected, at).await
        })
    }

    fn save_decision<'a>(&'a self, decision: &'a StoredDecision) -> StoreFuture<'a, ()> {
        self.0.save_decision(decision)
    }

    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        self.0.decisions(query)
    }

    fn revoke_decision<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredDecision>> {
        self.0.revoke_decision(id)
    }

    fn decisions_by<'a>(&'a self, author: Option<&'a str>, now: Millis) -> StoreFuture<'a, Vec<StoredDecision>> {
        self.0.decisions_by(author, now)
    }

    fn use_decision<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        events: &'a [toolgate::ledger::AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        self.0.use_decision(id, now, events)
    }

    fn use_decision_issuing<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        records: &'a [ApprovalRecord],
        events: &'a [toolgate::ledger::AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        self.0.use_decision_issuing(id, now, records, events)
    }
}

impl InboxStore for SlowSaves {
    fn list_approvals<'a>(&'a self, query: &'a ApprovalQuery) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        self.0.list_approvals(query)
    }

    fn count_pending(&self) -> StoreFuture<'_, u64> {
        self.0.count_pending()
    }
}

impl ContinuationStore for SlowSaves {
    fn claim_continuation<'a>(
        &'a self,
        conversation_id: &'a str,
        executor: &'a str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> StoreFuture<'a, Option<ContinuationClaim>> {
        self.0.claim_continuation(conversation_id, executor, until, now, create)
    }

    fn finish_continuation<'a>(&'a self, claim: &'a ContinuationClaim, executor: &'a str) -> StoreFuture<'a, bool> {
        self.0.finish_continuation(claim, executor)
    }

    fn due_continuations(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<String>> {
        self.0.due_continuations(now, limit)
    }
}

impl OutboxStore for SlowSaves {
    fn notify_cursor(&self) -> StoreFuture<'_, i64> {
        self.0.notify_cursor()
    }

    fn count_pending_deliveries(&self) -> StoreFuture<'_, u64> {
        self.0.count_pending_deliveries()
    }

    fn enqueue<'a>(&'a self, deliveries: &'a [Outbound], from: i64, to: i64) -> StoreFuture<'a, bool> {
        self.0.enqueue(deliveries, from, to)
    }

    fn claim_deliveries<'a>(
        &'a self,
        executor: &'a str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        self.0.claim_deliveries(executor, now, until, limit)
    }

    fn finish_attempt<'a>(&'a self, end: &'a AttemptEnd) -> StoreFuture<'a, bool> {
        self.0.finish_attempt(end)
    }

    fn deliveries<'a>(&'a self, query: &'a OutboxQuery) -> StoreFuture<'a, Vec<Delivery>> {
        self.0.deliveries(query)
    }
}

impl LinkStore for SlowSaves {
    fn consume_link<'a>(&'a self, link_id: &'a str, at: Millis, expires_at: Millis) -> StoreFuture<'a, bool> {
        self.0.consume_link(link_id, at, expires_at)
    }

    fn release_link<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, ()> {
        self.0.release_link(link_id)
    }

    fn link_used<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, bool> {
        self.0.link_used(link_id)
    }
}

/// Posts `body` and reads the stream only until its `finish` chunk; returns the chunks so far.
async fn until_finish(server: &Server, body: &Value) -> Vec<Value> {
    let url = format!("http://{}/api/chat", server.addr);
    let response = reqwest::Client::new().post(url).json(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut bytes = response.bytes_stream();
    let mut text = String::new();
    let mut chunks = Vec::new();
    while let Some(piece) = bytes.next().await {
        text.push_str(&String::from_utf8_lossy(&piece.unwrap()));
        while let Some(end) = text.find("\n\n") {
            let frame: String = text.drain(..end + 2).collect();
            if let Some(chunk) =
                frame.trim().strip_prefix("data: ").and_then(|data| serde_json::from_str::<Value>(data).ok())
            {
                let finished = chunk["type"] == "finish";
                chunks.push(chunk);
                if finished {
                    return chunks; // the body goes on; this client does not wait for it
                }
            }
        }
    }
    panic!("no finish chunk in {chunks:?}");
}

#[tokio::test]
async fn an_answer_sent_right_after_finish_finds_the_call_on_record() {
    let ledger = LedgerConfig::new(Arc::new(SlowSaves::default()));
    let server = start_configured(default_script(), move |config| config.ledger = Some(ledger)).await;
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]});
    let first = until_finish(&server, &json!({"id": "chat-1", "trigger": "submit-message", "messages": [user]})).await;
    let message_id = first[0]["messageId"].clone();
    let approval_id = first.iter().find(|c| c["type"] == "tool-approval-request").unwrap()["approvalId"].clone();

    let answer = json!({"id": "chat-1", "trigger": "submit-message", "messageId": message_id, "messages": [user,
        {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"path": "notes.txt"}, "approval": {"id": approval_id, "approved": true}}]}]});
    let reply = post(&server, "/api/chat", "application/json", answer.to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let output = reply.chunks().into_iter().find(|c| c["type"] == "tool-output-available");
    assert_eq!(output.unwrap()["output"], json!({"deleted": "notes.txt"}));
}
