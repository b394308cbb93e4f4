// Generates src/openapi.ts, the client's wire types, from a toolgate server's OpenAPI document:
//
//   node scripts/generate.mjs OPENAPI_JSON_OR_URL [OUT]   (default OUT: src/openapi.ts)
//
// Only the call-gating API's schemas are kept (the document's other schemas change with other features), and
// openapi-typescript writes them as TypeScript. The agent-clients suite regenerates the file from a running
// server and fails when it differs from the committed one, so the client cannot drift from the server.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const SCHEMAS = ["CallRequest", "CallDecided", "CallPending", "CallStatus", "FinishRequest"];

const [source, out = join(dirname(fileURLToPath(import.meta.url)), "..", "src", "openapi.ts")] = process.argv.slice(2);
if (!source) {
  console.error("usage: node scripts/generate.mjs OPENAPI_JSON_OR_URL [OUT]");
  process.exit(2);
}
const document = source.startsWith("http")
  ? await (await fetch(source)).json()
  : JSON.parse(readFileSync(source, "utf8"));
const schemas = {};
for (const name of SCHEMAS) {
  const schema = document.components?.schemas?.[name];
  if (!schema) {
    console.error(`the document has no schema ${name}`);
    process.exit(1);
  }
  schemas[name] = schema;
}
const kept = { openapi: document.openapi, info: { title: "toolgate call-gating API", version: "1" }, paths: {}, components: { schemas } };
const dir = mkdtempSync(join(tmpdir(), "toolgate-openapi-"));
try {
  writeFileSync(join(dir, "calls.json"), JSON.stringify(kept, null, 2));
  const cli = join(dirname(fileURLToPath(import.meta.url)), "..", "node_modules", "openapi-typescript", "bin", "cli.js");
  execFileSync(process.execPath, [cli, join(dir, "calls.json"), "-o", out], { stdio: ["ignore", "ignore", "inherit"] });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
