//! A non-streamed Chat Completions answer → `ModelResponse`.

use toolgate_model::ModelError;
use toolgate_protocol::{FinishReason, ModelContent, ModelResponse, ModelToolCall};

use super::stream::{finish_reason, usage_of};
use super::wire::ChatCompletion;
use crate::config::IdGenerator;

/// Converts the first choice: reasoning, text, then tool calls (calls without
/// an id get a generated one).
pub fn chat_response(completion: ChatCompletion, ids: &IdGenerator) -> Result<ModelResponse, ModelError> {
    let usage = completion.usage.as_ref().map(usage_of).unwrap_or_default();
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(ModelError::InvalidResponse { message: "the completion has no choices".into() });
    };
    let mut content = Vec::new();
    if let Some(text) = choice.message.reasoning_content.filter(|text| !text.is_empty()) {
        content.push(ModelContent::Reasoning { text });
    }
    if let Some(text) = choice.message.content.filter(|text| !text.is_empty()) {
        content.push(ModelContent::Text { text });
    }
    for call in choice.message.tool_calls {
        content.push(ModelContent::ToolCall(ModelToolCall {
            tool_call_id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("call_{}", ids())),
            tool_name: call.function.name.unwrap_or_default(),
            input: call.function.arguments.unwrap_or_default(),
            provider_executed: None,
            provider_metadata: None,
        }));
    }
    let finish_reason = choice.finish_reason.as_deref().map(finish_reason).unwrap_or(FinishReason::Other);
    Ok(ModelResponse { content, finish_reason, usage, provider_metadata: None })
}
