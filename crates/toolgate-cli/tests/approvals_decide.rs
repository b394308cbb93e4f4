//! `toolgate approvals watch --decide`: a terminal approver, answered line by
//! line on a piped stdin. Approvals are issued into a SQLite store through its
//! public API: alice's own (she decides them) and ones routed to the group
//! `finance` (bob, carol, erin; quorum 2) in alice's conversation.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{Served, approval, examples, now};
use toolgate::approval::lifecycle::{self, Decision, VoteOptions, Voter};
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, DecisionQuery, DecisionScope, LedgerStore, SystemClock, conversation_key,
};
use toolgate::tool::{CallGate, GateCall};
use toolgate_policy::{Policy, StickyAction, StoredGate, decode_stored};
use toolgate_store::{StoreSpec, open_store};

/// How long a watch may take to do what it is asked.
const PATIENCE: Duration = Duration::from_secs(60);

/// alice's own transfer in `chat-1`.
fn transfer(id: &str) -> ApprovalRecord {
    approval(id, "alice", "chat-1", "transfer_money", json!({"amount": 1200, "to": "bob"}), false)
}

/// A transfer in alice's `chat-1` routed to finance.
fn routed(id: &str) -> ApprovalRecord {
    approval(id, "alice", "chat-1", "transfer_money", json!({"amount": 5000, "to": "carol"}), true)
}

/// Runs `work` on the SQLite store of `data_dir`.
fn on_store<T>(data_dir: &Path, work: impl AsyncFnOnce(Arc<dyn LedgerStore>) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let spec = StoreSpec::parse("sqlite", data_dir).unwrap();
        let store = open_store(&spec).await.unwrap().expect("a store");
        work(store).await
    })
}

fn issue(data_dir: &Path, records: Vec<ApprovalRecord>) {
    on_store(data_dir, async |store| store.issue(&records, &[]).await.unwrap());
}

fn record(data_dir: &Path, id: &str) -> ApprovalRecord {
    on_store(data_dir, async |store| store.approvals(&[id.to_owned()]).await.unwrap().pop().expect("the approval"))
}

/// `toolgate approvals watch --decide ARGS` with stdin, stdout and stderr piped.
fn spawn_watch(args: &[&str], token: Option<&str>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .args(["approvals", "watch", "--decide"])
        .args(args)
        .env_remove("TOOLGATE_STORE")
        .env_remove("TOOLGATE_TOKEN")
        .env_remove("VISUAL")
        .env_remove("EDITOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("TOOLGATE_TOKEN", token);
    }
    command.spawn().unwrap()
}

/// What a finished watch did.
struct Watched {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Waits for `child` to exit by itself (killed and failed after [`PATIENCE`]).
fn finish(mut child: Child) -> Watched {
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the watch did not end: {}\n{}", out.join().unwrap(), err.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Watched { code: status.code(), stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// Runs a watch on the store of `data_dir` as `principal`, answering with `answers`, to its end.
fn decide(data_dir: &Path, principal: &str, answers: &str) -> Watched {
    let data_dir = data_dir.display().to_string();
    let mut child = spawn_watch(&["--as", principal, "--data-dir", &data_dir], None);
    child.stdin.take().unwrap().write_all(answers.as_bytes()).unwrap();
    finish(child)
}

/// The approval's recorded decision, as (approved, reason, edited input, principal).
fn decision(record: &ApprovalRecord) -> (bool, Option<String>, Option<Value>, Option<String>) {
    let decision = record.decision.clone().expect("a decision");
    (decision.approved, decision.reason, decision.edited_input, decision.principal)
}

/// The audit log's events of `approval` as (kind, principal).
fn audit(data_dir: &Path, approval: &str) -> Vec<(String, Option<String>)> {
    let output = support::toolgate(&["audit", "--data-dir", &data_dir.display().to_string()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect::<Vec<Value>>();
    events
        .iter()
        .filter(|event| event["approvalId"] == approval)
        .map(|event| (event["kind"].as_str().unwrap().to_owned(), event["principal"].as_str().map(str::to_owned)))
        .collect()
}

#[test]
fn y_approves_as_the_principal_and_the_audit_log_shows_the_vote() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), vec![transfer("apr-y")]);

    let watched = decide(dir.path(), "alice", "y\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    // The card: tool, the input pretty-printed, reason, requester, who decides, votes.
    let card = "? approve transfer_money\n  id           apr-y\n  state        pending\n  tool         transfer_money\n  \
                input        {\n                 \"amount\": 1200,\n                 \"to\": \"bob\"\n               }\n  \
                reason       transfers over 1000 need approval\n  conversation chat-1\n  requester    alice\n  \
                approvers    alice (0 of 1)\n  votes        none\n";
    assert!(watched.stdout.starts_with(card), "{}", watched.stdout);
    assert!(
        watched.stdout.contains(
            "[y] approve once  [n] deny  [e] edit  [a] always allow transfer_money in this chat  [s] skip › y\n"
        ),
        "{}",
        watched.stdout
    );
    assert!(watched.stdout.contains("  your approval is recorded: apr-y is approved\n"), "{}", watched.stdout);

    let approved = record(dir.path(), "apr-y");
    assert_eq!(approved.state, ApprovalState::Approved);
    assert_eq!(decision(&approved), (true, None, None, Some("alice".to_owned())));
    let alice = Some("alice".to_owned());
    assert_eq!(audit(dir.path(), "apr-y"), [("voted".to_owned(), alice.clone()), ("approved".to_owned(), alice)]);
}

#[test]
fn n_denies_with_the_reason_given() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), vec![transfer("apr-n")]);

    let watched = decide(dir.path(), "alice", "n\nnot this month\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert!(watched.stdout.contains("  reason (Enter to skip): not this month\n"), "{}", watched.stdout);
    assert!(watched.stdout.contains("  your denial is recorded: apr-n is denied\n"), "{}", watched.stdout);
    let denied = record(dir.path(), "apr-n");
    assert_eq!(denied.state, ApprovalState::Denied);
    assert_eq!(decision(&denied), (false, Some("not this month".to_owned()), None, Some("alice".to_owned())));
    assert_eq!(denied.votes[0].reason.as_deref(), Some("not this month"));

    // An empty reason is none.
    issue(dir.path(), vec![transfer("apr-n2")]);
    let watched = decide(dir.path(), "alice", "n\n\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert_eq!(decision(&record(dir.path(), "apr-n2")), (false, None, None, Some("alice".to_owned())));
}

/// An API call's edit is held to the schema its requester sent with it (`inputSchema`), on the store as on the server.
#[test]
fn an_edit_that_breaks_the_calls_input_schema_is_refused_and_the_call_stays_pending() {
    let dir = tempfile::tempdir().unwrap();
    let mut call = transfer("apr-s");
    call.origin = toolgate::ledger::Origin::Calls;
    call.input_schema = Some(json!({"type": "object", "properties": {"amount": {"type": "integer", "maximum": 2000}}}));
    issue(dir.path(), vec![call]);

    let watched = decide(dir.path(), "alice", "e\n{\"amount\": 90000, \"to\": \"bob\"}\n");
    assert!(watched.stderr.contains("error: invalid_tool_input: "), "{}{}", watched.stdout, watched.stderr);
    assert!(watched.stderr.contains("`/amount`"), "names where: {}", watched.stderr);
    let stored = record(dir.path(), "apr-s");
    assert_eq!((stored.state, stored.decision), (ApprovalState::Pending, None), "nothing was decided");

    let watched = decide(dir.path(), "alice", "e\n{\"amount\": 900, \"to\": \"bob\"}\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    let approved = record(dir.path(), "apr-s");
    let edit = json!({"amount": 900, "to": "bob"});
    assert_eq!(decision(&approved), (true, None, Some(edit), Some("alice".to_owned())));
}

#[test]
fn e_approves_the_edited_input_once_it_is_a_json_object() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), vec![transfer("apr-e")]);

    // Not JSON, then not an object, then unchanged: each refused, and the approval asked again.
    let answers =
        "e\n{amount: 5}\ne\n[1]\ne\n{\"amount\": 1200, \"to\": \"bob\"}\ne\n{\"amount\": 900, \"to\": \"bob\"}\n";
    let watched = decide(dir.path(), "alice", answers);
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert!(watched.stdout.contains("  edit> {amount: 5}\n  ✗ edit refused: not valid JSON ("), "{}", watched.stdout);
    assert!(
        watched.stdout.contains("  ✗ edit refused: a tool input is a JSON object, not an array\n"),
        "{}",
        watched.stdout
    );
    assert!(watched.stdout.contains("  the input is unchanged\n"), "{}", watched.stdout);
    assert_eq!(watched.stdout.matches("[s] skip › e\n").count(), 4, "{}", watched.stdout);
    assert!(
        watched.stdout.contains("  your approval of the edited input is recorded: apr-e is approved\n"),
        "{}",
        watched.stdout
    );

    let approved = record(dir.path(), "apr-e");
    let edit = json!({"amount": 900, "to": "bob"});
    assert_eq!(decision(&approved), (true, None, Some(edit), Some("alice".to_owned())));
    let kinds: Vec<String> = audit(dir.path(), "apr-e").into_iter().map(|(kind, _)| kind).collect();
    assert_eq!(kinds, ["voted", "approved", "edited"]);
}

#[test]
fn a_approves_and_always_allows_the_tool_in_that_conversation() {
    let dir = tempfile::tempdir().unwrap();
    // A conversation of the MCP gateway: `mcp:<principal>:<client>`, owned by alice.
    let chat = "mcp:alice:claude-desktop";
    issue(dir.path(), vec![approval("apr-a", "alice", chat, "delete_file", json!({"path": "notes.txt"}), false)]);

    let watched = decide(dir.path(), "alice", "a\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert!(watched.stdout.contains("  conversation mcp:alice:claude-desktop\n"), "{}", watched.stdout);
    assert!(watched.stdout.contains("  your approval is recorded: apr-a is approved\n"), "{}", watched.stdout);
    assert!(
        watched.stdout.contains("  later delete_file calls in chat mcp:alice:claude-desktop need no approval"),
        "{}",
        watched.stdout
    );
    assert_eq!(decision(&record(dir.path(), "apr-a")), (true, None, None, Some("alice".to_owned())));

    // The sticky decision: allow delete_file in alice's conversation, by alice.
    let key = conversation_key(Some("alice"), chat);
    let query = DecisionQuery { conversation_id: Some(key.clone()), principal: Some("alice".to_owned()), now: now() };
    let stored = on_store(dir.path(), async |store| store.decisions(&query).await.unwrap());
    let decisions = decode_stored(stored).unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(
        (decisions[0].action, decisions[0].tool.as_str(), &decisions[0].scope, decisions[0].created_by.as_deref()),
        (
            StickyAction::Allow,
            "delete_file",
            &DecisionScope::Conversation { conversation_id: key.clone() },
            Some("alice")
        )
    );
    assert!(watched.stdout.contains(&format!("(sticky decision {})", decisions[0].id)), "{}", watched.stdout);

    // The next delete_file call there is covered by the grant (an "always allow" is one); elsewhere nothing changed.
    let verdict = |conversation: &str, tool: &str| {
        let conversation = conversation.to_owned();
        let tool = tool.to_owned();
        on_store(dir.path(), async move |store| {
            let gate = StoredGate::new(
                Arc::new(Policy::empty()),
                store,
                Some(conversation.clone()),
                Some("alice".into()),
                now(),
            );
            let input = json!({"path": "other.txt"});
            let call = GateCall {
                tool_name: &tool,
                input: &input,
                tool_call_id: "call-next",
                conversation_id: Some(&conversation),
                principal: Some("alice"),
                groups: &[],
            };
            assert_eq!(gate.decide(&call).await, None, "a grant is no rule");
            gate.grants("call-next").iter().map(|offer| offer.granted_by.clone()).collect::<Vec<_>>()
        })
    };
    assert_eq!(verdict(&key, "delete_file"), [Some("alice".to_owned())]);
    assert_eq!(verdict(&key, "transfer_money"), Vec::<Option<String>>::new());
    assert_eq!(verdict(&conversation_key(Some("alice"), "chat-2"), "delete_file"), Vec::<Option<String>>::new());
}

#[test]
fn s_and_enter_skip_and_always_is_only_for_the_conversations_owner() {
    let dir = tempfile::tempdir().unwrap();
    let mut older = routed("apr-s1");
    older.issued_at -= 60_000;
    issue(dir.path(), vec![older, routed("apr-s2")]);

    // bob may decide alice's routed approvals, but not keep sticky decisions in her chat.
    let watched = decide(dir.path(), "bob", "a\ne\ns\n\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert!(!watched.stdout.contains("[a]"), "{}", watched.stdout);
    // Nor edit them: several approvers cannot approve different inputs.
    assert!(watched.stdout.contains("  [y] approve once  [n] deny  [s] skip › a\n"), "{}", watched.stdout);
    assert!(watched.stdout.contains("  (`a` is not an answer: press y, n or s)\n"), "{}", watched.stdout);
    assert!(watched.stdout.contains("  (`e` is not an answer: press y, n or s)\n"), "{}", watched.stdout);
    // Pending when the watch starts: asked oldest first.
    let skipped: Vec<&str> = watched.stdout.lines().filter(|line| line.contains("stays pending")).collect();
    assert_eq!(skipped, ["  skipped: apr-s1 stays pending", "  skipped: apr-s2 stays pending"], "{}", watched.stdout);
    assert!(watched.stdout.contains("  approvers    group:finance (0 of 2)\n"), "{}", watched.stdout);
    for id in ["apr-s1", "apr-s2"] {
        let skipped = record(dir.path(), id);
        assert_eq!((skipped.state, skipped.votes.len()), (ApprovalState::Pending, 0), "{id}");
    }
    let decisions = on_store(dir.path(), async |store| {
        let query = DecisionQuery {
            conversation_id: Some(conversation_key(Some("alice"), "chat-1")),
            principal: None,
            now: now(),
        };
        store.decisions(&query).await.unwrap()
    });
    assert!(decisions.is_empty(), "{decisions:?}");
}

/// The lines a child prints, as they come.
struct Lines(mpsc::Receiver<String>);

impl Lines {
    fn of(stream: impl Read + Send + 'static) -> Self {
        let (send, receive) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                if send.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Self(receive)
    }

    /// Reads up to the first line that contains `text`; the lines read.
    fn until(&self, text: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) if line.contains(text) => {
                    seen.push(line);
                    return seen;
                }
                Ok(line) => seen.push(line),
                Err(_) => panic!("no line with `{text}` came; seen: {seen:#?}"),
            }
        }
    }
}

fn answer(stdin: &mut ChildStdin, text: &str) {
    stdin.write_all(text.as_bytes()).unwrap();
    stdin.flush().unwrap();
}

#[test]
fn an_approval_decided_by_someone_else_while_asked_is_refused_and_the_watch_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), vec![routed("apr-1")]);
    let data_dir = dir.path().display().to_string();
    let mut child = spawn_watch(&["--as", "bob", "--data-dir", &data_dir], None);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = Lines::of(child.stdout.take().unwrap());
    let stderr = Lines::of(child.stderr.take().unwrap());

    // apr-1 is asked about; meanwhile carol denies it, apr-2 and apr-3 arrive (they queue),
    // and carol denies apr-3 too.
    let card = stdout.until("  id           apr-1");
    assert_eq!(card[0], "? approve transfer_money", "{card:#?}");
    stdout.until("  expires");
    let carol_denies = |id: &'static str| {
        on_store(dir.path(), async |store| {
            let carol = Voter {
                principal: Some("carol".into()),
                groups: Vec::new(),
                admin: false,
                bearer_link: false,
                anonymous: false,
            };
            let deny = Decision::Deny { reason: Some("duplicate".into()) };
            let options = VoteOptions { continuation: true, note: None };
            lifecycle::cast(store.as_ref(), &SystemClock, id, &carol, deny, options).await.unwrap();
        })
    };
    carol_denies("apr-1");
    let mut newer = routed("apr-3");
    newer.issued_at += 1;
    issue(dir.path(), vec![routed("apr-2"), newer]);
    // The store is polled every second: apr-3 is seen pending, then denied.
    std::thread::sleep(Duration::from_millis(1500));
    carol_denies("apr-3");
    std::thread::sleep(Duration::from_millis(1500));

    // bob's answer comes too late: refused, printed, and apr-2 is asked next.
    answer(&mut stdin, "y\n");
    let refusal = stderr.until("error: ");
    assert!(refusal.last().unwrap().starts_with("error: approval_already_decided: "), "{refusal:#?}");
    let skipped = stdout.until("  id           apr-2");
    assert!(skipped.contains(&"apr-3 (transfer_money) is denied now: not asked".to_owned()), "{skipped:#?}");
    answer(&mut stdin, "y\n");
    let rest = stdout.until("your approval is recorded: apr-2 is pending, waiting for group:finance (1 of 2)");
    assert!(!rest.iter().any(|line| line.contains("apr-3")), "{rest:#?}");
    drop(stdin);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < PATIENCE, "the end of stdin ends the watch");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));

    let first = record(dir.path(), "apr-1");
    assert_eq!((first.state, first.votes.len()), (ApprovalState::Denied, 1), "only carol's vote");
    let second = record(dir.path(), "apr-2");
    assert_eq!(second.votes.iter().map(|vote| vote.principal.clone()).collect::<Vec<_>>(), [Some("bob".to_owned())]);
}

#[test]
fn the_end_of_stdin_ends_the_watch_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing pending, nothing to answer with.
    issue(dir.path(), Vec::new());
    let watched = decide(dir.path(), "alice", "");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);

    // Pending, and stdin ends at the prompt: left pending.
    issue(dir.path(), vec![transfer("apr-eof")]);
    let watched = decide(dir.path(), "alice", "");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert_eq!(record(dir.path(), "apr-eof").state, ApprovalState::Pending);

    // Answers left over once nothing waits: the watch waits for approvals until stdin ends.
    let watched = decide(dir.path(), "alice", "s\n");
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert!(watched.stdout.contains("  skipped: apr-eof stays pending\n"), "{}", watched.stdout);
    assert!(!watched.stderr.contains("error"), "{}", watched.stderr);
}

#[test]
fn the_server_mode_votes_and_keeps_always_allow_through_its_api() {
    let dir = tempfile::tempdir().unwrap();
    let input = json!({"path": "notes.txt"});
    issue(dir.path(), vec![routed("apr-r"), approval("apr-own", "alice", "chat-9", "delete_file", input, false)]);
    let data_dir = dir.path().display().to_string();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, r#"{"tok-alice": "alice", "tok-bob": "bob"}"#).unwrap();
    let config = dir.path().join("toolgate.toml");
    std::fs::write(&config, "[groups]\nfinance = [\"bob\", \"carol\"]\n").unwrap();
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let (tokens, config) = (tokens.display().to_string(), config.display().to_string());
    let served =
        Served::start(&["--model", &script, "--data-dir", &data_dir, "--tokens-file", &tokens, "--config", &config]);

    // bob approves the routed one, as JSON lines: the item asked about, then the item after the vote.
    let mut child = spawn_watch(&["--server", &served.url, "--output", "jsonl"], Some("tok-bob"));
    child.stdin.take().unwrap().write_all(b"y\n").unwrap();
    let watched = finish(child);
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    let items: Vec<Value> = watched.stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(items.len(), 2, "{}", watched.stdout);
    assert_eq!((&items[0]["id"], &items[0]["votes"]), (&json!("apr-r"), &json!([])));
    assert_eq!((&items[1]["state"], &items[1]["votes"][0]["principal"]), (&json!("pending"), &json!("bob")));
    assert!(watched.stderr.contains("? approve transfer_money\n"), "{}", watched.stderr);
    assert_eq!(record(dir.path(), "apr-r").votes[0].principal.as_deref(), Some("bob"));

    // alice always allows delete_file in her chat-9: the server keeps the sticky decision.
    let mut child = spawn_watch(&["--server", &served.url], Some("tok-alice"));
    child.stdin.take().unwrap().write_all(b"a\n").unwrap();
    let watched = finish(child);
    assert_eq!(watched.code, Some(0), "{}{}", watched.stdout, watched.stderr);
    assert!(watched.stdout.contains("  id           apr-own\n"), "{}", watched.stdout);
    assert!(watched.stdout.contains("later delete_file calls in chat chat-9 need no approval"), "{}", watched.stdout);
    let own = record(dir.path(), "apr-own");
    assert_eq!(own.votes[0].principal.as_deref(), Some("alice"));
    let key = conversation_key(Some("alice"), "chat-9");
    let query = DecisionQuery { conversation_id: Some(key.clone()), principal: None, now: now() };
    let decisions = decode_stored(on_store(dir.path(), async |store| store.decisions(&query).await.unwrap())).unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(
        (decisions[0].tool.as_str(), &decisions[0].scope, decisions[0].created_by.as_deref()),
        ("delete_file", &DecisionScope::Conversation { conversation_id: key }, Some("alice"))
    );
}
