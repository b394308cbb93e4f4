// `@ag-ui/client` (HttpAgent, AG-UI 1.0) against `POST /ag-ui`: approvals as interrupts, resumed by a new run
// on the same thread with `resume` entries; the server is stateless and relies on the state and messages
// snapshots it sent before the interrupting RUN_FINISHED, which HttpAgent keeps and sends back.

import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { promptsAtLeast, server, signatureField } from '../lib/servers.js';
import { assertCleanPrompt, roles, toolCalls, toolResults, userText } from '../lib/prompt.js';
import { AguiThread, auditEvents, eventTypes, eventsOf, hasAguiRoute, resolved, terminal } from '../lib/agui.js';

const RESPONSE_SCHEMA_KEYS = ['approved', 'editedArgs', 'reason'];

let routeMissing = false;

/** Checks every run has: RUN_STARTED first, one terminal event last, nothing after it. */
function assertRunShape(run) {
  const types = eventTypes(run);
  assert.equal(types[0], 'RUN_STARTED', types.join(' '));
  const terminals = types.filter((type) => type === 'RUN_FINISHED' || type === 'RUN_ERROR');
  assert.equal(terminals.length, 1, `exactly one terminal event: ${types.join(' ')}`);
  assert.ok(['RUN_FINISHED', 'RUN_ERROR'].includes(types.at(-1)), types.join(' '));
}

/**
 * The first run of a thread paused on approvals: snapshots, then RUN_FINISHED {outcome: interrupt}. An expected
 * call with a `lineage` is a sub-agent's: its interrupt names the sub-run and carries the lineage.
 */
function assertInterrupted(thread, run, expected) {
  assert.equal(run.error, undefined, run.error?.stack);
  assertRunShape(run);
  const types = eventTypes(run);
  assert.deepEqual(types.slice(-3), ['MESSAGES_SNAPSHOT', 'STATE_SNAPSHOT', 'RUN_FINISHED'], types.join(' '));
  const outcome = terminal(run).outcome;
  assert.equal(outcome.type, 'interrupt');
  assert.equal(outcome.interrupts.length, expected.length);
  outcome.interrupts.forEach((interrupt, index) => {
    const { toolCallId, toolName, input, lineage } = expected[index];
    assert.match(interrupt.id, /^apr_[^.]+\.[^.]+$/, 'the interrupt id is the signed approval id');
    assert.equal(interrupt.reason, 'tool_call');
    assert.equal(interrupt.toolCallId, toolCallId);
    assert.equal(interrupt.responseSchema.type, 'object');
    assert.deepEqual(Object.keys(interrupt.responseSchema.properties).sort(), RESPONSE_SCHEMA_KEYS);
    assert.deepEqual(interrupt.responseSchema.required, ['approved']);
    const marker = { kind: 'approval', toolName, input };
    assert.deepEqual(interrupt.metadata, lineage ? { ...marker, lineage } : marker, 'with the approval marker TanStack resumes');
    // The sub-run: the agent call ids from the root (none for a call of the root's own).
    assert.equal(interrupt.subagentRunId, lineage?.map((step) => step.toolCallId).join('/'));
  });
  for (const pending of thread.agent.state.toolgate.pendingApprovals) {
    if (signatureField) assert.equal(typeof pending.signature, 'string', 'the AI SDK signature rides in the state');
    else assert.equal(pending.signature, undefined);
  }
  // HttpAgent keeps what it needs to resume.
  assert.deepEqual(
    thread.agent.pendingInterrupts.map((i) => i.id),
    outcome.interrupts.map((i) => i.id),
  );
  assert.deepEqual(
    thread.agent.state.toolgate.pendingApprovals.map((p) => [p.interruptId, p.toolCallId, p.toolName]),
    expected.map((e, index) => [outcome.interrupts[index].id, e.toolCallId, e.toolName]),
  );
  const calls = thread.agent.messages.filter((m) => m.role === 'assistant').flatMap((m) => m.toolCalls ?? []);
  for (const { toolCallId, toolName, input, lineage } of expected) {
    const call = calls.find((c) => c.id === toolCallId);
    assert.ok(call, `the agent's messages hold call ${toolCallId}`);
    assert.equal(call.function.name, toolName);
    assert.deepEqual(JSON.parse(call.function.arguments), input);
    assert.deepEqual(call.metadata?.toolgate?.subAgent?.lineage, lineage, 'the snapshot keeps the lineage');
  }
  return outcome.interrupts;
}

/** A resumed run: the request carried the state and messages back; results come without TOOL_CALL_START. */
function assertResumed(thread, run, { results }) {
  assert.equal(run.error, undefined, run.error?.stack);
  assertRunShape(run);
  const request = thread.requests.at(-1).body;
  assert.ok(Array.isArray(request.resume) && request.resume.length > 0, 'the request carried resume entries');
  assert.ok(request.state?.toolgate?.pendingApprovals?.length > 0, 'the request carried the state snapshot back');
  assert.equal(request.threadId, thread.requests[0].body.threadId, 'same thread');
  assert.notEqual(request.runId, thread.requests.at(-2).body.runId, 'a new run');
  const startedCalls = eventsOf(run, 'TOOL_CALL_START').map((e) => e.toolCallId);
  const got = {};
  for (const event of eventsOf(run, 'TOOL_CALL_RESULT')) {
    assert.ok(!startedCalls.includes(event.toolCallId), `no TOOL_CALL_START re-emitted for ${event.toolCallId}`);
    got[event.toolCallId] = JSON.parse(event.content);
  }
  assert.deepEqual(got, results);
  const finished = terminal(run);
  assert.equal(finished.type, 'RUN_FINISHED');
  assert.equal(finished.outcome.type, 'success');
  assert.deepEqual(thread.agent.pendingInterrupts, [], 'no interrupt left');
  assert.equal(thread.agent.state.toolgate, undefined, "toolgate's pending list was cleared from the state");
  const snapshot = eventsOf(run, 'STATE_SNAPSHOT').at(-1);
  assert.ok(snapshot && snapshot.snapshot.toolgate === undefined, 'a STATE_SNAPSHOT cleared the pending list');
}

/** The agent's tool message for a call, parsed. */
function toolMessage(thread, toolCallId) {
  const message = thread.agent.messages.find((m) => m.role === 'tool' && m.toolCallId === toolCallId);
  assert.ok(message, `the agent holds a tool message for ${toolCallId}`);
  return JSON.parse(message.content);
}

/** The depth-2 call of scenarios/agui/subagent*: the root's `manager` asks the `janitor`, who deletes notes.txt. */
const NESTED = {
  toolCallId: 'call-m/call-j/call-d',
  toolName: 'delete_file',
  input: { path: 'notes.txt' },
  lineage: [
    { agent: 'manager', toolCallId: 'call-m' },
    { agent: 'janitor', toolCallId: 'call-j' },
  ],
};

/**
 * A resumed run of a sub-agent tree: the agent call `call-m` gets the manager's answer as its result, and the run
 * ends in success with nothing pending. (Events of the sub-run itself, if any, are tagged with its call ids.)
 */
function assertSubAgentResumed(thread, run, { answer }) {
  assert.equal(run.error, undefined, run.error?.stack);
  assertRunShape(run);
  const request = thread.requests.at(-1).body;
  assert.ok(Array.isArray(request.resume) && request.resume.length === 1, 'the request carried the resume entry');
  assert.ok(request.state?.toolgate?.pendingApprovals?.length === 1, 'the request carried the state snapshot back');
  const startedCalls = eventsOf(run, 'TOOL_CALL_START').map((e) => e.toolCallId);
  const results = eventsOf(run, 'TOOL_CALL_RESULT');
  for (const event of results) {
    assert.ok(!startedCalls.includes(event.toolCallId), `no TOOL_CALL_START re-emitted for ${event.toolCallId}`);
  }
  const root = results.filter((event) => !event.toolCallId.startsWith('call-m/'));
  assert.deepEqual(root.map((e) => [e.toolCallId, JSON.parse(e.content)]), [['call-m', answer]]);
  assert.deepEqual(toolMessage(thread, 'call-m'), answer);
  const finished = terminal(run);
  assert.equal(finished.type, 'RUN_FINISHED');
  assert.equal(finished.outcome.type, 'success');
  assert.deepEqual(thread.agent.pendingInterrupts, [], 'no interrupt left');
  assert.equal(thread.agent.state.toolgate, undefined, "toolgate's pending list was cleared from the state");
}

/**
 * The audit log of one nested approval: its events' kinds, and the tools that ran anywhere in the tree (each
 * `executed` event, by tool name). The approval's events are in the sub-run's conversation: the root's key,
 * then each agent call id of the lineage after U+001E.
 */
async function auditOfNested(url, interrupt) {
  const events = await auditEvents(url);
  const own = events.filter((e) => e.approvalId === interrupt.id);
  const issued = own.find((e) => e.kind === 'issued');
  assert.ok(issued, `an issued event for ${interrupt.id}`);
  assert.deepEqual(issued.data.lineage, NESTED.lineage);
  const rootConversation = issued.data.rootConversation;
  assert.equal(issued.conversationId, [rootConversation, 'call-m', 'call-j'].join('\u001e'));
  assert.equal(issued.toolCallId, 'call-d', "the call's own id in the sub-agent");
  const inTree = (e) => e.conversationId === rootConversation || e.conversationId.startsWith(`${rootConversation}\u001e`);
  const ran = events.filter((e) => e.kind === 'executed' && inTree(e)).map((e) => e.data.toolName);
  return { kinds: own.map((e) => e.kind), own, ran: ran.sort() };
}

function assistantText(run) {
  return eventsOf(run, 'TEXT_MESSAGE_CONTENT')
    .map((e) => e.delta)
    .join('');
}

describe('@ag-ui/client HttpAgent against /ag-ui', () => {
  before(async () => {
    routeMissing = !(await hasAguiRoute(server('approve').url));
  });

  function skipIfNoRoute(t) {
    if (routeMissing) {
      t.skip('POST /ag-ui is not wired in this build of toolgate serve (404)');
      return true;
    }
    return false;
  }

  test('approve: the call runs on resume, the model sees its result', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('approve').url });
    thread.say('delete notes.txt');
    const first = await thread.run();
    const [interrupt] = assertInterrupted(thread, first, [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    assert.equal(assistantText(first), 'I will delete notes.txt.');
    const parent = eventsOf(first, 'TOOL_CALL_START')[0].parentMessageId;
    assert.ok(thread.agent.messages.some((m) => m.id === parent && m.role === 'assistant'), 'the call sits in its step');
    assert.equal((await promptsAtLeast('approve', 1)).length, 1);

    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: true })] });
    assertResumed(thread, second, { results: { 'call-del-1': { deleted: 'notes.txt' } } });
    assert.equal(assistantText(second), 'notes.txt is deleted.');
    assert.deepEqual(
      thread.agent.messages.map((m) => m.role),
      ['user', 'assistant', 'tool', 'assistant'],
    );
    assert.deepEqual(toolMessage(thread, 'call-del-1'), { deleted: 'notes.txt' });

    const all = await promptsAtLeast('approve', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(roles(all[1]), ['user', 'assistant', 'tool']);
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, { type: 'json', value: { deleted: 'notes.txt' } });
  });

  test('a grant given with the resume: a later matching call in the thread runs without asking', async (t) => {
    if (skipIfNoRoute(t)) return;
    const { url } = server('grant');
    const thread = new AguiThread({ url });
    thread.say('delete notes.txt');
    const first = await thread.run();
    const [interrupt] = assertInterrupted(thread, first, [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    // The inbox's grant object, passed through HttpAgent's resume payload as it is.
    const grant = { uses: 2, within: '1h', input: { '/path': { glob: '*.txt' } }, scope: 'conversation' };
    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: true, grant })] });
    assertResumed(thread, second, { results: { 'call-del-1': { deleted: 'notes.txt' } } });
    assert.equal(thread.requests.at(-1).body.resume[0].payload.grant.uses, 2, 'the grant went with the resume');

    thread.say('and draft.txt');
    const third = await thread.run();
    assert.equal(third.error, undefined, third.error?.stack);
    assert.equal(terminal(third).outcome.type, 'success', 'no interrupt: the grant covers it');
    const results = eventsOf(third, 'TOOL_CALL_RESULT').map((e) => [e.toolCallId, JSON.parse(e.content)]);
    assert.deepEqual(results, [['call-del-2', { deleted: 'draft.txt' }]]);
    const granted = (await auditEvents(url)).filter((event) => event.kind === 'granted');
    assert.deepEqual(granted.map((event) => event.toolCallId), ['call-del-2'], 'one use spent, on the later call');
  });

  test('sub-agent: a depth-2 approval is an interrupt naming the sub-run; the resume runs the call once', async (t) => {
    if (skipIfNoRoute(t)) return;
    const { url } = server('subagent');
    const thread = new AguiThread({ url });
    thread.say('tidy up');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [NESTED]);
    assert.equal(interrupt.subagentRunId, 'call-m/call-j');

    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: true })] });
    assertSubAgentResumed(thread, second, { answer: 'The janitor deleted notes.txt.' });
    assert.equal(assistantText(second), 'All tidy.');
    const audit = await auditOfNested(url, interrupt);
    assert.deepEqual(audit.kinds, ['issued', 'approved', 'executed']);
    assert.deepEqual(audit.own.at(-1).data.result, { type: 'json', value: { deleted: 'notes.txt' } });
    assert.deepEqual(audit.ran, ['delete_file', 'janitor', 'manager'], 'each call of the tree ran once');

    // The root model saw its own call and the agent's answer, never the nested call.
    let all = await promptsAtLeast('subagent', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(roles(all[1]), ['user', 'assistant', 'tool']);
    assert.deepEqual(toolCalls(all[1]).map((c) => c.toolCallId), ['call-m']);
    assert.deepEqual(toolResults(all[1])['call-m'].output, { type: 'text', value: 'The janitor deleted notes.txt.' });

    // The thread goes on with the messages HttpAgent holds: the nested call among them, without a result message
    // (its outcome is the janitor's). Nothing runs again.
    assert.ok(!thread.agent.messages.some((m) => m.role === 'tool' && m.toolCallId === NESTED.toolCallId));
    thread.say('thanks');
    const third = await thread.run();
    assert.equal(third.error, undefined, third.error?.stack);
    assert.equal(terminal(third).outcome?.type, 'success', eventTypes(third).join(' '));
    assert.equal(assistantText(third), 'You are welcome.');
    all = await promptsAtLeast('subagent', 3);
    assert.equal(all.length, 3);
    assertCleanPrompt(all[2]);
    assert.deepEqual(roles(all[2]), ['user', 'assistant', 'tool', 'assistant', 'user']);
    assert.deepEqual((await auditOfNested(url, interrupt)).ran, ['delete_file', 'janitor', 'manager']);
  });

  test('sub-agent: a denial at depth 2 reaches the janitor as denied, the root still answers', async (t) => {
    if (skipIfNoRoute(t)) return;
    const { url } = server('subagent-deny');
    const thread = new AguiThread({ url });
    thread.say('tidy up');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [NESTED]);
    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: false, reason: 'keep it' })] });
    assertSubAgentResumed(thread, second, { answer: 'The janitor kept notes.txt.' });
    assert.equal(assistantText(second), 'notes.txt stays.');
    const audit = await auditOfNested(url, interrupt);
    assert.deepEqual(audit.kinds, ['issued', 'denied']);
    assert.equal(audit.own[1].data.reason, 'keep it');
    assert.deepEqual(audit.ran, ['janitor', 'manager'], 'delete_file did not run; the janitor went on and answered');

    const all = await promptsAtLeast('subagent-deny', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(toolResults(all[1])['call-m'].output, { type: 'text', value: 'The janitor kept notes.txt.' });
  });

  test('deny with a reason: no run, the model sees execution-denied with the reason', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('deny').url });
    thread.say('delete notes.txt');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: false, reason: 'keep it' })] });
    assertResumed(thread, second, { results: { 'call-del-1': { denied: true, reason: 'keep it' } } });
    assert.equal(assistantText(second), 'Understood, notes.txt stays.');

    const all = await promptsAtLeast('deny', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, { type: 'execution-denied', reason: 'keep it' });
  });

  test('edit (payload.editedArgs): the edit runs, the snapshot and every later prompt show the edited call', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('edit').url });
    thread.say('delete notes.txt');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    const second = await thread.run({
      resume: [resolved(interrupt.id, { approved: true, editedArgs: { path: 'notes-old.txt' } })],
    });
    assertResumed(thread, second, { results: { 'call-del-1': { deleted: 'notes-old.txt' } } });
    assert.ok(eventTypes(second).includes('MESSAGES_SNAPSHOT'), 'the edited call is sent back as a snapshot');
    const call = thread.agent.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === 'call-del-1');
    assert.deepEqual(JSON.parse(call.function.arguments), { path: 'notes-old.txt' }, 'the client holds the edited call');

    let all = await promptsAtLeast('edit', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(toolCalls(all[1])[0].input, { path: 'notes-old.txt' }, 'the model sees the edited call');
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, { type: 'json', value: { deleted: 'notes-old.txt' } });

    thread.say('thanks');
    const third = await thread.run();
    assert.equal(third.error, undefined, third.error?.stack);
    assert.equal(terminal(third).outcome.type, 'success');
    assert.equal(assistantText(third), 'You are welcome.');
    // The trace is written by a background thread: wait for the third line rather than race it.
    all = await promptsAtLeast('edit', 3);
    assert.equal(all.length, 3);
    assertCleanPrompt(all[2]);
    assert.deepEqual(roles(all[2]), ['user', 'assistant', 'tool', 'assistant', 'user']);
    assert.equal(userText(all[2][4]), 'thanks');
    assert.deepEqual(toolCalls(all[2])[0].input, { path: 'notes-old.txt' }, 'later prompts keep the edited call');
    assert.deepEqual(toolResults(all[2])['call-del-1'].output, { type: 'json', value: { deleted: 'notes-old.txt' } });
  });

  test('two interrupts answered in one resume (approve one, deny the other)', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('two-interrupts').url });
    thread.say('delete a.txt and send Bob 5000');
    const [del, pay] = assertInterrupted(thread, await thread.run(), [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'a.txt' } },
      { toolCallId: 'call-pay-1', toolName: 'transfer_money', input: { amount: 5000, to: 'Bob' } },
    ]);
    assert.notEqual(del.id, pay.id);

    // HttpAgent itself refuses a resume that leaves an interrupt open; nothing is sent.
    const partial = await thread.run({ resume: [resolved(del.id, { approved: true })] });
    assert.ok(partial.error, 'the client refused a partial resume');
    assert.match(String(partial.error.message), /pending interrupt/);
    assert.equal(thread.requests.length, 1, 'no request was made');

    const second = await thread.run({
      resume: [resolved(del.id, { approved: true }), resolved(pay.id, { approved: false, reason: 'too much' })],
    });
    assertResumed(thread, second, {
      results: { 'call-del-1': { deleted: 'a.txt' }, 'call-pay-1': { denied: true, reason: 'too much' } },
    });
    const all = await promptsAtLeast('two-interrupts', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    assert.deepEqual(roles(all[1]), ['user', 'assistant', 'tool']);
    const results = toolResults(all[1]);
    assert.deepEqual(results['call-del-1'].output, { type: 'json', value: { deleted: 'a.txt' } });
    assert.deepEqual(results['call-pay-1'].output, { type: 'execution-denied', reason: 'too much' });
  });

  test('a malformed resume entry is a denial: the call does not run', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('malformed').url });
    thread.say('delete notes.txt');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: 'yes' })] });
    assert.equal(second.error, undefined, second.error?.stack);
    const result = JSON.parse(eventsOf(second, 'TOOL_CALL_RESULT')[0].content);
    assert.equal(result.denied, true);
    assert.match(result.reason, /malformed/);
    assert.match(result.reason, /approved/);
    assert.equal(terminal(second).outcome.type, 'success');

    const all = await promptsAtLeast('malformed', 2);
    assert.equal(all.length, 2);
    assertCleanPrompt(all[1]);
    const output = toolResults(all[1])['call-del-1'].output;
    assert.equal(output.type, 'execution-denied', JSON.stringify(output));
    assert.match(output.reason, /malformed/);
  });

  test('an unknown interruptId: RUN_ERROR, nothing runs, the thread can still be resumed', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('unknown-interrupt').url });
    thread.say('delete notes.txt');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    const bogus = `apr_0000000000000000.${'A'.repeat(43)}`;
    const second = await thread.run({
      resume: [resolved(interrupt.id, { approved: true }), resolved(bogus, { approved: true })],
    });
    assertRunShape(second);
    const error = terminal(second);
    assert.equal(error.type, 'RUN_ERROR', eventTypes(second).join(' '));
    assert.equal(error.code, 'unknown_interrupt');
    assert.match(error.message, new RegExp(bogus.replace('.', '\\.')));
    assert.equal(eventsOf(second, 'TOOL_CALL_RESULT').length, 0, 'nothing ran');
    assert.equal((await promptsAtLeast('unknown-interrupt', 1)).length, 1, 'the model was not called');

    const third = await thread.run({ resume: [resolved(interrupt.id, { approved: true })] });
    assertResumed(thread, third, { results: { 'call-del-1': { deleted: 'notes.txt' } } });
    assert.equal((await promptsAtLeast('unknown-interrupt', 2)).length, 2);
  });

  // The server keeps the thread (its default store), so the changed input is
  // caught against the stored thread before the signature is even checked.
  test('tampered arguments in the messages sent back: RUN_ERROR history_mismatch, nothing runs', async (t) => {
    if (skipIfNoRoute(t)) return;
    const thread = new AguiThread({ url: server('tamper').url });
    thread.say('delete notes.txt');
    const [interrupt] = assertInterrupted(thread, await thread.run(), [
      { toolCallId: 'call-del-1', toolName: 'delete_file', input: { path: 'notes.txt' } },
    ]);
    const messages = structuredClone(thread.agent.messages);
    const call = messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === 'call-del-1');
    call.function.arguments = JSON.stringify({ path: '/etc/passwd' });
    thread.agent.setMessages(messages);
    const second = await thread.run({ resume: [resolved(interrupt.id, { approved: true })] });
    assertRunShape(second);
    const error = terminal(second);
    assert.equal(error.type, 'RUN_ERROR', eventTypes(second).join(' '));
    assert.equal(error.code, 'history_mismatch', error.message);
    assert.match(error.message, /tool call `call-del-1`: the input of `delete_file` was changed/);
    assert.equal(eventsOf(second, 'TOOL_CALL_RESULT').length, 0, 'nothing ran');
    assert.equal((await promptsAtLeast('tamper', 1)).length, 1, 'the model was not called');
  });
});
