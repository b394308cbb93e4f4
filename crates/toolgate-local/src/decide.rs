//! How tool choice `auto` decides between a tool call and a text answer.
//!
//! Left to greedy sampling, a small model almost never starts its answer with `<tool_call>`: even for
//! "Delete the file notes.txt" the default 135M model puts about 4% on the call's first token and more on
//! "The". So `auto` decides before sampling:
//!
//! 1. It scores the call: the log-probability the model gives to the complete `<tool_call>` opener
//!    right after the prompt (its tokens are evaluated once; the cost is one small batch).
//! 2. At or above [`crate::LocalConfig::auto_call_threshold`] the answer is a call: generation continues
//!    after the opener under the tool grammar, as for `required`.
//! 3. A call identical to one already in the conversation (same tool, same arguments) is not made again:
//!    small models echo the previous call after its result or denial, and repeating a call the person
//!    already answered is the loop users of agent frameworks report. The answer becomes text instead.
//! 4. Below the threshold, or after a repeated call, the answer is text: the opener's first token is
//!    ruled out as the first token, and the grammar stays lazy, so the model can still call a tool after
//!    some text.
//!
//! On the default model, requests that name an action a tool does ("delete old.log", "send 20 dollars
//! to Bob") score between -9 and -5; greetings, jokes and arithmetic score below -9.7.

use serde_json::Value;
use toolgate_protocol::{AssistantContent, AssistantPart, ModelMessage};

/// The default threshold (natural log) above which `auto` answers with a call; tuned on the default model.
pub const DEFAULT_AUTO_CALL_THRESHOLD: f64 = -9.4;

/// `TOOLGATE_LOCAL_AUTO_CALL_THRESHOLD` when set (see [`parse_threshold`]), else
/// [`DEFAULT_AUTO_CALL_THRESHOLD`].
pub fn threshold_from_env() -> Option<f64> {
    const VAR: &str = "TOOLGATE_LOCAL_AUTO_CALL_THRESHOLD";
    let Ok(value) = std::env::var(VAR) else { return Some(DEFAULT_AUTO_CALL_THRESHOLD) };
    parse_threshold(&value).unwrap_or_else(|| {
        tracing::warn!("{VAR}={value:?} is neither a number nor `off`; using {DEFAULT_AUTO_CALL_THRESHOLD}");
        Some(DEFAULT_AUTO_CALL_THRESHOLD)
    })
}

/// A threshold setting: a number, or `off` for none (`Some(None)`); `None` when it is neither.
pub fn parse_threshold(value: &str) -> Option<Option<f64>> {
    match value.trim() {
        "off" => Some(None),
        number => number.parse::<f64>().ok().filter(|threshold| !threshold.is_nan()).map(Some),
    }
}

/// The tool calls already in a conversation: tool name and arguments.
pub fn earlier_calls(prompt: &[ModelMessage]) -> Vec<(String, Value)> {
    prompt
        .iter()
        .filter_map(|message| match message {
            ModelMessage::Assistant(assistant) => match &assistant.content {
                AssistantContent::Parts(parts) => Some(parts),
                AssistantContent::Text(_) => None,
            },
            ModelMessage::System(_) | ModelMessage::User(_) | ModelMessage::Tool(_) => None,
        })
        .flatten()
        .filter_map(|part| match part {
            AssistantPart::ToolCall(call) => Some((call.tool_name.clone(), call.input.clone())),
            _ => None,
        })
        .collect()
}

/// True when a call (its arguments as JSON text) repeats one of `earlier` (JSON values compare by
/// content, so key order and spacing do not matter).
pub fn is_repeat(name: &str, arguments: &str, earlier: &[(String, Value)]) -> bool {
    let Ok(arguments) = serde_json::from_str::<Value>(arguments) else { return false };
    earlier.iter().any(|(earlier_name, earlier_arguments)| earlier_name == name && *earlier_arguments == arguments)
}

/// The natural log-probability of token `token` under a next-token distribution given as logits (indexed
/// by token id); negative infinity for a token outside it.
pub fn log_prob(logits: &[f32], token: usize) -> f64 {
    let Some(&chosen) = logits.get(token) else { return f64::NEG_INFINITY };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() || !chosen.is_finite() {
        return f64::NEG_INFINITY;
    }
    let total: f64 = logits.iter().map(|logit| f64::from(logit - max).exp()).sum();
    f64::from(chosen - max) - total.ln()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn log_prob_is_a_log_softmax() {
        let logits = [1.0f32, 2.0, 3.0];
        let total: f64 = [1.0f64, 2.0, 3.0].iter().map(|logit| logit.exp()).sum();
        assert!((log_prob(&logits, 2) - (3.0 - total.ln())).abs() < 1e-9);
        let sum: f64 = (0..3).map(|token| log_prob(&logits, token).exp()).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        assert_eq!(log_prob(&logits, 7), f64::NEG_INFINITY);
        assert_eq!(log_prob(&[f32::NEG_INFINITY, 0.0], 0), f64::NEG_INFINITY);
    }

    #[test]
    fn thresholds_are_numbers_or_off() {
        assert_eq!(parse_threshold(" -7.5 "), Some(Some(-7.5)));
        assert_eq!(parse_threshold("off"), Some(None));
        assert_eq!(parse_threshold("NaN"), None);
        assert_eq!(parse_threshold("high"), None);
    }

    #[test]
    fn earlier_calls_and_repeats() {
        let prompt = toolgate_protocol::parse_messages(json!([
            {"role": "user", "content": "Delete notes.txt"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Sure."},
                {"type": "tool-call", "toolCallId": "c1", "toolName": "delete_file", "input": {"path": "notes.txt", "force": true}}
            ]},
            {"role": "tool", "content": [
                {"type": "tool-result", "toolCallId": "c1", "toolName": "delete_file", "output": {"type": "execution-denied"}}
            ]},
            {"role": "assistant", "content": "Not deleted."}
        ]))
        .unwrap();
        let earlier = earlier_calls(&prompt);
        assert_eq!(earlier, vec![("delete_file".to_owned(), json!({"path": "notes.txt", "force": true}))]);
        assert!(is_repeat("delete_file", r#"{ "force": true, "path": "notes.txt" }"#, &earlier));
        assert!(!is_repeat("delete_file", r#"{"path": "other.txt", "force": true}"#, &earlier));
        assert!(!is_repeat("get_weather", r#"{"path": "notes.txt", "force": true}"#, &earlier));
        assert!(!is_repeat("delete_file", "not json", &earlier));
    }
}
