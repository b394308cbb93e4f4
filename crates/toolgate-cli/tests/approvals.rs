//! `toolgate approvals`: the inbox on the store (`--data-dir`, `--as`) and
//! through `toolgate serve` (`--server`, `TOOLGATE_TOKEN`), with approvals
//! routed to the group `finance` (bob, carol, erin; quorum 2) in alice's
//! conversation, issued into the store through its public API.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{Served, examples};
use toolgate::ledger::ApprovalRecord;
use toolgate_store::{StoreSpec, open_store};

/// An approval of alice's `chat-1` for finance, pending for an hour.
fn routed(id: &str) -> ApprovalRecord {
    support::approval(id, "alice", "chat-1", "pay_invoice", json!({"invoice": id, "amount": 1200}), true)
}

/// Issues approvals with these ids into the default SQLite store of `data_dir`.
fn issue(data_dir: &Path, ids: &[&str]) {
    let records: Vec<ApprovalRecord> = ids.iter().map(|id| routed(id)).collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let spec = StoreSpec::parse("sqlite", data_dir).unwrap();
        let store = open_store(&spec).await.unwrap().expect("a store");
        store.issue(&records, &[]).await.unwrap();
    });
}

/// `toolgate approvals ARGS` with `TOOLGATE_TOKEN` set to `token` (else unset).
fn approvals(args: &[&str], token: Option<&str>) -> Output {
    command(args, token).output().unwrap()
}

fn command(args: &[&str], token: Option<&str>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.arg("approvals").args(args).env_remove("TOOLGATE_STORE").env_remove("TOOLGATE_TOKEN");
    if let Some(token) = token {
        command.env("TOOLGATE_TOKEN", token);
    }
    command
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The JSON lines of a successful command.
fn items(output: &Output) -> Vec<Value> {
    assert!(output.status.success(), "{}", stderr(output));
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The one item of a successful command.
fn item(output: &Output) -> Value {
    let mut items = items(output);
    assert_eq!(items.len(), 1, "{}", stdout(output));
    items.remove(0)
}

/// A refusal: exit status 1 and `error: CODE: ...` on stderr (after any log line).
fn assert_refused(output: &Output, code: &str) {
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(output), stderr(output));
    let prefix = format!("error: {code}: ");
    assert!(stderr(output).lines().any(|line| line.starts_with(&prefix)), "{}", stderr(output));
}

fn ids(items: &[Value]) -> Vec<&str> {
    items.iter().map(|item| item["id"].as_str().unwrap()).collect()
}

/// (principal, decision, reason) of each vote.
fn votes(item: &Value) -> Vec<(String, String, Option<String>)> {
    let votes = item["votes"].as_array().unwrap();
    votes
        .iter()
        .map(|vote| {
            let reason = vote["reason"].as_str().map(str::to_owned);
            (vote["principal"].as_str().unwrap().to_owned(), vote["decision"].as_str().unwrap().to_owned(), reason)
        })
        .collect()
}

/// The first line `watch` prints, within 30 seconds; the watch is killed after.
fn first_watched(mut command: Command) -> Value {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap());
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.lines() {
            let _ = send.send(line.unwrap());
        }
    });
    let line = receive.recv_timeout(Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    serde_json::from_str(&line.expect("watch prints the pending approval")).unwrap()
}

#[test]
fn the_store_inbox_lists_votes_and_withdraws_as_the_principal() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), &["apr-1", "apr-2"]);
    let data_dir = dir.path().display().to_string();
    let on_store = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["--data-dir", &data_dir]);
        approvals(&args, None)
    };

    // bob (finance) sees both, newest first; mallory sees none of it.
    let listed = items(&on_store(&["list", "--as", "bob", "--output", "jsonl"]));
    assert_eq!(ids(&listed).len(), 2);
    let first = listed.iter().find(|item| item["id"] == "apr-1").unwrap();
    assert_eq!(
        (&first["requester"], &first["state"], &first["quorum"]),
        (&json!("alice"), &json!("pending"), &json!(2))
    );
    assert_eq!(first["approvers"], json!(["group:finance"]));
    assert_eq!(first["conversationId"], "chat-1");
    assert!(items(&on_store(&["list", "--as", "mallory", "--output", "jsonl"])).is_empty());
    let table = on_store(&["list", "--as", "bob"]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(stdout(&table).starts_with("ID "), "{}", stdout(&table));
    assert!(stdout(&table).contains("group:finance (0 of 2)"), "{}", stdout(&table));

    // One approval of two, then refusals.
    let voted = item(&on_store(&["approve", "apr-1", "--as", "bob", "--output", "jsonl"]));
    assert_eq!(voted["state"], "pending");
    assert_eq!(votes(&voted), [("bob".to_owned(), "approve".to_owned(), None)]);
    assert_refused(&on_store(&["approve", "apr-1", "--as", "bob"]), "already_voted");
    assert_refused(&on_store(&["approve", "apr-1", "--as", "alice"]), "not_an_approver");
    assert_refused(&on_store(&["approve", "apr-1", "--as", "alice", "--group", "finance"]), "self_approval_forbidden");
    assert_refused(&on_store(&["approve", "apr-1", "--as", "mallory"]), "unknown_approval");

    // One denial denies.
    let denied = item(&on_store(&["deny", "apr-1", "--as", "carol", "--reason", "no", "--output", "jsonl"]));
    assert_eq!(denied["state"], "denied");
    let both = [
        ("bob".to_owned(), "approve".to_owned(), None),
        ("carol".to_owned(), "deny".to_owned(), Some("no".to_owned())),
    ];
    assert_eq!(votes(&denied), both);
    assert_refused(&on_store(&["approve", "apr-1", "--as", "erin"]), "approval_already_decided");
    let shown = on_store(&["show", "apr-1", "--as", "erin"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(stdout(&shown).contains("state        denied\n"), "{}", stdout(&shown));
    assert!(stdout(&shown).contains(": no\n"), "{}", stdout(&shown));

    // Only the requester withdraws.
    assert_refused(&on_store(&["withdraw", "apr-2", "--as", "bob"]), "not_the_requester");
    let withdrawn = item(&on_store(&["withdraw", "apr-2", "--as", "alice", "--output", "jsonl"]));
    assert_eq!(withdrawn["state"], "withdrawn");

    assert_refused(&on_store(&["show", "apr-404", "--as", "bob"]), "unknown_approval");
    let decided = items(&on_store(&["list", "--as", "alice", "--state", "decided", "--output", "jsonl"]));
    assert_eq!(decided.len(), 2);
    assert!(items(&on_store(&["list", "--as", "alice", "--output", "jsonl"])).is_empty());
}

#[test]
fn groups_come_from_flags_and_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), &["apr-g"]);
    let data_dir = dir.path().display().to_string();
    let config = dir.path().join("toolgate.toml");
    std::fs::write(&config, "[groups]\nfinance = [\"frank\"]\n").unwrap();
    let config = config.display().to_string();

    // dave is not a member at issue, but is in finance now by --group.
    assert!(
        items(&approvals(&["list", "--as", "dave", "--data-dir", &data_dir, "--output", "jsonl"], None)).is_empty()
    );
    let voted = approvals(
        &["approve", "apr-g", "--as", "dave", "--group", "finance", "--data-dir", &data_dir, "--output", "jsonl"],
        None,
    );
    assert_eq!(votes(&item(&voted)).len(), 1);
    // frank by the config's [groups]: the second approval decides.
    let decided = approvals(
        &["approve", "apr-g", "--as", "frank", "--config", &config, "--data-dir", &data_dir, "--output", "jsonl"],
        None,
    );
    assert_eq!(item(&decided)["state"], "approved");

    // The store watch prints the pending approvals one may decide.
    issue(dir.path(), &["apr-w"]);
    let watched =
        first_watched(command(&["watch", "--as", "erin", "--data-dir", &data_dir, "--output", "jsonl"], None));
    assert_eq!(watched["id"], "apr-w");

    // --server is another mode: the store's flags conflict with it.
    let conflict = approvals(&["list", "--server", "http://127.0.0.1:9", "--as", "bob"], None);
    assert_eq!(conflict.status.code(), Some(2), "{}", stderr(&conflict));
}

#[test]
fn the_server_inbox_answers_as_the_store_does() {
    let dir = tempfile::tempdir().unwrap();
    issue(dir.path(), &["apr-s"]);
    let data_dir = dir.path().display().to_string();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, r#"{"tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol"}"#).unwrap();
    // alice is in finance too, but may not approve her own request.
    let config = dir.path().join("toolgate.toml");
    std::fs::write(&config, "[groups]\nfinance = [\"alice\", \"bob\", \"carol\"]\n").unwrap();
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let (tokens, config) = (tokens.display().to_string(), config.display().to_string());
    let served =
        Served::start(&["--model", &script, "--data-dir", &data_dir, "--tokens-file", &tokens, "--config", &config]);
    let url = served.url.as_str();

    // The same items as on the store.
    let listed = items(&approvals(&["list", "--server", url, "--output", "jsonl"], Some("tok-bob")));
    assert_eq!(ids(&listed), ["apr-s"]);
    let on_store = items(&approvals(&["list", "--as", "bob", "--data-dir", &data_dir, "--output", "jsonl"], None));
    assert_eq!(listed, on_store);
    assert!(
        items(&approvals(&["list", "--server", url, "--output", "jsonl", "--state", "decided"], Some("tok-bob")))
            .is_empty()
    );

    // The stream shows it to an approver.
    let watched = first_watched(command(&["watch", "--server", url, "--output", "jsonl"], Some("tok-carol")));
    assert_eq!(watched["id"], "apr-s");

    let voted = item(&approvals(&["approve", "apr-s", "--server", url, "--output", "jsonl"], Some("tok-bob")));
    assert_eq!((&voted["state"], votes(&voted).len()), (&json!("pending"), 1));
    assert_refused(&approvals(&["approve", "apr-s", "--server", url], Some("tok-bob")), "already_voted");
    assert_refused(&approvals(&["approve", "apr-s", "--server", url], Some("tok-alice")), "self_approval_forbidden");
    assert_refused(&approvals(&["show", "apr-404", "--server", url], Some("tok-bob")), "unknown_approval");
    assert_refused(&approvals(&["list", "--server", url], None), "unauthorized");

    let denied = approvals(&["deny", "apr-s", "--server", url, "--reason", "no"], Some("tok-carol"));
    assert!(denied.status.success(), "{}", stderr(&denied));
    assert!(stdout(&denied).contains("state        denied\n"), "{}", stdout(&denied));
    let shown = item(&approvals(&["show", "apr-s", "--as", "bob", "--data-dir", &data_dir, "--output", "jsonl"], None));
    assert_eq!(shown["votes"][1]["reason"], "no");

    // No server there: an ordinary failure.
    let unreachable = approvals(&["list", "--server", "http://127.0.0.1:9"], Some("tok-bob"));
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(stderr(&unreachable).contains("cannot reach"), "{}", stderr(&unreachable));
}

#[test]
fn the_operator_decides_a_single_user_servers_approvals_on_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    // A server without principals files its approvals without an owner or approvers.
    let mut single = routed("apr-one");
    single.conversation_id = "chat-1".to_owned();
    single.owner = None;
    single.routing = None;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store = open_store(&StoreSpec::parse("sqlite", dir.path()).unwrap()).await.unwrap().expect("a store");
        store.issue(&[single, routed("apr-other")], &[]).await.unwrap();
    });
    let listed = items(&approvals(&["list", "--as", "ops", "--data-dir", &data_dir, "--output", "jsonl"], None));
    assert_eq!(ids(&listed), ["apr-one"], "alice's routed approval stays hidden from ops");
    let args =
        ["approve", "apr-one", "--as", "ops", "--reason", "checked", "--data-dir", &data_dir, "--output", "jsonl"];
    let approved = item(&approvals(&args, None));
    assert_eq!(approved["state"], "approved");
    // The one user of a server without principals has no name: the vote carries none.
    assert_eq!(
        approved["votes"],
        json!([{"principal": null, "decision": "approve", "reason": "checked",
        "at": approved["votes"][0]["at"]}])
    );
}

/// `approve --grant` on the store: the grant is checked before the vote
/// (a malformed one is refused by the flag, a quorum's by the lifecycle) and
/// kept, as the owner's, with its use limit, once the vote counted.
#[test]
fn approve_with_a_grant_keeps_it_after_the_vote() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_string_lossy().into_owned();
    let own = support::approval("apr-own", "alice", "chat-1", "pay_invoice", json!({"amount": 10}), false);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(async {
        let store = open_store(&StoreSpec::parse("sqlite", dir.path()).unwrap()).await.unwrap().expect("a store");
        store.issue(&[own, routed("apr-quorum")], &[]).await.unwrap();
        store
    });
    let on_store = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["--data-dir", &data_dir]);
        approvals(&args, None)
    };

    let bad = on_store(&["approve", "apr-own", "--as", "alice", "--grant", r#"{"uses": 0}"#]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("`uses` must be at least 1"), "{}", stderr(&bad));
    let grant = r#"{"uses": 3, "within": "1h", "input": {"/amount": {"le": 100}}}"#;
    assert_refused(&on_store(&["approve", "apr-quorum", "--as", "bob", "--grant", grant]), "grant_not_allowed");
    assert_refused(&on_store(&["deny", "apr-own", "--as", "alice", "--grant", grant]), "invalid_grant");

    let voted = item(&on_store(&["approve", "apr-own", "--as", "alice", "--grant", grant, "--output", "jsonl"]));
    assert_eq!(voted["state"], "approved");
    let kept = runtime.block_on(store.decisions_by(Some("alice"), support::now())).unwrap();
    let [kept] = kept.as_slice() else { panic!("{kept:?}") };
    assert_eq!((kept.tool_name.as_str(), kept.uses_left), ("pay_invoice", Some(3)));
    assert_eq!(kept.body["approvalId"], "apr-own");
    assert_eq!(kept.body["inputMatch"], json!({"/amount": {"le": 100}}));
    runtime.block_on(async { drop(store) });
}
