//! `ModelRequest` → Messages API request body.
//!
//! - System messages go to the top-level `system` (joined by blank lines).
//! - Tool results become `tool_result` blocks in a `user` message; consecutive
//!   user and tool messages merge into one `user` message with its
//!   `tool_result` blocks first, and consecutive assistant messages merge.
//!   Errors and denials set `is_error: true`; a denial's text is its reason or
//!   "Tool call execution denied.".
//! - Assistant text and tool calls become `text` and `tool_use` blocks;
//!   reasoning is sent back only as signed `thinking` (with
//!   `providerOptions.anthropic.signature`). Provider-executed calls, their
//!   results and approval messages are dropped: Anthropic has no provider
//!   approvals.
//! - `max_tokens` is the request's output limit or the configured default.
//! - Provider options (`providerOptions.anthropic`): `disableParallelToolUse`
//!   (bool), `thinking` (`{"type": "enabled", "budgetTokens": N}`).
//! - Provider tools `anthropic.<type>` are sent as `{type, name, ...args}`.

use serde_json::{Value, json};
use toolgate_model::ModelError;
use toolgate_protocol::{
    AssistantContent, AssistantPart, ContentOutputPart, ModelMessage, ModelRequest, ToolChoice, ToolPart,
    ToolResultOutput, ToolSpec, UserContent, UserPart,
};

use crate::wire::{Block, Message, MessagesRequest, Source, ToolResultContent};

/// Builds the request body for `model`.
pub fn messages_request(
    model: &str,
    request: &ModelRequest,
    default_max_tokens: u32,
    stream: bool,
) -> Result<MessagesRequest, ModelError> {
    let option = |key: &str| request.provider_options.as_ref()?.get("anthropic")?.get(key).cloned();
    let tools = request.tools.iter().map(tool).collect::<Result<Vec<_>, _>>()?;
    let tool_choice = (!tools.is_empty()).then(|| {
        let mut choice = match &request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Tool { tool_name } => json!({"type": "tool", "name": tool_name}),
        };
        if let (Some(Value::Bool(disable)), Some(object)) = (option("disableParallelToolUse"), choice.as_object_mut())
            && request.tool_choice != ToolChoice::None
        {
            object.insert("disable_parallel_tool_use".to_owned(), Value::Bool(disable));
        }
        choice
    });
    let thinking = option("thinking").map(|thinking| {
        let budget = thinking.get("budgetTokens").or_else(|| thinking.get("budget_tokens")).cloned();
        json!({"type": thinking.get("type").cloned().unwrap_or(json!("enabled")), "budget_tokens": budget})
    });
    let (system, messages) = messages(&request.prompt)?;
    Ok(MessagesRequest {
        model: model.to_owned(),
        max_tokens: request.max_output_tokens.unwrap_or(default_max_tokens),
        system,
        messages,
        tools,
        tool_choice,
        temperature: request.temperature,
        stop_sequences: request.stop_sequences.clone(),
        thinking,
        stream,
    })
}

fn tool(spec: &ToolSpec) -> Result<Value, ModelError> {
    match spec {
        ToolSpec::Function { name, description, input_schema } => {
            let mut tool = json!({"name": name, "input_schema": input_schema});
            if let (Some(description), Some(object)) = (description, tool.as_object_mut()) {
                object.insert("description".to_owned(), json!(description));
            }
            Ok(tool)
        }
        ToolSpec::Provider { name, id, args } => {
            let Some(kind) = id.strip_prefix("anthropic.") else {
                return Err(ModelError::Configuration {
                    message: format!("not supported by this provider: provider tool `{name}` ({id}) with Anthropic"),
                });
            };
            let mut tool = args.as_object().cloned().unwrap_or_default();
            tool.insert("type".to_owned(), json!(kind));
            tool.insert("name".to_owned(), json!(name));
            Ok(Value::Object(tool))
        }
    }
}

fn messages(prompt: &[ModelMessage]) -> Result<(Option<String>, Vec<Message>), ModelError> {
    let mut system = Vec::new();
    let mut out: Vec<Message> = Vec::new();
    for message in prompt {
        let (role, blocks) = match message {
            ModelMessage::System(message) => {
                system.push(message.content.clone());
                continue;
            }
            ModelMessage::User(user) => ("user", user_blocks(&user.content)?),
            ModelMessage::Tool(tool) => ("user", tool.content.iter().filter_map(tool_block).collect()),
            ModelMessage::Assistant(assistant) => ("assistant", assistant_blocks(&assistant.content)),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => out.push(Message { role, content: blocks }),
        }
    }
    for message in out.iter_mut().filter(|message| message.role == "user") {
        // Tool results first (stable), as the API requires after a tool_use turn.
        message.content.sort_by_key(|block| !matches!(block, Block::ToolResult { .. }));
    }
    Ok(((!system.is_empty()).then(|| system.join("\n\n")), out))
}

fn user_blocks(content: &UserContent) -> Result<Vec<Block>, ModelError> {
    let parts = match content {
        UserContent::Text(text) => return Ok(vec![Block::Text { text: text.clone() }]),
        UserContent::Parts(parts) => parts,
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for part in parts {
        blocks.push(match part {
            UserPart::Text(text) => Block::Text { text: text.text.clone() },
            UserPart::Image(image) => {
                Block::Image { source: source(&image.image, image.media_type.as_deref().unwrap_or("image/jpeg")) }
            }
            UserPart::File(file) if file.media_type.starts_with("image/") => {
                Block::Image { source: source(&file.data, &file.media_type) }
            }
            UserPart::File(file) if file.media_type == "application/pdf" => {
                Block::Document { source: source(&file.data, &file.media_type) }
            }
            UserPart::File(file) => {
                return Err(ModelError::Configuration {
                    message: format!("not supported by this provider: a user file of type {}", file.media_type),
                });
            }
            UserPart::ToolApproval(_) => continue,
        });
    }
    Ok(blocks)
}

fn source(data: &str, media_type: &str) -> Source {
    if data.starts_with("http://") || data.starts_with("https://") {
        Source::Url { url: data.to_owned() }
    } else if let Some((header, data)) = data.strip_prefix("data:").and_then(|rest| rest.split_once(',')) {
        let media_type = header.trim_end_matches(";base64");
        Source::Base64 { media_type: media_type.to_owned(), data: data.to_owned() }
    } else {
        Source::Base64 { media_type: media_type.to_owned(), data: data.to_owned() }
    }
}

fn assistant_blocks(content: &AssistantContent) -> Vec<Block> {
    let parts = match content {
        AssistantContent::Text(text) if text.is_empty() => return Vec::new(),
        AssistantContent::Text(text) => return vec![Block::Text { text: text.clone() }],
        AssistantContent::Parts(parts) => parts,
    };
    let signature = |options: Option<&toolgate_protocol::ProviderOptions>| {
        options?.get("anthropic")?.get("signature")?.as_str().map(str::to_owned)
    };
    parts
        .iter()
        .filter_map(|part| match part {
            AssistantPart::Text(text) if !text.text.is_empty() => Some(Block::Text { text: text.text.clone() }),
            AssistantPart::Reasoning(reasoning) => signature(reasoning.provider_options.as_ref())
                .map(|signature| Block::Thinking { thinking: reasoning.text.clone(), signature }),
            AssistantPart::ToolCall(call) if !call.is_provider_executed() => Some(Block::ToolUse {
                id: call.tool_call_id.clone(),
                name: call.tool_name.clone(),
                input: call.input.clone(),
            }),
            AssistantPart::Text(_)
            | AssistantPart::ToolCall(_)
            | AssistantPart::File(_)
            | AssistantPart::ToolResult(_)
            | AssistantPart::ToolApprovalRequest(_) => None,
        })
        .collect()
}

fn tool_block(part: &ToolPart) -> Option<Block> {
    let result = match part {
        ToolPart::ToolResult(result) => result,
        ToolPart::ToolApprovalResponse(_) => return None,
    };
    let output = &result.output;
    let content = match output {
        ToolResultOutput::Content { value, .. } => ToolResultContent::Blocks(value.iter().map(content_block).collect()),
        _ => ToolResultContent::Text(output.model_text()),
    };
    let is_error = output.is_error() || output.is_denied();
    Some(Block::ToolResult { tool_use_id: result.tool_call_id.clone(), content, is_error })
}

fn content_block(part: &ContentOutputPart) -> Block {
    match part {
        ContentOutputPart::Text { text, .. } => Block::Text { text: text.clone() },
        ContentOutputPart::ImageData { data, media_type, .. } | ContentOutputPart::Media { data, media_type }
            if media_type.starts_with("image/") =>
        {
            Block::Image { source: Source::Base64 { media_type: media_type.clone(), data: data.clone() } }
        }
        ContentOutputPart::ImageUrl { url, .. } => Block::Image { source: Source::Url { url: url.clone() } },
        ContentOutputPart::ImageData { .. }
        | ContentOutputPart::Media { .. }
        | ContentOutputPart::FileData { .. }
        | ContentOutputPart::FileUrl { .. }
        | ContentOutputPart::FileId { .. }
        | ContentOutputPart::ImageFileId { .. }
        | ContentOutputPart::Custom { .. } => Block::Text { text: serde_json::to_string(part).unwrap_or_default() },
    }
}
