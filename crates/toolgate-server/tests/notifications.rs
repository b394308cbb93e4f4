//! Notifications end to end: `[[notify]]` webhooks (signed JSON, Slack) and
//! e-mail over a real SMTP server on loopback, delivered from the store's
//! outbox with retries; the one-time links they carry (`GET` decides
//! nothing, `POST` decides once, as the right person); and escalation,
//! reminders and the deny step on the ledger's clock.
//!
//! The rule routes `delete_file` to `group:finance` (bob, carol, erin) with a
//! quorum of 2; alice asks; principals come from the `x-user` header.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::HeaderName;
use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{
    AuditKind, AuditQuery, DeliveryState, LedgerConfig, LedgerStore, ManualClock, MemoryStore, OutboxQuery,
};
use toolgate_notify::{Channels, NotifyConfig};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{Notifications, PrincipalSource, ServerConfig, TokenTable};
use toolgate_testkit::smtp::SmtpSink;
use toolgate_testkit::webhook::WebhookReceiver;

const PUBLIC: &str = "http://toolgate.test";
const SECRET: &str = "hook-secret";
const RULE: &str = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                    approvers = [\"group:finance\"]\nquorum = 2\nreason = \"finance signs off deletions\"\n";
const START: i64 = 1_700_000_000_000;

/// What a test server is made of.
struct Setup {
    rules: String,
    notify: String,
    store: Arc<dyn LedgerStore>,
    clock: Option<Arc<ManualClock>>,
    runs: Arc<AtomicUsize>,
    /// Bearer tokens instead of the `x-user` header.
    tokens: Option<TokenTable>,
}

impl Setup {
    fn new(notify: &str) -> Self {
        Self {
            rules: RULE.to_owned(),
            notify: notify.to_owned(),
            store: Arc::new(MemoryStore::new()),
            clock: None,
            runs: Arc::default(),
            tokens: None,
        }
    }

    fn tokens(mut self, tokens: &[(&str, &str)]) -> Self {
        let entries = tokens.iter().map(|(token, principal)| ((*token).to_owned(), (*principal).to_owned())).collect();
        self.tokens = Some(TokenTable::from_entries(entries).unwrap());
        self
    }

    fn rules(mut self, rules: &str) -> Self {
        self.rules = rules.to_owned();
        self
    }

    fn clock(mut self, clock: &Arc<ManualClock>) -> Self {
        self.clock = Some(Arc::clone(clock));
        self
    }

    fn store(mut self, store: &Arc<dyn LedgerStore>) -> Self {
        self.store = Arc::clone(store);
        self
    }

    /// The server's configuration change.
    fn configure(&self) -> impl FnOnce(&mut ServerConfig) + use<> {
        let (rules, runs, store, clock) =
            (self.rules.clone(), Arc::clone(&self.runs), Arc::clone(&self.store), self.clock.clone());
        let principals = match &self.tokens {
            Some(tokens) => PrincipalSource::Tokens(tokens.clone()),
            None => PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new()),
        };
        let notifications = channels(&self.notify).map(|channels| {
            Arc::new(Notifications::with_timeout(channels, Some(PUBLIC), Duration::from_secs(2)).unwrap())
        });
        move |config: &mut ServerConfig| {
            config.toolkit = counting_toolkit(runs);
            config.policy = PolicyHandle::new(Policy::from_toml_str(&rules).unwrap());
            config.principals = principals;
            let finance = ["bob", "carol", "erin"].map(str::to_owned).to_vec();
            config.groups =
                BTreeMap::from([("finance".to_owned(), finance), ("leads".to_owned(), vec!["dave".into()])]);
            let mut ledger = LedgerConfig::new(store);
            if let Some(clock) = clock {
                ledger = ledger.clock(clock);
            }
            config.ledger = Some(ledger);
            config.notifications = notifications;
        }
    }

    async fn start(&self) -> Server {
        start_configured(default_script(), self.configure()).await
    }
}

/// The channels of a `[[notify]]` text (none for an empty one); the hook secret comes from `HOOK_SECRET`.
fn channels(text: &str) -> Option<Channels> {
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        notify: Vec<NotifyConfig>,
        #[serde(default)]
        emails: BTreeMap<String, String>,
    }
    let file: File = toml::from_str(text).unwrap();
    if file.notify.is_empty() {
        return None;
    }
    Some(
        Channels::from_config(&file.notify, &file.emails, |name| (name == "HOOK_SECRET").then(|| SECRET.into()))
            .unwrap(),
    )
}

fn hook(url: &str, format: &str, extra: &str) -> String {
    format!(
        "[[notify]]\nname = \"ops\"\nwebhook = \"{url}\"\nsecret_env = \"HOOK_SECRET\"\nformat = \"{format}\"\n{extra}"
    )
}

/// A JSON request as `user`: the `x-user` header, or `Authorization: Bearer USER-token` on a server with tokens.
async fn call(server: &Server, method: &str, path: &str, user: &str, body: Option<Value>) -> Reply {
    let body = body.map(|body| body.to_string()).unwrap_or_default();
    let bearer = format!("Bearer {user}-token");
    let headers = [("content-type", "application/json"), ("x-user", user), ("authorization", bearer.as_str())];
    send(server, method, path, &headers, body.as_bytes()).await
}

/// Alice asks to delete notes.txt; the approval id.
async fn ask(server: &Server) -> String {
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let reply = call(server, "POST", "/api/chat", "alice", Some(body)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("an approval request");
    request["approvalId"].as_str().unwrap().to_owned()
}

async fn approve(server: &Server, id: &str, user: &str) -> Reply {
    call(server, "POST", &format!("/api/approvals/{id}"), user, Some(json!({"decision": "approve"}))).await
}

async fn item(server: &Server, id: &str, user: &str) -> Reply {
    call(server, "GET", &format!("/api/approvals/{id}"), user, None).await
}

/// The audit kinds of one approval, oldest first.
async fn kinds(store: &Arc<dyn LedgerStore>, id: &str) -> Vec<AuditKind> {
    let events = store.audit(&AuditQuery::default()).await.unwrap();
    events.into_iter().filter(|event| event.approval_id == id).map(|event| event.kind).collect()
}

/// Waits until `check` holds (or fails the test after 15 s).
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path of a link (`/a/TOKEN`).
fn path_of(link: &Value) -> String {
    link.as_str().unwrap().strip_prefix(PUBLIC).expect("links start with the public URL").to_owned()
}

/// A form POST to a link as `user`.
async fn post_link(server: &Server, path: &str, user: &str, form: &str) -> Reply {
    let headers = [("content-type", "application/x-www-form-urlencoded"), ("x-user", user)];
    send(server, "POST", path, &headers, form.as_bytes()).await
}

#[tokio::test]
async fn every_event_is_signed_and_delivered_once_with_links() {
    let receiver = WebhookReceiver::start(SECRET);
    let setup = Setup::new(&hook(&receiver.url(), "json", ""));
    let server = setup.start().await;
    let id = ask(&server).await;
    let requested =
        receiver.wait_for(|r| r.iter().any(|r| r.event_type == "approval.requested"), Duration::from_secs(10)).await;
    let request = requested.iter().find(|r| r.event_type == "approval.requested").unwrap();
    assert!(request.signature_ok && request.signature.as_deref().is_some_and(|s| s.starts_with("t=")));
    let body = &request.body;
    assert_eq!(body["type"], "approval.requested");
    assert_eq!(body["approval"]["id"], id.as_str());
    assert_eq!(body["approval"]["tool"], "delete_file");
    assert_eq!(body["approval"]["input"], json!({"path": "notes.txt"}));
    assert_eq!(body["approval"]["approvers"], json!(["group:finance"]));
    assert_eq!(body["links"]["view"], format!("{PUBLIC}/approvals/{id}"));
    assert!(path_of(&body["links"]["approve"]).starts_with("/a/"));
    // The item is the inbox's item, exactly.
    assert_eq!(body["approval"], item(&server, &id, "bob").await.json());

    assert_eq!(approve(&server, &id, "bob").await.status, 200);
    assert_eq!(approve(&server, &id, "carol").await.status, 200);
    let all = receiver
        .wait_for(
            |r| ["approval.decided", "approval.executed"].iter().all(|t| r.iter().any(|r| r.event_type == *t)),
            Duration::from_secs(15),
        )
        .await;
    assert_eq!(setup.runs.load(Ordering::SeqCst), 1, "the server continued the run");
    assert!(receiver.signature_failures().is_empty());
    let deliveries = receiver.deliveries();
    assert!(deliveries.iter().all(|delivery| delivery.attempts == 1), "{deliveries:?}");
    let mut event_ids: Vec<&str> = all.iter().map(|r| r.body["id"].as_str().unwrap()).collect();
    event_ids.sort_unstable();
    event_ids.dedup();
    assert_eq!(event_ids.len(), all.len(), "every event has its own id");
    let decided = all.iter().find(|r| r.event_type == "approval.decided").unwrap();
    assert_eq!(decided.body["approval"]["state"], "approved");
    assert!(decided.body.get("links").is_none(), "a decided approval's event carries no links");
    eventually("the notified audit events", || async { kinds(&setup.store, &id).await.contains(&AuditKind::Notified) })
        .await;
}

#[tokio::test]
async fn failed_attempts_are_retried_with_the_same_delivery_id_honouring_retry_after() {
    let receiver = WebhookReceiver::start(SECRET);
    receiver.respond_with(vec![(500, None), (429, Some(3))]);
    let setup = Setup::new(&hook(&receiver.url(), "json", "events = [\"approval.requested\"]\n"));
    let server = setup.start().await;
    let id = ask(&server).await;
    let first = receiver.wait_for(|r| r.len() == 2, Duration::from_secs(15)).await;
    let after_second = Instant::now();
    let third = receiver.wait_for(|r| r.len() == 3, Duration::from_secs(15)).await;
    assert!(after_second.elapsed() >= Duration::from_millis(2_800), "Retry-After: 3 was honoured");
    assert_eq!(first[0].delivery_id, third[2].delivery_id, "one delivery, the same id on every attempt");
    assert_eq!(third.iter().map(|r| r.status).collect::<Vec<_>>(), [500, 429, 200]);
    assert_eq!(receiver.deliveries().len(), 1);
    eventually("the attempts on record", || async {
        let deliveries = setup
            .store
            .deliveries(&OutboxQuery { approval_id: Some(id.clone()), limit: 10, ..Default::default() })
            .await
            .unwrap();
        deliveries.len() == 1 && deliveries[0].state == DeliveryState::Delivered && deliveries[0].attempts == 3
    })
    .await;
    let kinds = kinds(&setup.store, &id).await;
    assert_eq!(kinds.iter().filter(|kind| **kind == AuditKind::NotificationFailed).count(), 2);
    assert_eq!(kinds.iter().filter(|kind| **kind == AuditKind::Notified).count(), 1);
    // Every attempt is counted once it is recorded: two failed, one delivered.
    let failed = "toolgate_notifications_total{channel=\"ops\",outcome=\"failed\"} 2";
    let delivered = "toolgate_notifications_total{channel=\"ops\",outcome=\"delivered\"} 1";
    eventually("the attempts counted", || async {
        let text = server.state.metrics().render();
        text.lines().any(|line| line == failed) && text.lines().any(|line| line == delivered)
    })
    .await;
}

#[tokio::test]
async fn a_receiver_that_is_down_slows_nothing_and_its_events_wait() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let setup = Setup::new(&hook(&url, "json", ""));
    let server = setup.start().await;
    let id = ask(&server).await;
    assert_eq!(approve(&server, &id, "bob").await.status, 200);
    assert_eq!(approve(&server, &id, "carol").await.status, 200);
    eventually("the continued run", || async { setup.runs.load(Ordering::SeqCst) == 1 }).await;
    eventually("a failed attempt on record", || async {
        let query = OutboxQuery { approval_id: Some(id.clone()), limit: 10, ..Default::default() };
        let deliveries = setup.store.deliveries(&query).await.unwrap();
        deliveries.iter().any(|d| d.attempts >= 1 && d.last_error.is_some())
            && deliveries.iter().all(|d| d.state == DeliveryState::Pending)
    })
    .await;
    assert!(kinds(&setup.store, &id).await.contains(&AuditKind::NotificationFailed));
    // What waits is counted in the store: the outbox's deliveries (all pending here), and no approval.
    let store = server.state.config().ledger.as_ref().unwrap().store.clone();
    eventually("the waiting deliveries counted", || async {
        let query = OutboxQuery { limit: 100, ..Default::default() };
        let waiting = setup.store.deliveries(&query).await.unwrap().len();
        let text = server.state.metrics().scrape(Some(store.as_ref())).await;
        waiting >= 1
            && setup.store.count_pending_deliveries().await.unwrap() == waiting as u64
            && text.lines().any(|line| line == format!("toolgate_outbox_pending {waiting}"))
            && text.lines().any(|line| line == "toolgate_approvals_pending 0")
    })
    .await;
}

#[tokio::test]
async fn slack_messages_carry_buttons_that_open_the_links() {
    let receiver = WebhookReceiver::start_unsigned();
    let notify = format!("[[notify]]\nname = \"chat\"\nwebhook = \"{}\"\nformat = \"slack\"\n", receiver.url());
    let server = Setup::new(&notify).start().await;
    ask(&server).await;
    let requests = receiver.wait_for(|r| !r.is_empty(), Duration::from_secs(10)).await;
    let message = &requests[0].body;
    assert!(message["text"].as_str().unwrap().contains("delete_file"), "{message}");
    let buttons: Vec<&Value> = message["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "actions")
        .flat_map(|block| block["elements"].as_array().unwrap())
        .collect();
    assert!(
        buttons
            .iter()
            .any(|b| b["style"] == "primary" && b["url"].as_str().unwrap().starts_with(&format!("{PUBLIC}/a/")))
    );
    assert!(
        buttons
            .iter()
            .any(|b| b["style"] == "danger" && b["url"].as_str().unwrap().starts_with(&format!("{PUBLIC}/a/")))
    );
}

/// An e-mail channel to the approvers over the sink, with `[emails]` for finance.
fn mail_channel(sink: &SmtpSink) -> String {
    format!(
        "[emails]\nbob = \"bob@example.com\"\ncarol = \"carol@example.com\"\nerin = \"erin@example.com\"\n\
         [[notify]]\nname = \"mail\"\nsmtp = \"smtp://127.0.0.1:{}\"\ntls = \"none\"\n\
         from = \"toolgate <approvals@example.com>\"\nto = [\"approvers\"]\nevents = [\"approval.requested\"]\n",
        sink.port()
    )
}

/// The approve link in a mail's text.
fn mail_link(mail: &toolgate_testkit::smtp::ReceivedMail, choice: &str) -> String {
    let text = mail.text.clone().unwrap_or_default();
    let links: Vec<&str> = text.split_whitespace().filter(|word| word.starts_with(&format!("{PUBLIC}/a/"))).collect();
    assert_eq!(links.len(), 2, "an approve and a deny link: {text}");
    let index = usize::from(choice == "deny");
    let pos_approve = text.find(links[0]).unwrap();
    let pos_deny = text.find(links[1]).unwrap();
    assert!(pos_approve < pos_deny);
    links[index].strip_prefix(PUBLIC).unwrap().to_owned()
}

#[tokio::test]
async fn mails_go_to_each_approver_and_their_links_decide_as_them_only() {
    let sink = SmtpSink::start();
    let setup = Setup::new(&mail_channel(&sink));
    let server = setup.start().await;
    let id = ask(&server).await;
    let mails = sink.wait_for(3, Duration::from_secs(15)).await;
    let mut to: Vec<String> = mails.iter().flat_map(|mail| mail.to.clone()).collect();
    to.sort();
    assert_eq!(to, ["bob@example.com", "carol@example.com", "erin@example.com"]);
    assert!(mails.iter().all(|mail| mail.subject.contains("delete_file")), "{:?}", mails[0].subject);
    let of = |address: &str| mails.iter().find(|mail| mail.to == [address]).unwrap().clone();
    let (bob, carol) = (of("bob@example.com"), of("carol@example.com"));
    assert!(bob.header("toolgate-delivery").is_some());

    // GET decides nothing.
    let page = send(&server, "GET", &mail_link(&bob, "approve"), &[], b"").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("notes.txt") && page.body.contains("Approve"), "{}", page.body);
    assert_eq!(item(&server, &id, "bob").await.json()["votes"], json!([]));

    // Carol's link opened by erin: a forwarded mail is not a delegation.
    let forwarded = post_link(&server, &mail_link(&carol, "approve"), "erin", "").await;
    assert_eq!(forwarded.status, 403, "{}", forwarded.body);
    assert_eq!(item(&server, &id, "bob").await.json()["votes"], json!([]));

    let first = post_link(&server, &mail_link(&bob, "approve"), "bob", "").await;
    assert_eq!(first.status, 200, "{}", first.body);
    let again = post_link(&server, &mail_link(&bob, "approve"), "bob", "").await;
    assert_eq!(again.status, 410, "a link is used once: {}", again.body);
    assert!(again.body.contains("used"), "{}", again.body);
    assert_eq!(setup.runs.load(Ordering::SeqCst), 0);

    // Carol's own link completes the quorum, and the server continues the run.
    assert_eq!(post_link(&server, &mail_link(&carol, "approve"), "carol", "").await.status, 200);
    eventually("the continued run", || async { setup.runs.load(Ordering::SeqCst) == 1 }).await;
    let decided = post_link(&server, &mail_link(&of("erin@example.com"), "deny"), "erin", "reason=late").await;
    assert_eq!(decided.status, 410, "already decided: {}", decided.body);
    assert!(decided.body.contains("already decided"), "{}", decided.body);
}

#[tokio::test]
async fn tampered_and_expired_links_change_nothing() {
    let clock = Arc::new(ManualClock::new(START));
    let receiver = WebhookReceiver::start(SECRET);
    let setup = Setup::new(&hook(&receiver.url(), "json", "events = [\"approval.requested\"]\n")).clock(&clock);
    let server = setup.start().await;
    let id = ask(&server).await;
    let requests = receiver.wait_for(|r| !r.is_empty(), Duration::from_secs(10)).await;
    let deny = path_of(&requests[0].body["links"]["deny"]);
    let mut tampered = deny.clone();
    tampered.insert(10, if deny.as_bytes()[10] == b'A' { 'B' } else { 'A' });
    let refused = post_link(&server, &tampered, "bob", "").await;
    assert_eq!(refused.status, 410);
    assert!(refused.body.contains("altered"), "{}", refused.body);
    assert_eq!(send(&server, "GET", &tampered, &[], b"").await.status, 410);
    clock.advance(Duration::from_secs(25 * 60 * 60));
    let expired = post_link(&server, &deny, "bob", "reason=no").await;
    assert_eq!(expired.status, 410);
    assert!(expired.body.contains("expired"), "{}", expired.body);
    let votes = item(&server, &id, "bob").await.json()["votes"].clone();
    assert_eq!(votes, json!([]), "nothing was recorded");
}

#[tokio::test]
async fn a_webhook_link_counts_for_any_signed_in_approver_and_a_denial_takes_its_reason() {
    let receiver = WebhookReceiver::start(SECRET);
    let setup = Setup::new(&hook(&receiver.url(), "json", "events = [\"approval.requested\"]\n"));
    let server = setup.start().await;
    let id = ask(&server).await;
    let requests = receiver.wait_for(|r| !r.is_empty(), Duration::from_secs(10)).await;
    let deny = path_of(&requests[0].body["links"]["deny"]);
    let outsider = post_link(&server, &deny, "mallory", "reason=no").await;
    assert_eq!(outsider.status, 403, "{}", outsider.body);
    let denied = post_link(&server, &deny, "erin", "reason=not+today").await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    let item = item(&server, &id, "erin").await.json();
    assert_eq!(item["state"], "denied");
    assert_eq!(item["votes"][0]["principal"], "erin");
    assert_eq!(item["votes"][0]["reason"], "not today");
}

#[tokio::test]
async fn a_bearer_link_votes_as_its_channel_once() {
    let receiver = WebhookReceiver::start(SECRET);
    let setup = Setup::new(&hook(&receiver.url(), "json", "events = [\"approval.requested\"]\nlinks = \"bearer\"\n"));
    let server = setup.start().await;
    let id = ask(&server).await;
    let requests = receiver.wait_for(|r| !r.is_empty(), Duration::from_secs(10)).await;
    let approve_link = path_of(&requests[0].body["links"]["approve"]);
    let voted =
        send(&server, "POST", &approve_link, &[("content-type", "application/x-www-form-urlencoded")], b"").await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    let item = item(&server, &id, "bob").await.json();
    assert_eq!(item["state"], "pending", "one vote of a quorum of 2");
    assert_eq!(item["votes"][0]["principal"], "link:ops");
    assert_eq!(approve(&server, &id, "bob").await.status, 200);
    eventually("the continued run", || async { setup.runs.load(Ordering::SeqCst) == 1 }).await;
}

const ESCALATING: &str = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
    approvers = [\"group:finance\"]\nquorum = 1\n\
    escalate = [{ after = \"15m\", to = [\"group:leads\"] }, { after = \"1h\", action = \"deny\" }]\n";

#[tokio::test]
async fn an_escalation_adds_approvers_on_time_and_notifies_them() {
    let clock = Arc::new(ManualClock::new(START));
    let receiver = WebhookReceiver::start(SECRET);
    let setup = Setup::new(&hook(&receiver.url(), "json", "")).rules(ESCALATING).clock(&clock);
    let server = setup.start().await;
    let id = ask(&server).await;
    clock.advance(Duration::from_secs(14 * 60));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(item(&server, &id, "dave").await.status, 404, "not an approver before the delay");
    assert_eq!(approve(&server, &id, "dave").await.status, 404);
    clock.advance(Duration::from_secs(60));
    eventually("the escalation", || async { item(&server, &id, "dave").await.status == 200 }).await;
    assert_eq!(item(&server, &id, "dave").await.json()["approvers"], json!(["group:finance", "group:leads"]));
    let escalated =
        receiver.wait_for(|r| r.iter().any(|r| r.event_type == "approval.escalated"), Duration::from_secs(10)).await;
    assert!(escalated.iter().any(|r| r.event_type == "approval.escalated" && r.body["links"]["approve"].is_string()));
    assert_eq!(approve(&server, &id, "dave").await.status, 200);
    eventually("the continued run", || async { setup.runs.load(Ordering::SeqCst) == 1 }).await;
    assert_eq!(kinds(&setup.store, &id).await.iter().filter(|k| **k == AuditKind::Escalated).count(), 1);
}

#[tokio::test]
async fn the_deny_step_resolves_an_unanswered_approval_and_the_model_is_told() {
    let clock = Arc::new(ManualClock::new(START));
    let setup = Setup::new("").rules(ESCALATING).clock(&clock);
    let server = setup.start().await;
    let id = ask(&server).await;
    clock.advance(Duration::from_secs(61 * 60));
    eventually("the denial", || async { item(&server, &id, "alice").await.json()["state"] == "denied" }).await;
    let item = item(&server, &id, "alice").await.json();
    assert_eq!(item["votes"][0]["principal"], "toolgate");
    assert_eq!(item["votes"][0]["reason"], "not answered within 1h");
    eventually("the continued chat", || async {
        let reply = call(&server, "GET", "/api/chats/chat-1", "alice", None).await;
        reply.body.contains("not answered within 1h")
    })
    .await;
    assert_eq!(setup.runs.load(Ordering::SeqCst), 0, "nothing ran");
}

#[tokio::test]
async fn reminders_renotify_the_approvers_who_have_not_voted() {
    let clock = Arc::new(ManualClock::new(START));
    let sink = SmtpSink::start();
    let rules = format!("{RULE}remind = \"10m\"\n");
    let notify = mail_channel(&sink);
    let setup = Setup::new(&notify).rules(&rules).clock(&clock);
    let server = setup.start().await;
    let id = ask(&server).await;
    sink.wait_for(3, Duration::from_secs(15)).await;
    assert_eq!(approve(&server, &id, "bob").await.status, 200);
    clock.advance(Duration::from_secs(10 * 60));
    let mails = sink.wait_for(5, Duration::from_secs(15)).await;
    let reminded: Vec<&Vec<String>> = mails[3..].iter().map(|mail| &mail.to).collect();
    assert!(reminded.iter().all(|to| to[0] != "bob@example.com"), "bob voted: {reminded:?}");
    assert_eq!(kinds(&setup.store, &id).await.iter().filter(|k| **k == AuditKind::Reminded).count(), 1);
}

#[tokio::test]
async fn two_replicas_fire_each_timer_once_and_a_restart_between_timers_loses_none() {
    let clock = Arc::new(ManualClock::new(START));
    let store: Arc<dyn LedgerStore> = Arc::new(MemoryStore::new());
    let first = Setup::new("").rules(ESCALATING).clock(&clock).store(&store);
    let (one, stop_one) = start_stoppable(default_script(), first.configure()).await;
    let (two, stop_two) = start_stoppable(default_script(), first.configure()).await;
    let id = ask(&one).await;
    clock.advance(Duration::from_secs(16 * 60));
    eventually("the escalation", || async { item(&two, &id, "dave").await.status == 200 }).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(kinds(&store, &id).await.iter().filter(|k| **k == AuditKind::Escalated).count(), 1);

    // Both stop; the deny step falls due while nothing runs; a new process fires it.
    drop((stop_one, stop_two));
    tokio::time::sleep(Duration::from_millis(500)).await;
    clock.advance(Duration::from_secs(60 * 60));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(store.approvals(std::slice::from_ref(&id)).await.unwrap()[0].state.as_str(), "pending");
    let three = start_configured(default_script(), first.configure()).await;
    eventually("the denial", || async { item(&three, &id, "alice").await.json()["state"] == "denied" }).await;
    let kinds = kinds(&store, &id).await;
    assert_eq!(kinds.iter().filter(|k| **k == AuditKind::Escalated).count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == AuditKind::Denied).count(), 1);
}

#[tokio::test]
async fn with_bearer_tokens_the_link_page_asks_for_the_approvers_token() {
    let receiver = WebhookReceiver::start(SECRET);
    let tokens = [("alice-token", "alice"), ("bob-token", "bob"), ("mallory-token", "mallory")];
    let setup = Setup::new(&hook(&receiver.url(), "json", "events = [\"approval.requested\"]\n")).tokens(&tokens);
    let server = setup.start().await;
    let id = ask(&server).await;
    let requests = receiver.wait_for(|r| !r.is_empty(), Duration::from_secs(10)).await;
    let approve_link = path_of(&requests[0].body["links"]["approve"]);
    let page = send(&server, "GET", &approve_link, &[], b"").await;
    assert!(page.body.contains("name=\"token\""), "the page asks for a token: {}", page.body);
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let anonymous = send(&server, "POST", &approve_link, &form, b"").await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let unknown = send(&server, "POST", &approve_link, &form, b"token=guess").await;
    assert_eq!(unknown.status, 401, "{}", unknown.body);
    let outsider = send(&server, "POST", &approve_link, &form, b"token=mallory-token").await;
    assert_eq!(outsider.status, 403, "not an approver: {}", outsider.body);
    let voted = send(&server, "POST", &approve_link, &form, b"token=bob-token").await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    assert_eq!(item(&server, &id, "bob").await.json()["votes"][0]["principal"], "bob");
}

/// Item 9 of the threat model: the link form has a cross-site check in every
/// sign-in mode (here `--principal-header`, where a proxy signs the browser
/// in): posted from another page it changes nothing; the page's own form
/// (`Referrer-Policy: same-origin`, so its Origin is sent) is taken.
#[tokio::test]
async fn a_link_form_posted_from_another_page_changes_nothing() {
    let sink = SmtpSink::start();
    let setup = Setup::new(&mail_channel(&sink));
    let server = setup.start().await;
    let id = ask(&server).await;
    let mails = sink.wait_for(3, Duration::from_secs(15)).await;
    let bob = mails.iter().find(|mail| mail.to == ["bob@example.com"]).unwrap();
    let link = mail_link(bob, "approve");
    let page = send(&server, "GET", &link, &[], b"").await;
    assert_eq!(page.header("referrer-policy"), Some("same-origin"));
    let form = [("content-type", "application/x-www-form-urlencoded"), ("x-user", "bob")];
    for (name, value) in [("origin", "http://evil.example"), ("origin", "null"), ("sec-fetch-site", "cross-site")] {
        let headers = [form[0], form[1], (name, value)];
        let refused = send(&server, "POST", &link, &headers, b"").await;
        assert_eq!(refused.status, 403, "{name}: {value}: {}", refused.body);
        assert!(refused.body.contains("Not from this page"), "{}", refused.body);
    }
    assert_eq!(item(&server, &id, "bob").await.json()["votes"], json!([]));
    let own = [form[0], form[1], ("origin", "http://localhost"), ("sec-fetch-site", "same-origin")];
    let taken = send(&server, "POST", &link, &own, b"").await;
    assert_eq!(taken.status, 200, "{}", taken.body);
}

/// A person named as the server names the rules' decisions (`toolgate`) is
/// still a person: their answer in the chat is notified like anyone's, while
/// a call a rule decided as it was issued notifies nobody.
#[tokio::test]
async fn a_person_named_like_the_rules_is_notified_and_a_rules_decision_is_not() {
    let receiver = WebhookReceiver::start(SECRET);
    let rules = "[[rule]]\nname = \"small\"\naction = \"allow\"\ntool = \"ping\"\n";
    let setup = Setup::new(&hook(&receiver.url(), "json", "")).rules(rules);
    let server = setup.start().await;
    let allowed = call(&server, "POST", "/api/calls", "alice", Some(json!({"tool": "ping", "input": {}}))).await;
    assert_eq!((allowed.status, &allowed.json()["decision"]), (200, &json!("allow")), "{}", allowed.body);

    // `toolgate` asks; the tool's own policy asks them (unrouted), and they approve in the chat.
    let turn = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let reply = call(&server, "POST", "/api/chat", "toolgate", Some(turn)).await;
    let chunks = reply.chunks();
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("an approval request");
    let (id, message_id) = (request["approvalId"].as_str().unwrap(), chunks[0]["messageId"].as_str().unwrap());
    let answer = json!({"id": "chat-1", "trigger": "submit-message", "messageId": message_id, "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": message_id, "role": "assistant", "parts": [{"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"path": "notes.txt"}, "approval": {"id": id, "approved": true}}]}
    ]});
    assert_eq!(call(&server, "POST", "/api/chat", "toolgate", Some(answer)).await.status, 200);
    assert_eq!(setup.runs.load(Ordering::SeqCst), 1);
    let decided =
        receiver.wait_for(|r| r.iter().any(|r| r.event_type == "approval.decided"), Duration::from_secs(10)).await;
    let ids: Vec<&Value> =
        decided.iter().filter(|r| r.event_type == "approval.decided").map(|r| &r.body["approval"]["id"]).collect();
    assert_eq!(ids, [&json!(id)], "the person's decision only, not the rule's");
}

#[tokio::test]
async fn a_channels_grant_comes_with_its_approve_links() {
    let receiver = WebhookReceiver::start(SECRET);
    let extra = "events = [\"approval.requested\"]\ngrant = { uses = 2, within = \"1h\" }\n";
    let one_approver = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                        approvers = [\"group:finance\"]\n";
    let setup = Setup::new(&hook(&receiver.url(), "json", extra)).rules(one_approver);
    let server = setup.start().await;
    let id = ask(&server).await;
    let requests = receiver.wait_for(|r| !r.is_empty(), Duration::from_secs(10)).await;
    let link = path_of(&requests[0].body["links"]["approve"]);
    let page = call(&server, "GET", &link, "erin", None).await;
    assert!(page.body.contains("also allows the next 2 delete_file calls in this chat, for 1h"), "{}", page.body);
    let approved = post_link(&server, &link, "erin", "").await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    let state = item(&server, &id, "erin").await.json()["state"].clone();
    assert!(state == "approved" || state == "executed", "{state}");
    let grants = call(&server, "GET", "/api/grants", "erin", None).await.json();
    let [grant] = grants["grants"].as_array().unwrap().as_slice() else { panic!("{grants}") };
    assert_eq!(
        (grant["usesLeft"].as_i64(), &grant["createdBy"], &grant["approvalId"]),
        (Some(2), &json!("erin"), &json!(id))
    );

    let bearer = hook("http://127.0.0.1:9/", "json", "links = \"bearer\"\ngrant = { uses = 1 }\n");
    #[derive(serde::Deserialize)]
    struct File {
        notify: Vec<NotifyConfig>,
    }
    let file: File = toml::from_str(&bearer).unwrap();
    let error = Channels::from_config(&file.notify, &BTreeMap::new(), |_| Some(SECRET.into())).unwrap_err();
    assert!(error.to_string().contains("invalid grant"), "{error}");
}
