// The AI SDK adapter against a real `toolgate serve`: ai 6 (`needsApproval`, `tool-approval-request` answered by
// `approvalResponses`) and ai 7 (`toolApproval`), each on MockLanguageModelV3 from its own `ai` package.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as ai6 from "ai";
import * as ai7 from "ai-v7";
import { z } from "zod";
import { Gate } from "../dist/index.js";
import { approvalResponses, gateTool, toolApproval } from "../dist/ai-sdk.js";
import { lastToolResult, scriptedModel } from "./models.mjs";
import { decideWhenAsked, newMemo, TOKENS, URL } from "./helpers.mjs";

function transferTool(sdk, runs, gate, keyPrefix) {
  return gateTool(
    gate,
    "transfer_money",
    sdk.tool({
      description: "Sends money.",
      inputSchema: z.object({ amount: z.number(), memo: z.string() }),
      execute: async ({ amount, memo }) => (runs.push(memo), `sent ${amount}`),
    }),
    { keyPrefix },
  );
}

/** ai 6: runs until no approval request is left, answering each from toolgate. */
async function runV6(memo, amount, runs) {
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const model = scriptedModel({ amount, memo });
  const tools = { transfer_money: transferTool(ai6, runs, gate, keyPrefix) };
  let messages = [{ role: "user", content: "send it" }];
  let result = await ai6.generateText({ model, tools, messages, stopWhen: ai6.stepCountIs(5) });
  let rounds = 0;
  while (result.content.some((part) => part.type === "tool-approval-request")) {
    rounds += 1;
    const answers = await approvalResponses(gate, result.content, { keyPrefix, timeout: 30 });
    messages = [...messages, ...result.response.messages, { role: "tool", content: answers }];
    result = await ai6.generateText({ model, tools, messages, stopWhen: ai6.stepCountIs(5) });
  }
  return { text: result.text, rounds, model };
}

test("ai 6: an approved call runs once and its result reaches the model", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]]);
  const { text, rounds } = await runV6(memo, 70, runs);
  assert.deepEqual(await votes, [200]);
  assert.equal(text, "tool said: sent 70");
  assert.equal(rounds, 1);
  assert.deepEqual(runs, [memo]);
});

test("ai 6: a quorum of two approves a big transfer", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"], ["carol", "approve"]]);
  const { text } = await runV6(memo, 5000, runs);
  assert.deepEqual(await votes, [200, 200]);
  assert.equal(text, "tool said: sent 5000");
  assert.deepEqual(runs, [memo]);
});

test("ai 6: a denial reaches the model as execution-denied with the reason", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" });
  const { text } = await runV6(memo, 70, runs);
  await votes;
  assert.match(text, /^tool said: denied: .*not this month/);
  assert.deepEqual(runs, []);
});

test("ai 7: toolApproval waits for toolgate's decision and the run goes on", async () => {
  const memo = newMemo();
  const runs = [];
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const model = scriptedModel({ amount: 70, memo }, { v7: true });
  const tools = { transfer_money: transferTool(ai7, runs, gate, keyPrefix) };
  delete tools.transfer_money.needsApproval; // ai 7 asks toolApproval instead
  const votes = decideWhenAsked(memo, [["bob", "approve"]]);
  const result = await ai7.generateText({
    model,
    tools,
    prompt: "send it",
    toolApproval: toolApproval(gate, ["transfer_money"], { keyPrefix, timeout: 30 }),
    stopWhen: ai7.stepCountIs(5),
  });
  assert.deepEqual(await votes, [200]);
  assert.equal(result.text, "tool said: sent 70");
  assert.deepEqual(runs, [memo]);
});

test("ai 7: a denial from toolgate reaches the model with its reason", async () => {
  const memo = newMemo();
  const runs = [];
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const model = scriptedModel({ amount: 70, memo }, { v7: true });
  const tools = { transfer_money: transferTool(ai7, runs, gate, keyPrefix) };
  delete tools.transfer_money.needsApproval;
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" });
  const result = await ai7.generateText({
    model,
    tools,
    prompt: "send it",
    toolApproval: toolApproval(gate, ["transfer_money"], { keyPrefix, timeout: 30 }),
    stopWhen: ai7.stepCountIs(5),
  });
  await votes;
  assert.match(result.text, /^tool said: denied: .*not this month/);
  assert.deepEqual(runs, []);
  assert.equal(lastToolResult(model.doGenerateCalls.at(-1).prompt), result.text.replace("tool said: ", ""));
});

test("ai 6: the approver's edit is what runs", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]], { editedInput: { amount: 7, memo } });
  const { text } = await runV6(memo, 700, runs);
  assert.deepEqual(await votes, [200]);
  assert.equal(text, "tool said: sent 7");
  assert.deepEqual(runs, [memo]);
});
