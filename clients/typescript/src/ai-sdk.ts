/**
 * The AI SDK (`ai` 6 and 7): tools whose decision and exactly-once run happen on the toolgate server.
 *
 * - `gateTool(gate, name, tool)`: the tool with `needsApproval` asking toolgate (a call it allows at once needs
 *   no approval) and `execute` running the approved (possibly edited) input once under toolgate's claim.
 * - ai 6: a call that waits for approvers stops the step with a `tool-approval-request`; `approvalResponses(gate,
 *   result.content)` waits for toolgate's decisions and returns the `tool-approval-response` parts to send back
 *   in a `tool` message (a denial carries toolgate's reason, which the model gets as `execution-denied`).
 * - ai 7: `toolApproval(gate, names)` is a `toolApproval` setting whose functions wait for toolgate's decision
 *   and answer `approved` or `denied` with the reason, so the run goes on without a round trip.
 *
 * The idempotency key is `keyPrefix` + the model's tool call id, so a restarted run with the same ids waits on
 * the same approvals. Only types come from `ai`: this module needs nothing at run time beyond `fetch`.
 */
import { denialText, NotRun } from "./errors.js";
import { asJson, describe, type Gate, type WaitOptions } from "./gate.js";

/** The parts of an AI SDK tool this adapter reads and replaces (`tool({...})` of ai 6 or 7). */
export interface AiSdkTool<INPUT = any, OUTPUT = any> {
  execute?: (input: INPUT, options: { toolCallId: string; [key: string]: any }) => OUTPUT | PromiseLike<OUTPUT> | AsyncIterable<OUTPUT>;
  needsApproval?: unknown;
  [key: string]: any;
}

/** Options of the adapter's functions. */
export interface AdapterOptions extends Pick<WaitOptions, "timeout" | "conversationId" | "description"> {
  /** Put before the tool call id to make the idempotency key (e.g. a conversation id). */
  keyPrefix?: string;
}

/** `tool`, decided and run through toolgate as `name`. */
export function gateTool<T extends AiSdkTool>(gate: Gate, name: string, tool: T, options: AdapterOptions = {}): T {
  const { keyPrefix = "", ...wait } = options;
  const execute = tool.execute;
  if (!execute) throw new TypeError(`gateTool: the tool ${name} has no execute function to gate`);
  return {
    ...tool,
    needsApproval: async (input: unknown, call: { toolCallId: string; messages?: ReadonlyArray<unknown> }) => {
      // A call that was held for approvers stays one that needs approval when the SDK asks again on resuming
      // (it checks the approval response against this answer), even though toolgate has approved it by then.
      if (askedBefore(call.messages, call.toolCallId)) return true;
      const decision = await gate.submit(name, input, { ...wait, idempotencyKey: keyPrefix + call.toolCallId });
      return decision.decision !== "allow";
    },
    execute: async (input: unknown, call: { toolCallId: string; abortSignal?: AbortSignal }) => {
      let outcome;
      try {
        outcome = await gate.decide(name, input, {
          ...wait,
          idempotencyKey: keyPrefix + call.toolCallId,
          signal: call.abortSignal,
        });
      } catch (error) {
        if (error instanceof NotRun) return denialText(name, error);
        throw error;
      }
      if (outcome.kind === "finished") return outcome.output;
      await gate.start(outcome.callId);
      let result: unknown;
      try {
        result = await execute(outcome.input as never, call);
      } catch (error) {
        await gate.finish(outcome.callId, { error: describe(error) });
        throw error;
      }
      await gate.finish(outcome.callId, { output: asJson(result) });
      return result;
    },
  };
}

/** Whether `messages` hold an approval request for the tool call `toolCallId`. */
function askedBefore(messages: ReadonlyArray<unknown> | undefined, toolCallId: string): boolean {
  return (messages ?? []).some((message) => {
    const content = (message as { content?: unknown }).content;
    return (
      Array.isArray(content) &&
      content.some((part: { type?: string; toolCallId?: string }) => part?.type === "tool-approval-request" && part.toolCallId === toolCallId)
    );
  });
}

/** The `tool-approval-request` part of a step's content (ai 6), as far as this adapter reads it. */
export interface ApprovalRequestPart {
  type: "tool-approval-request";
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** The `tool-approval-response` part to send back (ai 6). */
export interface ApprovalResponsePart {
  type: "tool-approval-response";
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/** Toolgate's decisions on the approval requests in `content` (waiting for them), as response parts. */
export async function approvalResponses(
  gate: Gate,
  content: ReadonlyArray<{ type: string }>,
  options: AdapterOptions = {},
): Promise<ApprovalResponsePart[]> {
  const { keyPrefix = "", ...wait } = options;
  const responses: ApprovalResponsePart[] = [];
  for (const part of content) {
    if (part.type !== "tool-approval-request") continue;
    const { approvalId, toolCall } = part as ApprovalRequestPart;
    try {
      await gate.decide(toolCall.toolName, toolCall.input, { ...wait, idempotencyKey: keyPrefix + toolCall.toolCallId });
      responses.push({ type: "tool-approval-response", approvalId, approved: true });
    } catch (error) {
      if (!(error instanceof NotRun)) throw error;
      responses.push({ type: "tool-approval-response", approvalId, approved: false, reason: denialText(toolCall.toolName, error) });
    }
  }
  return responses;
}

/** An ai 7 tool approval status. */
export type ApprovalStatus = { type: "approved"; reason?: string } | { type: "denied"; reason?: string };

/** An ai 7 `toolApproval` setting: for each named tool, a function that waits for toolgate's decision. */
export function toolApproval<N extends string>(
  gate: Gate,
  names: readonly N[],
  options: AdapterOptions = {},
): Record<N, (input: unknown, call: { toolCallId: string }) => Promise<ApprovalStatus>> {
  const { keyPrefix = "", ...wait } = options;
  const entries = names.map((name) => [
    name,
    async (input: unknown, call: { toolCallId: string }): Promise<ApprovalStatus> => {
      try {
        await gate.decide(name, input, { ...wait, idempotencyKey: keyPrefix + call.toolCallId });
        return { type: "approved" };
      } catch (error) {
        if (error instanceof NotRun) return { type: "denied", reason: denialText(name, error) };
        throw error;
      }
    },
  ]);
  return Object.fromEntries(entries) as Record<N, (input: unknown, call: { toolCallId: string }) => Promise<ApprovalStatus>>;
}
