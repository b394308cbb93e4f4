//! Turns collected answers into what happens before the model is called.
//!
//! Every check runs before anything executes, so a request either passes
//! all of them or runs nothing:
//! 1. Local answers need a toolkit.
//! 2. The tool must exist and be run by toolgate.
//! 3. The call's input, and the person's edit of it, must pass the schema.
//! 4. The approval policy is run again on the original input: an approval
//!    for a call that needs none becomes a denial (a forged approval cannot
//!    run a tool that was never gated).
//! 5. With a signer, every approved call that would run must carry a valid
//!    signature binding it to a request this server issued.
//!
//! Provider-executed answers are not acted on here: the prompt forwards them.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate_protocol::{ModelMessage, ToolApprovalResponsePart, ToolCallPart};

use super::collect::{Answer, CallRef, Collected};
use super::{ApprovalSigner, NO_ANSWER_REASON};
use crate::EngineError;
use crate::tool::{ApprovalContext, Tool, Toolkit};

/// One thing to do before the model is called, in the order of the calls.
#[derive(Debug, Clone)]
pub(crate) enum Resolved {
    /// Run the call; `call.input` is the input to run with (edited if the person edited it).
    Run { call: ToolCallPart, tool: Tool, messages: Arc<[ModelMessage]> },
    /// The call is denied; it gets an `execution-denied` result.
    Deny { call: ToolCallPart, reason: Option<String> },
    /// A provider-executed call nobody answered: forward a denial to the provider.
    ForwardDenial { call: ToolCallPart, response: ToolApprovalResponsePart },
}

impl Resolved {
    /// The call this is about.
    pub(crate) fn call(&self) -> &ToolCallPart {
        match self {
            Self::Run { call, .. } | Self::Deny { call, .. } | Self::ForwardDenial { call, .. } => call,
        }
    }
}

/// Shares one copy of each history prefix between the calls of one message.
struct Prefixes<'h> {
    history: &'h [ModelMessage],
    cache: HashMap<usize, Arc<[ModelMessage]>>,
}

impl Prefixes<'_> {
    fn before(&mut self, message_index: usize) -> Arc<[ModelMessage]> {
        let history = self.history;
        Arc::clone(self.cache.entry(message_index).or_insert_with(|| history[..message_index].into()))
    }
}

/// Checks collected answers and decides what runs (see the module docs).
pub(crate) async fn resolve(
    collected: Collected<'_>,
    history: &[ModelMessage],
    toolkit: Option<&Toolkit>,
    signer: Option<&ApprovalSigner>,
) -> Result<Vec<(CallPosition, Resolved)>, EngineError> {
    if !collected.open.is_empty() {
        return Err(EngineError::UnansweredApprovals {
            approval_ids: collected.open.iter().map(|r| r.approval_id.clone()).collect(),
        });
    }
    let local_answers: Vec<&str> = collected
        .answered
        .iter()
        .filter(|a| !a.call.call.is_provider_executed())
        .map(|a| a.call.call.tool_name.as_str())
        .collect();
    let toolkit = match toolkit {
        Some(toolkit) if !toolkit.is_empty() => toolkit,
        _ if local_answers.is_empty() => &Toolkit::default(),
        _ => {
            return Err(EngineError::ToolkitRequired {
                pending_tools: local_answers.into_iter().map(str::to_owned).collect(),
            });
        }
    };
    let mut prefixes = Prefixes { history, cache: HashMap::new() };
    let mut resolved = Vec::new();

    for answered in &collected.answered {
        let call = answered.call.call;
        let approval_id = &answered.request.approval_id;
        if call.is_provider_executed() {
            if matches!(&answered.answer, Answer::Approved { edited_input: Some(_) }) {
                return Err(EngineError::EditNotSupported { approval_id: approval_id.clone() });
            }
            continue;
        }
        let edited_input = match &answered.answer {
            Answer::Denied { reason } => {
                resolved.push(deny(answered.call, reason.clone()));
                continue;
            }
            Answer::Approved { edited_input } => edited_input,
        };
        let tool = runnable_tool(toolkit, &call.tool_name)?;
        check_input(tool, call, &call.input, "")?;
        if let Some(edited) = edited_input {
            check_input(tool, call, edited, "edited input: ")?;
        }
        let messages = prefixes.before(answered.call.message_index);
        let context = ApprovalContext { tool_call_id: call.tool_call_id.clone(), messages: Arc::clone(&messages) };
        if !tool.requires_approval(&call.input, context).await {
            let reason = format!("Tool \"{}\" does not require approval", call.tool_name);
            resolved.push(deny(answered.call, Some(reason)));
            continue;
        }
        if let Some(signer) = signer {
            signer.verify(answered.request, &call.tool_name, &call.input).map_err(|reason| {
                EngineError::InvalidApprovalSignature {
                    approval_id: approval_id.clone(),
                    tool_call_id: call.tool_call_id.clone(),
                    reason,
                }
            })?;
        }
        let mut run = call.clone();
        if let Some(edited) = edited_input {
            run.input = edited.clone();
        }
        resolved.push((position(answered.call), Resolved::Run { call: run, tool: tool.clone(), messages }));
    }

    for (request, call) in &collected.unanswered {
        if call.call.is_provider_executed() {
            let response = ToolApprovalResponsePart {
                approval_id: request.approval_id.clone(),
                approved: false,
                reason: Some(NO_ANSWER_REASON.to_owned()),
                provider_executed: Some(true),
                edited_input: None,
            };
            resolved.push((position(*call), Resolved::ForwardDenial { call: call.call.clone(), response }));
        } else {
            resolved.push(deny(*call, Some(NO_ANSWER_REASON.to_owned())));
        }
    }

    for sibling in &collected.held_siblings {
        let Some(tool) = toolkit.get(&sibling.call.tool_name).filter(|tool| tool.is_local()) else {
            continue;
        };
        let messages = prefixes.before(sibling.message_index);
        let context =
            ApprovalContext { tool_call_id: sibling.call.tool_call_id.clone(), messages: Arc::clone(&messages) };
        if tool.validate_input(&sibling.call.input).is_ok()
            && !tool.requires_approval(&sibling.call.input, context).await
        {
            resolved
                .push((position(*sibling), Resolved::Run { call: sibling.call.clone(), tool: tool.clone(), messages }));
        } else {
            let reason = "This call was held while other calls awaited approval, and it now needs approval itself; it did not run.";
            resolved.push(deny(*sibling, Some(reason.to_owned())));
        }
    }

    resolved.sort_by_key(|(position, _)| *position);
    Ok(resolved)
}

/// Where a call is in the history: (message index, part index).
pub(crate) type CallPosition = (usize, usize);

fn position(call: CallRef<'_>) -> CallPosition {
    (call.message_index, call.part_index)
}

fn deny(call: CallRef<'_>, reason: Option<String>) -> (CallPosition, Resolved) {
    (position(call), Resolved::Deny { call: call.call.clone(), reason })
}

fn runnable_tool<'t>(toolkit: &'t Toolkit, tool_name: &str) -> Result<&'t Tool, EngineError> {
    toolkit.get(tool_name).filter(|tool| tool.is_local()).ok_or_else(|| EngineError::ToolNotFound {
        tool_name: tool_name.to_owned(),
        available_tools: toolkit.tools().iter().filter(|t| t.is_local()).map(|t| t.name().to_owned()).collect(),
    })
}

fn check_input(tool: &Tool, call: &ToolCallPart, input: &serde_json::Value, what: &str) -> Result<(), EngineError> {
    tool.validate_input(input).map_err(|detail| EngineError::InvalidToolInput {
        tool_name: call.tool_name.clone(),
        tool_call_id: call.tool_call_id.clone(),
        detail: format!("{what}{detail}"),
    })
}
