// The OpenAI Agents JS adapter against a real `toolgate serve`: `gateTool` and `resolveInterruptions` on a
// scripted `Model` (the SDK's Model interface: getResponse / getStreamedResponse).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent, Runner, setTracingDisabled, tool, Usage } from "@openai/agents";
import { z } from "zod";
import { Gate } from "../dist/index.js";
import { gateTool, resolveInterruptions } from "../dist/openai-agents.js";
import { decideWhenAsked, newMemo, TOKENS, URL } from "./helpers.mjs";

setTracingDisabled(true); // nothing leaves the machine

/** Calls transfer_money once with `args`, then answers with the tool's output it was given. */
class ScriptedModel {
  constructor(args) {
    this.args = args;
  }

  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const result = items.filter((item) => item.type === "function_call_result").at(-1);
    const output = result
      ? [{
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: `tool said: ${textOf(result.output)}` }],
        }]
      : [{
          type: "function_call",
          callId: "call_transfer_1",
          name: "transfer_money",
          arguments: JSON.stringify(this.args),
          status: "completed",
        }];
    return { usage: new Usage(), output, responseId: undefined };
  }

  async *getStreamedResponse() {
    throw new Error("the tests run the agent without streaming");
  }
}

function textOf(output) {
  if (typeof output === "string") return output;
  if (output?.type === "text") return output.text;
  return JSON.stringify(output);
}

async function runAgent(memo, amount, runs) {
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const transfer = tool({
    name: "transfer_money",
    description: "Sends money.",
    parameters: z.object({ amount: z.number(), memo: z.string() }),
    execute: async ({ amount, memo }) => (runs.push(memo), `sent ${amount}`),
  });
  const agent = new Agent({ name: "payer", model: new ScriptedModel({ amount, memo }), tools: [gateTool(gate, transfer, { keyPrefix })] });
  const runner = new Runner();
  let result = await runner.run(agent, "send it");
  const interruptions = result.interruptions?.length ?? 0;
  while (result.interruptions?.length) {
    const state = await resolveInterruptions(gate, result, { keyPrefix, timeout: 30 });
    result = await runner.run(agent, state);
  }
  return { output: result.finalOutput, interruptions };
}

test("an approved call runs once and its output reaches the model", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]]);
  const { output, interruptions } = await runAgent(memo, 70, runs);
  assert.deepEqual(await votes, [200]);
  assert.equal(output, "tool said: sent 70");
  assert.equal(interruptions, 1);
  assert.deepEqual(runs, [memo]);
});

test("a quorum of two approves a big transfer", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"], ["carol", "approve"]]);
  const { output } = await runAgent(memo, 5000, runs);
  assert.deepEqual(await votes, [200, 200]);
  assert.equal(output, "tool said: sent 5000");
  assert.deepEqual(runs, [memo]);
});

test("a denial reaches the model as the rejection message", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" });
  const { output } = await runAgent(memo, 70, runs);
  await votes;
  assert.match(output, /^tool said: The call to `transfer_money` was not run: denied: .*not this month/);
  assert.deepEqual(runs, []);
});

test("the approver's edit is what runs", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]], { editedInput: { amount: 7, memo } });
  const { output } = await runAgent(memo, 700, runs);
  assert.deepEqual(await votes, [200]);
  assert.equal(output, "tool said: sent 7");
  assert.deepEqual(runs, [memo]);
});
