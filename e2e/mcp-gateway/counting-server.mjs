#!/usr/bin/env node
// A tiny MCP server (stdio, the official SDK) that counts how often its tool really ran, so the tests can tell
// whether `toolgate mcp-gateway` let a call reach upstream, and how many times.
//
//   bump {label}  no annotations (so the gateway asks): appends one line `<label>` to $COUNT_FILE and returns
//                 `bumped <label> #<n>` (n: the lines in the file now) with structuredContent {count: n}; it has
//                 an outputSchema, so a client checks that a gateway's own isError results stay valid for it.
//                 $BUMP_DELAY_MS (default 0): how long it then waits before answering (a wider window for
//                 concurrent retries to race the running call).
//   peek          readOnlyHint, not destructive, closed world: the current count, writing nothing.
import fs from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const countFile = process.env.COUNT_FILE;
if (!countFile) {
  console.error("counting-server: COUNT_FILE is not set");
  process.exit(2);
}
const delayMs = Number(process.env.BUMP_DELAY_MS || 0);

function count() {
  try {
    return fs.readFileSync(countFile, "utf8").split("\n").filter((line) => line !== "").length;
  } catch (error) {
    if (error.code === "ENOENT") return 0;
    throw error;
  }
}

const server = new McpServer({ name: "toolgate-e2e-counting-server", version: "1.0.0" });

server.registerTool(
  "bump",
  {
    title: "Bump",
    description: "Adds one to the counter (one line in the count file) and returns the new count.",
    inputSchema: { label: z.string().describe("A label written to the count file") },
    outputSchema: { count: z.number() },
  },
  async ({ label }) => {
    // Synchronous append and read: one call's line and its count cannot interleave with another's.
    fs.appendFileSync(countFile, `${label.replace(/\n/g, " ")}\n`);
    const n = count();
    if (delayMs > 0) await sleep(delayMs);
    return { content: [{ type: "text", text: `bumped ${label} #${n}` }], structuredContent: { count: n } };
  },
);

server.registerTool(
  "peek",
  {
    title: "Peek",
    description: "The current count, changing nothing.",
    inputSchema: {},
    outputSchema: { count: z.number() },
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  },
  async () => {
    const n = count();
    return { content: [{ type: "text", text: `count ${n}` }], structuredContent: { count: n } };
  },
);

// Leave when the client (the gateway) goes away, also when it was killed and never said goodbye.
process.stdin.on("end", () => process.exit(0));
process.stdin.on("close", () => process.exit(0));

await server.connect(new StdioServerTransport());
