// Scripted models of the AI SDK tests: MockLanguageModelV3 from the `ai` package under test (`ai/test`, or
// `ai-v7/test`), calling transfer_money once and then answering with what the tool gave back, by `generateText`
// (doGenerate) or `streamText` (doStream: the same turn as stream parts, the text word by word).
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

/** The turn after `prompt`: a call of `tool` with `input`, or `tool said: RESULT` once a tool result is in it. */
function turn(prompt, input, tool) {
  const result = lastToolResult(prompt);
  if (result === undefined) {
    const call = { toolCallId: "call_transfer_1", toolName: tool, input: JSON.stringify(input) };
    return { call, finish: "tool-calls" };
  }
  return { text: `tool said: ${result}`, finish: "stop" };
}

/** A turn as LanguageModelV3 stream parts. */
function streamParts({ call, text, finish }) {
  const parts = [{ type: "stream-start", warnings: [] }];
  if (call) parts.push({ type: "tool-call", ...call });
  if (text !== undefined) {
    parts.push({ type: "text-start", id: "text_1" });
    text.split(/(?= )/).forEach((delta) => parts.push({ type: "text-delta", id: "text_1", delta }));
    parts.push({ type: "text-end", id: "text_1" });
  }
  parts.push({ type: "finish", finishReason: { unified: finish, raw: undefined }, usage });
  return new ReadableStream({
    start(controller) {
      parts.forEach((part) => controller.enqueue(part));
      controller.close();
    },
  });
}

/** The model: a call of transfer_money with `input`, then `tool said: RESULT`. Keeps its calls' prompts. */
export function scriptedModel(input, { v7 = false, tool = "transfer_money" } = {}) {
  const Mock = v7 ? MockV7 : MockV6;
  return new Mock({
    provider: "scripted",
    modelId: "scripted",
    doGenerate: async ({ prompt }) => {
      const { call, text, finish } = turn(prompt, input, tool);
      return {
        content: call ? [{ type: "tool-call", ...call }] : [{ type: "text", text }],
        finishReason: { unified: finish, raw: undefined },
        usage,
        warnings: [],
      };
    },
    doStream: async ({ prompt }) => ({ stream: streamParts(turn(prompt, input, tool)) }),
  });
}
