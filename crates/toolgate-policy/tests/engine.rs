//! A `PolicyGate` driving the real engine with a scripted model.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate::{
    ModelMessage, ScriptedModel, TextRequest, TextResult, Tool, ToolError, ToolResultOutput, Toolkit, generate_text,
};
use toolgate_policy::{DecisionScope, Policy, PolicyGate, StickyAction, StickyDecision};

const RULES: &str = r#"
[[mcp]]
name = "ignored here"

[[rule]]
name = "no-rm-rf"
action = "deny"
tool = "shell__*"
reason = "never delete recursively"
[rule.input]
"/command" = { regex = 'rm\s+-rf' }

[[rule]]
name = "ask-writes"
action = "ask"
tool = "fs__write_file"
[rule.input]
"/path" = { glob = "/etc/**" }
"#;

/// A tool that runs without approval and counts its runs.
fn tool(name: &str, runs: &Arc<AtomicUsize>, needs_approval: bool) -> Tool {
    let runs = Arc::clone(runs);
    Tool::dynamic(name, json!({"type": "object"})).needs_approval(needs_approval).handler(move |_: Value, _ctx| {
        runs.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, ToolError>(json!({"ok": true})) }
    })
}

/// One tool call, then a closing text turn.
fn model(tool: &str, input: Value) -> ScriptedModel {
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
        [{"type": "text", "text": "done"}]
    ]});
    ScriptedModel::from_json(&script.to_string()).unwrap()
}

async fn run(tools: Vec<Tool>, model: &ScriptedModel, gate: PolicyGate) -> TextResult {
    let request = TextRequest::new(vec![ModelMessage::user("go")])
        .toolkit(Toolkit::new(tools).unwrap())
        .conversation_id("c1")
        .principal("alice")
        .gate(Arc::new(gate));
    generate_text(model, request).await.unwrap()
}

fn policy() -> Arc<Policy> {
    Arc::new(Policy::from_toml_str(RULES).unwrap())
}

#[tokio::test]
async fn a_deny_rule_refuses_a_tool_that_needs_no_approval() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = model("shell__exec", json!({"command": "rm -rf /"}));
    let result = run(vec![tool("shell__exec", &runs, false)], &model, PolicyGate::new(policy(), vec![], 0)).await;

    assert_eq!(runs.load(Ordering::SeqCst), 0, "a denied call never runs");
    assert!(result.approval_requests().is_empty(), "a denial asks nobody");
    let output = &result.steps[0].tool_results[0].output;
    let ToolResultOutput::ExecutionDenied { reason: Some(reason), .. } = output else {
        panic!("expected execution-denied, got {output:?}");
    };
    assert_eq!(
        reason,
        r#"rule `no-rm-rf` matched tool `shell__exec`, /command = "rm -rf /": never delete recursively"#
    );
    assert_eq!(result.text(), "done");
}

#[tokio::test]
async fn no_matching_rule_leaves_the_tool_policy_in_charge() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = model("shell__exec", json!({"command": "ls"}));
    let result = run(vec![tool("shell__exec", &runs, false)], &model, PolicyGate::new(policy(), vec![], 0)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(!result.steps[0].tool_results[0].output.is_denied());
}

#[tokio::test]
async fn an_ask_rule_requests_approval_naming_the_rule() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = model("fs__write_file", json!({"path": "/etc/hosts", "content": "x"}));
    let result = run(vec![tool("fs__write_file", &runs, false)], &model, PolicyGate::new(policy(), vec![], 0)).await;

    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let [request] = result.approval_requests() else { panic!("{:?}", result.approval_requests()) };
    assert_eq!(request.tool_call.tool_name, "fs__write_file");
    assert_eq!(
        request.reason.as_deref(),
        Some(r#"rule `ask-writes` matched tool `fs__write_file`, /path = "/etc/hosts""#)
    );
}

#[tokio::test]
async fn sticky_allow_is_a_grant_lifting_only_questions_its_author_decides() {
    let always = StickyDecision::new(
        "d1",
        StickyAction::Allow,
        "fs__write_file",
        DecisionScope::Conversation { conversation_id: "c1".into() },
        0,
    )
    .created_by("alice");

    // The tool always asks; the sticky allow (a grant without a use limit, by alice) lets it run.
    let runs = Arc::new(AtomicUsize::new(0));
    let model = model("fs__write_file", json!({"path": "/tmp/x"}));
    let gate = PolicyGate::new(policy(), vec![always.clone()], 0);
    let result = run(vec![tool("fs__write_file", &runs, true)], &model, gate).await;
    assert!(result.approval_requests().is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The file's unrouted ask rule asks alice, who granted it: lifted too.
    let runs = Arc::new(AtomicUsize::new(0));
    let model = self::model("fs__write_file", json!({"path": "/etc/passwd"}));
    let gate = PolicyGate::new(policy(), vec![always.clone()], 0);
    let result = run(vec![tool("fs__write_file", &runs, true)], &model, gate).await;
    assert!(result.approval_requests().is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // An ask rule routed to someone else still asks them.
    let routed = RULES.replace("tool = \"fs__write_file\"", "tool = \"fs__write_file\"\napprovers = [\"bob\"]");
    let routed = Arc::new(Policy::from_toml_str(&routed).unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    let model = self::model("fs__write_file", json!({"path": "/etc/passwd"}));
    let result = run(vec![tool("fs__write_file", &runs, true)], &model, PolicyGate::new(routed, vec![always], 0)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let reason = result.approval_requests()[0].reason.clone().unwrap();
    assert!(reason.starts_with("rule `ask-writes`"), "{reason}");
}
