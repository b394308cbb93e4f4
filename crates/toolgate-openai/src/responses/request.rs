//! `ModelRequest` → Responses API request body.
//!
//! - System messages become `system` messages; user text, images and PDFs
//!   become `input_text`/`input_image`/`input_file` parts; assistant text
//!   becomes `output_text` in an `assistant` message.
//! - Local tool calls become `function_call` items and their results
//!   `function_call_output` items (text as in Chat Completions; a denial
//!   reads as its reason or "Tool call execution denied."). A denied result
//!   tagged `providerOptions.openai.approvalId` is skipped: its approval
//!   response already tells OpenAI.
//! - Provider-executed approval responses become `mcp_approval_response`
//!   (once per approval id; `reason` is sent with a denial). When the
//!   conversation is stored server-side (`store` is not `false`) and no
//!   `previousResponseId` is given, an `item_reference` to the approval
//!   request comes first, as is an `item_reference` to a provider-executed
//!   result that carries `providerOptions.openai.itemId`; otherwise those
//!   items are not repeated. Provider-executed calls themselves and
//!   reasoning are not sent.
//! - Tools: function tools (`strict` from the `strictJsonSchema` option,
//!   default `false`), `openai.mcp` provider tools from [`McpServer`] args,
//!   and any other `openai.<type>` provider tool as `{type, ...args}` verbatim.

use std::collections::HashSet;

use serde_json::{Value, json};
use toolgate_model::ModelError;
use toolgate_protocol::{
    AssistantContent, AssistantPart, ModelMessage, ModelRequest, ToolChoice, ToolPart, ToolResultOutput, ToolSpec,
    UserContent, UserPart,
};

use super::items::ApprovalAliases;
use super::mcp::{AllowedTools, ApprovalMode, MCP_TOOL_ID, McpServer, RequireApproval, ToolFilter};
use super::wire::{ContentPart, InputItem, InputMessage, MessageContent, ResponsesRequest, TypedInput};
use crate::OpenAiConfig;
use crate::convert::{Options, file_url, image_url, unsupported};

/// Builds the request body for `model`.
pub fn responses_request(
    config: &OpenAiConfig,
    model: &str,
    request: &ModelRequest,
    stream: bool,
) -> Result<ResponsesRequest, ModelError> {
    let options = Options::new(request, &config.provider_name);
    let store = options.bool("store");
    let previous_response_id = options.str("previousResponseId").map(str::to_owned);
    let references = store != Some(false) && previous_response_id.is_none();
    let strict = options.bool("strictJsonSchema").unwrap_or(false);
    let tools = request.tools.iter().map(|spec| tool(spec, strict)).collect::<Result<Vec<_>, _>>()?;
    let tool_choice = (!tools.is_empty()).then(|| match &request.tool_choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool { tool_name } => match mcp_label(&request.tools, tool_name) {
            Some(label) => json!({"type": "mcp", "server_label": label}),
            None => json!({"type": "function", "name": tool_name}),
        },
    });
    let mut reasoning = serde_json::Map::new();
    for (key, option) in [("effort", "reasoningEffort"), ("summary", "reasoningSummary")] {
        if let Some(value) = options.str(option) {
            reasoning.insert(key.to_owned(), json!(value));
        }
    }
    Ok(ResponsesRequest {
        model: model.to_owned(),
        input: input(&request.prompt, references)?,
        instructions: options.str("instructions").map(str::to_owned),
        parallel_tool_calls: if tools.is_empty() { None } else { options.bool("parallelToolCalls") },
        tools,
        tool_choice,
        store,
        previous_response_id,
        max_output_tokens: request.max_output_tokens,
        temperature: request.temperature,
        user: options.str("user").map(str::to_owned),
        reasoning: (!reasoning.is_empty()).then_some(Value::Object(reasoning)),
        stream,
    })
}

/// Approval request ids → tool call ids, from the prompt's provider-executed
/// calls (`providerOptions.openai.approvalRequestId`).
pub fn approval_aliases(prompt: &[ModelMessage]) -> ApprovalAliases {
    let mut aliases = ApprovalAliases::new();
    for message in prompt {
        let ModelMessage::Assistant(assistant) = message else { continue };
        for part in assistant.part_slice() {
            if let AssistantPart::ToolCall(call) = part
                && let Some(approval) = openai_option(call.provider_options.as_ref(), "approvalRequestId")
            {
                aliases.insert(approval.to_owned(), call.tool_call_id.clone());
            }
        }
    }
    aliases
}

fn openai_option<'a>(options: Option<&'a toolgate_protocol::ProviderOptions>, key: &str) -> Option<&'a str> {
    options?.get("openai")?.get(key)?.as_str()
}

fn mcp_label<'a>(tools: &'a [ToolSpec], name: &str) -> Option<&'a str> {
    tools.iter().find_map(|spec| match spec {
        ToolSpec::Provider { name: tool_name, id, args } if tool_name == name && id == MCP_TOOL_ID => {
            args.get("serverLabel").or_else(|| args.get("server_label")).and_then(Value::as_str)
        }
        _ => None,
    })
}

fn tool(spec: &ToolSpec, strict: bool) -> Result<Value, ModelError> {
    match spec {
        ToolSpec::Function { name, description, input_schema } => {
            let mut tool = json!({"type": "function", "name": name, "parameters": input_schema, "strict": strict});
            if let (Some(description), Some(object)) = (description, tool.as_object_mut()) {
                object.insert("description".to_owned(), json!(description));
            }
            Ok(tool)
        }
        ToolSpec::Provider { name, id, args } if id == MCP_TOOL_ID => {
            let server: McpServer = serde_json::from_value(args.clone()).map_err(|error| {
                ModelError::Configuration { message: format!("invalid args for MCP tool `{name}`: {error}") }
            })?;
            Ok(mcp_tool(&server))
        }
        ToolSpec::Provider { name, id, args } => {
            let Some(kind) = id.strip_prefix("openai.") else {
                return Err(unsupported(format_args!("provider tool `{name}` ({id}) with the OpenAI Responses API")));
            };
            let mut tool = args.as_object().cloned().unwrap_or_default();
            tool.insert("type".to_owned(), json!(kind));
            Ok(Value::Object(tool))
        }
    }
}

fn mcp_tool(server: &McpServer) -> Value {
    fn filter(filter: &ToolFilter) -> Value {
        let mut out = serde_json::Map::new();
        if let Some(names) = &filter.tool_names {
            out.insert("tool_names".to_owned(), json!(names));
        }
        if let Some(read_only) = filter.read_only {
            out.insert("read_only".to_owned(), json!(read_only));
        }
        Value::Object(out)
    }
    let mut tool = serde_json::Map::new();
    tool.insert("type".to_owned(), json!("mcp"));
    tool.insert("server_label".to_owned(), json!(server.server_label));
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            tool.insert(key.to_owned(), value);
        }
    };
    put("server_url", server.server_url.as_ref().map(|url| json!(url)));
    put("connector_id", server.connector_id.as_ref().map(|id| json!(id)));
    put("server_description", server.server_description.as_ref().map(|text| json!(text)));
    put("headers", server.headers.as_ref().map(|headers| json!(headers)));
    put("authorization", server.authorization.as_ref().map(|token| json!(token)));
    put(
        "allowed_tools",
        server.allowed_tools.as_ref().map(|allowed| match allowed {
            AllowedTools::Names(names) => json!(names),
            AllowedTools::Filter(rule) => filter(rule),
        }),
    );
    put(
        "require_approval",
        server.require_approval.as_ref().map(|rule| match rule {
            RequireApproval::Mode(ApprovalMode::Always) => json!("always"),
            RequireApproval::Mode(ApprovalMode::Never) => json!("never"),
            RequireApproval::Filter { always, never } => {
                let mut out = serde_json::Map::new();
                if let Some(always) = always {
                    out.insert("always".to_owned(), filter(always));
                }
                if let Some(never) = never {
                    out.insert("never".to_owned(), filter(never));
                }
                Value::Object(out)
            }
        }),
    );
    Value::Object(tool)
}

fn input(prompt: &[ModelMessage], references: bool) -> Result<Vec<InputItem>, ModelError> {
    let mut items = Vec::with_capacity(prompt.len());
    let mut answered = HashSet::new();
    for message in prompt {
        match message {
            ModelMessage::System(system) => items.push(InputItem::Message(InputMessage {
                role: "system",
                content: MessageContent::Text(system.content.clone()),
            })),
            ModelMessage::User(user) => items.push(InputItem::Message(InputMessage {
                role: "user",
                content: MessageContent::Parts(user_parts(&user.content)?),
            })),
            ModelMessage::Assistant(assistant) => assistant_items(&assistant.content, references, &mut items),
            ModelMessage::Tool(tool) => {
                for part in &tool.content {
                    match part {
                        ToolPart::ToolResult(result) => {
                            let covered = matches!(&result.output, ToolResultOutput::ExecutionDenied { provider_options, .. }
                                if openai_option(provider_options.as_ref(), "approvalId").is_some());
                            if !covered {
                                items.push(InputItem::Item(TypedInput::FunctionCallOutput {
                                    call_id: result.tool_call_id.clone(),
                                    output: result.output.model_text(),
                                }));
                            }
                        }
                        ToolPart::ToolApprovalResponse(response) => {
                            if response.provider_executed != Some(true) || !answered.insert(&response.approval_id) {
                                continue;
                            }
                            if references {
                                items.push(InputItem::Item(TypedInput::ItemReference {
                                    id: response.approval_id.clone(),
                                }));
                            }
                            items.push(InputItem::Item(TypedInput::McpApprovalResponse {
                                approval_request_id: response.approval_id.clone(),
                                approve: response.approved,
                                reason: if response.approved { None } else { response.reason.clone() },
                            }));
                        }
                    }
                }
            }
        }
    }
    Ok(items)
}

fn assistant_items(content: &AssistantContent, references: bool, items: &mut Vec<InputItem>) {
    let parts = match content {
        AssistantContent::Text(text) if text.is_empty() => return,
        AssistantContent::Text(text) => {
            items.push(assistant_text(text.clone()));
            return;
        }
        AssistantContent::Parts(parts) => parts,
    };
    let mut text = String::new();
    for part in parts {
        match part {
            AssistantPart::Text(part) => text.push_str(&part.text),
            AssistantPart::ToolCall(call) if !call.is_provider_executed() => {
                if !text.is_empty() {
                    items.push(assistant_text(std::mem::take(&mut text)));
                }
                items.push(InputItem::Item(TypedInput::FunctionCall {
                    call_id: call.tool_call_id.clone(),
                    name: call.tool_name.clone(),
                    arguments: call.input.to_string(),
                }));
            }
            AssistantPart::ToolResult(result) if references => {
                if let Some(item_id) = openai_option(result.provider_options.as_ref(), "itemId") {
                    if !text.is_empty() {
                        items.push(assistant_text(std::mem::take(&mut text)));
                    }
                    items.push(InputItem::Item(TypedInput::ItemReference { id: item_id.to_owned() }));
                }
            }
            AssistantPart::ToolCall(_)
            | AssistantPart::ToolResult(_)
            | AssistantPart::Reasoning(_)
            | AssistantPart::File(_)
            | AssistantPart::ToolApprovalRequest(_) => {}
        }
    }
    if !text.is_empty() {
        items.push(assistant_text(text));
    }
}

fn assistant_text(text: String) -> InputItem {
    InputItem::Message(InputMessage {
        role: "assistant",
        content: MessageContent::Parts(vec![ContentPart::OutputText { text }]),
    })
}

fn user_parts(content: &UserContent) -> Result<Vec<ContentPart>, ModelError> {
    let parts = match content {
        UserContent::Text(text) => return Ok(vec![ContentPart::InputText { text: text.clone() }]),
        UserContent::Parts(parts) => parts,
    };
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        out.push(match part {
            UserPart::Text(text) => ContentPart::InputText { text: text.text.clone() },
            UserPart::Image(image) => ContentPart::InputImage { image_url: image_url(image) },
            UserPart::File(file) if file.media_type.starts_with("image/") => {
                ContentPart::InputImage { image_url: file_url(file) }
            }
            UserPart::File(file) if file.media_type == "application/pdf" => ContentPart::InputFile {
                filename: file.filename.clone().unwrap_or_else(|| "document.pdf".to_owned()),
                file_data: file_url(file),
            },
            UserPart::File(file) => return Err(unsupported(format_args!("a user file of type {}", file.media_type))),
            UserPart::ToolApproval(_) => continue,
        });
    }
    Ok(out)
}
