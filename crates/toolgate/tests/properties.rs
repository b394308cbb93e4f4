//! Property tests for approvals.
//!
//! - Conversations played from a random script, continued several times with
//!   random decisions (approve, approve with an edit, deny, or move on with a
//!   new user message) through both `generate_text` and `stream_text`:
//!   no tool call ever runs twice, an approved call runs exactly once with
//!   the input the person approved, a denied call never runs and gets an
//!   `execution-denied` result, and every prompt the model receives is clean
//!   (each call followed by exactly one result, no approval parts left).
//! - `input_digest` ignores the order of object keys, and a signed approval
//!   stops verifying once its approval id, tool call id, tool name or input
//!   changes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate::approval::{ApprovalSigner, HeldCalls, NO_ANSWER_REASON, SignedCall, input_digest};
use toolgate::model::ScriptPart;
use toolgate::prompt::build_prompt;
use toolgate::protocol::{
    AssistantPart, ModelMessage, ToolApprovalRequestPart, ToolApprovalResponsePart, ToolCallPart, ToolPart,
    ToolResultOutput, UserContent, UserPart,
};
use toolgate::{
    ApprovalRequest, EngineError, RecordingModel, ScriptedModel, TextRequest, TextResult, Tool, ToolContext, ToolError,
    Toolkit, generate_text, stream_text,
};

// ---------------------------------------------------------------------------
// The toolkit: one automatic tool, one always gated, one gated by a policy.
// Every handler counts its runs per tool call id.
// ---------------------------------------------------------------------------

/// Runs per tool call id, shared by every handler.
type Runs = Arc<Mutex<HashMap<String, usize>>>;

/// `transfer` needs approval above this amount.
const TRANSFER_LIMIT: u32 = 100;

#[derive(Serialize, Deserialize, JsonSchema)]
struct NoteInput {
    id: u32,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct PathInput {
    path: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct TransferInput {
    amount: u32,
}

/// What a handler returns: its tool, its call and the input it ran with.
fn ran_output(tool_name: &str, tool_call_id: &str, input: &Value) -> Value {
    json!({"tool": tool_name, "toolCallId": tool_call_id, "input": input})
}

fn counting_tool<I>(tool: Tool, runs: &Runs) -> Tool
where
    I: Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    let name = tool.name().to_owned();
    let runs = Arc::clone(runs);
    tool.handler(move |input: I, context: ToolContext| {
        let runs = Arc::clone(&runs);
        let name = name.clone();
        async move {
            let id = context.tool_call_id().to_owned();
            *runs.lock().unwrap().entry(id.clone()).or_default() += 1;
            let input = serde_json::to_value(input).map_err(|e| ToolError::text(e.to_string()))?;
            Ok::<_, ToolError>(ran_output(&name, &id, &input))
        }
    })
}

fn toolkit(runs: &Runs) -> Toolkit {
    Toolkit::new([
        counting_tool::<NoteInput>(Tool::function::<NoteInput>("read_note"), runs),
        counting_tool::<PathInput>(Tool::function::<PathInput>("delete_file").needs_approval(true), runs),
        counting_tool::<TransferInput>(
            Tool::function::<TransferInput>("transfer")
                .approval_when(|input: &TransferInput, _| input.amount > TRANSFER_LIMIT),
            runs,
        ),
    ])
    .expect("the test tools are valid")
}

/// The toolkit's approval policy, restated independently of the engine.
fn needs_approval(tool_name: &str, input: &Value) -> bool {
    match tool_name {
        "delete_file" => true,
        "transfer" => input["amount"].as_u64().is_none_or(|amount| amount > u64::from(TRANSFER_LIMIT)),
        _ => false,
    }
}

/// A valid edited input for a gated tool.
fn edited_input(tool_name: &str, seed: u32) -> Value {
    match tool_name {
        "delete_file" => json!({"path": format!("edited-{seed}.txt")}),
        _ => json!({"amount": seed}),
    }
}

// ---------------------------------------------------------------------------
// Random scenarios.
// ---------------------------------------------------------------------------

/// One scripted model turn.
#[derive(Debug, Clone)]
struct Turn {
    text: Option<String>,
    calls: Vec<(&'static str, Value)>,
}

/// What the person does with the approvals a continuation returned.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// Answer every request.
    AnswerAll,
    /// Answer every other request, then write a new user message.
    AnswerSomeThenMoveOn,
    /// Write a new user message without answering.
    MoveOn,
    /// Answer the first half, check that the engine refuses to continue and
    /// runs nothing, then answer the rest.
    AnswerInTwoTries,
}

#[derive(Debug, Clone)]
struct Decision {
    approve: bool,
    reason: Option<String>,
    edit: Option<u32>,
}

#[derive(Debug, Clone)]
struct Round {
    streaming: bool,
    max_steps: usize,
    action: Action,
    /// Decision for the i-th pending request (cycled).
    decisions: Vec<Decision>,
}

#[derive(Debug, Clone)]
struct Scenario {
    turns: Vec<Turn>,
    rounds: Vec<Round>,
    hold_batch: bool,
    /// `Some(signature_field)` to sign approvals.
    signed: Option<bool>,
    concurrency: usize,
}

fn tool_call() -> impl Strategy<Value = (&'static str, Value)> {
    prop_oneof![
        (0u32..1000).prop_map(|id| ("read_note", json!({"id": id}))),
        "[a-z]{1,8}\\.txt".prop_map(|path| ("delete_file", json!({"path": path}))),
        (0u32..=2 * TRANSFER_LIMIT).prop_map(|amount| ("transfer", json!({"amount": amount}))),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    (option::of("[a-z]{1,8}( [a-z]{1,8}){0,3}"), vec(tool_call(), 0..4)).prop_map(|(text, calls)| {
        // A turn with neither text nor calls leaves no assistant message, so
        // the script would never move past it.
        let text = if calls.is_empty() { Some(text.unwrap_or_else(|| "ok".into())) } else { text };
        Turn { text, calls }
    })
}

fn decision() -> impl Strategy<Value = Decision> {
    (any::<bool>(), option::of("[a-z]{1,12}"), option::weighted(0.3, 0u32..1000))
        .prop_map(|(approve, reason, edit)| Decision { approve, reason, edit })
}

fn round() -> impl Strategy<Value = Round> {
    let action = prop_oneof![
        4 => Just(Action::AnswerAll),
        2 => Just(Action::AnswerSomeThenMoveOn),
        2 => Just(Action::MoveOn),
        1 => Just(Action::AnswerInTwoTries),
    ];
    (any::<bool>(), 1usize..=4, action, vec(decision(), 4))
        .prop_map(|(streaming, max_steps, action, decisions)| Round { streaming, max_steps, action, decisions })
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (vec(turn(), 1..8), vec(round(), 1..=6), any::<bool>(), option::of(any::<bool>()), 1usize..=3).prop_map(
        |(turns, rounds, hold_batch, signed, concurrency)| Scenario { turns, rounds, hold_batch, signed, concurrency },
    )
}

/// The script: call ids are unique over the whole script, and a final
/// text-only turn repeats harmlessly once the script runs out.
fn script(turns: &[Turn]) -> Vec<Vec<ScriptPart>> {
    let mut script: Vec<Vec<ScriptPart>> = turns
        .iter()
        .enumerate()
        .map(|(turn_index, turn)| {
            let text = turn.text.iter().map(|text| ScriptPart::Text { text: text.clone() });
            let calls = turn.calls.iter().enumerate().map(|(call_index, (tool_name, input))| ScriptPart::ToolCall {
                tool_call_id: format!("call-{turn_index}-{call_index}"),
                tool_name: (*tool_name).to_owned(),
                input: input.clone(),
                provider_executed: None,
            });
            text.chain(calls).collect()
        })
        .collect();
    script.push(vec![ScriptPart::Text { text: "All done.".into() }]);
    script
}

// ---------------------------------------------------------------------------
// The conversation driver and its checks.
// ---------------------------------------------------------------------------

/// What must have happened to a call once its decision was sent.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    Ran { input: Value },
    Denied { reason: Option<String> },
}

struct Conversation {
    model: RecordingModel<ScriptedModel>,
    runs: Runs,
    toolkit: Toolkit,
    signer: Option<ApprovalSigner>,
    ids: Arc<AtomicUsize>,
    hold_batch: bool,
    concurrency: usize,
    history: Vec<ModelMessage>,
    /// Decisions sent so far, by tool call id.
    decided: HashMap<String, Expected>,
}

impl Conversation {
    fn new(scenario: &Scenario) -> Self {
        let runs = Runs::default();
        Self {
            model: RecordingModel::new(ScriptedModel::new(script(&scenario.turns)).expect("the script has turns")),
            toolkit: toolkit(&runs),
            runs,
            signer: scenario.signed.map(|field| {
                ApprovalSigner::new("property-test-secret").expect("non-empty secret").with_signature_field(field)
            }),
            ids: Arc::default(),
            hold_batch: scenario.hold_batch,
            concurrency: scenario.concurrency,
            history: vec![ModelMessage::user("Please tidy up.")],
            decided: HashMap::new(),
        }
    }

    fn request(&self, max_steps: usize) -> TextRequest {
        let ids = Arc::clone(&self.ids);
        let mut request = TextRequest::new(self.history.clone())
            .toolkit(self.toolkit.clone())
            .max_steps(max_steps)
            .tool_concurrency(self.concurrency)
            .hold_batch_for_approval(self.hold_batch)
            .id_generator(move || format!("id{}", ids.fetch_add(1, Ordering::Relaxed)));
        if let Some(signer) = &self.signer {
            request = request.approval_signer(signer.clone());
        }
        request
    }

    async fn engine_call(&self, streaming: bool, max_steps: usize) -> Result<TextResult, EngineError> {
        let request = self.request(max_steps);
        if streaming {
            stream_text(&self.model, request).await?.finish().await
        } else {
            generate_text(&self.model, request).await
        }
    }

    /// Continues the conversation, appends what it produced, and checks the invariants.
    async fn continue_ok(&mut self, streaming: bool, max_steps: usize) -> TextResult {
        let prompts_before = self.model.prompts().len();
        let result = match self.engine_call(streaming, max_steps).await {
            Ok(result) => result,
            Err(error) => panic!("continuation failed: {error}\nhistory: {:#?}", self.history),
        };
        assert!(!result.steps.is_empty() && result.steps.len() <= max_steps, "steps: {}", result.steps.len());
        self.history.extend(result.response_messages.iter().cloned());
        self.check(&result, prompts_before);
        result
    }

    async fn round(&mut self, round: &Round) {
        let result = self.continue_ok(round.streaming, round.max_steps).await;
        let pending = result.approval_requests().to_vec();
        let decision = |index: usize| &round.decisions[index % round.decisions.len()];
        match round.action {
            Action::AnswerAll => {
                let answers = pending.iter().enumerate().map(|(i, request)| (request, decision(i))).collect();
                self.answer(answers);
            }
            Action::MoveOn => self.move_on(&pending),
            Action::AnswerSomeThenMoveOn => {
                let (answered, unanswered): (Vec<_>, Vec<_>) =
                    pending.iter().enumerate().partition(|(i, _)| i % 2 == 0);
                self.answer(answered.into_iter().map(|(i, request)| (request, decision(i))).collect());
                let unanswered: Vec<ApprovalRequest> =
                    unanswered.into_iter().map(|(_, request)| request.clone()).collect();
                self.move_on(&unanswered);
            }
            Action::AnswerInTwoTries if pending.is_empty() => {}
            Action::AnswerInTwoTries => {
                let (first, rest) = pending.split_at(pending.len() / 2);
                self.answer(first.iter().enumerate().map(|(i, request)| (request, decision(i))).collect());
                self.expect_refusal(rest, round.streaming, round.max_steps).await;
                let offset = first.len();
                self.answer(rest.iter().enumerate().map(|(i, request)| (request, decision(offset + i))).collect());
            }
        }
    }

    /// Appends one tool message answering these requests.
    fn answer(&mut self, answers: Vec<(&ApprovalRequest, &Decision)>) {
        if answers.is_empty() {
            return;
        }
        let mut parts = Vec::new();
        for (request, decision) in answers {
            let call = &request.tool_call;
            let edited = decision.edit.filter(|_| decision.approve).map(|seed| edited_input(&call.tool_name, seed));
            let expected = if decision.approve {
                Expected::Ran { input: edited.clone().unwrap_or_else(|| call.input.clone()) }
            } else {
                Expected::Denied { reason: decision.reason.clone() }
            };
            assert!(self.decided.insert(call.tool_call_id.clone(), expected).is_none(), "decided twice");
            parts.push(ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
                approval_id: request.approval_id.clone(),
                approved: decision.approve,
                reason: decision.reason.clone(),
                provider_executed: None,
                edited_input: edited,
            }));
        }
        self.history.push(ModelMessage::tool(parts));
    }

    /// Writes a new user message; these requests stay unanswered and must resolve as denied.
    fn move_on(&mut self, unanswered: &[ApprovalRequest]) {
        for request in unanswered {
            let expected = Expected::Denied { reason: Some(NO_ANSWER_REASON.to_owned()) };
            assert!(self.decided.insert(request.tool_call.tool_call_id.clone(), expected).is_none(), "decided twice");
        }
        self.history.push(ModelMessage::user("Never mind, something else."));
    }

    /// With these requests still open, the engine must refuse before running or asking anything.
    async fn expect_refusal(&self, open: &[ApprovalRequest], streaming: bool, max_steps: usize) {
        let runs_before = self.runs.lock().unwrap().clone();
        let prompts_before = self.model.prompts().len();
        match self.engine_call(streaming, max_steps).await {
            Err(EngineError::UnansweredApprovals { approval_ids }) => {
                let expected: BTreeSet<&str> = open.iter().map(|request| request.approval_id.as_str()).collect();
                assert_eq!(approval_ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), expected);
            }
            Err(other) => panic!("expected UnansweredApprovals, got {other}"),
            Ok(result) => panic!("open approvals were ignored: {:#?}", result.response_messages),
        }
        assert_eq!(*self.runs.lock().unwrap(), runs_before, "a refused continuation ran tools");
        assert_eq!(self.model.prompts().len(), prompts_before, "a refused continuation called the model");
    }

    /// Checks the whole history, the engine's pending approvals, and the
    /// prompts the model received during the last continuation.
    fn check(&self, result: &TextResult, prompts_before: usize) {
        let runs = self.runs.lock().unwrap().clone();
        let view = HistoryView::new(&self.history);

        for (id, count) in &runs {
            assert!(*count <= 1, "call {id} ran {count} times");
            assert!(view.calls.contains_key(id.as_str()), "call {id} ran but is not in the history");
        }

        let mut outstanding = BTreeSet::new();
        let mut open = BTreeSet::new();
        for (&id, site) in &view.calls {
            let call = site.call;
            let ran = runs.get(id).copied().unwrap_or(0);
            let gated = needs_approval(&call.tool_name, &call.input);
            let requests = view.requests.get(id).map_or(&[][..], Vec::as_slice);
            assert_eq!(requests.len(), usize::from(gated), "approval requests for {id} ({})", call.input);
            let results = view.results.get(id).map_or(&[][..], Vec::as_slice);
            assert!(results.len() <= 1, "call {id} has {} results", results.len());

            match results.first() {
                Some(ToolResultOutput::Json { value, .. }) => {
                    assert_eq!(ran, 1, "call {id} has a result but ran {ran} times");
                    let input = match self.decided.get(id) {
                        Some(Expected::Ran { input }) => input,
                        Some(denied) => panic!("call {id} ran but was {denied:?}"),
                        None => {
                            assert!(!gated, "gated call {id} ran without an approval");
                            &call.input
                        }
                    };
                    assert_eq!(value, &ran_output(&call.tool_name, id, input));
                }
                Some(ToolResultOutput::ExecutionDenied { reason, .. }) => {
                    assert_eq!(ran, 0, "denied call {id} ran");
                    assert_eq!(self.decided.get(id), Some(&Expected::Denied { reason: reason.clone() }), "call {id}");
                }
                Some(other) => panic!("call {id}: unexpected output {other:?}"),
                None => {
                    assert_eq!(ran, 0, "call {id} ran but has no result");
                    assert!(!self.decided.contains_key(id), "decided call {id} has no result");
                    let is_open = |approval_id: &str| !view.responses.contains(approval_id);
                    if let Some(&(_, approval_id)) = requests.first() {
                        assert!(is_open(approval_id), "answered call {id} has no result");
                        open.insert(approval_id);
                    } else {
                        // Only a call held back beside an open request may wait.
                        let beside_open = view.requests.iter().any(|(other, requests)| {
                            view.calls[other].message == site.message
                                && !view.results.contains_key(other)
                                && requests.iter().any(|&(_, approval_id)| is_open(approval_id))
                        });
                        assert!(self.hold_batch && beside_open, "call {id} has no result and waits for nothing");
                    }
                    outstanding.insert(id);
                }
            }
        }

        let pending: BTreeSet<&str> = result.approval_requests().iter().map(|r| r.approval_id.as_str()).collect();
        assert_eq!(pending, open, "the engine's pending approvals are the open requests of the history");
        for request in result.approval_requests() {
            assert_eq!(&request.tool_call, view.calls[request.tool_call.tool_call_id.as_str()].call);
        }

        match build_prompt(&self.history) {
            Ok(prompt) => {
                assert!(outstanding.is_empty(), "a prompt was built with calls {outstanding:?} unanswered");
                assert_clean_prompt(&prompt, &self.decided);
            }
            Err(EngineError::MissingToolResults { tool_call_ids }) => {
                assert_eq!(tool_call_ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), outstanding);
            }
            Err(other) => panic!("build_prompt failed: {other}"),
        }

        let prompts = self.model.prompts();
        assert_eq!(prompts.len() - prompts_before, result.steps.len(), "one prompt per step");
        for prompt in &prompts[prompts_before..] {
            assert_clean_prompt(prompt, &self.decided);
        }
    }
}

/// Where a call is.
struct CallSite<'h> {
    message: usize,
    call: &'h ToolCallPart,
}

/// Calls, results, requests and responses of a raw history, by id.
struct HistoryView<'h> {
    calls: BTreeMap<&'h str, CallSite<'h>>,
    results: HashMap<&'h str, Vec<&'h ToolResultOutput>>,
    /// tool call id -> (message index, approval id)
    requests: HashMap<&'h str, Vec<(usize, &'h str)>>,
    responses: HashSet<&'h str>,
}

impl<'h> HistoryView<'h> {
    fn new(history: &'h [ModelMessage]) -> Self {
        let mut view = Self {
            calls: BTreeMap::new(),
            results: HashMap::new(),
            requests: HashMap::new(),
            responses: HashSet::new(),
        };
        for (message, entry) in history.iter().enumerate() {
            match entry {
                ModelMessage::Assistant(assistant) => {
                    for part in assistant.part_slice() {
                        match part {
                            AssistantPart::ToolCall(call) => {
                                let previous = view.calls.insert(&call.tool_call_id, CallSite { message, call });
                                assert!(previous.is_none(), "two calls share the id {}", call.tool_call_id);
                            }
                            AssistantPart::ToolApprovalRequest(request) => {
                                let requests = view.requests.entry(&request.tool_call_id).or_default();
                                requests.push((message, &request.approval_id));
                            }
                            _ => {}
                        }
                    }
                }
                ModelMessage::Tool(tool) => {
                    for part in &tool.content {
                        match part {
                            ToolPart::ToolResult(result) => {
                                view.results.entry(&result.tool_call_id).or_default().push(&result.output)
                            }
                            ToolPart::ToolApprovalResponse(response) => {
                                view.responses.insert(&response.approval_id);
                            }
                        }
                    }
                }
                ModelMessage::User(_) | ModelMessage::System(_) => {}
            }
        }
        view
    }
}

/// A prompt is clean when every local call is followed, in the tool
/// message(s) right after it, by exactly one result, no result is orphaned,
/// no approval parts remain, and approved calls show the input that ran.
fn assert_clean_prompt(prompt: &[ModelMessage], decided: &HashMap<String, Expected>) {
    for (index, message) in prompt.iter().enumerate() {
        match message {
            ModelMessage::System(_) => {}
            ModelMessage::User(user) => {
                if let UserContent::Parts(parts) = &user.content {
                    assert!(
                        !parts.iter().any(|p| matches!(p, UserPart::ToolApproval(_))),
                        "approval in a user message"
                    );
                }
            }
            ModelMessage::Tool(_) => {
                let after = index.checked_sub(1).map(|previous| &prompt[previous]);
                assert!(
                    matches!(after, Some(ModelMessage::Assistant(_) | ModelMessage::Tool(_))),
                    "tool message {index} does not follow an assistant message"
                );
            }
            ModelMessage::Assistant(assistant) => {
                let parts = assistant.part_slice();
                assert!(
                    !parts.iter().any(|p| matches!(p, AssistantPart::ToolApprovalRequest(_))),
                    "approval request in the prompt"
                );
                let calls: Vec<&ToolCallPart> = parts
                    .iter()
                    .filter_map(|part| match part {
                        AssistantPart::ToolCall(call) if !call.is_provider_executed() => Some(call),
                        _ => None,
                    })
                    .collect();
                let mut results: BTreeMap<&str, usize> = BTreeMap::new();
                let following = prompt[index + 1..].iter().map_while(|next| match next {
                    ModelMessage::Tool(tool) => Some(tool),
                    _ => None,
                });
                for tool in following {
                    for part in &tool.content {
                        match part {
                            ToolPart::ToolResult(result) => *results.entry(&result.tool_call_id).or_default() += 1,
                            ToolPart::ToolApprovalResponse(response) => {
                                assert_eq!(
                                    response.provider_executed,
                                    Some(true),
                                    "local approval response in the prompt"
                                )
                            }
                        }
                    }
                }
                let expected: BTreeMap<&str, usize> =
                    calls.iter().map(|call| (call.tool_call_id.as_str(), 1)).collect();
                assert_eq!(results, expected, "results after assistant message {index}");
                for call in calls {
                    if let Some(Expected::Ran { input }) = decided.get(&call.tool_call_id) {
                        assert_eq!(
                            &call.input, input,
                            "the prompt shows call {} with the input that ran",
                            call.tool_call_id
                        );
                    }
                }
            }
        }
    }
}

fn play(scenario: &Scenario) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime");
    runtime.block_on(async {
        let mut conversation = Conversation::new(scenario);
        for round in &scenario.rounds {
            conversation.round(round).await;
        }
        // One more continuation, so the last decisions are carried out and checked.
        conversation.continue_ok(false, 1).await;
    });
}

// ---------------------------------------------------------------------------
// JSON values for the digest and signature properties.
// ---------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite and have an exact canonical form", |f| {
                f.is_finite() && !(f.fract() == 0.0 && (9_007_199_254_740_992.0..1e21).contains(&f.abs()))
            })
            .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map("\\PC{0,6}", inner, 0..5).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A JSON object with at least two keys, like a tool input.
fn json_object() -> impl Strategy<Value = Value> {
    btree_map("\\PC{1,8}", json_value(), 2..6).prop_map(|map| Value::Object(map.into_iter().collect()))
}

/// The same value with the keys of every object in another order.
/// Puts an object's entries in some order.
type KeyOrder<'a> = dyn Fn(&mut [(&String, &Value)]) + 'a;

fn reordered(value: &Value, order: &KeyOrder<'_>) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            order(&mut entries);
            Value::Object(entries.into_iter().map(|(key, value)| (key.clone(), reordered(value, order))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|item| reordered(item, order)).collect()),
        other => other.clone(),
    }
}

fn shuffled(value: &Value, seed: u64) -> Value {
    reordered(value, &|entries| {
        entries.sort_by_key(|(key, _)| {
            let mut hasher = DefaultHasher::new();
            (seed, key).hash(&mut hasher);
            hasher.finish()
        })
    })
}

fn reversed(value: &Value) -> Value {
    reordered(value, &|entries| entries.reverse())
}

/// Ways to change a signed approval's approval id.
#[derive(Debug, Clone)]
enum IdChange {
    /// Another nonce, same signature.
    Nonce(String),
    /// Any other string.
    Replace(String),
    /// One character of the signature replaced.
    SignatureChar { position: usize, replacement: char },
}

fn id_change() -> impl Strategy<Value = IdChange> {
    prop_oneof![
        "[A-Za-z0-9_-]{1,24}".prop_map(IdChange::Nonce),
        "\\PC{0,60}".prop_map(IdChange::Replace),
        (any::<usize>(), "[A-Za-z0-9_-]")
            .prop_map(|(position, c)| IdChange::SignatureChar { position, replacement: c.chars().next().unwrap() }),
    ]
}

fn changed_id(approval_id: &str, nonce: &str, change: &IdChange) -> String {
    let (_, signature) = approval_id.rsplit_once('.').expect("a signed id has a signature");
    match change {
        IdChange::Nonce(other) => {
            let other = if other == nonce { format!("{other}x") } else { other.clone() };
            format!("apr_{other}.{signature}")
        }
        IdChange::Replace(other) if other == approval_id => format!("{other}x"),
        IdChange::Replace(other) => other.clone(),
        IdChange::SignatureChar { position, replacement } => {
            let mut chars: Vec<char> = signature.chars().collect();
            let position = position % chars.len();
            chars[position] = if chars[position] == *replacement {
                if *replacement == 'A' { 'B' } else { 'A' }
            } else {
                *replacement
            };
            format!("apr_{nonce}.{}", chars.into_iter().collect::<String>())
        }
    }
}

// ---------------------------------------------------------------------------
// The properties.
// ---------------------------------------------------------------------------

fn config(cases: u32) -> ProptestConfig {
    // No regression files: they would be written next to this test.
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn continuations_never_rerun_calls_and_always_send_clean_prompts(scenario in scenario()) {
        play(&scenario);
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn input_digest_ignores_object_key_order(input in json_object(), seed in any::<u64>()) {
        let digest = input_digest(&input);
        prop_assert_eq!(input_digest(&shuffled(&input, seed)), digest.clone());
        let backwards = reversed(&input);
        // The reversed copy really serializes differently (serde_json keeps insertion order here).
        prop_assert_ne!(backwards.to_string(), input.to_string());
        prop_assert_eq!(input_digest(&backwards), digest);
    }

    #[test]
    fn signed_approval_fails_verification_when_any_bound_field_changes(
        secret in vec(any::<u8>(), 1..48),
        signature_field in any::<bool>(),
        nonce in "[A-Za-z0-9_-]{1,24}",
        tool_call_id in "\\PC{1,24}",
        tool_name in "[a-z_]{1,16}",
        input in json_object(),
        id_change in id_change(),
        other_tool_call_id in "\\PC{1,24}",
        other_tool_name in "[a-z_]{1,16}",
        other_input in json_object(),
        seed in any::<u64>(),
    ) {
        let signer = ApprovalSigner::new(&secret).unwrap().with_signature_field(signature_field);
        let call = SignedCall { tool_call_id: &tool_call_id, tool_name: &tool_name, input: &input };
        let issued = signer.issue(&nonce, call, &HeldCalls::none()).expect("the input has a canonical form");
        let request = ToolApprovalRequestPart {
            approval_id: issued.approval_id.clone(),
            tool_call_id: tool_call_id.clone(),
            signature: issued.signature.clone(),
        };
        prop_assert_eq!(signer.verify(&request, &tool_name, &input, &HeldCalls::none()), Ok(()));
        prop_assert_eq!(signer.verify(&request, &tool_name, &shuffled(&input, seed), &HeldCalls::none()), Ok(()), "key order is not bound");

        let other_id = ToolApprovalRequestPart {
            approval_id: changed_id(&issued.approval_id, &nonce, &id_change),
            ..request.clone()
        };
        prop_assert_ne!(&other_id.approval_id, &issued.approval_id);
        prop_assert!(signer.verify(&other_id, &tool_name, &input, &HeldCalls::none()).is_err(), "approval id {}", other_id.approval_id);

        if other_tool_call_id != tool_call_id {
            let other_call = ToolApprovalRequestPart { tool_call_id: other_tool_call_id, ..request.clone() };
            prop_assert!(signer.verify(&other_call, &tool_name, &input, &HeldCalls::none()).is_err(), "tool call id");
        }
        if other_tool_name != tool_name {
            prop_assert!(signer.verify(&request, &other_tool_name, &input, &HeldCalls::none()).is_err(), "tool name");
        }
        if input_digest(&other_input) != input_digest(&input) {
            prop_assert!(signer.verify(&request, &tool_name, &other_input, &HeldCalls::none()).is_err(), "input");
        }
        let mut extended = input.clone();
        extended.as_object_mut().unwrap().insert("\u{0}extra".into(), Value::Bool(true));
        prop_assert!(signer.verify(&request, &tool_name, &extended, &HeldCalls::none()).is_err(), "input with an extra key");

        let other_signer = ApprovalSigner::new([secret.as_slice(), b"!"].concat()).unwrap();
        prop_assert!(other_signer.verify(&request, &tool_name, &input, &HeldCalls::none()).is_err(), "another secret");
    }
}
