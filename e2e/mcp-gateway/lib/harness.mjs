// Shared helpers of the mcp-gateway tests: the gateway's config, starting it (stdio through the SDK's
// StdioClientTransport, or `--listen` on a free loopback port and the SDK's StreamableHTTPClientTransport),
// stopping it and every process under it by PID, and `toolgate approvals` on the gateway's store.
//
// Environment:
//   TOOLGATE_BIN          the toolgate command (default <repo>/target/debug/toolgate)
//   TOOLGATE_E2E_RUN_DIR  where each gateway's directory (config, data dir, log, the fs server's root) goes
//                         (default: a fresh directory under the OS temp dir)
import { execFile, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const execFileP = promisify(execFile);

export const E2E = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const ROOT = path.resolve(E2E, "../..");
export const BIN = process.env.TOOLGATE_BIN
  ? path.resolve(process.env.TOOLGATE_BIN)
  : path.join(process.env.CARGO_TARGET_DIR ? path.resolve(ROOT, process.env.CARGO_TARGET_DIR) : path.join(ROOT, "target"), "debug", "toolgate");
export const FS_SERVER = path.join(E2E, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
export const COUNTING_SERVER = path.join(E2E, "counting-server.mjs");

const RUN_DIR = process.env.TOOLGATE_E2E_RUN_DIR
  ? path.resolve(process.env.TOOLGATE_E2E_RUN_DIR)
  : fs.mkdtempSync(path.join(os.tmpdir(), "toolgate-e2e-mcp-gateway."));
fs.mkdirSync(RUN_DIR, { recursive: true });

/** A fresh directory under the run directory. */
export function freshDir(prefix) {
  return fs.mkdtempSync(path.join(RUN_DIR, `${prefix}.`));
}

// ---------------------------------------------------------------------------------------------------------
// Processes: everything started here is killed by PID at the end, also when a test fails or the runner exits.

const live = new Set();

function killLive() {
  const all = [...live].flatMap((pid) => [pid, ...descendants(pid)]);
  for (const pid of all) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}
process.on("exit", killLive);
// A signal ends node without its `exit` event: kill what this file started first.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    killLive();
    process.exit(130);
  });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The PIDs of every process under `pid` (Linux /proc; none elsewhere). */
export function descendants(pid) {
  const found = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift();
    let tasks = [];
    try {
      tasks = fs.readdirSync(`/proc/${parent}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      let children = "";
      try {
        children = fs.readFileSync(`/proc/${parent}/task/${task}/children`, "utf8");
      } catch {}
      for (const child of children.split(/\s+/).filter(Boolean).map(Number)) {
        if (!found.includes(child)) {
          found.push(child);
          queue.push(child);
        }
      }
    }
  }
  return found;
}

/** Kills `pid` and the processes under it: SIGTERM (unless `hard`), then SIGKILL after a bounded wait. */
export async function killTree(pid, { hard = false } = {}) {
  if (!pid) return;
  const tree = [pid, ...descendants(pid)];
  for (const p of tree) live.add(p);
  for (const p of tree) {
    try {
      process.kill(p, hard ? "SIGKILL" : "SIGTERM");
    } catch {}
  }
  for (const p of tree) {
    for (let i = 0; i < 50 && alive(p); i++) await sleep(100);
    try {
      process.kill(p, "SIGKILL");
    } catch {}
    live.delete(p);
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// Config.

/** A TOML string (basic strings take JSON's escapes). */
const q = (value) => JSON.stringify(String(value));

/**
 * The gateway's config: the reference filesystem server on `fsDir` (trusted) as `fs`, the counting server
 * writing `countFile` as `count` (trusted too: its `peek` is read-only, its `bump` asks anyway), and `rules`
 * ({name, action, tool, reason?, input?: {pointer: {glob|regex|equals}}, approvers?}).
 */
export function gatewayConfig({ fsDir, countFile, bumpDelayMs = 0, rules = [], extra = "" }) {
  const lines = [
    "# Written by e2e/mcp-gateway/lib/harness.mjs",
    "[[mcp]]",
    'name = "fs"',
    `command = ${q(process.execPath)}`,
    `args = [${q(FS_SERVER)}, ${q(fsDir)}]`,
    "trusted = true",
    "",
    "[[mcp]]",
    'name = "count"',
    `command = ${q(process.execPath)}`,
    `args = [${q(COUNTING_SERVER)}]`,
    `env = { COUNT_FILE = ${q(countFile)}, BUMP_DELAY_MS = ${q(bumpDelayMs)} }`,
    "trusted = true",
    "",
  ];
  for (const rule of rules) {
    lines.push("[[rule]]", `name = ${q(rule.name)}`, `action = ${q(rule.action)}`, `tool = ${q(rule.tool)}`);
    if (rule.reason) lines.push(`reason = ${q(rule.reason)}`);
    if (rule.approvers) lines.push(`approvers = [${rule.approvers.map(q).join(", ")}]`);
    if (rule.input) {
      const predicates = Object.entries(rule.input).map(([pointer, predicate]) => {
        const [[op, value]] = Object.entries(predicate);
        return `${q(pointer)} = { ${op} = ${q(value)} }`;
      });
      lines.push(`input = { ${predicates.join(", ")} }`);
    }
    lines.push("");
  }
  if (extra) lines.push(extra, "");
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------------------
// The gateway and a client of it.

/**
 * Starts a gateway and connects an SDK client.
 *
 * - transport: "stdio" (the SDK spawns `toolgate mcp-gateway ...`) or "http" (`--listen 127.0.0.1:PORT`,
 *   health-checked, then `http://127.0.0.1:PORT/mcp`).
 * - elicit: a function (request params) => ElicitResult, or null for a client without the elicitation
 *   capability. Every elicitation request's params are pushed to `gateway.elicitations`.
 * - setup: the test's directory (from `prepareGateway`); `flags`: more gateway flags.
 */
export async function startGateway({ setup, transport = "stdio", elicit = null, clientName, flags = [] }) {
  const args = [
    "mcp-gateway",
    "--config",
    setup.configFile,
    "--store",
    "sqlite",
    "--data-dir",
    setup.dataDir,
    "--principal",
    setup.principal,
    ...flags,
  ];
  const gateway = {
    setup,
    transport,
    pid: null,
    url: null,
    elicitations: [],
    log: path.join(setup.dir, `gateway-${transport}-${Date.now()}.log`),
    client: null,
  };

  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: clientName, version: "1.0.0" }, { capabilities });
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      gateway.elicitations.push(request.params);
      return elicit(request.params);
    });
  }
  gateway.client = client;

  if (transport === "stdio") {
    const clientTransport = new StdioClientTransport({
      command: BIN,
      args,
      env: { ...process.env },
      stderr: "pipe",
    });
    clientTransport.stderr.pipe(fs.createWriteStream(gateway.log));
    try {
      await client.connect(clientTransport);
    } finally {
      gateway.pid = clientTransport.pid ?? null;
      if (gateway.pid) live.add(gateway.pid);
    }
  } else {
    let lastError;
    for (let attempt = 1; attempt <= 3 && !gateway.url; attempt++) {
      const port = await freePort();
      const out = fs.openSync(gateway.log, "a");
      const child = spawn(BIN, [...args, "--listen", `127.0.0.1:${port}`], {
        stdio: ["ignore", out, out],
        env: { ...process.env },
      });
      fs.closeSync(out);
      live.add(child.pid);
      let exited = false;
      child.on("exit", () => {
        exited = true;
      });
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline && !exited) {
        try {
          const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
          if (response.status === 200) {
            gateway.url = `http://127.0.0.1:${port}/mcp`;
            gateway.pid = child.pid;
            break;
          }
          lastError = new Error(`/healthz answered ${response.status}`);
        } catch (error) {
          lastError = error;
        }
        await sleep(100);
      }
      if (!gateway.url) await killTree(child.pid);
    }
    if (!gateway.url) {
      throw new Error(`the gateway did not become healthy (${lastError}); log ${gateway.log}:\n${readLog(gateway)}`);
    }
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)));
  }
  return gateway;
}

export function readLog(gateway) {
  try {
    return fs.readFileSync(gateway.log, "utf8");
  } catch {
    return "";
  }
}

/** Closes the client and kills the gateway and everything under it, by PID. */
export async function stopGateway(gateway) {
  if (!gateway) return;
  const tree = gateway.pid ? [gateway.pid, ...descendants(gateway.pid)] : [];
  for (const pid of tree) live.add(pid);
  try {
    await Promise.race([gateway.client.close(), sleep(5000)]);
  } catch {}
  for (const pid of tree) await killTree(pid);
}

/** kill -9 of the gateway process (and, by PID, the upstream servers it had started). */
export async function kill9Gateway(gateway) {
  const children = descendants(gateway.pid);
  process.kill(gateway.pid, "SIGKILL");
  for (let i = 0; i < 50 && alive(gateway.pid); i++) await sleep(100);
  live.delete(gateway.pid);
  for (const pid of children) await killTree(pid, { hard: true });
  try {
    await Promise.race([gateway.client.close(), sleep(2000)]);
  } catch {}
}

/**
 * A test's directory: the filesystem server's root (`fsDir`, empty), the count file, the data dir, the config.
 */
export function prepareGateway({ prefix, principal, rules = [], bumpDelayMs = 0, extra = "" }) {
  const dir = freshDir(prefix);
  const fsDir = path.join(dir, "files");
  const dataDir = path.join(dir, "data");
  fs.mkdirSync(fsDir);
  fs.mkdirSync(dataDir, { mode: 0o700 }); // private, as the store wants it
  const countFile = path.join(dir, "count.txt");
  const configFile = path.join(dir, "gateway.toml");
  fs.writeFileSync(configFile, gatewayConfig({ fsDir, countFile, bumpDelayMs, rules, extra }));
  return { dir, fsDir: fs.realpathSync(fsDir), dataDir, countFile, configFile, principal };
}

/** The count file's lines (one per upstream run of `bump`). */
export function countLines(setup) {
  try {
    return fs.readFileSync(setup.countFile, "utf8").split("\n").filter((line) => line !== "");
  } catch (error) {
    if (error.code === "ENOENT") return [];
    throw error;
  }
}

/** The text of a tool result's first content block. */
export function text(result) {
  return (result.content ?? []).filter((block) => block.type === "text").map((block) => block.text).join("\n");
}

// ---------------------------------------------------------------------------------------------------------
// `toolgate approvals` on the gateway's store.

/** Runs `toolgate approvals SUB --store sqlite --data-dir DIR --as PRINCIPAL ...rest`; resolves to stdout. */
export async function approvalsCli(setup, sub, ...rest) {
  const args = ["approvals", sub, "--store", "sqlite", "--data-dir", setup.dataDir, "--as", setup.principal, ...rest];
  try {
    const { stdout } = await execFileP(BIN, args, { timeout: 30_000, env: { ...process.env } });
    return stdout;
  } catch (error) {
    throw new Error(`toolgate ${args.join(" ")} failed: ${error.message}\nstdout: ${error.stdout}\nstderr: ${error.stderr}`);
  }
}

/** The approvals `approvals list --output jsonl` prints (pending ones unless `--state` is given). */
export async function listApprovals(setup, ...rest) {
  const stdout = await approvalsCli(setup, "list", "--output", "jsonl", ...rest);
  return stdout
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line));
}

/** The tool name of a listed approval. */
export const itemTool = (item) => item.tool;

/** Polls the pending approvals until one matches `predicate`; resolves to it. */
export async function waitForPending(setup, predicate, { timeoutMs = 20_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let seen = [];
  while (Date.now() < deadline) {
    seen = await listApprovals(setup);
    const found = seen.find(predicate);
    if (found) return found;
    await sleep(100);
  }
  throw new Error(`no pending approval matched within ${timeoutMs} ms; pending: ${JSON.stringify(seen)}`);
}

/** A pending approval of the counting server's `bump` with this label. */
export const bumpOf = (label) => (item) => String(itemTool(item)).endsWith("bump") && item.input?.label === label;
