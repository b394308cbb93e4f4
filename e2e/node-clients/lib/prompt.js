// Checks on the prompts a model received (the `prompt` of a --trace-prompts line, AI SDK ModelMessage JSON).

import assert from 'node:assert/strict';

function parts(message) {
  return Array.isArray(message.content) ? message.content : [];
}

/**
 * A prompt a provider accepts and that follows toolgate's rules:
 * - no `tool-approval-request` anywhere;
 * - `tool-approval-response` only in tool messages and only for provider-executed approvals
 *   (ids in `providerApprovalIds`), which are forwarded to the provider;
 * - tool messages follow an assistant message, never another tool message;
 * - every local tool call is answered by a `tool-result` in the tool message right after its assistant message,
 *   and every tool result there answers a call of that assistant message;
 * - a provider-executed call has its result in the same assistant message or a forwarded approval response.
 */
export function assertCleanPrompt(prompt, { providerApprovalIds = [] } = {}) {
  assert.ok(Array.isArray(prompt) && prompt.length > 0, 'the prompt is a non-empty array');
  prompt.forEach((message, index) => {
    const where = `prompt[${index}] (${message.role})`;
    assert.ok(['system', 'user', 'assistant', 'tool'].includes(message.role), `${where}: role`);
    for (const part of parts(message)) {
      assert.notEqual(part.type, 'tool-approval-request', `${where} holds an approval request: ${JSON.stringify(part)}`);
      if (part.type === 'tool-approval-response') {
        assert.equal(message.role, 'tool', `${where}: approval response outside a tool message`);
        assert.ok(
          providerApprovalIds.includes(part.approvalId),
          `${where}: a local approval response reached the model: ${JSON.stringify(part)}`,
        );
      }
    }
    if (message.role === 'tool') {
      const previous = prompt[index - 1];
      assert.ok(previous && previous.role === 'assistant', `${where} must follow an assistant message`);
      const calls = new Set(parts(previous).filter((p) => p.type === 'tool-call').map((p) => p.toolCallId));
      for (const part of parts(message).filter((p) => p.type === 'tool-result')) {
        assert.ok(calls.has(part.toolCallId), `${where}: result ${part.toolCallId} answers no call of prompt[${index - 1}]`);
      }
    }
    if (message.role === 'assistant') {
      const next = prompt[index + 1];
      const answered = new Set(
        next && next.role === 'tool'
          ? parts(next).filter((p) => p.type === 'tool-result').map((p) => p.toolCallId)
          : [],
      );
      const forwarded = new Set(
        next && next.role === 'tool'
          ? parts(next).filter((p) => p.type === 'tool-approval-response').map((p) => p.approvalId)
          : [],
      );
      const ownResults = new Set(parts(message).filter((p) => p.type === 'tool-result').map((p) => p.toolCallId));
      for (const call of parts(message).filter((p) => p.type === 'tool-call')) {
        if (call.providerExecuted === true) {
          assert.ok(
            ownResults.has(call.toolCallId) || forwarded.size > 0,
            `${where}: provider-executed call ${call.toolCallId} has neither a result nor a forwarded approval`,
          );
        } else {
          assert.ok(
            answered.has(call.toolCallId),
            `${where}: call ${call.toolCallId} (${call.toolName}) is not followed by its result`,
          );
        }
      }
    }
  });
}

/** The tool results of a prompt by call id: `{toolCallId: {toolName, output, index}}`. */
export function toolResults(prompt) {
  const out = {};
  prompt.forEach((message, index) => {
    for (const part of parts(message)) {
      if (part.type === 'tool-result') out[part.toolCallId] = { toolName: part.toolName, output: part.output, index };
    }
  });
  return out;
}

/** The tool calls of a prompt, in order. */
export function toolCalls(prompt) {
  return prompt.flatMap((message) => parts(message).filter((p) => p.type === 'tool-call'));
}

/** The roles of a prompt, e.g. `['user', 'assistant', 'tool']`. */
export function roles(prompt) {
  return prompt.map((message) => message.role);
}

/** The text of a user message (string content or text parts). */
export function userText(message) {
  if (typeof message.content === 'string') return message.content;
  return parts(message)
    .filter((p) => p.type === 'text')
    .map((p) => p.text)
    .join('');
}
