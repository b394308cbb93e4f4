//! `--config` rules from the command line: `toolgate policy explain`, a run
//! decided by a rule, and `toolgate serve` reloading its rules when the file
//! changes (and keeping them when the new file does not parse).

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{Served, examples, toolgate};

const RULES: &str = r#"
[[rule]]
name = "no-system-files"
action = "deny"
tool = "delete_file"
reason = "system files stay"
[rule.input]
"/path" = { glob = "/etc/**" }

[[rule]]
name = "ask-weather"
action = "ask"
tool = "get_weather"

[[rule]]
name = "scratch-is-fine"
action = "allow"
tool = "delete_file"
[rule.input]
"/path" = { glob = "scratch/*" }

[[rule]]
name = "contractors-ask"
action = "ask"
tool = "*"
principal = "contractor-*"
"#;

fn config_file(dir: &Path, text: &str) -> String {
    let path = dir.join("toolgate.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// (exit code, first line, `because:` line, stderr)
fn explain(config: &str, tool: &str, input: Value, principal: Option<&str>) -> (i32, String, String, String) {
    let input = input.to_string();
    let mut args = vec!["policy", "explain", "--config", config, "--tool", tool, "--input", &input];
    if let Some(principal) = principal {
        args.extend(["--principal", principal]);
    }
    let output = toolgate(&args);
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let mut lines = stdout.lines();
    let decision = lines.next().unwrap_or_default().to_owned();
    let because = lines.next().unwrap_or_default().to_owned();
    (output.status.code().unwrap_or(-1), decision, because, String::from_utf8_lossy(&output.stderr).to_string())
}

#[test]
fn explain_prints_the_decision_and_the_rule_that_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path(), RULES);

    let (code, decision, because, _) = explain(&config, "delete_file", json!({"path": "/etc/passwd"}), None);
    assert_eq!((code, decision.as_str()), (0, "deny"));
    assert!(because.contains("rule `no-system-files`") && because.contains("system files stay"), "{because}");

    let (_, decision, because, _) = explain(&config, "get_weather", json!({"city": "Oslo"}), None);
    assert_eq!(decision, "ask");
    assert!(because.contains("rule `ask-weather`"), "{because}");

    let (_, decision, because, _) = explain(&config, "delete_file", json!({"path": "scratch/a.txt"}), None);
    assert_eq!(decision, "allow", "an allow rule lifts the tool's own approval");
    assert!(because.contains("rule `scratch-is-fine`"), "{because}");

    let (_, decision, because, _) = explain(&config, "delete_file", json!({"path": "notes.txt"}), None);
    assert_eq!(decision, "ask");
    assert_eq!(because, "because: tool `delete_file` requires approval");

    let (_, decision, because, _) =
        explain(&config, "delete_file", json!({"path": "scratch/a.txt"}), Some("contractor-7"));
    assert_eq!(decision, "ask", "ask outranks allow");
    assert!(because.contains("rule `contractors-ask`"), "{because}");

    let (_, decision, _, _) = explain(&config, "delete_file", json!({"path": "scratch/../../x"}), None);
    assert_eq!(decision, "deny", "the tool's own refusal stands even where an allow rule matches");
}

#[test]
fn explain_exits_non_zero_on_an_invalid_file_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    for (text, named) in [
        ("[[rule]]\naction = \"sometimes\"\n", "sometimes"),
        ("[[rule]]\naction = \"ask\"\ntol = \"x\"\n", "tol"),
        ("[[rule]]\naction = \"ask\"\n[rule.input]\n\"/a\" = { regex = \"(\" }\n", "regex"),
        ("[[rules]]\naction = \"ask\"\n", "rules"),
        ("[[mcp]]\nname = \"fs\"\n", "fs"),
    ] {
        let config = config_file(dir.path(), text);
        let (code, decision, _, stderr) = explain(&config, "get_weather", json!({}), None);
        assert_eq!(code, 2, "{text}");
        assert!(decision.is_empty(), "nothing is decided from an invalid file");
        assert!(stderr.contains(named), "{text}: {stderr}");
    }
}

#[test]
fn a_run_is_decided_by_the_rules_of_its_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path(), "[[rule]]\nname = \"no-deletes\"\naction = \"deny\"\ntool = \"delete_*\"\n");
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let messages = examples().join("request-approval/messages.json").display().to_string();
    let run = toolgate(&["run", "--model", &script, "--messages", &messages, "--config", &config]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let parts: Vec<Value> =
        String::from_utf8_lossy(&run.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(!parts.iter().any(|part| part["type"] == "tool-approval-request"), "a denied call is never asked about");
    let denied = parts.iter().find(|part| part["type"] == "tool-output-denied").expect("a denial");
    assert!(denied["reason"].as_str().unwrap().contains("rule `no-deletes`"), "{denied}");
}

fn serve(config: &str, data_dir: &Path) -> Served {
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let data_dir = data_dir.display().to_string();
    Served::start(&["--model", &script, "--config", config, "--data-dir", &data_dir])
}

async fn what_happens(served: &Served, chat: &str) -> String {
    let body = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let reply = reqwest::Client::new().post(format!("{}/api/chat", served.url)).json(&body).send().await.unwrap();
    let text = reply.text().await.unwrap();
    for kind in ["tool-approval-request", "tool-output-denied", "tool-output-available"] {
        if text.contains(&format!("\"type\":\"{kind}\"")) {
            return kind.to_owned();
        }
    }
    panic!("no outcome in {text}");
}

/// Polls until the chat's outcome is `expected`, or fails at the deadline.
async fn eventually(served: &Served, expected: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut round = 0;
    loop {
        round += 1;
        let seen = what_happens(served, &format!("chat-{expected}-{round}")).await;
        if seen == expected {
            return;
        }
        assert!(Instant::now() < deadline, "still `{seen}`, expected `{expected}`");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn serve_reloads_its_rules_and_keeps_them_when_the_file_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path(), "# no rules yet\n");
    let served = serve(&config, &dir.path().join("data"));
    assert_eq!(what_happens(&served, "chat-0").await, "tool-approval-request");

    std::fs::write(&config, "[[rule]]\nname = \"no-deletes\"\naction = \"deny\"\ntool = \"delete_file\"\n").unwrap();
    eventually(&served, "tool-output-denied").await;

    std::fs::write(&config, "[[rule]]\naction = \"allow-all-please\"\n").unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(what_happens(&served, "chat-broken").await, "tool-output-denied", "a broken file keeps the old rules");

    std::fs::write(&config, "[[rule]]\naction = \"allow\"\ntool = \"delete_file\"\n").unwrap();
    eventually(&served, "tool-output-available").await;
}

#[test]
fn explain_judges_history_terms_on_a_store_with_store() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        dir.path(),
        r#"
[[rule]]
name = "third-transfer"
action = "deny"
tool = "transfer_money"
history = { window = "24h", count = { gte = 2 } }
"#,
    );
    let path = dir.path().join("ledger.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let spec = toolgate_store::StoreSpec::Sqlite(path.clone());
        let store = std::sync::Arc::new(toolgate_store::SqlStore::open(&spec).await.unwrap());
        let config = toolgate::ledger::LedgerConfig::new(store.clone());
        let ledger = config.owned(Some("alice"), "c1").principal("alice");
        let now = toolgate_policy::now_ms();
        let input = json!({"amount": 5});
        let call = toolgate::approval::lifecycle::direct::DirectCall {
            tool_call_id: "earlier",
            tool_name: "transfer_money",
            input: &input,
        };
        let events: Vec<_> = (1..=2)
            .map(|ago| toolgate::approval::lifecycle::direct::ran(&ledger, call, Ok(&json!(1)), now - ago * 60_000))
            .collect();
        toolgate::ledger::ApprovalStore::append(store.as_ref(), &events).await.unwrap();
        store.close().await;
    });
    let store = format!("sqlite://{}", path.display());
    let input = json!({"amount": 1}).to_string();
    let base = ["policy", "explain", "--config", &config, "--tool", "transfer_money", "--input", &input];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let output = toolgate(&args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let judged = run(&["--principal", "alice", "--store", &store]);
    assert!(judged.starts_with("deny\n"), "{judged}");
    assert!(judged.contains("history: 2 earlier calls vs >= 2 in the last 24h (principal `alice`)"), "{judged}");
    let other = run(&["--principal", "bob", "--store", &store]);
    assert!(!other.starts_with("deny"), "bob sent nothing: {other}");
    let unknown = run(&["--principal", "alice"]);
    assert!(unknown.starts_with("ask\n") && unknown.contains("history: unknown"), "{unknown}");
}

#[test]
fn explain_asks_a_running_server_with_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        dir.path(),
        "[[rule]]\nname = \"one-delete\"\naction = \"deny\"\ntool = \"delete_file\"\n\
         history = { window = \"1h\", scope = \"everyone\", count = { gte = 1 } }\n",
    );
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let spec = toolgate_store::StoreSpec::Sqlite(data_dir.join("toolgate.db"));
        let store = std::sync::Arc::new(toolgate_store::SqlStore::open(&spec).await.unwrap());
        let ledger = toolgate::ledger::LedgerConfig::new(store.clone()).conversation("earlier");
        let input = json!({"path": "a.txt"});
        let call = toolgate::approval::lifecycle::direct::DirectCall {
            tool_call_id: "d",
            tool_name: "delete_file",
            input: &input,
        };
        let at = toolgate_policy::now_ms() - 60_000;
        let event = toolgate::approval::lifecycle::direct::ran(&ledger, call, Ok(&json!(1)), at);
        toolgate::ledger::ApprovalStore::append(store.as_ref(), &[event]).await.unwrap();
        store.close().await;
    });
    let served = serve(&config, &data_dir);
    let input = json!({"path": "b.txt"}).to_string();
    let output = toolgate(&["policy", "explain", "--server", &served.url, "--tool", "delete_file", "--input", &input]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("deny\n"), "{stdout}");
    assert!(stdout.contains("history: 1 earlier call vs >= 1 in the last 1h (everyone)"), "{stdout}");
    assert!(stdout.contains("matched: deny one-delete:"), "{stdout}");
}

#[test]
fn report_counts_what_shadow_rules_would_have_decided_and_audit_filters_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use toolgate::approval::lifecycle::direct::{DirectCall, ran, shadowed};
        use toolgate::tool::{GateAction, Shadowed};
        let spec = toolgate_store::StoreSpec::Sqlite(path.clone());
        let store = std::sync::Arc::new(toolgate_store::SqlStore::open(&spec).await.unwrap());
        let ledger = toolgate::ledger::LedgerConfig::new(store.clone()).conversation("c");
        let input = json!({"amount": 500});
        let call = DirectCall { tool_call_id: "t", tool_name: "transfer_money", input: &input };
        let now = toolgate_policy::now_ms();
        let rule = |name: &str, action| Shadowed { rule: name.into(), action, reason: "because".into() };
        let events = vec![
            shadowed(&ledger, call, &rule("big", GateAction::Deny), GateAction::Allow, now - 1_000),
            shadowed(&ledger, call, &rule("big", GateAction::Deny), GateAction::Allow, now - 900),
            shadowed(&ledger, call, &rule("new-payee", GateAction::Ask), GateAction::Allow, now - 800),
            shadowed(&ledger, call, &rule("old", GateAction::Ask), GateAction::Allow, now - 30 * 24 * 3_600_000),
            ran(&ledger, call, Ok(&json!(1)), now - 700),
        ];
        toolgate::ledger::ApprovalStore::append(store.as_ref(), &events).await.unwrap();
        store.close().await;
    });
    let store = format!("sqlite://{}", path.display());
    let report = toolgate(&["policy", "report", "--store", &store, "--since", "7d"]);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let text = String::from_utf8_lossy(&report.stdout);
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|line| line.split_whitespace().collect()).collect();
    assert_eq!(rows, [vec!["big", "2", "2", "0", "0"], vec!["new-payee", "1", "0", "1", "0"]], "{text}");

    let audit = toolgate(&["audit", "--store", &store, "--kind", "shadowed"]);
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stderr));
    let kinds: Vec<Value> = String::from_utf8_lossy(&audit.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["kind"].clone())
        .collect();
    assert_eq!(kinds, vec![json!("shadowed"); 4]);
    let bad = toolgate(&["audit", "--store", &store, "--kind", "shadow"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown kind `shadow`"));
}

#[test]
fn the_example_policies_pass_their_tests() {
    let payments = examples().join("policies/payments.test.toml").display().to_string();
    let files = examples().join("policies/files.test.toml").display().to_string();
    let output = toolgate(&["policy", "test", &payments, &files]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.ends_with("12 passed, 0 failed\n"), "{stdout}");
}

#[test]
fn a_failing_case_exits_non_zero_with_what_was_expected_and_what_was_decided() {
    let dir = tempfile::tempdir().unwrap();
    config_file(dir.path(), RULES);
    let tests = dir.path().join("rules.test.toml");
    std::fs::write(
        &tests,
        r#"
config = "toolgate.toml"

[[case]]
name = "weather asks"
tool = "get_weather"
input = { city = "Oslo" }
expect = "ask"
rule = "ask-weather"

[[case]]
name = "etc is fine (wrong)"
tool = "delete_file"
input = { path = "/etc/passwd" }
expect = "allow"
"#,
    )
    .unwrap();
    let tests = tests.display().to_string();
    let output = toolgate(&["policy", "test", &tests]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("ok      "), "{stdout}");
    assert!(stdout.contains("FAILED  ") && stdout.contains("etc is fine (wrong)"), "{stdout}");
    assert!(stdout.contains("  - expected: allow\n  + got:      deny by `no-system-files`\n"), "{stdout}");
    assert!(stdout.ends_with("1 passed, 1 failed\n"), "{stdout}");

    std::fs::write(dir.path().join("rules.test.toml"), "config = \"toolgate.toml\"\n[[case]]\nname = \"x\"\n").unwrap();
    let invalid = toolgate(&["policy", "test", &tests]);
    assert_eq!(invalid.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&invalid.stderr).contains("rules.test.toml"), "the file is named");
}
