// Out-of-band approvals with the stock AI SDK chat client: the requester's client gets the approval request and
// goes away; the approval is decided in the inbox (`POST /api/approvals/{id}`), not in the chat; the server
// continues the run by itself (runs the call, calls the model, stores the chat); a new stock client for the
// requester picks it up with `resumeStream()` (`GET /api/chat/{id}/stream`, while the continuation runs) or
// from `GET /api/chats/{id}` (once it is stored).
//
// Scenarios (scenarios/ui/out-of-band-*.json, fixtures in scenarios/ui/out-of-band/):
// - out-of-band-quorum: `ops__archive_file` (an MCP tool, gated-tool.mjs, that waits until the test releases it)
//   is routed to `group:finance` (bob, carol) with a quorum of 2; alice asks. The tool waiting keeps the server's
//   continuation running while alice's new client reconnects, so `resumeStream` attaches mid-run every time.
//   Two tests: alice's new client resumes the running continuation (newer clients start the resumed message over
//   at its first `start` chunk: the server's resumable stream of a continuation replays the message as it stood
//   first), or loads the stored chat once the run is over.
// - out-of-band-inbox: a plain `ask` rule on `delete_file`; alice decides her own approval in the inbox.
// Both servers take bearer tokens (scenarios/ui/out-of-band/tokens.json).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { server, prompts, promptsAtLeast, signatureField, sleep, waitUntil } from '../lib/servers.js';
import { assertCleanPrompt, roles, toolResults, userText } from '../lib/prompt.js';
import {
  UiChat,
  aiVersion,
  assertStrictChunkKeys,
  partSummary,
  reasons,
  resumeStartsMessageOver,
  toolPart,
} from '../lib/ui-chat.js';
import {
  bearer,
  call,
  gatedToolCalls,
  refusal,
  releaseGatedTool,
  storedMessages,
  vote,
  waitForContinuation,
} from '../lib/out-of-band.js';

const mode = signatureField ? 'with --signature-field' : 'default server';
const QUORUM = 'out-of-band-quorum';
const INBOX = 'out-of-band-inbox';
const uniqueId = (prefix) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

/** The prompts of one chat of the quorum server: those whose first message is the chat's own user text. */
function chatPrompts(text) {
  return prompts(QUORUM).filter((prompt) => prompt[0]?.role === 'user' && userText(prompt[0]) === text);
}

/** The prompts of one chat once there are at least `count` (the trace is written from a thread of its own). */
async function chatPromptsAtLeast(text, count) {
  await waitUntil(() => chatPrompts(text).length >= count, { what: `${count} prompts of "${text}"` });
  return chatPrompts(text);
}

/** A value as it goes over the wire (keys holding `undefined` dropped). */
function plain(value) {
  return JSON.parse(JSON.stringify(value));
}

/** Resolves with `promise`, or rejects after `ms` naming `what`. */
async function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `GET /api/chat/{id}/stream` as `principal` when nothing runs: 204, no body. */
async function assertNothingToResume(url, chatId, as) {
  const reply = await call(url, `/api/chat/${encodeURIComponent(chatId)}/stream`, { as });
  assert.equal(reply.status, 204, `nothing is running for ${chatId}: ${reply.text}`);
}

/** The `data-toolgate-approval` part of a message for one approval. */
function approvalPart(message, approvalId) {
  const part = message.parts.find((p) => p.type === 'data-toolgate-approval' && p.id === approvalId);
  assert.ok(part, `message ${message.id} reports approval ${approvalId}: ${JSON.stringify(message.parts)}`);
  return part.data;
}

/** A stored approval after the decision: approved, with the signature field when the server sends it. */
function assertStoredApproved(part, approvalId) {
  const { signature, ...approval } = plain(part.approval);
  assert.deepEqual(approval, { id: approvalId, approved: true });
  assert.equal(typeof signature === 'string', signatureField, `signature field: ${JSON.stringify(part.approval)}`);
}

/** The final parts of the quorum scenario's assistant message. */
const ARCHIVED = [
  'step-start',
  'text:I will archive q3.csv once finance signs off.',
  'dynamic-tool(ops__archive_file):call-arch-1:output-available',
  'step-start',
  'text:q3.csv is archived.',
  'data-toolgate-approval',
];

/**
 * Alice's stock client asks to archive q3.csv (`text`: her message, unique to the chat, so its prompts can be told
 * apart); the call waits for finance (2 of bob, carol). Checks the request and that alice cannot approve it
 * herself, in the inbox or in the chat; then her client goes away. Returns the assistant message that asked and
 * the approval id.
 */
async function aliceAsksAndLeaves(url, chatId, text) {
  const first = new UiChat({ url, id: chatId, headers: bearer('alice') });
  await first.send(text);
  assert.equal(first.status, 'ready', first.chat.error?.message);
  assert.deepEqual(first.messages.map((m) => m.role), ['user', 'assistant']);
  const asked = first.messages[1];
  assert.deepEqual(partSummary(asked), [
    'step-start',
    'text:I will archive q3.csv once finance signs off.',
    'dynamic-tool(ops__archive_file):call-arch-1:approval-requested',
  ]);
  const requested = toolPart(asked, 'call-arch-1');
  const approvalId = requested.approval.id;
  assert.deepEqual(requested.input, { path: 'q3.csv' });
  assert.match(approvalId, /^apr_[^.]+\.[^.]+$/);
  const reason = reasons(asked)['call-arch-1'];
  assert.equal(reason.decision, 'ask');
  assert.equal(reason.approvalId, approvalId);
  assert.deepEqual(reason.approvers, ['group:finance']);
  assert.equal(reason.quorum, 2);
  assert.match(reason.reason, /finance signs off archiving/);
  const chunks = first.chunks(0);
  const reasonAt = chunks.findIndex((c) => c.type === 'data-toolgate-reason');
  const requestAt = chunks.findIndex((c) => c.type === 'tool-approval-request');
  assert.ok(reasonAt !== -1 && reasonAt < requestAt, 'the reason (approvers, quorum) precedes the approval request');
  assertStrictChunkKeys(chunks, { signatureField });

  // Alice cannot approve it herself: not in the inbox, not in the chat (the stock client's automatic resend).
  assert.deepEqual(refusal(await vote(url, approvalId, 'alice')), { status: 403, code: 'not_an_approver' });
  await first.answer(approvalId, true);
  await first.settle({ requests: 2 });
  assert.equal(first.requests[1].status, 403, first.requests[1].text);
  assert.equal(JSON.parse(first.requests[1].text).error.code, 'not_an_approver');
  assert.equal(first.status, 'error');
  // An outsider does not even learn that the approval exists.
  assert.deepEqual(refusal(await vote(url, approvalId, 'mallory')), { status: 404, code: 'unknown_approval' });
  const untouched = await call(url, `/api/approvals/${encodeURIComponent(approvalId)}`, { as: 'alice' });
  assert.equal(untouched.json.state, 'pending', untouched.text);
  assert.deepEqual(untouched.json.votes, [], 'the refused attempts cast no vote');

  // Alice's client goes away (the tab is closed): nothing of it is used again, nothing runs for the chat.
  first.chat.stop();
  await assertNothingToResume(url, chatId, 'alice');
  return { asked, approvalId };
}

/** Bob, then carol approve in the inbox; bob's vote alone runs nothing. */
async function financeApproves(url, approvalId, callsBefore) {
  const bob = await vote(url, approvalId, 'bob');
  assert.equal(bob.status, 200, bob.text);
  assert.equal(bob.json.state, 'pending');
  assert.deepEqual(bob.json.votes.map((v) => [v.principal, v.decision]), [['bob', 'approve']]);
  await sleep(200);
  assert.equal(gatedToolCalls(QUORUM).length, callsBefore, 'one approval of two runs nothing');
  const carol = await vote(url, approvalId, 'carol');
  assert.equal(carol.status, 200, carol.text);
  assert.equal(carol.json.state, 'approved');
  assert.equal(carol.json.requester, 'alice');
}

/** What holds once the quorum scenario's chat is continued: stored, ran once, the model read the result. */
async function assertArchivedOnce(url, chatId, approvalId, { callsBefore, text }) {
  const stored = await waitForContinuation(url, chatId, 'alice');
  assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant']);
  assert.deepEqual(partSummary(stored[1]), ARCHIVED);
  const part = toolPart(stored[1], 'call-arch-1');
  assert.deepEqual(part.output.structuredContent, { archived: 'q3.csv' });
  assertStoredApproved(part, approvalId);
  const decided = approvalPart(stored[1], approvalId);
  assert.equal(decided.state, 'executed');
  assert.deepEqual(decided.votes.map((v) => [v.principal, v.decision]), [['bob', 'approve'], ['carol', 'approve']]);
  assert.equal(decided.waitingFor, 'group finance (2 of 2)');

  assert.equal(gatedToolCalls(QUORUM).length, callsBefore + 1, 'the approved call ran once');
  const all = await chatPromptsAtLeast(text, 2);
  assert.equal(all.length, 2, 'one model call to ask, one to answer after the call ran');
  const answered = all[1];
  assertCleanPrompt(answered);
  assert.deepEqual(roles(answered), ['user', 'assistant', 'tool']);
  assert.deepEqual(toolResults(answered)['call-arch-1'].output, { type: 'json', value: { archived: 'q3.csv' } });
  const item = await call(url, `/api/approvals/${encodeURIComponent(approvalId)}`, { as: 'bob' });
  assert.equal(item.json.state, 'executed', item.text);
  assert.deepEqual(refusal(await vote(url, approvalId, 'bob', 'deny')), { status: 409, code: 'approval_already_decided' });
  await assertNothingToResume(url, chatId, 'alice');
  return stored;
}

describe(`ai@${aiVersion} UI chat: approvals decided out of band (${mode})`, () => {
  test(
    'quorum: bob and carol approve in the inbox, the server continues, alice resumes the running stream',
    async () => {
      const { url } = server(QUORUM);
      const chatId = uniqueId('oob-resume');
      const text = `archive q3.csv (${chatId})`;
      const callsBefore = gatedToolCalls(QUORUM).length;
      const { asked, approvalId } = await aliceAsksAndLeaves(url, chatId, text);
      await financeApproves(url, approvalId, callsBefore);

      // The server continues by itself: the call is running (the gated tool holds it until released).
      await waitUntil(() => gatedToolCalls(QUORUM).length === callsBefore + 1, {
        what: 'the server to run the approved call',
      });
      assert.deepEqual(gatedToolCalls(QUORUM).at(-1).input, { path: 'q3.csv' });
      const before = await storedMessages(url, chatId, 'alice');
      assert.equal(toolPart(before.at(-1), 'call-arch-1').state, 'approval-requested', 'stored when the run ends');

      // A new stock client for alice: the stored chat as its messages, then resumeStream() while the run goes on.
      const second = new UiChat({ url, id: chatId, messages: before, headers: bearer('alice') });
      const resuming = second.resume();
      await waitUntil(() => second.requests[0]?.status !== undefined, { what: 'the reconnect request' });
      const reconnect = second.requests[0];
      assert.equal(reconnect.method, 'GET');
      assert.equal(reconnect.url, `${url}/api/chat/${chatId}/stream`);
      assert.equal(reconnect.status, 200, `the continuation runs, so there is a stream to resume: ${reconnect.text}`);
      assert.equal((await chatPromptsAtLeast(text, 1)).length, 1, 'the model was not called yet: alice attached mid-run');
      releaseGatedTool(QUORUM);
      await within(resuming, 15_000, 'the resumed stream to end');

      // Alice sees the tool output and the model's answer, in the same assistant message; nothing was resent.
      assert.equal(second.status, 'ready', second.chat.error?.message);
      assert.deepEqual(second.errors, []);
      assert.equal(second.requests.length, 1, 'resumeStream made one request and no automatic resend followed');
      assert.deepEqual(second.messages.map((m) => m.role), ['user', 'assistant']);
      const final = second.messages[1];
      assert.equal(final.id, asked.id, 'the continuation extends the message that asked');
      if (resumeStartsMessageOver) {
        assert.deepEqual(partSummary(final), ARCHIVED);
      } else {
        // ai@6.0.201 appends a resumed stream to the message it holds, and a request cannot tell it from newer
        // clients, which start the message over: the server serves what current clients need (the message as it
        // stood, then the continuation), so this old client shows the parts it already had twice (text and
        // step-start; tool and data parts are matched by id). Known and accepted for the pinned old client.
        const [stepStart, asking, archived, ...answer] = ARCHIVED;
        assert.deepEqual(partSummary(final), [stepStart, asking, archived, stepStart, asking, ...answer]);
      }
      const done = toolPart(final, 'call-arch-1');
      assert.deepEqual(done.output.structuredContent, { archived: 'q3.csv' });
      // No UI stream chunk carries an approval's answer: the resumed part keeps the request's approval, and the
      // decision arrives as toolgate's `data-toolgate-approval` part (the stored part also has `approved: true`).
      assert.equal(done.approval.id, approvalId);
      assert.equal(approvalPart(final, approvalId).state, 'executed');
      const resumed = second.chunks(0);
      assertStrictChunkKeys(resumed, { signatureField });
      assert.deepEqual(resumed[0], { type: 'start', messageId: asked.id }, 'the response is resumed from its start');
      assert.ok(resumed.some((c) => c.type === 'tool-output-available' && c.toolCallId === 'call-arch-1'));

      // The stored chat says the same; the call ran once; the model read its result; nothing runs any more.
      const stored = await assertArchivedOnce(url, chatId, approvalId, { callsBefore, text });
      assert.deepEqual(toolPart(stored[1], 'call-arch-1').output, done.output);
    },
  );

  test('quorum: bob and carol approve in the inbox, the server continues, a new client of alice loads the stored chat', async () => {
    const { url } = server(QUORUM);
    const chatId = uniqueId('oob-reload');
    const text = `archive q3.csv (${chatId})`;
    releaseGatedTool(QUORUM); // this test does not hold the call: the run just goes to its end
    const callsBefore = gatedToolCalls(QUORUM).length;
    const { asked, approvalId } = await aliceAsksAndLeaves(url, chatId, text);
    await financeApproves(url, approvalId, callsBefore);
    const stored = await assertArchivedOnce(url, chatId, approvalId, { callsBefore, text });

    // Alice comes back: a new stock client from the stored chat; resumeStream finds nothing running (204).
    const second = new UiChat({ url, id: chatId, messages: stored, headers: bearer('alice') });
    await second.resume();
    assert.deepEqual(second.requests.map((r) => [r.method, r.status]), [['GET', 204]]);
    assert.equal(second.status, 'ready', second.chat.error?.message);
    assert.equal(second.messages[1].id, asked.id);
    assert.deepEqual(partSummary(second.messages[1]), ARCHIVED);
    assert.deepEqual(toolPart(second.messages[1], 'call-arch-1').output.structuredContent, { archived: 'q3.csv' });
  });

  test('inbox: alice decides her own approval out of band, the server continues, a new client loads the stored chat', async () => {
    const { url } = server(INBOX);
    const chatId = uniqueId('oob-inbox');

    const first = new UiChat({ url, id: chatId, headers: bearer('alice') });
    await first.send('delete notes.txt');
    assert.equal(first.status, 'ready', first.chat.error?.message);
    const asked = first.messages[1];
    assert.deepEqual(partSummary(asked), [
      'step-start',
      'text:I will delete notes.txt.',
      'tool-delete_file:call-del-1:approval-requested',
    ]);
    const approvalId = toolPart(asked, 'call-del-1').approval.id;
    assert.match(reasons(asked)['call-del-1'].reason, /ask-deletes/);
    first.chat.stop(); // alice's client goes away without answering

    // The inbox: alice's own approval, decided by her alone; another principal does not see it.
    const listed = await call(url, `/api/approvals?conversation=${encodeURIComponent(chatId)}`, { as: 'alice' });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.json.approvals.map((a) => [a.id, a.state, a.requester, a.approvers, a.quorum]),
      [[approvalId, 'pending', 'alice', ['alice'], 1]],
    );
    assert.deepEqual(refusal(await vote(url, approvalId, 'bob')), { status: 404, code: 'unknown_approval' });
    const decided = await vote(url, approvalId, 'alice');
    assert.equal(decided.status, 200, decided.text);
    assert.equal(decided.json.state, 'approved');

    // The server continues by itself; once it is stored, a new stock client starts from the stored chat.
    const stored = await waitForContinuation(url, chatId, 'alice');
    const second = new UiChat({ url, id: chatId, messages: stored, headers: bearer('alice') });
    await second.resume();
    assert.deepEqual(second.requests.map((r) => [r.method, r.status]), [['GET', 204]], 'the run is over: nothing to resume');
    assert.equal(second.status, 'ready', second.chat.error?.message);
    assert.deepEqual(second.messages.map((m) => m.role), ['user', 'assistant']);
    const final = second.messages[1];
    assert.equal(final.id, asked.id);
    assert.deepEqual(partSummary(final), [
      'step-start',
      'text:I will delete notes.txt.',
      'tool-delete_file:call-del-1:output-available',
      'step-start',
      'text:notes.txt is deleted.',
      'data-toolgate-approval',
    ]);
    const done = toolPart(final, 'call-del-1');
    assert.deepEqual(done.output, { deleted: 'notes.txt' });
    assertStoredApproved(done, approvalId);
    const report = approvalPart(final, approvalId);
    assert.equal(report.state, 'executed');
    assert.deepEqual(report.votes.map((v) => [v.principal, v.decision]), [['alice', 'approve']]);

    // The call ran once (one result, in the model's second prompt); the approval is executed.
    const all = await promptsAtLeast(INBOX, 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(roles(all[1]), ['user', 'assistant', 'tool']);
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, { type: 'json', value: { deleted: 'notes.txt' } });
    const item = await call(url, `/api/approvals/${encodeURIComponent(approvalId)}`, { as: 'alice' });
    assert.equal(item.json.state, 'executed', item.text);

    // The restored client goes on with the conversation: the server accepts the history it loaded.
    await second.send('thanks');
    assert.equal(second.status, 'ready', second.chat.error?.message);
    assert.equal(second.requests[1].status, 200, second.requests[1].text);
    assert.deepEqual(second.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.ok(!second.chunks(1).some((c) => c.toolCallId === 'call-del-1'), 'the decided call is not run again');
    const after = await promptsAtLeast(INBOX, 3);
    assert.equal(after.length, 3);
    const results = after[2].flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p) => p.type === 'tool-result');
    assert.deepEqual(results.map((r) => r.toolCallId), ['call-del-1'], 'still one result: the call ran once');
  });
});
