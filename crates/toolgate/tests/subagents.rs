//! Sub-agents through the engine's public API: an agent used as a tool whose
//! gated call, at depth 1, 2 or 3, is asked at the root, answered there and
//! run exactly once by a new engine on the same store (a restart); siblings
//! answered in either order; denial, edits (checked again) and expiry at
//! depth 2; typed errors for a step limit and a missing ledger.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate::agent::{NEEDS_LEDGER, STEP_LIMIT};
use toolgate::ledger::{
    ApprovalStore, AuditKind, AuditQuery, AuditStore, EXPIRED_TEXT, LedgerConfig, ManualClock, MemoryStore,
};
use toolgate::protocol::{ModelMessage, ToolApprovalResponsePart, ToolPart, ToolResultOutput};
use toolgate::{
    Agent, ApprovalRequest, EngineError, LineageStep, RecordingModel, ScriptedModel, StreamPart, TextRequest,
    TextResult, Tool, ToolError, Toolkit, Verdict, generate_text,
};

const T0: i64 = 1_700_000_000_000;

#[derive(Deserialize, JsonSchema)]
struct Path {
    path: String,
}

/// A root and a chain of agents (`agent1` calls `agent2` ...), the last one
/// calling the gated `delete_file`; every model uses the call id `call-1`.
struct Tree {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    log: Executions,
    /// The root's model, then each agent's, in depth order.
    models: Vec<RecordingModel<ScriptedModel>>,
}

fn calls(tool: &str, input: Value) -> Value {
    json!([[{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}], [{"type": "text", "text": format!("{tool} done")}]])
}

impl Tree {
    fn chain(depth: usize) -> Self {
        let mut models = Vec::new();
        for level in 0..=depth {
            let turns = if level == depth {
                calls("delete_file", json!({"path": "notes.txt"}))
            } else {
                calls(&format!("agent{}", level + 1), json!({"task": format!("level {level} asks")}))
            };
            models.push(RecordingModel::new(script(turns)));
        }
        Self {
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(ManualClock::new(T0)),
            log: Executions::default(),
            models,
        }
    }

    /// A process on the tree's store: its own ledger settings (and nothing kept from another).
    fn process(&self) -> LedgerConfig {
        LedgerConfig::new(self.store.clone()).clock(self.clock.clone()).ttl(Duration::from_secs(60))
    }

    fn delete_file(&self) -> Tool {
        let log = self.log.clone();
        Tool::function::<Path>("delete_file")
            .policy(
                |input: &Path, _| {
                    if input.path.starts_with("/etc") { Verdict::deny("never under /etc") } else { Verdict::ask() }
                },
            )
            .handler(move |input: Path, ctx| {
                let log = log.clone();
                async move {
                    log.record("delete_file", ctx.tool_call_id(), json!({"path": input.path}));
                    Ok::<_, ToolError>(json!({"deleted": input.path}))
                }
            })
    }

    /// The root's toolkit, built anew (as a restarted process would).
    fn toolkit(&self) -> Toolkit {
        let depth = self.models.len() - 1;
        let mut tools = vec![self.delete_file()];
        for level in (1..=depth).rev() {
            let agent = Agent::new(self.models[level].clone())
                .instructions(format!("You are agent {level}."))
                .toolkit(Toolkit::new(tools).unwrap());
            tools = vec![Tool::agent(format!("agent{level}"), agent)];
        }
        Toolkit::new(tools).unwrap()
    }

    async fn run(&self, history: Vec<ModelMessage>) -> Result<TextResult, EngineError> {
        let request = TextRequest::new(history)
            .toolkit(self.toolkit())
            .ledger(self.process().owned(Some("alice"), "chat-1").principal("alice"));
        generate_text(&self.models[0], request).await
    }

    fn model_calls(&self, level: usize) -> usize {
        self.models[level].requests().len()
    }
}

fn answer(approval_id: &str, approved: bool, edited_input: Option<Value>) -> ToolApprovalResponsePart {
    ToolApprovalResponsePart {
        approval_id: approval_id.to_owned(),
        approved,
        reason: (!approved).then(|| "not that one".to_owned()),
        provider_executed: None,
        edited_input,
    }
}

/// The history after `result`, with `answers` in one tool message.
fn answered(
    mut history: Vec<ModelMessage>,
    result: &TextResult,
    answers: Vec<ToolApprovalResponsePart>,
) -> Vec<ModelMessage> {
    history.extend(result.response_messages.iter().cloned());
    history.push(ModelMessage::tool(answers.into_iter().map(ToolPart::ToolApprovalResponse).collect()));
    history
}

fn lineage(request: &ApprovalRequest) -> Vec<(String, String)> {
    request.lineage.iter().map(|LineageStep { agent, tool_call_id }| (agent.clone(), tool_call_id.clone())).collect()
}

/// Asks at depth `depth`, approves from the root on a new process, and checks exactly once.
async fn approve_at_depth(depth: usize) {
    let tree = Tree::chain(depth);
    let history = vec![ModelMessage::user("clean up")];
    let asked = tree.run(history.clone()).await.unwrap();

    let requests = asked.approval_requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.tool_call.tool_name, "delete_file");
    assert_eq!(request.tool_call.input, json!({"path": "notes.txt"}));
    let expected: Vec<(String, String)> = (1..=depth).map(|level| (format!("agent{level}"), "call-1".into())).collect();
    assert_eq!(lineage(request), expected);
    assert_eq!(request.tool_call.tool_call_id, vec!["call-1"; depth + 1].join("/"));
    assert!(tree.log.all().is_empty(), "nothing ran before the answer");
    // Recorded where it was made: the sub-run's own conversation, with the root's owner.
    let record = &tree.store.approvals(std::slice::from_ref(&request.approval_id)).await.unwrap()[0];
    assert_eq!((record.owner.as_deref(), record.tool_call_id.as_str()), (Some("alice"), "call-1"));
    let sub_run = std::iter::once("chat-1").chain(vec!["call-1"; depth]).collect::<Vec<_>>().join("\u{1e}");
    assert_eq!(record.conversation_name(), sub_run);
    let events = tree.store.audit(&AuditQuery::default()).await.unwrap();
    let issued = events.iter().find(|event| event.kind == AuditKind::Issued).unwrap();
    assert_eq!((issued.owner.as_deref(), issued.principal.as_deref()), (Some("alice"), Some("alice")));
    let steps: Vec<Value> = expected.iter().map(|(agent, id)| json!({"agent": agent, "toolCallId": id})).collect();
    assert_eq!((&issued.data["lineage"], &issued.data["rootConversation"]), (&json!(steps), &json!("chat-1")));
    assert_eq!((0..=depth).map(|level| tree.model_calls(level)).collect::<Vec<_>>(), vec![1; depth + 1]);

    // A new engine on the same store (a restart) gets the answer.
    let history = answered(history, &asked, vec![answer(&request.approval_id, true, None)]);
    let done = tree.run(history.clone()).await.unwrap();
    assert_eq!(done.text(), "agent1 done".replace("agent1", if depth == 0 { "delete_file" } else { "agent1" }));
    assert_eq!(tree.log.call_ids(), vec!["call-1"], "the approved call ran once, where it was made");
    assert_eq!((0..=depth).map(|level| tree.model_calls(level)).collect::<Vec<_>>(), vec![2; depth + 1]);
    let result = &done.preresolved[0];
    assert_eq!(result.tool_name, "agent1");
    assert_eq!(result.output, ToolResultOutput::text(if depth == 1 { "delete_file done" } else { "agent2 done" }));
    // The leaf's model read the call's result after its own call, not a replay from its start.
    let leaf_prompt = tree.models[depth].prompts().pop().unwrap();
    assert!(serde_json::to_string(&leaf_prompt).unwrap().contains("\"deleted\":\"notes.txt\""));

    // The same answer sent again (a client retrying after a crash): nothing runs twice below the root.
    let again = tree.run(history).await.unwrap();
    assert_eq!(again.preresolved, done.preresolved);
    assert_eq!(tree.log.call_ids(), vec!["call-1"]);
    assert_eq!((1..=depth).map(|level| tree.model_calls(level)).collect::<Vec<_>>(), vec![2; depth]);
}

#[tokio::test]
async fn depth_one_approval_is_answered_at_the_root_and_runs_once() {
    approve_at_depth(1).await;
}

#[tokio::test]
async fn depth_two_approval_is_answered_at_the_root_and_runs_once() {
    approve_at_depth(2).await;
}

#[tokio::test]
async fn depth_three_approval_survives_a_restart_and_runs_once() {
    approve_at_depth(3).await;
}

/// A root whose one step calls two agents, each asking for one deletion.
fn siblings() -> (Tree, Toolkit) {
    let mut tree = Tree::chain(1);
    tree.models[0] = RecordingModel::new(script(json!([
        [{"type": "tool-call", "toolCallId": "call-a", "toolName": "left", "input": {"task": "a"}},
         {"type": "tool-call", "toolCallId": "call-b", "toolName": "right", "input": {"task": "b"}}],
        [{"type": "text", "text": "both done"}]
    ])));
    let leaf = |path: &str| RecordingModel::new(script(calls("delete_file", json!({"path": path}))));
    let agent = |model| Agent::new(model).toolkit(Toolkit::new([tree.delete_file()]).unwrap());
    let toolkit =
        Toolkit::new([Tool::agent("left", agent(leaf("a.txt"))), Tool::agent("right", agent(leaf("b.txt")))]).unwrap();
    (tree, toolkit)
}

async fn siblings_answered(reverse: bool) {
    let (tree, toolkit) = siblings();
    let run = |history: Vec<ModelMessage>| {
        let request = TextRequest::new(history)
            .toolkit(toolkit.clone())
            .ledger(tree.process().owned(Some("alice"), "chat-2").principal("alice"));
        generate_text(&tree.models[0], request)
    };
    let history = vec![ModelMessage::user("clean both")];
    let asked = run(history.clone()).await.unwrap();
    let requests = asked.approval_requests();
    let agents: Vec<Vec<(String, String)>> = requests.iter().map(lineage).collect();
    assert_eq!(agents, vec![vec![("left".into(), "call-a".into())], vec![("right".into(), "call-b".into())]]);
    let mut answers: Vec<_> = requests.iter().map(|request| answer(&request.approval_id, true, None)).collect();
    if reverse {
        answers.reverse();
    }
    let done = run(answered(history, &asked, answers)).await.unwrap();
    assert_eq!(done.text(), "both done");
    let mut paths: Vec<Value> = tree.log.all().into_iter().map(|(_, _, input)| input).collect();
    paths.sort_by_key(Value::to_string);
    assert_eq!(paths, vec![json!({"path": "a.txt"}), json!({"path": "b.txt"})]);
}

#[tokio::test]
async fn sibling_sub_agents_pending_together_are_one_batch_answered_in_order() {
    siblings_answered(false).await;
}

#[tokio::test]
async fn sibling_sub_agents_pending_together_are_one_batch_answered_in_reverse() {
    siblings_answered(true).await;
}

#[tokio::test]
async fn a_sibling_left_unanswered_keeps_the_batch_open() {
    let (tree, toolkit) = siblings();
    let request = |history| {
        TextRequest::new(history)
            .toolkit(toolkit.clone())
            .ledger(tree.process().owned(Some("alice"), "chat-3").principal("alice"))
    };
    let history = vec![ModelMessage::user("clean both")];
    let asked = generate_text(&tree.models[0], request(history.clone())).await.unwrap();
    let first = &asked.approval_requests()[0];
    let error = generate_text(
        &tree.models[0],
        request(answered(history, &asked, vec![answer(&first.approval_id, true, None)])),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, EngineError::UnansweredApprovals { .. }), "{error:?}");
    assert!(tree.log.all().is_empty());
}

#[tokio::test]
async fn a_denial_at_depth_two_is_a_denied_result_in_that_sub_agent() {
    let tree = Tree::chain(2);
    let history = vec![ModelMessage::user("clean up")];
    let asked = tree.run(history.clone()).await.unwrap();
    let approval_id = asked.approval_requests()[0].approval_id.clone();
    let done = tree.run(answered(history, &asked, vec![answer(&approval_id, false, None)])).await.unwrap();
    assert!(tree.log.all().is_empty(), "a denied call never runs");
    assert_eq!(done.text(), "agent1 done");
    let leaf_prompt = serde_json::to_value(tree.models[2].prompts().pop().unwrap()).unwrap();
    let denied = json!({"type": "execution-denied", "reason": "not that one"});
    assert!(leaf_prompt.to_string().contains(&denied.to_string()), "{leaf_prompt}");
}

#[tokio::test]
async fn an_edit_at_depth_two_runs_the_edited_input_and_is_checked_again() {
    let tree = Tree::chain(2);
    let history = vec![ModelMessage::user("clean up")];
    let asked = tree.run(history.clone()).await.unwrap();
    let approval_id = asked.approval_requests()[0].approval_id.clone();

    // An edit the tool's policy denies fails the request before anything runs, at any depth.
    let refused = answer(&approval_id, true, Some(json!({"path": "/etc/passwd"})));
    let error = tree.run(answered(history.clone(), &asked, vec![refused])).await.unwrap_err();
    assert_eq!(error.code(), "edit_denied", "{error}");
    assert!(tree.log.all().is_empty());

    let edited = answer(&approval_id, true, Some(json!({"path": "old.txt"})));
    let done = tree.run(answered(history, &asked, vec![edited])).await.unwrap();
    assert_eq!(tree.log.all(), vec![("delete_file".into(), "call-1".into(), json!({"path": "old.txt"}))]);
    assert_eq!(done.text(), "agent1 done");
}

#[tokio::test]
async fn an_answer_after_expiry_at_depth_two_runs_nothing_and_the_sub_agent_goes_on() {
    let tree = Tree::chain(2);
    let history = vec![ModelMessage::user("clean up")];
    let asked = tree.run(history.clone()).await.unwrap();
    let approval_id = asked.approval_requests()[0].approval_id.clone();
    tree.clock.advance(Duration::from_secs(61));
    let done = tree.run(answered(history, &asked, vec![answer(&approval_id, true, None)])).await.unwrap();
    assert!(tree.log.all().is_empty(), "an expired approval runs nothing");
    assert_eq!(done.text(), "agent1 done");
    let leaf_prompt = serde_json::to_string(&tree.models[2].prompts().pop().unwrap()).unwrap();
    assert!(leaf_prompt.contains(EXPIRED_TEXT), "{leaf_prompt}");
}

#[tokio::test]
async fn a_sub_agent_past_its_step_limit_is_a_typed_tool_error() {
    let tree = Tree::chain(1);
    let looping = RecordingModel::new(script(
        json!([[{"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "Oslo"}}]]),
    ));
    let log = Executions::default();
    let agent = Agent::new(looping).max_steps(2).toolkit(Toolkit::new(tools(&log)).unwrap());
    let toolkit = Toolkit::new([Tool::agent("agent1", agent)]).unwrap();
    let request = TextRequest::new(vec![ModelMessage::user("weather?")])
        .toolkit(toolkit)
        .ledger(tree.process().owned(Some("alice"), "chat-4").principal("alice"));
    let result = generate_text(&tree.models[0], request).await.unwrap();
    let ToolResultOutput::ErrorJson { value, .. } = &result.steps[0].tool_results[0].output else {
        panic!("{:?}", result.steps[0].tool_results)
    };
    assert_eq!(value["error"], STEP_LIMIT);
    assert_eq!(value["agent"], "agent1");
}

#[tokio::test]
async fn without_a_ledger_a_sub_agent_cannot_wait_and_says_so() {
    let tree = Tree::chain(1);
    let request = TextRequest::new(vec![ModelMessage::user("clean up")]).toolkit(tree.toolkit());
    let result = generate_text(&tree.models[0], request).await.unwrap();
    assert!(result.approval_requests().is_empty());
    let ToolResultOutput::ErrorJson { value, .. } = &result.steps[0].tool_results[0].output else {
        panic!("{:?}", result.steps[0].tool_results)
    };
    assert_eq!(value["error"], NEEDS_LEDGER);
    assert!(tree.log.all().is_empty());
}

#[tokio::test]
async fn a_typed_agent_answers_with_checked_json() {
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Summary {
        files: u32,
    }
    let tree = Tree::chain(1);
    let model = script(json!([[{"type": "text", "text": "{\"files\": 3}"}]]));
    let agent = Agent::new(model).input::<Path>().output::<Summary>();
    let tool = Tool::agent("counter", agent);
    assert_eq!(tool.input_schema()["required"], json!(["path"]));
    let root = script(json!([
        [{"type": "tool-call", "toolCallId": "c", "toolName": "counter", "input": {"path": "/tmp"}}],
        [{"type": "text", "text": "3 files"}]
    ]));
    let request = TextRequest::new(vec![ModelMessage::user("count")])
        .toolkit(Toolkit::new([tool]).unwrap())
        .ledger(tree.process().owned(Some("alice"), "chat-5"));
    let result = generate_text(&root, request).await.unwrap();
    assert_eq!(result.steps[0].tool_results[0].output, ToolResultOutput::json(json!({"files": 3})));
}

#[tokio::test]
async fn the_root_stream_carries_the_nested_call_and_its_request() {
    let tree = Tree::chain(2);
    let request = TextRequest::new(vec![ModelMessage::user("clean up")])
        .toolkit(tree.toolkit())
        .ledger(tree.process().owned(Some("alice"), "chat-6").principal("alice"));
    let (parts, result) = drain(toolgate::stream_text(&tree.models[0], request).await.unwrap()).await;
    let approval_id = result.unwrap().approval_requests()[0].approval_id.clone();
    let nested: Vec<&StreamPart> = parts
        .iter()
        .filter(|part| match part {
            StreamPart::ToolCall(call) | StreamPart::ToolApprovalRequest { tool_call: call, .. } => {
                call.tool_call_id == "call-1/call-1/call-1"
            }
            _ => false,
        })
        .collect();
    assert_eq!(nested.len(), 2, "{parts:#?}");
    assert!(
        matches!(nested[0], StreamPart::ToolCall(call) if call.tool_name == "delete_file" && call.dynamic == Some(true))
    );
    assert!(matches!(nested[1], StreamPart::ToolApprovalRequest { approval_id: id, .. } if *id == approval_id));
    // The agent's own call gets no result, only preliminary ones: its progress, then what it waits for.
    let agent: Vec<&StreamPart> = parts
        .iter()
        .filter(|part| matches!(part, StreamPart::ToolResult { tool_call_id, .. } | StreamPart::ToolError { tool_call_id, .. } if tool_call_id == "call-1"))
        .collect();
    let Some(StreamPart::ToolResult { output, preliminary: Some(true), .. }) = agent.last() else {
        panic!("{agent:#?}")
    };
    assert!(agent.iter().all(|part| matches!(part, StreamPart::ToolResult { preliminary: Some(true), .. })));
    assert_eq!(output["status"], "awaiting-approval");
    assert_eq!(output["pending"][0]["approvalId"], approval_id.as_str());
    assert_eq!(
        output["pending"][0]["lineage"],
        json!([{"agent": "agent1", "toolCallId": "call-1"}, {"agent": "agent2", "toolCallId": "call-1"}])
    );
}

/// A gate that asks for every call of one tool.
struct AskFor(&'static str);

impl toolgate::CallGate for AskFor {
    fn check<'a>(&'a self, call: toolgate::GateCall<'a>) -> futures::future::BoxFuture<'a, Option<Verdict>> {
        let verdict = (call.tool_name == self.0).then(|| Verdict::ask().because(format!("{} asks here", self.0)));
        Box::pin(async move { verdict })
    }
}

#[tokio::test]
async fn an_agents_own_rules_add_to_its_callers_at_its_depth() {
    let tree = Tree::chain(1);
    let log = Executions::default();
    let model = || script(calls("get_weather", json!({"city": "Oslo"})));
    let strict = Agent::new(model()).toolkit(Toolkit::new(tools(&log)).unwrap()).gate(Arc::new(AskFor("get_weather")));
    let lenient = Agent::new(model()).toolkit(Toolkit::new(tools(&log)).unwrap());
    let root = script(json!([
        [{"type": "tool-call", "toolCallId": "s", "toolName": "strict", "input": {"task": "weather"}},
         {"type": "tool-call", "toolCallId": "l", "toolName": "lenient", "input": {"task": "weather"}}],
        [{"type": "text", "text": "done"}]
    ]));
    let toolkit = Toolkit::new([Tool::agent("strict", strict), Tool::agent("lenient", lenient)]).unwrap();
    let request = TextRequest::new(vec![ModelMessage::user("weather twice")])
        .toolkit(toolkit)
        .ledger(tree.process().owned(Some("alice"), "chat-7").principal("alice"));
    let result = generate_text(&root, request).await.unwrap();
    // The lenient agent's call ran; the strict agent's rule asks, at the root.
    assert_eq!(log.call_ids(), vec!["call-1"]);
    let asked = result.approval_requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(lineage(&asked[0]), vec![("strict".to_owned(), "s".to_owned())]);
    assert_eq!(asked[0].reason.as_deref(), Some("get_weather asks here"));
    assert_eq!(result.steps[0].tool_results.len(), 1, "only the lenient agent answered");
}

#[tokio::test]
async fn a_sub_agents_progress_streams_as_preliminary_output_of_its_call() {
    let tree = Tree::chain(1);
    let log = Executions::default();
    let weather = script(calls("get_weather", json!({"city": "Oslo"})));
    let agent = Agent::new(weather).toolkit(Toolkit::new(tools(&log)).unwrap());
    let root = script(json!([
        [{"type": "tool-call", "toolCallId": "r", "toolName": "forecaster", "input": {"task": "Oslo?"}}],
        [{"type": "text", "text": "It is mild."}]
    ]));
    let request = TextRequest::new(vec![ModelMessage::user("weather")])
        .toolkit(Toolkit::new([Tool::agent("forecaster", agent)]).unwrap())
        .ledger(tree.process().owned(Some("alice"), "chat-8").principal("alice"));
    let (parts, result) = drain(toolgate::stream_text(&root, request).await.unwrap()).await;
    assert_eq!(result.unwrap().text(), "It is mild.");
    let outputs: Vec<(&Value, Option<bool>)> = parts
        .iter()
        .filter_map(|part| match part {
            StreamPart::ToolResult { tool_call_id, output, preliminary, .. } if tool_call_id == "r" => {
                Some((output, *preliminary))
            }
            _ => None,
        })
        .collect();
    let (last, rest) = outputs.split_last().unwrap();
    assert_eq!(*last, (&json!("get_weather done"), None), "the final answer comes last");
    assert!(rest.iter().all(|(output, preliminary)| *preliminary == Some(true) && output["status"] == "running"));
    let seen = rest.last().unwrap().0;
    assert_eq!(seen["calls"], json!([{"toolCallId": "call-1", "toolName": "get_weather", "state": "done"}]));
    assert_eq!((&seen["agent"], &seen["steps"]), (&json!("forecaster"), &json!(2)));
}
