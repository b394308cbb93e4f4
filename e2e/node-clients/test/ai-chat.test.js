// The AI SDK v6 UI chat client (`AbstractChat` + `DefaultChatTransport` +
// `lastAssistantMessageIsCompleteWithApprovalResponses`) against `POST /api/chat`.
// Run once per installed `ai` version (TOOLGATE_E2E_AI_PACKAGE) and server mode (--signature-field or not).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { server, promptsAtLeast, signatureField } from '../lib/servers.js';
import { assertCleanPrompt, roles, toolResults, toolCalls, userText } from '../lib/prompt.js';
import {
  UiChat,
  aiVersion,
  assertStrictChunkKeys,
  keepsSignature,
  knowsSignature,
  partSummary,
  reasons,
  strictChunks,
  toolPart,
} from '../lib/ui-chat.js';

const mode = signatureField ? 'with --signature-field' : 'default server';
const WEATHER = { city: 'Paris', temperatureC: 21, condition: 'sunny' };

/** A signed toolgate approval id: `apr_<nonce>.<signature>`. */
function assertSignedApprovalId(id) {
  assert.match(id, /^apr_[^.]+\.[^.]+$/, `a signed approval id: ${id}`);
}

/** The approval object the client shows while waiting, with the signature field when the server sends it. */
function assertRequestedApproval(part) {
  assert.equal(part.state, 'approval-requested');
  assertSignedApprovalId(part.approval.id);
  const expected = { id: part.approval.id };
  if (signatureField) {
    assert.equal(typeof part.approval.signature, 'string', 'the signature field arrived');
    expected.signature = part.approval.signature;
  }
  assert.deepEqual(plain(part.approval), expected);
}

/** A value as it goes over the wire (keys holding `undefined` dropped, e.g. `reason` after an approval without one). */
function plain(value) {
  return JSON.parse(JSON.stringify(value));
}

/** The approval object after the person answered and the server acted. */
function expectedAnswered(requested, approved, reason) {
  const approval = { id: requested.id, approved };
  if (reason !== undefined) approval.reason = reason;
  if (signatureField && keepsSignature) approval.signature = requested.signature;
  return approval;
}

/** Checks that hold for every finished conversation of this file. */
function assertWire(chat) {
  assertStrictChunkKeys(chat.allChunks(), { signatureField });
  for (const entry of chat.requests) {
    assert.equal(entry.body.trigger, 'submit-message');
  }
}

/** A continuation extends the last assistant message: same id, outputs before the first step. */
function assertContinuation(chat, index, { assistantId, outputs }) {
  const body = chat.requests[index].body;
  assert.equal(body.messageId, assistantId, 'the continuation names the assistant message');
  assert.equal(body.messages.at(-1).id, assistantId);
  const chunks = chat.chunks(index);
  assert.deepEqual(chunks[0], { type: 'start', messageId: assistantId }, 'start reuses the continued message id');
  const firstStep = chunks.findIndex((c) => c.type === 'start-step');
  const before = chunks
    .slice(1, firstStep)
    .filter((c) => c.type !== 'data-toolgate-reason')
    .map((c) => `${c.type}:${c.toolCallId}`);
  assert.deepEqual(before, outputs, 'the pre-resolution outputs come before the first start-step');
}

describe(`ai@${aiVersion} UI chat against /api/chat (${mode})`, () => {
  test('approve: the tool runs, the model sees its result, one assistant message', async () => {
    const chat = new UiChat({ url: server('approve').url });
    await chat.send('delete notes.txt');
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    const assistant = chat.messages[1];
    assert.deepEqual(partSummary(assistant), [
      'step-start',
      'text:I will delete notes.txt.',
      'tool-delete_file:call-del-1:approval-requested',
    ]);
    const requested = toolPart(assistant, 'call-del-1');
    assert.deepEqual(requested.input, { path: 'notes.txt' });
    assertRequestedApproval(requested);
    assert.deepEqual(
      reasons(assistant)['call-del-1'],
      { toolCallId: 'call-del-1', decision: 'ask', reason: 'tool `delete_file` requires approval', approvalId: requested.approval.id },
      'the client keeps why the call waits as a data part',
    );
    assert.equal((await promptsAtLeast('approve', 1)).length, 1);

    await chat.answer(requested.approval.id, true);
    await chat.settle({ requests: 2 });

    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant'], 'no duplicated assistant message');
    const final = chat.messages[1];
    assert.equal(final.id, assistant.id);
    assert.deepEqual(partSummary(final), [
      'step-start',
      'text:I will delete notes.txt.',
      'tool-delete_file:call-del-1:output-available',
      'step-start',
      'text:notes.txt is deleted.',
    ]);
    const done = toolPart(final, 'call-del-1');
    assert.deepEqual(done.output, { deleted: 'notes.txt' });
    assert.deepEqual(plain(done.approval), expectedAnswered(requested.approval, true));

    const sent = toolPart(chat.requests[1].body.messages[1], 'call-del-1');
    assert.equal(sent.state, 'approval-responded');
    assert.deepEqual(plain(sent.approval), expectedAnswered(requested.approval, true));
    assertContinuation(chat, 1, { assistantId: assistant.id, outputs: ['tool-output-available:call-del-1'] });
    assertWire(chat);

    const [first, second] = await promptsAtLeast('approve', 2);
    assert.deepEqual(first, [{ role: 'user', content: [{ type: 'text', text: 'delete notes.txt' }] }]);
    assertCleanPrompt(second);
    assert.deepEqual(roles(second), ['user', 'assistant', 'tool']);
    assert.deepEqual(second[2].content, [
      {
        type: 'tool-result',
        toolCallId: 'call-del-1',
        toolName: 'delete_file',
        output: { type: 'json', value: { deleted: 'notes.txt' } },
      },
    ]);
  });

  test('sub-agent: a depth-2 approval is a part of the root message, answered unchanged', async () => {
    const chat = new UiChat({ url: server('subagent').url });
    await chat.send('tidy up');
    const assistant = chat.messages[1];
    const nested = toolPart(assistant, 'call-m/call-j/call-d');
    assert.equal(nested.state, 'approval-requested');
    assert.equal(nested.toolName, 'delete_file');
    assert.deepEqual(nested.input, { path: 'notes.txt' });
    assert.deepEqual(
      nested.callProviderMetadata.toolgate.subAgent.lineage,
      [{ agent: 'manager', toolCallId: 'call-m' }, { agent: 'janitor', toolCallId: 'call-j' }],
    );
    assert.equal(toolPart(assistant, 'call-m').output.status, 'awaiting-approval', 'the agent shows what it waits for');

    await chat.answer(nested.approval.id, true);
    await chat.settle({ requests: 2 });

    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    const manager = toolPart(chat.messages[1], 'call-m');
    assert.equal(manager.state, 'output-available');
    assert.equal(manager.output, 'The janitor deleted notes.txt.');
    assert.ok(!manager.preliminary, 'the answer replaced the progress');
    assert.ok(partSummary(chat.messages[1]).includes('text:All tidy.'));
    assertWire(chat);
  });

  test('deny with a reason: execution-denied with the reason reaches the model', async () => {
    const chat = new UiChat({ url: server('deny').url });
    await chat.send('delete notes.txt');
    const requested = toolPart(chat.messages[1], 'call-del-1');
    assertRequestedApproval(requested);

    await chat.answer(requested.approval.id, false, 'keep it, it is my diary');
    await chat.settle({ requests: 2 });

    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    assert.deepEqual(partSummary(chat.messages[1]), [
      'step-start',
      'text:I will delete notes.txt.',
      'tool-delete_file:call-del-1:output-denied',
      'step-start',
      'text:Understood, notes.txt stays.',
    ]);
    const denied = toolPart(chat.messages[1], 'call-del-1');
    assert.equal(denied.output, undefined);
    assert.deepEqual(plain(denied.approval), expectedAnswered(requested.approval, false, 'keep it, it is my diary'));
    assertContinuation(chat, 1, { assistantId: chat.messages[1].id, outputs: ['tool-output-denied:call-del-1'] });
    assertWire(chat);

    const all = await promptsAtLeast('deny', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, {
      type: 'execution-denied',
      reason: 'keep it, it is my diary',
    });
  });

  test('mixed batch: get_weather runs at once, delete_file waits for the person', async () => {
    const chat = new UiChat({ url: server('mixed-batch').url });
    await chat.send('weather in Paris, and delete old.log');
    const assistant = chat.messages[1];
    assert.deepEqual(partSummary(assistant), [
      'step-start',
      'tool-get_weather:call-weather-1:output-available',
      'tool-delete_file:call-del-1:approval-requested',
    ]);
    const weather = toolPart(assistant, 'call-weather-1');
    assert.deepEqual(weather.output, WEATHER);
    assert.equal(weather.approval, undefined);
    const requested = toolPart(assistant, 'call-del-1');
    assertRequestedApproval(requested);
    assert.equal((await promptsAtLeast('mixed-batch', 1)).length, 1, 'the step stopped at the approval');

    await chat.answer(requested.approval.id, true);
    await chat.settle({ requests: 2 });

    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    assert.deepEqual(partSummary(chat.messages[1]), [
      'step-start',
      'tool-get_weather:call-weather-1:output-available',
      'tool-delete_file:call-del-1:output-available',
      'step-start',
      'text:Paris is sunny and old.log is gone.',
    ]);
    assert.deepEqual(toolPart(chat.messages[1], 'call-del-1').output, { deleted: 'old.log' });
    // Only the approved call runs on the continuation; the weather result is already in the history.
    assertContinuation(chat, 1, { assistantId: assistant.id, outputs: ['tool-output-available:call-del-1'] });
    assertWire(chat);

    const all = await promptsAtLeast('mixed-batch', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(roles(all[1]), ['user', 'assistant', 'tool']);
    assert.deepEqual(
      all[1][2].content.map((p) => [p.type, p.toolCallId]),
      [
        ['tool-result', 'call-weather-1'],
        ['tool-result', 'call-del-1'],
      ],
    );
    assert.deepEqual(toolResults(all[1])['call-weather-1'].output, { type: 'json', value: WEATHER });
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, { type: 'json', value: { deleted: 'old.log' } });
  });

  test('two approvals in one step: the resend waits for both answers (approve one, deny one)', async () => {
    const chat = new UiChat({ url: server('two-approvals').url });
    await chat.send('delete a.txt and send Bob 5000');
    const assistant = chat.messages[1];
    assert.deepEqual(partSummary(assistant), [
      'step-start',
      'tool-delete_file:call-del-1:approval-requested',
      'tool-transfer_money:call-pay-1:approval-requested',
    ]);
    const del = toolPart(assistant, 'call-del-1');
    const pay = toolPart(assistant, 'call-pay-1');
    assertRequestedApproval(del);
    assertRequestedApproval(pay);
    assert.notEqual(del.approval.id, pay.approval.id);

    await chat.answer(del.approval.id, true);
    await chat.settle({ requests: 1, quietMs: 300 }); // must NOT send: one approval is still open
    assert.equal(toolPart(chat.messages[1], 'call-del-1').state, 'approval-responded');
    assert.equal(toolPart(chat.messages[1], 'call-pay-1').state, 'approval-requested');

    await chat.answer(pay.approval.id, false, 'too much');
    await chat.settle({ requests: 2 });

    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    assert.deepEqual(partSummary(chat.messages[1]), [
      'step-start',
      'tool-delete_file:call-del-1:output-available',
      'tool-transfer_money:call-pay-1:output-denied',
      'step-start',
      'text:a.txt is deleted; the transfer was refused.',
    ]);
    assert.deepEqual(plain(toolPart(chat.messages[1], 'call-pay-1').approval), expectedAnswered(pay.approval, false, 'too much'));
    const sent = chat.requests[1].body.messages[1];
    assert.deepEqual(
      [toolPart(sent, 'call-del-1').state, toolPart(sent, 'call-pay-1').state],
      ['approval-responded', 'approval-responded'],
    );
    const outputs = chat
      .chunks(1)
      .slice(1, chat.chunks(1).findIndex((c) => c.type === 'start-step'))
      .filter((c) => c.type !== 'data-toolgate-reason')
      .map((c) => `${c.type}:${c.toolCallId}`)
      .sort();
    assert.deepEqual(outputs, ['tool-output-available:call-del-1', 'tool-output-denied:call-pay-1']);
    assert.equal(reasons(chat.messages[1])['call-pay-1'].reason, 'too much', "the person's reason is kept with the call");
    assertWire(chat);

    const all = await promptsAtLeast('two-approvals', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    const results = toolResults(all[1]);
    assert.deepEqual(results['call-del-1'].output, { type: 'json', value: { deleted: 'a.txt' } });
    assert.deepEqual(results['call-pay-1'].output, { type: 'execution-denied', reason: 'too much' });
  });

  test('chained approvals: continuation 1 asks again, continuation 2 finishes', async () => {
    const chat = new UiChat({ url: server('chained').url });
    await chat.send('delete first.txt, then second.txt');
    const assistantId = chat.messages[1].id;
    const first = toolPart(chat.messages[1], 'call-del-1');
    assertRequestedApproval(first);

    await chat.answer(first.approval.id, true);
    await chat.settle({ requests: 2 });
    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    assert.equal(chat.messages[1].id, assistantId);
    assert.deepEqual(partSummary(chat.messages[1]), [
      'step-start',
      'tool-delete_file:call-del-1:output-available',
      'step-start',
      'text:Now the second file.',
      'tool-delete_file:call-del-2:approval-requested',
    ]);
    const second = toolPart(chat.messages[1], 'call-del-2');
    assertRequestedApproval(second);
    assert.notEqual(second.approval.id, first.approval.id);
    assertContinuation(chat, 1, { assistantId, outputs: ['tool-output-available:call-del-1'] });

    await chat.answer(second.approval.id, true);
    await chat.settle({ requests: 3 });
    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant'], 'still one assistant message');
    assert.equal(chat.messages[1].id, assistantId);
    assert.deepEqual(partSummary(chat.messages[1]), [
      'step-start',
      'tool-delete_file:call-del-1:output-available',
      'step-start',
      'text:Now the second file.',
      'tool-delete_file:call-del-2:output-available',
      'step-start',
      'text:Both files are deleted.',
    ]);
    assert.deepEqual(toolPart(chat.messages[1], 'call-del-2').output, { deleted: 'second.txt' });
    // call-del-1 already has a result: it must not run again.
    assertContinuation(chat, 2, { assistantId, outputs: ['tool-output-available:call-del-2'] });
    assertWire(chat);

    const all = await promptsAtLeast('chained', 3);
    assert.equal(all.length, 3);
    all.forEach((prompt) => assertCleanPrompt(prompt));
    assert.deepEqual(roles(all[2]), ['user', 'assistant', 'tool', 'assistant', 'tool']);
    assert.deepEqual(toolCalls(all[2]).map((c) => c.toolCallId), ['call-del-1', 'call-del-2']);
    assert.deepEqual(toolResults(all[2])['call-del-1'].output, { type: 'json', value: { deleted: 'first.txt' } });
    assert.deepEqual(toolResults(all[2])['call-del-2'].output, { type: 'json', value: { deleted: 'second.txt' } });
  });

  const mcp = {};
  test('provider-executed (MCP-style) approval: forwarded to the provider, provider result shown', async () => {
    const chat = new UiChat({ url: server('provider-mcp').url });
    await chat.send('shorten https://example.com/long');
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    const requested = toolPart(chat.messages[1], 'mcp-call-1');
    mcp.firstTurnPart = requested;
    assert.equal(requested.providerExecuted, true);
    assert.equal(requested.state, 'approval-requested');
    assert.deepEqual(requested.input, { url: 'https://example.com/long' });
    assert.deepEqual(plain(requested.approval), { id: 'mcpr_1' }, 'the provider approval id, unsigned and untouched');

    await chat.answer('mcpr_1', true);
    await chat.settle({ requests: 2 });

    assert.equal(chat.status, 'ready', chat.chat.error?.message);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
    const sent = toolPart(chat.requests[1].body.messages[1], 'mcp-call-1');
    assert.equal(sent.state, 'approval-responded');
    assert.equal(sent.providerExecuted, true);
    const done = toolPart(chat.messages[1], 'mcp-call-1');
    assert.equal(done.state, 'output-available');
    assert.deepEqual(done.output, { shortUrl: 'https://sho.rt/abc' });
    assert.deepEqual(plain(done.approval), { id: 'mcpr_1', approved: true });
    assert.deepEqual(chat.messages[1].parts.filter((p) => p.type === 'text').map((p) => p.text), [
      'Your short link is https://sho.rt/abc.',
    ]);
    const output = chat.chunks(1).find((c) => c.type === 'tool-output-available');
    assert.equal(output.providerExecuted, true);
    assertWire(chat);

    const all = await promptsAtLeast('provider-mcp', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1], { providerApprovalIds: ['mcpr_1'] });
    assert.deepEqual(roles(all[1]), ['user', 'assistant', 'tool']);
    assert.deepEqual(all[1][1].content, [
      {
        type: 'tool-call',
        toolCallId: 'mcp-call-1',
        toolName: 'mcp.create_short_url',
        input: { url: 'https://example.com/long' },
        providerExecuted: true,
      },
    ]);
    const forwarded = all[1][2].content;
    assert.equal(forwarded.length, 1);
    assert.equal(forwarded[0].type, 'tool-approval-response');
    assert.equal(forwarded[0].approvalId, 'mcpr_1');
    assert.equal(forwarded[0].approved, true);
    assert.equal(forwarded[0].providerExecuted, true);
  });

  test('provider-executed (MCP-style) call: the client shows a dynamic-tool part', () => {
    // An MCP tool is not in the client's (or the server's) toolkit: the AI SDK marks such calls dynamic
    // (`dynamic: true` on tool-input-start/-available), so clients render them as `dynamic-tool`.
    const part = mcp.firstTurnPart;
    assert.ok(part, 'the previous test got as far as the first turn');
    assert.equal(
      part.type,
      'dynamic-tool',
      `KNOWN SERVER BUG (see the e2e report): provider-executed calls to tools outside the toolkit are sent without ` +
        `dynamic:true, so the client made a static part: ${JSON.stringify(part)}`,
    );
    assert.equal(part.toolName, 'mcp.create_short_url');
  });

  test('reload: a new chat from the returned messages continues, the server accepts the whole history', async () => {
    const url = server('reload').url;
    const first = new UiChat({ url, id: 'chat-reload' });
    await first.send('delete notes.txt');
    await first.answer(toolPart(first.messages[1], 'call-del-1').approval.id, true);
    await first.settle({ requests: 2 });
    assert.equal(first.status, 'ready', first.chat.error?.message);
    const saved = JSON.parse(JSON.stringify(first.messages)); // as an app would persist and load them

    const reloaded = new UiChat({ url, id: 'chat-reload', messages: saved });
    await reloaded.send('What is the weather in Paris?');
    assert.equal(reloaded.status, 'ready', reloaded.chat.error?.message);
    assert.deepEqual(reloaded.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.deepEqual(reloaded.messages[1], saved[1], 'the old assistant message is untouched');
    assert.notEqual(reloaded.messages[3].id, saved[1].id, 'a new assistant message');
    assert.deepEqual(partSummary(reloaded.messages[3]), [
      'step-start',
      'tool-get_weather:call-weather-1:output-available',
      'step-start',
      'text:It is sunny in Paris.',
    ]);
    const body = reloaded.requests[0].body;
    assert.equal(body.messages.length, 3, 'the whole history was sent');
    const chunks = reloaded.chunks(0);
    assert.ok(!chunks.some((c) => c.toolCallId === 'call-del-1'), 'the old approved call is not run again');
    assert.ok(chunks[0].type === 'start' && chunks[0].messageId !== saved[1].id);
    assertWire(reloaded);

    const all = await promptsAtLeast('reload', 4);
    assert.equal(all.length, 4, 'two calls for the first chat, two (tool step + answer) after the reload');
    all.forEach((prompt) => assertCleanPrompt(prompt));
    const last = all[3];
    assert.deepEqual(roles(last), ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant', 'tool']);
    assert.equal(userText(last[4]), 'What is the weather in Paris?');
    assert.deepEqual(toolResults(last)['call-del-1'].output, { type: 'json', value: { deleted: 'notes.txt' } });
    assert.deepEqual(toolResults(last)['call-weather-1'].output, { type: 'json', value: WEATHER });
  });

  test('tampered approval (input changed in chat.messages before the resend): HTTP 400, client error, no model call', async () => {
    const chat = new UiChat({ url: server('tamper').url });
    await chat.send('delete notes.txt');
    const requested = toolPart(chat.messages[1], 'call-del-1');
    assertRequestedApproval(requested);

    // The person's browser state is edited: same approval, different file.
    const edited = structuredClone(chat.messages);
    toolPart(edited[1], 'call-del-1').input = { path: '/etc/passwd' };
    chat.chat.messages = edited;
    await chat.answer(requested.approval.id, true);
    await chat.settle({ requests: 2 });

    assert.equal(chat.requests[1].status, 400);
    assert.equal(toolPart(chat.requests[1].body.messages[1], 'call-del-1').input.path, '/etc/passwd');
    // The server keeps the conversation (the default SQLite store): a changed input is not the call the
    // model made, so the history is refused before any signature is looked at.
    const reply = JSON.parse(chat.requests[1].text);
    assert.equal(reply.error.code, 'history_mismatch', chat.requests[1].text);
    assert.match(reply.error.message, /input differs/);
    assert.equal(chat.status, 'error');
    assert.equal(chat.errors.length, 1, 'onError was called once');
    assert.match(chat.chat.error.message, /history_mismatch/);
    assert.equal(toolPart(chat.messages[1], 'call-del-1').state, 'approval-responded', 'nothing ran');
    assert.equal((await promptsAtLeast('tamper', 1)).length, 1, 'the model was not called again');
  });

  test(`unknown chunk keys: ${strictChunks ? 'this strict client rejects' : 'this client accepts'} the signature field`, async () => {
    // The probe server always runs with --signature-field. A strict client (< 6.0.231) that predates the field
    // (< 6.0.202) must fail with a type validation error: this shows the other scenarios would catch any unknown key.
    const chat = new UiChat({ url: server('signature-probe').url });
    await chat.chat.sendMessage({ text: 'delete notes.txt' });
    await chat.settle({ requests: 1 });
    if (strictChunks && !knowsSignature) {
      assert.equal(chat.status, 'error');
      assert.equal(chat.errors.length, 1);
      const error = chat.errors[0];
      assert.ok(
        error.name === 'AI_TypeValidationError' || /Type validation failed/.test(error.message),
        `${error.name}: ${error.message}`,
      );
      assert.match(error.message, /signature/);
    } else {
      assert.equal(chat.status, 'ready', chat.chat.error?.message);
      const part = toolPart(chat.messages[1], 'call-del-1');
      assert.equal(part.state, 'approval-requested');
      assert.equal(typeof part.approval.signature, 'string');
      await chat.answer(part.approval.id, true);
      await chat.settle({ requests: 2 });
      assert.equal(chat.status, 'ready', chat.chat.error?.message);
      assert.equal(toolPart(chat.messages[1], 'call-del-1').state, 'output-available');
    }
  });
});
