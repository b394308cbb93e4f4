// The AI SDK adapter against a real `toolgate serve`: ai 6 (`needsApproval`, `tool-approval-request` answered by
// `approvalResponses`) and ai 7 (`toolApproval`), each on MockLanguageModelV3 from its own `ai` package, through
// `generateText` and `streamText`.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as ai6 from "ai";
import * as ai7 from "ai-v7";
import { z } from "zod";
import { Gate } from "../dist/index.js";
import { approvalResponses, gateTool, toolApproval } from "../dist/ai-sdk.js";
import { lastToolResult, scriptedModel } from "./models.mjs";
import { decideWhenAsked, newMemo, signal, TOKENS, URL } from "./helpers.mjs";

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

/** ai 7: a `generateText` run whose `toolApproval` is toolgate's. */
async function runV7(memo, amount, runs) {
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const model = scriptedModel({ amount, memo }, { v7: true });
  const tools = { transfer_money: transferTool(ai7, runs, gate, keyPrefix) };
  delete tools.transfer_money.needsApproval; // ai 7 asks toolApproval instead
  const toolApprovals = toolApproval(gate, ["transfer_money"], { keyPrefix, timeout: 30 });
  const stopWhen = ai7.stepCountIs(5);
  return ai7.generateText({ model, tools, prompt: "send it", toolApproval: toolApprovals, stopWhen });
}

test("ai 7: toolApproval waits for toolgate's decision and the run goes on", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]]);
  const result = await runV7(memo, 70, runs);
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

test("ai 7: a quorum of two approves a big transfer", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"], ["carol", "approve"]]);
  const result = await runV7(memo, 5000, runs);
  assert.deepEqual(await votes, [200, 200]);
  assert.equal(result.text, "tool said: sent 5000");
  assert.deepEqual(runs, [memo]);
});

/** A `fullStream` part as a short line: its type, with the text of a delta or a tool result. */
function describePart(part) {
  if (part.type === "text-delta") return `delta:${part.text}`;
  if (part.type === "tool-result") return `tool-result:${part.output}`;
  return part.type;
}

/** ai 6: `streamText` until no approval request is left, answering each from toolgate; each stream's parts. */
async function streamV6(memo, runs) {
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const model = scriptedModel({ amount: 70, memo });
  const tools = { transfer_money: transferTool(ai6, runs, gate, keyPrefix) };
  let messages = [{ role: "user", content: "send it" }];
  const rounds = [];
  for (;;) {
    const result = ai6.streamText({ model, tools, messages, stopWhen: ai6.stepCountIs(5) });
    const parts = [];
    for await (const part of result.fullStream) parts.push(describePart(part));
    rounds.push(parts);
    const content = await result.content;
    if (!content.some((part) => part.type === "tool-approval-request")) return { text: await result.text, rounds };
    const answers = await approvalResponses(gate, content, { keyPrefix, timeout: 30 });
    messages = [...messages, ...(await result.response).messages, { role: "tool", content: answers }];
  }
}

const TEXT = (words) => words.map((word, i) => `delta:${i ? " " : ""}${word}`);

test("ai 6: streamText stops on the approval request and streams the result once approved", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "approve"]]);
  const { text, rounds } = await streamV6(memo, runs);
  assert.deepEqual(await votes, [200]);
  assert.deepEqual(rounds[0], ["start", "start-step", "tool-call", "tool-approval-request", "finish-step", "finish"]);
  const second = rounds[1].filter((part) => part.startsWith("tool-") || part.startsWith("delta:"));
  assert.deepEqual(second, ["tool-result:sent 70", ...TEXT(["tool", "said:", "sent", "70"])]);
  assert.equal(text, "tool said: sent 70");
  assert.deepEqual(runs, [memo]);
});

test("ai 6: a denial reaches a streamed run as execution-denied with the reason", async () => {
  const memo = newMemo();
  const runs = [];
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" });
  const { text, rounds } = await streamV6(memo, runs);
  await votes;
  assert.equal(rounds.length, 2);
  assert.ok(rounds[1].includes("tool-output-denied"), rounds[1].join(" "));
  assert.match(text, /^tool said: denied: The call to `transfer_money` was not run: denied: .*not this month/);
  assert.deepEqual(runs, []);
});

/** ai 7: one `streamText` run whose `toolApproval` is toolgate's; `streaming` resolves at the streamed call. */
async function streamV7(memo, amount, runs, streaming) {
  const gate = new Gate(URL, TOKENS.alice);
  const keyPrefix = `${memo}:`;
  const model = scriptedModel({ amount, memo }, { v7: true });
  const tools = { transfer_money: transferTool(ai7, runs, gate, keyPrefix) };
  delete tools.transfer_money.needsApproval;
  const toolApprovals = toolApproval(gate, ["transfer_money"], { keyPrefix, timeout: 30 });
  const stopWhen = ai7.stepCountIs(5);
  const result = ai7.streamText({ model, tools, prompt: "send it", toolApproval: toolApprovals, stopWhen });
  const parts = [];
  for await (const part of result.fullStream) {
    parts.push(describePart(part));
    if (part.type === "tool-call") streaming.resolve();
  }
  return { text: await result.text, parts };
}

test("ai 7: streamText waits on toolApproval mid-stream, approved in the inbox meanwhile", async () => {
  const memo = newMemo();
  const runs = [];
  const streaming = signal(); // bob votes only once the stream has shown the call
  const votes = decideWhenAsked(memo, [["bob", "approve"]], {}, { after: streaming.promise });
  const { text, parts } = await streamV7(memo, 70, runs, streaming);
  assert.deepEqual(await votes, [200]);
  const tools = parts.filter((part) => part.startsWith("tool-"));
  assert.deepEqual(tools, ["tool-call", "tool-approval-request", "tool-approval-response", "tool-result:sent 70"]);
  assert.equal(text, "tool said: sent 70");
  assert.deepEqual(runs, [memo]);
});

test("ai 7: a denial reaches a streamed run as tool-output-denied with the reason", async () => {
  const memo = newMemo();
  const runs = [];
  const streaming = signal();
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" }, { after: streaming.promise });
  const { text, parts } = await streamV7(memo, 70, runs, streaming);
  assert.deepEqual(await votes, [200]);
  const tools = parts.filter((part) => part.startsWith("tool-"));
  assert.deepEqual(tools, ["tool-call", "tool-approval-request", "tool-approval-response", "tool-output-denied"]);
  assert.match(text, /^tool said: denied: The call to `transfer_money` was not run: denied: .*not this month/);
  assert.deepEqual(runs, []);
});
