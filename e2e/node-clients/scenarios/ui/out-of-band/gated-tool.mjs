// A minimal MCP stdio server (JSON-RPC lines on stdin/stdout) with one tool, `archive_file {path}`, that
// waits for the test before it answers: each call is appended to $TOOLGATE_E2E_SERVER_DIR/tool-calls.jsonl,
// then the call waits until the file $TOOLGATE_E2E_SERVER_DIR/release exists (at most RELEASE_TIMEOUT_MS,
// so a failed test never hangs the phase), then answers `{"archived": path}` as structured content.
// scripts/e2e-node-clients.sh sets TOOLGATE_E2E_SERVER_DIR for every server it starts; toolgate serve
// passes its environment on to the stdio servers of its --config.

import { appendFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const DIR = process.env.TOOLGATE_E2E_SERVER_DIR;
const RELEASE_TIMEOUT_MS = 30_000;

const TOOL = {
  name: 'archive_file',
  description: 'Archive a file (moves it to cold storage).',
  inputSchema: {
    type: 'object',
    properties: { path: { type: 'string', description: 'The file to archive.' } },
    required: ['path'],
    additionalProperties: false,
  },
};

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function released() {
  const deadline = Date.now() + RELEASE_TIMEOUT_MS;
  while (DIR && !existsSync(join(DIR, 'release')) && Date.now() < deadline) {
    await sleep(10);
  }
}

async function call(id, params) {
  const args = params.arguments ?? {};
  if (params.name !== 'archive_file') {
    send({ jsonrpc: '2.0', id, error: { code: -32602, message: `unknown tool ${params.name}` } });
    return;
  }
  if (DIR) appendFileSync(join(DIR, 'tool-calls.jsonl'), `${JSON.stringify({ tool: params.name, input: args, at: Date.now() })}\n`);
  await released();
  const output = { archived: args.path };
  send({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: JSON.stringify(output) }], structuredContent: output } });
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line.trim() === '') return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  const { id, method, params = {} } = message;
  if (id === undefined || id === null) return; // a notification
  switch (method) {
    case 'initialize':
      send({
        jsonrpc: '2.0',
        id,
        result: {
          protocolVersion: params.protocolVersion ?? '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 'toolgate-e2e-gated-tool', version: '1.0.0' },
        },
      });
      break;
    case 'tools/list':
      send({ jsonrpc: '2.0', id, result: { tools: [TOOL] } });
      break;
    case 'tools/call':
      call(id, params);
      break;
    case 'ping':
      send({ jsonrpc: '2.0', id, result: {} });
      break;
    default:
      send({ jsonrpc: '2.0', id, error: { code: -32601, message: `no method ${method}` } });
  }
});
lines.on('close', () => process.exit(0));
