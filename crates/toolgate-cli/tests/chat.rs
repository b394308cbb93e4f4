//! `toolgate chat` without a terminal, as scripts use it: messages from `-m`
//! or stdin, approvals from `--approve-all`, `--deny-all` or `--decisions`,
//! text or JSON-lines output; in process (with and without a store) and
//! against `toolgate serve`.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::Served;

fn command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    for name in ["TOOLGATE_APPROVAL_SECRET", "TOOLGATE_STORE", "TOOLGATE_TOKEN", "VISUAL", "EDITOR"] {
        command.env_remove(name);
    }
    command
}

fn toolgate(args: &[&str]) -> Output {
    command().args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// A scratch directory with a scripted model.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new(turns: Value) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("script.json"), json!({ "turns": turns }).to_string()).unwrap();
        Self { dir }
    }

    fn model(&self) -> String {
        format!("script:{}", self.dir.path().join("script.json").display())
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `toolgate chat --model SCRIPT --store none ARGS...`
    fn chat(&self, args: &[&str]) -> Output {
        let model = self.model();
        let mut all = vec!["chat", "--model", &model, "--store", "none"];
        all.extend_from_slice(args);
        toolgate(&all)
    }
}

fn call(id: &str, tool: &str, input: Value) -> Value {
    json!({"type": "tool-call", "toolCallId": id, "toolName": tool, "input": input})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The model deletes notes.txt, then says `after`.
fn delete_then(after: &str) -> Scratch {
    Scratch::new(json!([
        [text("Deleting it."), call("call-1", "delete_file", json!({"path": "notes.txt"}))],
        [text(after)]
    ]))
}

fn json_lines(output: &Output) -> Vec<Value> {
    stdout(output).lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect()
}

#[test]
fn approve_all_runs_the_tool_and_prints_the_answer() {
    let scratch = delete_then("Deleted notes.txt for you.");
    let output = scratch.chat(&["--approve-all", "-m", "delete notes.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    for expected in [
        "you> delete notes.txt",
        "Deleting it.",
        "tool call delete_file (call-1)",
        "→ approved delete_file (--approve-all)",
        "✓ delete_file result:\n  {\n    \"deleted\": \"notes.txt\"\n  }",
        "Deleted notes.txt for you.",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    let order: Vec<usize> = ["Deleting it.", "→ approved", "✓ delete_file", "Deleted notes.txt"]
        .iter()
        .map(|needle| out.find(needle).unwrap())
        .collect();
    assert!(order.is_sorted(), "{out}");
}

#[test]
fn denials_show_the_reason() {
    let scratch = delete_then("Fine, I kept it.");
    let output = scratch.chat(&["--deny-all", "-m", "delete notes.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("→ denied delete_file (--deny-all)"), "{out}");
    assert!(out.contains("✗ delete_file denied (no reason given)") && out.contains("Fine, I kept it."), "{out}");
    assert!(!out.contains("\"deleted\""), "{out}");

    let decisions =
        scratch.file("deny.jsonl", "{\"decision\":\"deny\",\"reason\":\"I still need it\",\"tool\":\"delete_file\"}\n");
    let output = scratch.chat(&["--decisions", &decisions, "-m", "delete notes.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("→ denied delete_file (--decisions line 1): I still need it"), "{out}");
    assert!(out.contains("✗ delete_file denied: I still need it"), "{out}");
}

#[test]
fn an_edit_from_the_decisions_file_is_what_runs() {
    let scratch = delete_then("Done.");
    let decisions = scratch.file("edit.jsonl", "\n{\"decision\":\"edit\",\"input\":{\"path\":\"old.txt\"}}\n");
    let output = scratch.chat(&["--decisions", &decisions, "-m", "delete notes.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("→ approved delete_file with an edited input (--decisions line 2):"), "{out}");
    assert!(out.contains("  path: \"notes.txt\" → \"old.txt\""), "{out}");
    assert!(out.contains("\"deleted\": \"old.txt\"") && !out.contains("\"deleted\": \"notes.txt\""), "{out}");
}

#[test]
fn an_edit_must_pass_the_config_rules_as_the_engine_would_judge_it() {
    let scratch = delete_then("Done.");
    let config = scratch.file(
        "toolgate.toml",
        "[[rule]]\nname = \"keep-secrets\"\naction = \"deny\"\ntool = \"delete_file\"\nreason = \"secrets stay\"\n\
         [rule.input]\n\"/path\" = { glob = \"secret*\" }\n",
    );
    let decisions = scratch.file("edit.jsonl", "{\"decision\":\"edit\",\"input\":{\"path\":\"secret.txt\"}}\n");
    let output = scratch.chat(&["--config", &config, "--decisions", &decisions, "-m", "delete notes.txt"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let error = stderr(&output);
    for needle in ["line 1", "delete_file", "call-1", "policy denies the edited input", "keep-secrets", "secrets stay"]
    {
        assert!(error.contains(needle), "missing {needle:?} in {error}");
    }
    assert!(!stdout(&output).contains("\"deleted\""), "nothing ran");

    // An edit the rules let through runs.
    let decisions = scratch.file("edit.jsonl", "{\"decision\":\"edit\",\"input\":{\"path\":\"old.txt\"}}\n");
    let output = scratch.chat(&["--config", &config, "--decisions", &decisions, "-m", "delete notes.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("\"deleted\": \"old.txt\""), "{}", stdout(&output));
}

#[test]
fn bad_decisions_are_errors_that_say_what_is_wrong() {
    let scratch = delete_then("Done.");
    let cases = [
        ("{\"decision\":\"edit\",\"input\":{\"path\":5}}", vec!["line 1", "delete_file", "call-1", "\"string\""]),
        (
            "{\"decision\":\"edit\",\"input\":{\"path\":\"/etc/passwd\"}}",
            vec!["line 1", "policy denies the edited input", "/etc/passwd"],
        ),
        ("{\"decision\":\"approve\",\"tool\":\"transfer_money\"}", vec!["`transfer_money`", "`delete_file`", "call-1"]),
        ("", vec!["no decision left", "delete_file", "call-1", "notes.txt"]),
        ("{\"decision\":\"perhaps\"}", vec!["line 1", "not `perhaps`"]),
    ];
    for (line, expected) in cases {
        let decisions = scratch.file("bad.jsonl", line);
        let output = scratch.chat(&["--decisions", &decisions, "-m", "delete notes.txt"]);
        assert_eq!(output.status.code(), Some(1), "{line}");
        let error = stderr(&output);
        for needle in expected {
            assert!(error.contains(needle), "{line}: missing {needle:?} in {error}");
        }
        assert!(error.contains("bad.jsonl"), "{error}");
        assert!(!stdout(&output).contains("\"deleted\""), "nothing ran for {line}");
    }
}

#[test]
fn without_a_terminal_an_approval_needs_a_decision_flag() {
    let scratch = delete_then("Done.");
    let output = scratch.chat(&["-m", "delete notes.txt"]);
    assert_eq!(output.status.code(), Some(1));
    let error = stderr(&output);
    assert!(
        error.contains("delete_file (call call-1) asks for approval") && error.contains("--approve-all"),
        "{error}"
    );

    for flags in [["--approve-all", "--deny-all"], ["--deny-all", "--decisions=x"], ["--approve-all", "--decisions=x"]]
    {
        let output = scratch.chat(&[flags[0], flags[1], "-m", "hi"]);
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        assert!(stderr(&output).contains("cannot be used with"), "{}", stderr(&output));
    }
    let output = toolgate(&["chat", "--model", &scratch.model(), "--server", "http://127.0.0.1:9"]);
    assert!(stderr(&output).contains("cannot be used with"), "{}", stderr(&output));
}

#[test]
fn jsonl_output_is_every_event_then_the_decisions() {
    let scratch = delete_then("Done.");
    let output = scratch.chat(&["--approve-all", "--output", "jsonl", "-m", "delete notes.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let position = |test: &dyn Fn(&Value) -> bool| lines.iter().position(test);
    let requested = position(&|l| l["type"] == "approval-requested").expect("approval-requested");
    assert_eq!(lines[requested]["toolName"], "delete_file");
    assert_eq!(lines[requested]["input"], json!({"path": "notes.txt"}));
    assert!(lines[requested]["approvalId"].as_str().unwrap().starts_with("apr_"));
    let decision = position(&|l| l["type"] == "decision").expect("a decision line");
    assert_eq!(
        lines[decision],
        json!({"type": "decision", "approvalId": lines[requested]["approvalId"], "toolCallId": "call-1",
            "toolName": "delete_file", "by": "approve-all", "decision": "approve"})
    );
    let ran = position(&|l| l["type"] == "tool-state-changed" && l["to"] == "output-available").expect("it ran");
    assert!(requested < decision && decision < ran, "{lines:#?}");
    assert_eq!(lines[0]["type"], "message-added");
    assert_eq!(lines[0]["message"]["parts"], json!([{"type": "text", "text": "delete notes.txt"}]));
    let deltas: String = lines
        .iter()
        .filter(|l| l["type"] == "message-updated" && l["chunk"]["type"] == "text-delta")
        .map(|l| l["chunk"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Deleting it.Done.");
    assert!(lines.iter().any(|l| l["type"] == "status-changed" && l["to"] == "streaming"));
    assert_eq!(lines.last().unwrap(), &json!({"type": "status-changed", "from": "streaming", "to": "ready"}));
}

#[test]
fn messages_are_sent_in_order_from_flags_or_stdin() {
    let scratch = Scratch::new(json!([[text("one")], [text("two")], [text("three")]]));
    let output = scratch.chat(&["-m", "first", "-m", "second"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "you> first\none\nyou> second\ntwo\n");

    let model = scratch.model();
    let mut child = command()
        .args(["chat", "--model", &model, "--store", "none"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"first\n\nsecond\nthird\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "you> first\none\nyou> second\ntwo\nyou> third\nthree\n");
}

#[test]
fn a_client_executed_call_gets_an_error_result_without_a_terminal() {
    let scratch = Scratch::new(json!([
        [call("q1", "ask_user", json!({"question": "Which file?"}))],
        [text("I will ask again later.")]
    ]));
    let output = scratch.chat(&["--output", "jsonl", "-m", "delete something"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("ask_user needs an answer from a person"), "{}", stderr(&output));
    let lines = json_lines(&output);
    assert!(
        lines.iter().any(|l| l["type"] == "tool-state-changed" && l["toolCallId"] == "q1" && l["to"] == "output-error"),
        "{lines:#?}"
    );
    assert!(lines.iter().any(|l| l["chunk"]["delta"] == "later."), "the chat went on: {lines:#?}");
}

#[test]
fn a_failed_request_exits_non_zero() {
    let scratch = Scratch::new(json!([[text("Partly"), {"type": "error", "message": "the model fell over"}]]));
    let output = scratch.chat(&["-m", "hi", "-m", "never sent"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("the model fell over"), "{}", stderr(&output));
    assert!(!stdout(&output).contains("never sent"), "the next message is not sent: {}", stdout(&output));
}

#[test]
fn the_default_store_is_sqlite_in_the_data_dir_and_the_ledger_knows_the_chat() {
    let scratch = delete_then("Done.");
    let data = scratch.path("data");
    let data_arg = data.display().to_string();
    let model = scratch.model();
    let output = toolgate(&["chat", "--model", &model, "--data-dir", &data_arg, "--approve-all", "-m", "delete it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("\"deleted\": \"notes.txt\""), "{}", stdout(&output));
    assert!(data.join("toolgate.db").is_file());

    let audit = toolgate(&["audit", "--data-dir", &data_arg]);
    assert!(audit.status.success(), "{}", stderr(&audit));
    let events: Vec<Value> = stdout(&audit).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|event| event["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["issued", "approved", "executed"]);
    let conversation = events[0]["conversationId"].as_str().unwrap();
    assert!(conversation.starts_with("chat-"), "the ledger conversation is the chat id: {conversation}");

    // The chat ran the receipts worker: its events are chained, receipted and checkpointed.
    let keys = toolgate(&["audit", "keys", "--data-dir", &data_arg]);
    assert!(keys.status.success(), "{}", stderr(&keys));
    let keys_arg = scratch.file("keys.json", &stdout(&keys));
    let verified = toolgate(&["audit", "verify", "--store", "sqlite", "--data-dir", &data_arg, "--keys", &keys_arg]);
    let report = stdout(&verified);
    assert!(verified.status.success(), "{report}{}", stderr(&verified));
    assert!(report.contains("verified: 3 events") && report.contains(", 2 receipts;"), "{report}");
    assert!(!report.contains("not yet signed"), "nothing unsealed: {report}");

    // `--store none` keeps nothing.
    let empty = scratch.path("empty");
    let output = scratch.chat(&["--data-dir", &empty.display().to_string(), "--approve-all", "-m", "delete it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!empty.join("toolgate.db").exists());
}

/// `toolgate serve --store memory` playing `model`, with its data in `data_dir`.
fn serve(model: &str, data_dir: &Path, extra: &[&str]) -> Served {
    let data_dir = data_dir.display().to_string();
    let mut args = vec!["--model", model, "--store", "memory", "--data-dir", &data_dir];
    args.extend_from_slice(extra);
    Served::start(&args)
}

#[test]
fn server_mode_talks_to_toolgate_serve_with_the_token() {
    let scratch = delete_then("Done over HTTP.");
    let tokens = scratch.file("tokens.json", r#"{"s3cret-token": "alice"}"#);
    let server = serve(&scratch.model(), &scratch.path("server-data"), &["--tokens-file", &tokens]);

    let chat = |url: &str, token: Option<&str>, decisions: &str| {
        let mut command = command();
        command.args(["chat", "--server", url, "--decisions", decisions, "-m", "delete notes.txt"]);
        if let Some(token) = token {
            command.env("TOOLGATE_TOKEN", token);
        }
        command.output().unwrap()
    };
    // An edit checked against the demo toolkit known here, executed by the server.
    let decisions = scratch.file("edit.jsonl", "{\"decision\":\"edit\",\"input\":{\"path\":\"old.txt\"}}\n");
    let output = chat(&server.url, Some("s3cret-token"), &decisions);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("path: \"notes.txt\" → \"old.txt\""), "{out}");
    assert!(out.contains("\"deleted\": \"old.txt\"") && out.contains("Done over HTTP."), "{out}");

    // The full endpoint URL works too; without the token the server refuses.
    let endpoint = format!("{}/api/chat", server.url);
    let output = chat(&endpoint, None, &decisions);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("401"), "{}", stderr(&output));
}

/// The model deletes a.txt, then b.txt in the next turn.
fn two_deletions() -> Scratch {
    Scratch::new(json!([
        [call("call-1", "delete_file", json!({"path": "a.txt"}))],
        [text("First one done.")],
        [call("call-2", "delete_file", json!({"path": "b.txt"}))],
        [text("Second one done.")]
    ]))
}

#[test]
fn always_keeps_a_sticky_decision_so_the_next_call_is_not_asked_about() {
    let scratch = two_deletions();
    let always = scratch.file("always.jsonl", "{\"decision\":\"always\"}\n");
    // One line answers both calls: the second is decided by the sticky decision, not the file.
    let output = scratch.chat(&["--decisions", &always, "-m", "delete a.txt", "-m", "delete b.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("later delete_file calls in this chat run without asking (sticky decision dec_"), "{out}");
    assert!(out.contains("\"deleted\": \"b.txt\"") && out.contains("Second one done."), "{out}");

    // Against a server, the decision goes to its /api/decisions, made by the token's principal.
    let scratch = two_deletions();
    let tokens = scratch.file("tokens.json", r#"{"s3cret-token": "alice"}"#);
    let server = serve(&scratch.model(), &scratch.path("server-data"), &["--tokens-file", &tokens]);
    let always = scratch.file("always.jsonl", "{\"decision\":\"always\"}\n");
    let output = command()
        .args(["chat", "--server", &server.url, "--decisions", &always, "-m", "delete a.txt", "-m", "delete b.txt"])
        .env("TOOLGATE_TOKEN", "s3cret-token")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("(sticky decision dec_") && out.contains("\"deleted\": \"b.txt\""), "{out}");
}
