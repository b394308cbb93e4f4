/**
 * The OpenAI Agents JS SDK (`@openai/agents`): `needsApproval` and the run's interruptions decided by toolgate.
 *
 * `gateTool(gate, tool)` returns a copy of a function tool whose `needsApproval` asks toolgate (a call it allows
 * at once needs no approval) and whose `invoke` runs the approved (possibly edited) input once under toolgate's
 * claim. After a run stops on interruptions, `resolveInterruptions(gate, result)` waits for each call's decision
 * and approves or rejects it in `result.state` (a rejection carries toolgate's reason to the model); run the
 * state again to go on. The idempotency key is `keyPrefix` + the model's call id. Only types come from the SDK.
 */
import type { FunctionTool, RunContext, RunState, RunToolApprovalItem } from "@openai/agents";
import { denialText, NotRun } from "./errors.js";
import { asJson, describe, type Gate } from "./gate.js";
import type { AdapterOptions } from "./ai-sdk.js";

export type { AdapterOptions } from "./ai-sdk.js";

type AnyFunctionTool = FunctionTool<any, any, any>;

/** `tool`, decided and run through toolgate under its own name. */
export function gateTool<T extends AnyFunctionTool>(gate: Gate, tool: T, options: AdapterOptions = {}): T {
  const { keyPrefix = "", ...wait } = options;
  const invoke = tool.invoke;
  const gated: AnyFunctionTool = {
    ...tool,
    needsApproval: async (_context: RunContext, input: unknown, callId?: string) => {
      if (!callId) return true;
      const decision = await gate.submit(tool.name, input, { ...wait, idempotencyKey: keyPrefix + callId });
      return decision.decision !== "allow";
    },
    invoke: async (context: RunContext, input: string, details?: Parameters<AnyFunctionTool["invoke"]>[2]) => {
      const callId = details?.toolCall?.callId;
      if (!callId) return `The call to \`${tool.name}\` was not run: it has no call id to gate it by`;
      const parsed: unknown = input ? JSON.parse(input) : {};
      let outcome;
      try {
        outcome = await gate.decide(tool.name, parsed, { ...wait, idempotencyKey: keyPrefix + callId });
      } catch (error) {
        if (error instanceof NotRun) return denialText(tool.name, error);
        throw error;
      }
      if (outcome.kind === "finished") return typeof outcome.output === "string" ? outcome.output : JSON.stringify(outcome.output);
      await gate.start(outcome.callId);
      let result: Awaited<ReturnType<AnyFunctionTool["invoke"]>>;
      try {
        result = await invoke(context, JSON.stringify(outcome.input), details);
      } catch (error) {
        await gate.finish(outcome.callId, { error: describe(error) });
        throw error;
      }
      await gate.finish(outcome.callId, { output: asJson(result) });
      return result;
    },
  };
  return gated as T;
}

/** Approves or rejects each of the run's interruptions in `result.state`, as toolgate decides (waiting for it). */
export async function resolveInterruptions(
  gate: Gate,
  result: { interruptions?: RunToolApprovalItem[]; state: RunState<any, any> },
  options: AdapterOptions = {},
): Promise<RunState<any, any>> {
  const { keyPrefix = "", ...wait } = options;
  for (const item of result.interruptions ?? []) {
    const name = item.name ?? "";
    const raw = item.rawItem as { callId?: string };
    if (!raw.callId) {
      result.state.reject(item, { message: `The call to \`${name}\` was not run: it has no call id to gate it by` });
      continue;
    }
    const input: unknown = item.arguments ? JSON.parse(item.arguments) : {};
    try {
      await gate.decide(name, input, { ...wait, idempotencyKey: keyPrefix + raw.callId });
      result.state.approve(item);
    } catch (error) {
      if (!(error instanceof NotRun)) throw error;
      result.state.reject(item, { message: denialText(name, error) });
    }
  }
  return result.state;
}
