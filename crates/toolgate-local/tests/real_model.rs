//! The approval flow driven by the real default model (SmolLM2-135M-Instruct).
//!
//! These tests need the model file: `toolgate model pull` (or `scripts/setup-local-model.sh`) puts it in
//! the cache; `TOOLGATE_LOCAL_MODEL=PATH` points at another GGUF. The crate's build script looks for it:
//! without it every test here is listed as ignored with the reason (never a silent pass), and
//! `TOOLGATE_REQUIRE_LOCAL_MODEL=1` (set by CI) makes `the_model_is_there_when_required` fail; a model
//! that came or went since the build script looked fails `the_build_script_saw_the_model_as_it_is`.
//! Assertions are on structure (tool names, input shape, result types), never on prose.

use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::protocol::{ModelRequest, ModelStreamPart, ToolPart, ToolSpec};
use toolgate::{
    EngineError, FinishReason, LanguageModel, ModelError, ModelMessage, RecordingModel, TextRequest, ToolChoice,
    ToolResultOutput, generate_text, stream_text,
};
use toolgate_local::{LocalConfig, LocalModel, pull};

/// `TOOLGATE_LOCAL_MODEL` (when not empty), else the default model; the build script looks at the same path.
fn model_path() -> std::path::PathBuf {
    std::env::var_os("TOOLGATE_LOCAL_MODEL")
        .filter(|path| !path.is_empty())
        .map(Into::into)
        .unwrap_or_else(pull::default_model_path)
}

fn model() -> LocalModel {
    let path = model_path();
    LocalModel::load(&path).unwrap_or_else(|error| panic!("cannot load the model at {}: {error}", path.display()))
}

/// Always runs: with `TOOLGATE_REQUIRE_LOCAL_MODEL=1` (CI) a missing model fails the run instead of
/// leaving the real-model tests ignored.
#[test]
fn the_model_is_there_when_required() {
    let path = model_path();
    if std::env::var("TOOLGATE_REQUIRE_LOCAL_MODEL").as_deref() == Ok("1") {
        assert!(
            path.is_file(),
            "TOOLGATE_REQUIRE_LOCAL_MODEL=1 but there is no model at {}: run `toolgate model pull` \
             (scripts/setup-local-model.sh)",
            path.display()
        );
    } else if !path.is_file() {
        // Shown with `--nocapture`; the ignored tests carry the reason in any case.
        eprintln!("NOTICE: the real-model tests are ignored: no model at {}", path.display());
    }
}

/// The real-model tests are ignored or not by what the build script saw; a model that came or went
/// without cargo noticing fails here rather than leaving them ignored next to a model.
#[test]
fn the_build_script_saw_the_model_as_it_is() {
    let path = model_path();
    let built_with_model = cfg!(toolgate_local_model);
    assert_eq!(
        built_with_model,
        path.is_file(),
        "the model at {} {} after the build looked for it: build again (`cargo clean -p toolgate-local`)",
        path.display(),
        if built_with_model { "went away" } else { "appeared" }
    );
}

#[test]
fn the_build_script_looks_where_the_crate_looks() {
    assert_eq!(std::path::Path::new(env!("TOOLGATE_LOCAL_MODEL_AT_BUILD")), model_path());
}

fn delete_file() -> ToolChoice {
    ToolChoice::Tool { tool_name: "delete_file".into() }
}

fn ask_to_delete() -> Vec<ModelMessage> {
    vec![ModelMessage::user("Please delete the file notes.txt")]
}

/// Asks for the deletion with `delete_file` forced; returns the history up to the approval request
/// and its approval id.
async fn approval_requested(model: &LocalModel) -> (Vec<Value>, String, Value) {
    let request = TextRequest::new(ask_to_delete())
        .toolkit(toolgate::demo::toolkit())
        .tool_choice(delete_file())
        .max_output_tokens(64);
    let mut stream = stream_text(model, request).await.expect("the stream starts");
    let mut part_types = Vec::new();
    while let Some(part) = stream.next().await {
        part_types.push(serde_json::to_value(&part).unwrap()["type"].as_str().unwrap().to_owned());
    }
    let result = stream.finish().await.expect("the turn succeeds");
    assert!(part_types.contains(&"tool-call".to_owned()), "{part_types:?}");
    assert!(part_types.contains(&"tool-approval-request".to_owned()), "{part_types:?}");
    let requests = result.approval_requests();
    assert_eq!(requests.len(), 1, "one approval request");
    let call = &requests[0].tool_call;
    assert_eq!(call.tool_name, "delete_file");
    let input = call.input.as_object().expect("the input is an object");
    assert!(input["path"].is_string(), "the input has a string path: {input:?}");
    assert_eq!(input.len(), 1, "no other keys: {input:?}");
    assert!(result.steps.iter().all(|step| step.tool_results.is_empty()), "nothing ran");
    let mut history: Vec<Value> = ask_to_delete().iter().map(|m| serde_json::to_value(m).unwrap()).collect();
    history.extend(result.response_messages.iter().map(|m| serde_json::to_value(m).unwrap()));
    (history, requests[0].approval_id.clone(), call.input.clone())
}

fn answer(mut history: Vec<Value>, approval_id: &str, approved: bool) -> Vec<ModelMessage> {
    history.push(json!({"role": "tool", "content": [
        {"type": "tool-approval-response", "approvalId": approval_id, "approved": approved}
    ]}));
    serde_json::from_value(Value::Array(history)).expect("the history parses")
}

/// The tool result the model received in its (first) prompt of the continuation.
fn result_in_prompt(request: &ModelRequest) -> ToolResultOutput {
    request
        .prompt
        .iter()
        .find_map(|message| match message {
            ModelMessage::Tool(tool) => tool.content.iter().find_map(|part| match part {
                ToolPart::ToolResult(result) if result.tool_name == "delete_file" => Some(result.output.clone()),
                _ => None,
            }),
            _ => None,
        })
        .expect("the model's prompt holds the delete_file result")
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn approved_deletion_runs_and_the_model_sees_the_result() {
    let model = model();
    let (history, approval_id, input) = approval_requested(&model).await;
    let recording = RecordingModel::new(model.clone());
    let request = TextRequest::new(answer(history, &approval_id, true))
        .toolkit(toolgate::demo::toolkit())
        .tool_choice(ToolChoice::None)
        .max_output_tokens(24);
    let result = generate_text(&recording, request).await.expect("the continuation succeeds");
    assert_eq!(result.preresolved.len(), 1);
    let expected = ToolResultOutput::json(json!({"deleted": input["path"]}));
    assert_eq!(result.preresolved[0].output, expected, "the approved call ran before the model");
    let requests = recording.requests();
    assert_eq!(requests.len(), 1, "one model call");
    assert_eq!(result_in_prompt(&requests[0]), expected);
    assert!(result.steps[0].tool_calls().next().is_none());
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn denied_deletion_gives_execution_denied() {
    let model = model();
    let (history, approval_id, _) = approval_requested(&model).await;
    let recording = RecordingModel::new(model.clone());
    let request = TextRequest::new(answer(history, &approval_id, false))
        .toolkit(toolgate::demo::toolkit())
        .tool_choice(ToolChoice::None)
        .max_output_tokens(24);
    let result = generate_text(&recording, request).await.expect("the continuation succeeds");
    assert_eq!(result.preresolved.len(), 1);
    assert!(matches!(result.preresolved[0].output, ToolResultOutput::ExecutionDenied { .. }));
    let requests = recording.requests();
    assert!(matches!(result_in_prompt(&requests[0]), ToolResultOutput::ExecutionDenied { .. }));
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn tool_choice_none_gives_text_and_no_calls() {
    let model = model();
    let request = TextRequest::new(ask_to_delete())
        .toolkit(toolgate::demo::toolkit())
        .tool_choice(ToolChoice::None)
        .max_output_tokens(24);
    let result = generate_text(&model, request).await.expect("the turn succeeds");
    assert!(!result.text().trim().is_empty(), "some text");
    assert!(result.steps.iter().all(|step| step.tool_calls().next().is_none()));
    assert!(result.approval_requests().is_empty());
    assert!(matches!(result.finish_reason, FinishReason::Stop | FinishReason::Length));
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn required_gives_a_schema_valid_call_of_an_offered_tool() {
    let model = model();
    let request = ModelRequest {
        prompt: vec![ModelMessage::user("What is the weather in Paris?")].into(),
        tools: toolgate::demo::toolkit().specs(),
        tool_choice: ToolChoice::Required,
        max_output_tokens: Some(64),
        ..ModelRequest::default()
    };
    let response = model.generate(request).await.expect("the call succeeds");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let call = response
        .content
        .iter()
        .find_map(|part| match part {
            toolgate::protocol::ModelContent::ToolCall(call) => Some(call),
            _ => None,
        })
        .expect("a tool call");
    assert!(["get_weather", "delete_file", "transfer_money", "ask_user"].contains(&call.tool_name.as_str()));
    let input: Value = serde_json::from_str(&call.input).expect("the input is JSON");
    assert!(input.is_object());
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn streamed_named_call_has_input_parts_and_a_tool_calls_finish() {
    let model = model();
    let request = ModelRequest {
        prompt: ask_to_delete().into(),
        tools: vec![ToolSpec::Function {
            name: "delete_file".into(),
            description: Some("Delete a file.".into()),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        tool_choice: delete_file(),
        max_output_tokens: Some(64),
        ..ModelRequest::default()
    };
    let parts: Vec<ModelStreamPart> =
        model.stream(request).await.expect("the stream opens").map(|part| part.expect("no error")).collect().await;
    let types: Vec<String> =
        parts.iter().map(|p| serde_json::to_value(p).unwrap()["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(types, ["tool-input-start", "tool-input-delta", "tool-input-end", "tool-call", "finish"]);
    let ModelStreamPart::Finish { finish_reason, usage, .. } = &parts[4] else { unreachable!() };
    assert_eq!(*finish_reason, FinishReason::ToolCalls);
    assert!(usage.input_tokens.unwrap() > 0 && usage.output_tokens.unwrap() > 0);
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn a_history_longer_than_the_context_is_context_too_long() {
    let path = model_path();
    let small =
        LocalModel::load_with(path, LocalConfig { context_length: Some(256), ..LocalConfig::default() }).unwrap();
    assert_eq!(small.context_length(), 256);
    let long = "Please read this carefully. ".repeat(200);
    let request = TextRequest::new(vec![ModelMessage::user(long)]).toolkit(toolgate::demo::toolkit());
    match generate_text(&small, request).await {
        Err(EngineError::Model { source: ModelError::ContextTooLong { message }, .. }) => {
            assert!(message.contains("256"), "{message}");
        }
        other => panic!("expected ContextTooLong, got {other:?}"),
    }
}

#[test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
fn the_chat_template_comes_from_the_gguf() {
    let model = model();
    let template = model.chat_template().expect("SmolLM2 ships a chat template");
    assert!(template.contains("<|im_start|>"), "{template}");
}

/// One `auto` turn with the demo tools.
async fn auto_turn(model: &impl LanguageModel, prompt: Vec<ModelMessage>) -> toolgate::TextResult {
    let request = TextRequest::new(prompt).toolkit(toolgate::demo::toolkit()).max_output_tokens(48);
    generate_text(model, request).await.expect("the turn succeeds")
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn auto_calls_delete_file_for_a_deletion_request() {
    let model = model();
    let result = auto_turn(&model, vec![ModelMessage::user("Delete the file notes.txt")]).await;
    let requests = result.approval_requests();
    assert_eq!(requests.len(), 1, "one approval request: {:?}", result.text());
    assert_eq!(requests[0].tool_call.tool_name, "delete_file");
    assert!(requests[0].tool_call.input["path"].is_string(), "{:?}", requests[0].tool_call.input);
    assert!(result.steps.iter().all(|step| step.tool_results.is_empty()), "nothing ran");
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn auto_picks_the_tool_that_fits_runs_it_and_then_answers_in_text() {
    let model = model();
    // 50 is under transfer_money's approval limit, so the call runs in the same turn.
    let result = auto_turn(&model, vec![ModelMessage::user("Transfer 50 euros to Alice")]).await;
    assert!(result.approval_requests().is_empty());
    let calls: Vec<_> = result.steps[0].tool_calls().collect();
    assert_eq!(calls.len(), 1, "one call in the first step");
    assert_eq!(calls[0].tool_name, "transfer_money");
    assert!(calls[0].input["amount"].is_number() && calls[0].input["to"].is_string(), "{:?}", calls[0].input);
    assert_eq!(result.steps[0].tool_results.len(), 1, "it ran");
    assert_eq!(result.steps.len(), 2, "then one more step");
    assert!(result.steps[1].tool_calls().next().is_none(), "which does not call again");
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn auto_answers_small_talk_and_questions_in_text() {
    let model = model();
    for prompt in ["What is the capital of France?", "Write a haiku about autumn"] {
        let result = auto_turn(&model, vec![ModelMessage::user(prompt)]).await;
        assert!(!result.text().trim().is_empty(), "{prompt}: some text");
        assert!(result.steps.iter().all(|step| step.tool_calls().next().is_none()), "{prompt}: no tool call");
        assert!(result.approval_requests().is_empty(), "{prompt}");
    }
}

#[tokio::test]
#[cfg_attr(not(toolgate_local_model), ignore = "no local model: `toolgate model pull` or scripts/setup-local-model.sh")]
async fn auto_after_an_approved_or_denied_call_answers_in_text_instead_of_repeating_it() {
    let model = model();
    for approved in [true, false] {
        let (history, approval_id, _) = approval_requested(&model).await;
        let recording = RecordingModel::new(model.clone());
        let result = auto_turn(&recording, answer(history, &approval_id, approved)).await;
        assert_eq!(result.preresolved.len(), 1, "approved: {approved}");
        assert!(result.approval_requests().is_empty(), "approved: {approved}: no second request");
        assert_eq!(result.steps.len(), 1, "approved: {approved}: one step, no new call");
        assert!(result.steps[0].tool_calls().next().is_none(), "approved: {approved}");
        assert!(!result.text().trim().is_empty(), "approved: {approved}: the model answers");
        assert_eq!(recording.requests().len(), 1);
    }
}
