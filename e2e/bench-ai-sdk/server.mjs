// The Vercel AI SDK side of `scripts/bench-vs-ai-sdk.sh`: a stock `ai@6` chat
// backend, written the way the AI SDK's docs write one, so toolgate can be
// measured against it with the same bodies and the same scripted model.
//
//   POST /api/chat   `DefaultChatTransport` body -> UI message stream (SSE)
//   GET  /healthz    200 "ok"
//
// What a request does, as in any `useChat` backend: `convertToModelMessages`
// of the body's UI messages, `streamText` with the tools, and the result's UI
// message stream (`pipeUIMessageStreamToResponse`, the Node `http` form of
// `toUIMessageStreamResponse`) with `originalMessages`. An approval
// continuation therefore runs the approved call first (the SDK's
// pre-resolution) and then one model step.
//
// The tools are toolgate's demo tools (crates/toolgate/src/demo.rs) with the
// same semantics: `get_weather` runs without approval, `delete_file` always
// needs one, `transfer_money` needs one above 1000, `ask_user` is
// client-executed (no `execute`).
//
// The model is scripted: every call answers with the text "Done." and
// finishes with `stop`, at once (no simulated delay), like toolgate's
// `--model script:FILE` with a one-turn script.
//
// Env: PORT (default 0 = ephemeral). Prints `listening <port>` on stdout once
// it accepts connections. VALIDATE=1 also runs `validateUIMessages` on the
// body first (the AI SDK's recommendation when messages hold tool parts);
// off by default, as in the stock route handler.

import http from 'node:http';
import { convertToModelMessages, stepCountIs, streamText, tool, validateUIMessages } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

const TRANSFER_APPROVAL_THRESHOLD = 1000;

const tools = {
  get_weather: tool({
    description: 'Get the current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, temperatureC: 21, condition: 'sunny' }),
  }),
  delete_file: tool({
    description: 'Delete a file in the working directory. Always asks a person first.',
    inputSchema: z.object({ path: z.string() }),
    needsApproval: true,
    execute: async ({ path }) => ({ deleted: path }),
  }),
  transfer_money: tool({
    description: 'Transfer money to someone. Amounts over 1000 need a person\'s approval.',
    inputSchema: z.object({ amount: z.number().positive(), to: z.string().min(1) }),
    needsApproval: async ({ amount }) => amount > TRANSFER_APPROVAL_THRESHOLD,
    execute: async ({ amount, to }) => ({ transferred: amount, to }),
  }),
  ask_user: tool({
    description: 'Ask the person a question.',
    inputSchema: z.object({ question: z.string() }),
    // No execute: the client answers.
  }),
};

const ANSWER = 'Done.';
let responses = 0;

/** The model's stream for one call: one text block and `stop`, with no delay. */
function answerStream() {
  const id = `txt_${++responses}`;
  const chunks = [
    { type: 'stream-start', warnings: [] },
    { type: 'response-metadata', id: `resp_${responses}`, modelId: 'scripted-v3' },
    { type: 'text-start', id },
    { type: 'text-delta', id, delta: ANSWER },
    { type: 'text-end', id },
    {
      type: 'finish',
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 1, text: 1, reasoning: undefined },
      },
    },
  ];
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

const model = new MockLanguageModelV3({
  provider: 'scripted',
  modelId: 'scripted-v3',
  doStream: async () => {
    // The mock keeps every call's options (the whole prompt) for tests to
    // inspect; a server under load must not, or its memory grows without end.
    model.doStreamCalls.length = 0;
    return { stream: answerStream() };
  },
  doGenerate: async () => {
    model.doGenerateCalls.length = 0;
    return {
      content: [{ type: 'text', text: ANSWER }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: {
        inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 1, text: 1, reasoning: undefined },
      },
      warnings: [],
    };
  },
});

class BadRequest extends Error {}

function sendJson(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (e) {
    throw new BadRequest(`invalid JSON: ${e.message}`);
  }
}

async function chat(req, res) {
  const body = await readJson(req);
  let messages = body?.messages;
  if (!Array.isArray(messages)) throw new BadRequest('body must be an object with a `messages` array');
  if (process.env.VALIDATE === '1') messages = await validateUIMessages({ messages, tools });
  const result = streamText({
    model,
    tools,
    messages: await convertToModelMessages(messages, { tools }),
    stopWhen: stepCountIs(5),
  });
  result.pipeUIMessageStreamToResponse(res, {
    originalMessages: messages,
    onError: (error) => (error instanceof Error ? error.message : String(error)),
  });
}

async function route(req, res) {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST' && path === '/api/chat') return chat(req, res);
  if (req.method === 'GET' && path === '/healthz') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
    return;
  }
  sendJson(res, 404, { error: `not found: ${req.method} ${path}` });
}

const server = http.createServer((req, res) => {
  route(req, res).catch((err) => {
    const status = err instanceof BadRequest ? 400 : 500;
    if (status === 500) console.error('request failed:', err);
    if (res.headersSent) res.destroy();
    else sendJson(res, status, { error: err?.message ?? String(err) });
  });
});
// Keep-alive connections from the load generator stay open between requests.
server.keepAliveTimeout = 60_000;

server.listen(Number(process.env.PORT ?? 0) || 0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
