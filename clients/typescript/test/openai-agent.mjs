// An OpenAI Agents JS agent for the tests: a scripted `Model` (getResponse and getStreamedResponse) that calls
// transfer_money once and then answers with the tool's output, and the runs through toolgate that the tests and
// restart-agent.mjs share.
import { Agent, Runner, setTracingDisabled, tool, Usage } from "@openai/agents";
import { z } from "zod";
import { gateTool, resolveInterruptions } from "../dist/openai-agents.js";

setTracingDisabled(true); // nothing leaves the machine

/** Calls transfer_money once with `args`, then answers with the tool's output it was given. */
export class ScriptedModel {
  constructor(args) {
    this.args = args;
  }

  #output(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const result = items.filter((item) => item.type === "function_call_result").at(-1);
    if (!result) {
      return [{
        type: "function_call",
        callId: "call_transfer_1",
        name: "transfer_money",
        arguments: JSON.stringify(this.args),
        status: "completed",
      }];
    }
    const text = `tool said: ${textOf(result.output)}`;
    return [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }];
  }

  async getResponse(request) {
    return { usage: new Usage(), output: this.#output(request), responseId: undefined };
  }

  /** The same output as stream events: the text word by word, then the completed response. */
  async *getStreamedResponse(request) {
    const output = this.#output(request);
    yield { type: "response_started" };
    for (const item of output.filter((item) => item.type === "message")) {
      for (const delta of item.content[0].text.split(/(?= )/)) yield { type: "output_text_delta", delta };
    }
    const usage = { requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 };
    yield { type: "response_done", response: { id: "resp_1", usage, output } };
  }
}

function textOf(output) {
  if (typeof output === "string") return output;
  if (output?.type === "text") return output.text;
  return JSON.stringify(output);
}

/** The payer agent: transfer_money (`record(memo)` on each run) gated by toolgate with `keyPrefix`. */
export function payer(gate, { memo, amount, keyPrefix, record }) {
  const transfer = tool({
    name: "transfer_money",
    description: "Sends money.",
    parameters: z.object({ amount: z.number(), memo: z.string() }),
    execute: async ({ amount, memo }) => (record(memo), `sent ${amount}`),
  });
  const model = new ScriptedModel({ amount, memo });
  return new Agent({ name: "payer", model, tools: [gateTool(gate, transfer, { keyPrefix })] });
}

/** `runner.run` until no interruption is left, each resolved through toolgate. */
export async function runToEnd(gate, agent, keyPrefix, timeout) {
  const runner = new Runner();
  let result = await runner.run(agent, "send it");
  const interruptions = result.interruptions?.length ?? 0;
  while (result.interruptions?.length) {
    result = await runner.run(agent, await resolveInterruptions(gate, result, { keyPrefix, timeout }));
  }
  return { output: result.finalOutput, interruptions };
}

/** `runner.run(..., { stream: true })` until no interruption is left; each streamed run's events (run items by
 * name, with a tool output's text; text deltas as `delta:TEXT`). */
export async function streamToEnd(gate, agent, keyPrefix, timeout) {
  const runner = new Runner();
  let result = await runner.run(agent, "send it", { stream: true });
  const rounds = [];
  for (;;) {
    const events = [];
    for await (const event of result) {
      if (event.type === "run_item_stream_event") {
        events.push(event.name === "tool_output" ? `tool_output:${textOf(event.item.output)}` : event.name);
      } else if (event.type === "raw_model_stream_event" && event.data.type === "output_text_delta") {
        events.push(`delta:${event.data.delta}`);
      }
    }
    await result.completed;
    rounds.push(events);
    if (!result.interruptions?.length) return { output: result.finalOutput, rounds };
    const state = await resolveInterruptions(gate, result, { keyPrefix, timeout });
    result = await runner.run(agent, state, { stream: true });
  }
}
