//! `ModelRequest` → Chat Completions request body.
//!
//! - System, user, assistant and tool messages map one to one; each tool
//!   result becomes its own `tool` message whose text is
//!   [`ToolResultOutput::model_text`](toolgate_protocol::ToolResultOutput::model_text)
//!   (a denial reads as its reason or "Tool call execution denied.").
//! - Reasoning, provider-executed calls and results, and approval responses
//!   are dropped: Chat Completions has no hosted tools and no provider approvals.
//! - Provider tools (`ToolSpec::Provider`) are rejected with a configuration error.

use serde_json::json;
use toolgate_model::ModelError;
use toolgate_protocol::{
    AssistantContent, AssistantPart, ModelMessage, ModelRequest, ToolChoice, ToolPart, ToolSpec, UserContent, UserPart,
};

use super::wire::{
    ChatFunction, ChatFunctionCall, ChatMessage, ChatRequest, ChatTool, ChatToolCall, ChatUserContent, ChatUserPart,
    FileData, FunctionKind, StreamOptions, UrlRef,
};
use crate::OpenAiConfig;
use crate::convert::{Options, file_url, image_url, unsupported};

/// Builds the request body for `model`.
pub fn chat_request(
    config: &OpenAiConfig,
    model: &str,
    request: &ModelRequest,
    stream: bool,
) -> Result<ChatRequest, ModelError> {
    let options = Options::new(request, &config.provider_name);
    let tools = request.tools.iter().map(chat_tool).collect::<Result<Vec<_>, _>>()?;
    let tool_choice = (!tools.is_empty()).then(|| match &request.tool_choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool { tool_name } => json!({"type": "function", "function": {"name": tool_name}}),
    });
    let (max_completion_tokens, max_tokens) =
        if config.is_openai() { (request.max_output_tokens, None) } else { (None, request.max_output_tokens) };
    Ok(ChatRequest {
        model: model.to_owned(),
        messages: messages(&request.prompt)?,
        parallel_tool_calls: if tools.is_empty() { None } else { options.bool("parallelToolCalls") },
        tools,
        tool_choice,
        stream,
        stream_options: (stream && config.include_usage).then_some(StreamOptions { include_usage: true }),
        max_completion_tokens,
        max_tokens,
        temperature: request.temperature,
        stop: request.stop_sequences.clone(),
        user: options.str("user").map(str::to_owned),
        reasoning_effort: options.str("reasoningEffort").map(str::to_owned),
    })
}

fn chat_tool(spec: &ToolSpec) -> Result<ChatTool, ModelError> {
    match spec {
        ToolSpec::Function { name, description, input_schema } => Ok(ChatTool {
            kind: FunctionKind::Function,
            function: ChatFunction {
                name: name.clone(),
                description: description.clone(),
                parameters: input_schema.clone(),
                strict: None,
            },
        }),
        ToolSpec::Provider { name, id, .. } => Err(unsupported(format_args!(
            "provider tool `{name}` ({id}) with Chat Completions; use the Responses API model"
        ))),
    }
}

fn messages(prompt: &[ModelMessage]) -> Result<Vec<ChatMessage>, ModelError> {
    let mut out = Vec::with_capacity(prompt.len());
    for message in prompt {
        match message {
            ModelMessage::System(system) => out.push(ChatMessage::System { content: system.content.clone() }),
            ModelMessage::User(user) => out.push(ChatMessage::User { content: user_content(&user.content)? }),
            ModelMessage::Assistant(assistant) => {
                let mut text = String::new();
                let mut tool_calls = Vec::new();
                match &assistant.content {
                    AssistantContent::Text(content) => text.push_str(content),
                    AssistantContent::Parts(parts) => {
                        for part in parts {
                            match part {
                                AssistantPart::Text(part) => text.push_str(&part.text),
                                AssistantPart::ToolCall(call) if !call.is_provider_executed() => {
                                    tool_calls.push(ChatToolCall {
                                        id: call.tool_call_id.clone(),
                                        kind: FunctionKind::Function,
                                        function: ChatFunctionCall {
                                            name: call.tool_name.clone(),
                                            arguments: call.input.to_string(),
                                        },
                                    })
                                }
                                AssistantPart::ToolCall(_)
                                | AssistantPart::Reasoning(_)
                                | AssistantPart::File(_)
                                | AssistantPart::ToolResult(_)
                                | AssistantPart::ToolApprovalRequest(_) => {}
                            }
                        }
                    }
                }
                if !text.is_empty() || !tool_calls.is_empty() {
                    out.push(ChatMessage::Assistant { content: text, tool_calls });
                }
            }
            ModelMessage::Tool(tool) => {
                for part in &tool.content {
                    match part {
                        ToolPart::ToolResult(result) => out.push(ChatMessage::Tool {
                            tool_call_id: result.tool_call_id.clone(),
                            content: result.output.model_text(),
                        }),
                        ToolPart::ToolApprovalResponse(_) => {}
                    }
                }
            }
        }
    }
    Ok(out)
}

fn user_content(content: &UserContent) -> Result<ChatUserContent, ModelError> {
    let parts = match content {
        UserContent::Text(text) => return Ok(ChatUserContent::Text(text.clone())),
        UserContent::Parts(parts) => parts,
    };
    if let [UserPart::Text(text)] = parts.as_slice() {
        return Ok(ChatUserContent::Text(text.text.clone()));
    }
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        out.push(match part {
            UserPart::Text(text) => ChatUserPart::Text { text: text.text.clone() },
            UserPart::Image(image) => ChatUserPart::ImageUrl { image_url: UrlRef { url: image_url(image) } },
            UserPart::File(file) if file.media_type.starts_with("image/") => {
                ChatUserPart::ImageUrl { image_url: UrlRef { url: file_url(file) } }
            }
            UserPart::File(file) if file.media_type == "application/pdf" => ChatUserPart::File {
                file: FileData {
                    filename: file.filename.clone().unwrap_or_else(|| "document.pdf".to_owned()),
                    file_data: file_url(file),
                },
            },
            UserPart::File(file) => return Err(unsupported(format_args!("a user file of type {}", file.media_type))),
            UserPart::ToolApproval(_) => continue,
        });
    }
    Ok(ChatUserContent::Parts(out))
}
