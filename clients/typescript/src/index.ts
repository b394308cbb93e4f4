/**
 * toolgate-client: gate any agent's tool calls through a toolgate server. The adapters are separate entry
 * points (`toolgate-client/ai-sdk`, `toolgate-client/openai-agents`), so this one needs nothing beyond `fetch`.
 */
export * from "./errors.js";
export * from "./gate.js";
export type * from "./types.js";
