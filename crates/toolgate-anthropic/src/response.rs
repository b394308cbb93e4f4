//! A non-streamed message → `ModelResponse`.

use toolgate_protocol::{FinishReason, ModelContent, ModelResponse, ModelToolCall};

use crate::stream::{finish_reason, usage_of};
use crate::wire::{AnthropicUsage, ContentBlock, MessagesResponse};

/// Converts the blocks in order: text, thinking, tool calls (others skipped).
pub fn messages_response(response: MessagesResponse) -> ModelResponse {
    let content = response
        .content
        .into_iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } if !text.is_empty() => Some(ModelContent::Text { text }),
            ContentBlock::Thinking { thinking } if !thinking.is_empty() => {
                Some(ModelContent::Reasoning { text: thinking })
            }
            ContentBlock::ToolUse { id, name, input } => Some(ModelContent::ToolCall(ModelToolCall {
                tool_call_id: id,
                tool_name: name,
                input: if input.is_null() { "{}".to_owned() } else { input.to_string() },
                provider_executed: None,
                provider_metadata: None,
            })),
            ContentBlock::Text { .. } | ContentBlock::Thinking { .. } | ContentBlock::Other => None,
        })
        .collect();
    let usage = response.usage.unwrap_or_default();
    ModelResponse {
        content,
        finish_reason: response.stop_reason.as_deref().map(finish_reason).unwrap_or(FinishReason::Other),
        usage: usage_of(AnthropicUsage { output_tokens: None, ..usage }, usage.output_tokens),
        provider_metadata: None,
    }
}
