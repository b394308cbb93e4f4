// Helpers for the out-of-band approval scenarios (scenarios/ui/out-of-band-*.json): the principals of
// scenarios/ui/out-of-band/tokens.json, plain `fetch` calls to the inbox and the stored chats as one of
// them, and the gated MCP tool of scenarios/ui/out-of-band/gated-tool.mjs (its calls and its release).

import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { server, sleep } from './servers.js';

const TOKENS_FILE = new URL('../scenarios/ui/out-of-band/tokens.json', import.meta.url);

/** principal → bearer token, from the tokens file the out-of-band servers were started with. */
const tokens = Object.fromEntries(
  Object.entries(JSON.parse(readFileSync(TOKENS_FILE, 'utf8'))).map(([token, principal]) => [principal, token]),
);

/** The `Authorization` header of a principal. */
export function bearer(principal) {
  const token = tokens[principal];
  if (!token) throw new Error(`no token for ${principal} in ${TOKENS_FILE.pathname}`);
  return { Authorization: `Bearer ${token}` };
}

/** One JSON request as `principal`: `{status, json, text}` (`json` undefined when the body is not JSON). */
export async function call(url, path, { as, method = 'GET', body } = {}) {
  const headers = { ...bearer(as) };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text };
}

/** A vote in the inbox: `POST /api/approvals/{id}` as `principal`. */
export function vote(url, approvalId, as, decision = 'approve', extra = {}) {
  return call(url, `/api/approvals/${encodeURIComponent(approvalId)}`, {
    as,
    method: 'POST',
    body: { decision, ...extra },
  });
}

/** `{status, code}` of a reply, for deepEqual against an expected refusal. */
export function refusal(reply) {
  return { status: reply.status, code: reply.json?.error?.code };
}

/** The stored messages of a chat (`GET /api/chats/{id}` as `principal`). */
export async function storedMessages(url, chatId, as) {
  const reply = await call(url, `/api/chats/${encodeURIComponent(chatId)}`, { as });
  if (reply.status !== 200) throw new Error(`GET /api/chats/${chatId}: ${reply.status} ${reply.text}`);
  return reply.json.messages;
}

/** True once every tool call of the last (assistant) message has an outcome and a text follows them. */
export function isContinued(messages) {
  const last = messages.at(-1);
  if (!last || last.role !== 'assistant') return false;
  const calls = last.parts.filter((part) => typeof part.toolCallId === 'string' && part.state !== undefined);
  const lastCall = last.parts.findLastIndex((part) => typeof part.toolCallId === 'string' && part.state !== undefined);
  return (
    calls.length > 0 &&
    calls.every((part) => part.state.startsWith('output-')) &&
    last.parts.slice(lastCall + 1).some((part) => part.type === 'text')
  );
}

/**
 * Polls `GET /api/chats/{id}` until the server's continuation stored the run (see `isContinued`); the
 * continuation runs on its own after the deciding vote, so nothing else says when it is done.
 */
export async function waitForContinuation(url, chatId, as, { timeoutMs = 10_000 } = {}) {
  let messages = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    messages = await storedMessages(url, chatId, as);
    if (isContinued(messages)) return messages;
    if (Date.now() > deadline) {
      throw new Error(`the server did not continue ${chatId} within ${timeoutMs} ms: ${JSON.stringify(messages)}`);
    }
    await sleep(25);
  }
}

/** The calls the gated MCP tool of a scenario's server received so far (`[{tool, input, at}]`). */
export function gatedToolCalls(name) {
  let text;
  try {
    text = readFileSync(join(server(name).dir, 'tool-calls.jsonl'), 'utf8');
  } catch (error) {
    if (error.code === 'ENOENT') return [];
    throw error;
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/** Lets the gated MCP tool of a scenario's server answer (every call, from now on). */
export function releaseGatedTool(name) {
  appendFileSync(join(server(name).dir, 'release'), 'released\n');
}
