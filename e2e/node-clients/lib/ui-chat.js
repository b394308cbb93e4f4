// The real AI SDK chat client, headless: `AbstractChat` with an in-memory ChatState,
// `DefaultChatTransport` against the server's `/api/chat`, and
// `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses`.
//
// TOOLGATE_E2E_AI_PACKAGE names the installed `ai` alias to use (`ai-v6-strict`, `ai-v6-latest` or `ai-v7`).
// Every request body, HTTP status and raw response body is recorded so tests can look at the wire as well.

import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { sseData, sleep, waitUntil } from './servers.js';

export const aiPackage = process.env.TOOLGATE_E2E_AI_PACKAGE ?? 'ai-v6-latest';
export const ai = await import(aiPackage);
export const aiVersion = JSON.parse(
  readFileSync(new URL(`../node_modules/${aiPackage}/package.json`, import.meta.url), 'utf8'),
).version;

const [aiMajor, , aiPatch] = aiVersion.split('.').map(Number);
/** True from this 6.0.x patch on (and for every later major). */
const since6 = (patch) => aiMajor > 6 || aiPatch >= patch;
/** Chunk schemas reject unknown keys before ai@6.0.231. */
export const strictChunks = !since6(231);
/** The `signature` field exists in chunks and approvals from ai@6.0.202 on. */
export const knowsSignature = since6(202);
/** `addToolApprovalResponse` keeps the approval's `signature` from ai@6.0.221 on. */
export const keepsSignature = since6(221);
/**
 * True when this client's `resumeStream` takes the resumed stream for the whole response message: its first
 * `start` chunk starts the message over (`DefaultChatTransport`'s `resumeStreamIsReplay`, default true; with
 * false, a `start` naming a message id other than the new state's does the same unless the last message has an
 * `approval-responded` part). Older clients (ai@6.0.201) continue the last assistant message with the stream.
 * Found by feature: the transport has `resumeStreamIsReplay` (ai@6.0.326 and ai@7 do).
 */
export const resumeStartsMessageOver = new ai.DefaultChatTransport({}).resumeStreamIsReplay !== undefined;

/** A ChatState kept in memory (what a framework's reactive store does in a browser). */
class MemoryChatState {
  constructor(messages = []) {
    this.status = 'ready';
    this.error = undefined;
    this.messages = messages;
  }

  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };

  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };

  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  };

  snapshot = (value) => structuredClone(value);
}

class NodeChat extends ai.AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new MemoryChatState(messages) });
  }
}

/**
 * One chat against one server, with everything that went over the wire.
 * `requests[i]` is `{method, url, body, status, text}`: the method, the URL, the JSON body POSTed (undefined for
 * the GET of `resumeStream`), the HTTP status and the raw response body.
 * `headers` go with every request (the transport's `headers` option, e.g. `Authorization: Bearer ...`).
 */
export class UiChat {
  constructor({ url, id = `chat-${Math.random().toString(36).slice(2, 10)}`, messages = [], headers }) {
    this.requests = [];
    this.finishes = [];
    this.withoutResponse = 0; // requests that end without a response to finish (a 204 to resumeStream)
    this.errors = [];
    this.pending = [];
    const recordingFetch = async (input, init) => {
      const entry = {
        method: init.method ?? 'GET',
        url: String(input),
        body: init.body === undefined ? undefined : JSON.parse(init.body),
        status: undefined,
        text: undefined,
      };
      this.requests.push(entry);
      const response = await fetch(input, init);
      entry.status = response.status;
      if (!response.body) {
        entry.text = '';
        return response;
      }
      const [forClient, forLog] = response.body.tee();
      this.pending.push(
        new Response(forLog).text().then((text) => {
          entry.text = text;
        }),
      );
      return new Response(forClient, { status: response.status, statusText: response.statusText, headers: response.headers });
    };
    this.chat = new NodeChat({
      id,
      messages,
      transport: new ai.DefaultChatTransport({
        api: `${url}/api/chat`,
        fetch: recordingFetch,
        ...(headers === undefined ? {} : { headers }),
      }),
      sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
      onFinish: (event) => this.finishes.push(event),
      onError: (error) => this.errors.push(error),
    });
  }

  get messages() {
    return this.chat.messages;
  }

  get status() {
    return this.chat.status;
  }

  /** Sends a user message and waits until the chat is idle again. */
  async send(text) {
    await this.chat.sendMessage({ text });
    await this.settle();
  }

  /**
   * The stock `resumeStream()`: `GET {api}/{id}/stream`, then the running response (if any, else 204 and nothing
   * changes) is applied to the last message. Resolves when the response ended.
   */
  async resume() {
    const before = this.requests.length;
    await this.chat.resumeStream();
    await Promise.all(this.pending);
    if (this.requests.length > before && this.requests[before].status === 204) this.withoutResponse += 1;
  }

  /** Answers an approval; the automatic resend (if it fires) is not awaited by the SDK, see `settle`. */
  async answer(approvalId, approved, reason) {
    await this.chat.addToolApprovalResponse({ id: approvalId, approved, ...(reason === undefined ? {} : { reason }) });
  }

  /**
   * Waits until `requests` requests have finished (successfully or not) and the chat is idle,
   * then makes sure no further request starts within `quietMs`.
   */
  async settle({ requests = this.requests.length, quietMs = 100, timeoutMs = 10_000 } = {}) {
    const describe = () =>
      `requests=${this.requests.length} finishes=${this.finishes.length} status=${this.status} error=${this.chat.error?.message}`;
    await waitUntil(
      () =>
        this.finishes.length + this.withoutResponse >= requests && this.status !== 'submitted' && this.status !== 'streaming',
      { timeoutMs, what: `${requests} finished request(s)`, describe },
    );
    await Promise.all(this.pending);
    await sleep(quietMs);
    assert.equal(this.requests.length, requests, `exactly ${requests} request(s) were made. ${describe()}`);
    await Promise.all(this.pending);
  }

  /** The UI message stream chunks of response `index`. */
  chunks(index) {
    const entry = this.requests[index];
    assert.ok(entry, `request ${index} exists`);
    assert.equal(entry.status, 200, `request ${index} succeeded: ${entry.text}`);
    return sseData(entry.text);
  }

  /** Every chunk of every successful response. */
  allChunks() {
    return this.requests.flatMap((entry, index) => (entry.status === 200 ? this.chunks(index) : []));
  }
}

/** The tool parts of a UI message (static `tool-*` and `dynamic-tool`). */
export function toolParts(message) {
  return message.parts.filter((part) => part.type === 'dynamic-tool' || part.type.startsWith('tool-'));
}

/** The tool part of a message for one call. */
export function toolPart(message, toolCallId) {
  const part = toolParts(message).find((p) => p.toolCallId === toolCallId);
  assert.ok(part, `message ${message.id} has a tool part for ${toolCallId}: ${JSON.stringify(message.parts)}`);
  return part;
}

/** toolgate's `data-toolgate-reason` parts (why a call waits or was denied), by call id. */
export function reasons(message) {
  return Object.fromEntries(
    message.parts.filter((part) => part.type === 'data-toolgate-reason').map((part) => [part.id, part.data]),
  );
}

/**
 * A compact view of a message's parts, for deepEqual: `['step-start', 'text:Hi', 'tool-x:call-1:state']`.
 * `data-toolgate-reason` parts are left out here and checked with `reasons`.
 */
export function partSummary(message) {
  return message.parts.filter((part) => part.type !== 'data-toolgate-reason').map((part) => {
    if (part.type === 'text' || part.type === 'reasoning') return `${part.type}:${part.text}`;
    if (part.type === 'dynamic-tool') return `dynamic-tool(${part.toolName}):${part.toolCallId}:${part.state}`;
    if (part.type.startsWith('tool-')) return `${part.type}:${part.toolCallId}:${part.state}`;
    return part.type;
  });
}

// The keys each chunk type may carry in the oldest client we test (ai@6.0.201's strict schemas).
// `signature` on `tool-approval-request` is only allowed when the server was started with --signature-field.
const ALLOWED_CHUNK_KEYS = {
  start: ['messageId', 'messageMetadata'],
  finish: ['finishReason', 'messageMetadata'],
  'start-step': [],
  'finish-step': [],
  abort: ['reason'],
  'message-metadata': ['messageMetadata'],
  error: ['errorText'],
  'text-start': ['id', 'providerMetadata'],
  'text-delta': ['id', 'delta', 'providerMetadata'],
  'text-end': ['id', 'providerMetadata'],
  'reasoning-start': ['id', 'providerMetadata'],
  'reasoning-delta': ['id', 'delta', 'providerMetadata'],
  'reasoning-end': ['id', 'providerMetadata'],
  'tool-input-start': ['toolCallId', 'toolName', 'providerExecuted', 'providerMetadata', 'dynamic', 'title'],
  'tool-input-delta': ['toolCallId', 'inputTextDelta'],
  'tool-input-available': ['toolCallId', 'toolName', 'input', 'providerExecuted', 'providerMetadata', 'dynamic', 'title'],
  'tool-input-error': ['toolCallId', 'toolName', 'input', 'errorText', 'providerExecuted', 'providerMetadata', 'dynamic', 'title'],
  'tool-approval-request': ['approvalId', 'toolCallId'],
  'tool-output-available': ['toolCallId', 'output', 'providerExecuted', 'providerMetadata', 'dynamic', 'preliminary'],
  'tool-output-error': ['toolCallId', 'errorText', 'providerExecuted', 'providerMetadata', 'dynamic'],
  'tool-output-denied': ['toolCallId'],
  // A data chunk (`data-<name>`: id, data, transient), accepted by every client version.
  'data-toolgate-reason': ['id', 'data'],
  'data-toolgate-approval': ['id', 'data'],
};

/** Every chunk uses only the keys the strict (pre-6.0.231) client schemas accept. */
export function assertStrictChunkKeys(chunks, { signatureField }) {
  for (const chunk of chunks) {
    const allowed = ALLOWED_CHUNK_KEYS[chunk.type];
    assert.ok(allowed, `unknown chunk type: ${JSON.stringify(chunk)}`);
    const extra = Object.keys(chunk).filter(
      (key) => key !== 'type' && !allowed.includes(key) && !(signatureField && chunk.type === 'tool-approval-request' && key === 'signature'),
    );
    assert.deepEqual(extra, [], `chunk has keys a strict client rejects: ${JSON.stringify(chunk)}`);
  }
}
