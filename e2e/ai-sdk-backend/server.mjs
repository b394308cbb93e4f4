// A stock Vercel AI SDK v6 chat backend (not toolgate) with a scripted,
// deterministic language model. Rust tests start it on a loopback port to
// prove that the toolgate client can drive an ordinary `useChat` server
// through approve / deny / edit of tool calls.
//
// Routes:
//   POST /api/chat    useChat DefaultChatTransport body -> UI message SSE stream
//   GET  /executions  JSON array of {tool, input} for every tool that ran
//   POST /reset       clears the executions
//   GET  /healthz     200 "ok"
//
// Env: PORT (default 0 = ephemeral). TOOL_APPROVAL_SECRET (optional): when
// set, the SDK signs approval requests and rejects approvals whose signature
// is missing or does not match the tool call.

import http from 'node:http';
import {
  convertToModelMessages,
  safeValidateUIMessages,
  stepCountIs,
  streamText,
  tool,
} from 'ai';
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test';
import { z } from 'zod';

const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** Every tool execution, in order. */
let executions = [];

function record(toolName, input) {
  executions.push({ tool: toolName, input });
}

const tools = {
  delete_file: tool({
    description: 'Delete a file at the given path.',
    inputSchema: z.object({ path: z.string() }),
    needsApproval: true,
    execute: async (input) => {
      record('delete_file', input);
      return { deleted: input.path };
    },
  }),
  send_email: tool({
    description: 'Send an email.',
    inputSchema: z.object({ to: z.string(), subject: z.string() }),
    needsApproval: true,
    execute: async (input) => {
      record('send_email', input);
      return { sent: true, to: input.to };
    },
  }),
  get_weather: tool({
    description: 'Get the weather forecast for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async (input) => {
      record('get_weather', input);
      return { city: input.city, forecast: 'sunny' };
    },
  }),
};

// ---------------------------------------------------------------------------
// Scripted model
// ---------------------------------------------------------------------------

let toolCallCounter = 0;
let textCounter = 0;

function usage(outputTokens) {
  return {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: outputTokens, text: outputTokens, reasoning: undefined },
  };
}

/** Describes one part of a `tool` prompt message for the summary text. */
function describeToolPart(part) {
  if (part.type !== 'tool-result') return null;
  const out = part.output ?? {};
  switch (out.type) {
    case 'execution-denied':
      return `denied: ${part.toolName} (reason: ${out.reason ?? 'none'})`;
    case 'json':
      return `done: ${part.toolName} -> ${JSON.stringify(out.value)}`;
    case 'text':
      return `done: ${part.toolName} -> ${out.value}`;
    case 'error-text':
      return `error: ${part.toolName} -> ${out.value}`;
    case 'error-json':
      return `error: ${part.toolName} -> ${JSON.stringify(out.value)}`;
    default:
      return `result: ${part.toolName} -> ${JSON.stringify(out)}`;
  }
}

function lastUserText(prompt) {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const msg = prompt[i];
    if (msg.role !== 'user') continue;
    return msg.content
      .filter((p) => p.type === 'text')
      .map((p) => p.text)
      .join('')
      .trim();
  }
  return '';
}

/** Splits text into at least two deltas (word-sized when possible). */
function splitDeltas(text) {
  const words = text.match(/\S+\s*|\s+/g) ?? [];
  if (words.length >= 2) return words;
  const mid = Math.max(1, Math.floor(text.length / 2));
  return [text.slice(0, mid), text.slice(mid)];
}

function textParts(text) {
  const id = `txt_${++textCounter}`;
  const deltas = splitDeltas(text);
  return {
    parts: [
      { type: 'text-start', id },
      ...deltas.map((delta) => ({ type: 'text-delta', id, delta })),
      { type: 'text-end', id },
    ],
    finishReason: { unified: 'stop', raw: 'stop' },
    outputTokens: deltas.length,
  };
}

function toolCallParts(calls) {
  return {
    parts: calls.map(([toolName, input]) => ({
      type: 'tool-call',
      toolCallId: `call_${++toolCallCounter}`,
      toolName,
      input: JSON.stringify(input),
    })),
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    outputTokens: calls.length,
  };
}

/** Decides the model's reply from the prompt the SDK passes to doStream. */
function script(prompt) {
  const last = prompt[prompt.length - 1];
  if (last?.role === 'tool') {
    const lines = last.content.map(describeToolPart).filter((l) => l != null);
    return textParts(lines.length > 0 ? lines.join('\n') : 'no tool results');
  }
  const text = lastUserText(prompt);
  let m;
  if ((m = /^delete\s+(\S+)\s+and\s+email\s+(\S+)$/i.exec(text))) {
    return toolCallParts([
      ['delete_file', { path: m[1] }],
      ['send_email', { to: m[2], subject: 'hello' }],
    ]);
  }
  if ((m = /^delete\s+(\S+)$/i.exec(text))) {
    return toolCallParts([['delete_file', { path: m[1] }]]);
  }
  if ((m = /^email\s+(\S+)$/i.exec(text))) {
    return toolCallParts([['send_email', { to: m[1], subject: 'hello' }]]);
  }
  if ((m = /^weather\s+(.+)$/i.exec(text))) {
    return toolCallParts([['get_weather', { city: m[1] }]]);
  }
  return textParts(`echo: ${text}`);
}

const model = new MockLanguageModelV3({
  provider: 'scripted',
  modelId: 'scripted-v3',
  doGenerate: async ({ prompt }) => {
    const { parts, finishReason, outputTokens } = script(prompt);
    const content = [];
    for (const p of parts) {
      if (p.type === 'text-start') content.push({ type: 'text', text: '' });
      else if (p.type === 'text-delta') content[content.length - 1].text += p.delta;
      else if (p.type === 'tool-call') content.push(p);
    }
    return { content, finishReason, usage: usage(outputTokens), warnings: [] };
  },
  doStream: async ({ prompt }) => {
    const { parts, finishReason, outputTokens } = script(prompt);
    return {
      stream: simulateReadableStream({
        chunks: [
          { type: 'stream-start', warnings: [] },
          { type: 'response-metadata', id: `resp_${textCounter}_${toolCallCounter}`, modelId: 'scripted-v3' },
          ...parts,
          { type: 'finish', finishReason, usage: usage(outputTokens) },
        ],
        initialDelayInMs: 0,
        chunkDelayInMs: 2,
      }),
    };
  },
});

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

class BadRequest extends Error {}

function sendJson(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadRequest('request body too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new BadRequest(`invalid JSON: ${e.message}`);
  }
}

async function handleChat(req, res) {
  const body = await readJson(req);
  if (body == null || typeof body !== 'object' || !Array.isArray(body.messages)) {
    throw new BadRequest('body must be an object with a `messages` array');
  }
  const validated = await safeValidateUIMessages({ messages: body.messages, tools });
  if (!validated.success) {
    throw new BadRequest(`invalid messages: ${validated.error.message}`);
  }
  const messages = validated.data;
  let modelMessages;
  try {
    modelMessages = await convertToModelMessages(messages, { tools });
  } catch (e) {
    throw new BadRequest(`cannot convert messages: ${e.message}`);
  }

  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });

  const secret = process.env.TOOL_APPROVAL_SECRET;
  const result = streamText({
    model,
    tools,
    messages: modelMessages,
    stopWhen: stepCountIs(5),
    abortSignal: abort.signal,
    ...(secret ? { experimental_toolApprovalSecret: secret } : {}),
  });
  result.pipeUIMessageStreamToResponse(res, {
    originalMessages: messages,
    onError: (error) => (error instanceof Error ? error.message : String(error)),
  });
}

async function route(req, res) {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const key = `${req.method} ${url.pathname}`;
  switch (key) {
    case 'GET /healthz':
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    case 'GET /executions':
      sendJson(res, 200, executions);
      return;
    case 'POST /reset':
      executions = [];
      sendJson(res, 200, { ok: true });
      return;
    case 'POST /api/chat':
      await handleChat(req, res);
      return;
    default:
      sendJson(res, 404, { error: `not found: ${key}` });
  }
}

const server = http.createServer((req, res) => {
  route(req, res).catch((err) => {
    const status = err instanceof BadRequest ? 400 : 500;
    if (status === 500) console.error('request failed:', err);
    if (res.headersSent) {
      res.destroy();
    } else {
      sendJson(res, status, { error: err?.message ?? String(err) });
    }
  });
});

server.listen(Number(process.env.PORT ?? 0) || 0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => process.exit(0));
}
