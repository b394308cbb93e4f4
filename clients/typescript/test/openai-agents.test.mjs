// The OpenAI Agents JS adapter against a real `toolgate serve`: `gateTool` and `resolveInterruptions` on a
// scripted `Model` (the SDK's Model interface: getResponse / getStreamedResponse), through `run` and
// `run(..., { stream: true })`.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Gate } from "../dist/index.js";
import { payer, runToEnd, streamToEnd } from "./openai-agent.mjs";
import { decideWhenAsked, newMemo, TOKENS, URL } from "./helpers.mjs";

function agent(memo, amount, runs) {
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  return { gate, keyPrefix, agent: payer(gate, { memo, amount, keyPrefix, record: (m) => runs.push(m) }) };
}

async function runAgent(memo, amount, runs) {
  const { gate, keyPrefix, agent: payerAgent } = agent(memo, amount, runs);
  return runToEnd(gate, payerAgent, keyPrefix, 30);
}

async function streamAgent(memo, amount, runs) {
  const { gate, keyPrefix, agent: payerAgent } = agent(memo, amount, runs);
  return streamToEnd(gate, payerAgent, keyPrefix, 30);
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

test("a streamed run stops on the call and streams the result once approved", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]]);
  const { output, rounds } = await streamAgent(memo, 70, runs);
  assert.deepEqual(await votes, [200]);
  assert.deepEqual(rounds, [
    ["tool_called", "tool_approval_requested"],
    ["tool_output:sent 70", "delta:tool", "delta: said:", "delta: sent", "delta: 70", "message_output_created"],
  ]);
  assert.equal(output, "tool said: sent 70");
  assert.deepEqual(runs, [memo]);
});

test("a denial reaches a streamed run as the rejection message", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" });
  const { output, rounds } = await streamAgent(memo, 70, runs);
  await votes;
  assert.equal(rounds.length, 2);
  assert.match(rounds[1][0], /^tool_output:The call to `transfer_money` was not run: denied: .*not this month/);
  assert.match(output, /^tool said: The call to `transfer_money` was not run: denied: .*not this month/);
  assert.deepEqual(runs, []);
});
