// Scripted models of the AI SDK tests: MockLanguageModelV3 from the `ai` package under test (`ai/test`, or
// `ai-v7/test`), calling transfer_money once and then answering with what the tool gave back.
import { MockLanguageModelV3 as MockV6 } from "ai/test";
import { MockLanguageModelV3 as MockV7 } from "ai-v7/test";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** The text of the last tool result in the prompt (an output or a denial), or undefined. */
export function lastToolResult(prompt) {
  const results = prompt.filter((m) => m.role === "tool").flatMap((m) => m.content).filter((p) => p.type === "tool-result");
  const last = results.at(-1);
  if (!last) return undefined;
  const output = last.output;
  if (output.type === "execution-denied") return `denied: ${output.reason ?? ""}`;
  return typeof output.value === "string" ? output.value : JSON.stringify(output.value);
}

/** The model: a call of transfer_money with `input`, then `tool said: RESULT`. Keeps its calls' prompts. */
export function scriptedModel(input, { v7 = false, tool = "transfer_money" } = {}) {
  const Mock = v7 ? MockV7 : MockV6;
  const model = new Mock({
    provider: "scripted",
    modelId: "scripted",
    doGenerate: async ({ prompt }) => {
      const result = lastToolResult(prompt);
      const content =
        result === undefined
          ? [{ type: "tool-call", toolCallId: "call_transfer_1", toolName: tool, input: JSON.stringify(input) }]
          : [{ type: "text", text: `tool said: ${result}` }];
      return {
        content,
        finishReason: { unified: result === undefined ? "tool-calls" : "stop", raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
  return model;
}
