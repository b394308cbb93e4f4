// The servers that scripts/e2e-node-clients.sh started for this run, and their prompt traces.
//
// The script writes a JSON manifest and passes its path in TOOLGATE_E2E_SERVERS:
//   {"phase": "...", "signatureField": false,
//    "scenarios": {"<name>": {"url": "http://127.0.0.1:PORT", "trace": "/path/trace.jsonl", "dir": "/path"}}}
// Every scenario has its own server (started with scenarios/<dir>/<name>.json as its script), its own trace file,
// and its own run directory `dir` (also TOOLGATE_E2E_SERVER_DIR in the server's environment).

import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';

const manifestPath = process.env.TOOLGATE_E2E_SERVERS;

function loadManifest() {
  if (!manifestPath) {
    throw new Error(
      'TOOLGATE_E2E_SERVERS is not set: run the suite with scripts/e2e-node-clients.sh, which starts the servers',
    );
  }
  return JSON.parse(readFileSync(manifestPath, 'utf8'));
}

export const manifest = loadManifest();

/** True when this phase's servers send the AI SDK `signature` field (`--signature-field`). */
export const signatureField = manifest.signatureField === true;

/** The server of one scenario: `{url, trace, dir}`. */
export function server(name) {
  const entry = manifest.scenarios[name];
  assert.ok(entry, `no server was started for scenario "${name}" (phase ${manifest.phase})`);
  return entry;
}

/** Every model call the scenario's server made so far: `[{prompt, tools, toolChoice}]`, oldest first. */
export function traces(name) {
  let text;
  try {
    text = readFileSync(server(name).trace, 'utf8');
  } catch (error) {
    if (error.code === 'ENOENT') return [];
    throw error;
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/** The prompts of every model call so far. */
export function prompts(name) {
  return traces(name).map((line) => line.prompt);
}

/** The prompts of `name` once the trace holds at least `count` (the server writes it from a thread of its own). */
export async function promptsAtLeast(name, count) {
  await waitUntil(() => prompts(name).length >= count, { what: `${count} prompts in the ${name} trace` });
  return prompts(name);
}

/** Resolves when `condition()` is true; rejects after `timeoutMs` with `describe()` in the message. */
export async function waitUntil(condition, { timeoutMs = 10_000, what = 'condition', describe = () => '' } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}. ${describe()}`);
    }
    await sleep(10);
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Parses a server-sent event body into its JSON `data` payloads (without `[DONE]`). */
export function sseData(text) {
  const out = [];
  for (const frame of text.split(/\r?\n\r?\n/)) {
    const data = frame
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data === '' || data === '[DONE]') continue;
    out.push(JSON.parse(data));
  }
  return out;
}
