// An agent process for the restart test: an AI SDK 6 agent (generateText on MockLanguageModelV3) whose
// transfer_money tool toolgate gates, with the key `restart-MEMO:` + the model's call id. Appends a line to
// RUNS_FILE per run of the tool, prints `result: ...`, exits 0. Killed while it waits and started again, it
// must wait on the same approval and run the tool once.
//
//   node restart-agent.mjs MEMO RUNS_FILE
import { appendFileSync } from "node:fs";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";
import { Gate } from "../dist/index.js";
import { approvalResponses, gateTool } from "../dist/ai-sdk.js";
import { scriptedModel } from "./models.mjs";
import { TOKENS, URL } from "./helpers.mjs";

const [memo, runs] = process.argv.slice(2);
const gate = new Gate(URL, TOKENS.alice);
const keyPrefix = `restart-${memo}:`;
const tools = {
  transfer_money: gateTool(
    gate,
    "transfer_money",
    tool({
      description: "Sends money.",
      inputSchema: z.object({ amount: z.number(), memo: z.string() }),
      execute: async ({ amount, memo }) => {
        appendFileSync(runs, `${memo}\n`);
        return `sent ${amount}`;
      },
    }),
    { keyPrefix },
  ),
};
const model = scriptedModel({ amount: 70, memo });
let messages = [{ role: "user", content: "send 70" }];
let result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
while (result.content.some((part) => part.type === "tool-approval-request")) {
  messages = [...messages, ...result.response.messages, { role: "tool", content: await approvalResponses(gate, result.content, { keyPrefix }) }];
  result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
}
console.log(`result: ${result.text}`);
