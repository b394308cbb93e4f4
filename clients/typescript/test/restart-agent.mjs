// An agent process for the restart tests: gates one transfer_money call of 70 with the key `restart-MEMO:` + the
// model's call id, appends a line to RUNS_FILE per run of the tool, prints `result: ...` and exits 0. It prints
// `waiting` each time it long-polls the server for the call's decision, so a test kills it only while it waits.
// Killed with SIGKILL and started again, it must wait on the same approval and run the tool once. Its calls are in
// the conversation `restart-MEMO`.
//
//   node restart-agent.mjs core|ai6|ai7|openai-agents MEMO RUNS_FILE
//
// core: a function wrapped by `Gate.gated` (the key `restart-MEMO`); ai6: generateText on MockLanguageModelV3
// with `needsApproval`, the approval requests answered by `approvalResponses`; ai7: generateText with
// `toolApproval`; openai-agents: a scripted Model, `gateTool` and `resolveInterruptions`.
//
// Each kind imports only its own framework, so that the process starts as fast as it can.
import { appendFileSync } from "node:fs";
import { Gate } from "../dist/index.js";
import { TOKENS, URL } from "./helpers.mjs";

const [kind, memo, runs] = process.argv.slice(2);
const keyPrefix = `restart-${memo}:`;
const record = (line) => appendFileSync(runs, `${line}\n`);

/** `fetch` that says `waiting` when it long-polls a call. */
function announcingFetch(input, init) {
  const url = new globalThis.URL(String(input));
  if ((init?.method ?? "GET") === "GET" && url.pathname.startsWith("/api/calls/") && url.searchParams.has("wait")) {
    console.log("waiting");
  }
  return fetch(input, init);
}
const gate = new Gate(URL, TOKENS.alice, { fetch: announcingFetch, conversationId: `restart-${memo}` });

async function transferTool(sdk) {
  const { z } = await import("zod");
  const { gateTool } = await import("../dist/ai-sdk.js");
  const transfer = sdk.tool({
    description: "Sends money.",
    inputSchema: z.object({ amount: z.number(), memo: z.string() }),
    execute: async ({ amount, memo }) => (record(memo), `sent ${amount}`),
  });
  return gateTool(gate, "transfer_money", transfer, { keyPrefix });
}

async function runCore() {
  const transfer = gate.gated("transfer_money", async ({ amount, memo }) => (record(memo), `sent ${amount}`), {
    key: (input) => `restart-${input.memo}`,
  });
  return transfer({ amount: 70, memo });
}

async function runAi6() {
  const ai6 = await import("ai");
  const { approvalResponses } = await import("../dist/ai-sdk.js");
  const { scriptedModel } = await import("./models.mjs");
  const tools = { transfer_money: await transferTool(ai6) };
  const model = scriptedModel({ amount: 70, memo });
  let messages = [{ role: "user", content: "send 70" }];
  let result = await ai6.generateText({ model, tools, messages, stopWhen: ai6.stepCountIs(5) });
  while (result.content.some((part) => part.type === "tool-approval-request")) {
    const content = await approvalResponses(gate, result.content, { keyPrefix });
    messages = [...messages, ...result.response.messages, { role: "tool", content }];
    result = await ai6.generateText({ model, tools, messages, stopWhen: ai6.stepCountIs(5) });
  }
  return result.text;
}

async function runAi7() {
  const ai7 = await import("ai-v7");
  const { toolApproval } = await import("../dist/ai-sdk.js");
  const { scriptedModel } = await import("./models.mjs");
  const tools = { transfer_money: await transferTool(ai7) };
  delete tools.transfer_money.needsApproval; // ai 7 asks toolApproval instead
  const model = scriptedModel({ amount: 70, memo }, { v7: true });
  const approval = toolApproval(gate, ["transfer_money"], { keyPrefix });
  const stopWhen = ai7.stepCountIs(5);
  return (await ai7.generateText({ model, tools, prompt: "send 70", toolApproval: approval, stopWhen })).text;
}

async function runOpenAiAgents() {
  const { payer, runToEnd } = await import("./openai-agent.mjs");
  const { output } = await runToEnd(gate, payer(gate, { memo, amount: 70, keyPrefix, record }), keyPrefix);
  return output;
}

const kinds = { core: runCore, ai6: runAi6, ai7: runAi7, "openai-agents": runOpenAiAgents };
console.log(`result: ${await kinds[kind]()}`);
