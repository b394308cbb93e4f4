// `@tanstack/ai-client` (ChatClient + fetchServerSentEvents, which speaks AG-UI RunAgentInput / events)
// against `POST /ag-ui`.
//
// The first leg works: ChatClient parses toolgate's events and sees the interrupt. The approval cannot be
// completed, for two reasons in @tanstack/ai-client 0.33.2 itself (see the e2e report):
//  1. Its RunAgentInput builder always sends `state: {}` (connection-adapters.js, buildRunAgentInputBody), so the
//     STATE_SNAPSHOT toolgate sends before the interrupt (the pending approvals, since the server is stateless)
//     never comes back, and the server answers the resume with RUN_ERROR `no_pending_interrupts`.
//  2. It only lets an application answer interrupts that carry its own binding metadata
//     (`metadata["tanstack:interruptBinding"]`, made by a TanStack server) or its legacy marker
//     (`metadata.kind: "approval"`); toolgate's interrupts are "unbound" (`canResolve: false`), so only the
//     documented-unsafe `resumeInterruptsUnsafe` can send an answer at all.
// This test pins those facts down with the real client, so a client or server change that makes the flow work
// shows up as a failure here (then replace it with a real approve scenario). It does not pretend the flow works.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatClient, fetchServerSentEvents } from '@tanstack/ai-client';
import { prompts, server, sseData, waitUntil } from '../lib/servers.js';
import { hasAguiRoute } from '../lib/agui.js';

describe('@tanstack/ai-client ChatClient against /ag-ui', () => {
  test('sees the interrupt, but cannot resume it (sends state {}; interrupt unbound)', async (t) => {
    const url = server('tanstack-approve').url;
    if (!(await hasAguiRoute(url))) {
      t.skip('POST /ag-ui is not wired in this build of toolgate serve (404)');
      return;
    }
    const requests = [];
    const fetchClient = async (input, init) => {
      const entry = { body: JSON.parse(init.body), status: undefined, text: undefined };
      requests.push(entry);
      const response = await fetch(input, init);
      entry.status = response.status;
      const [forClient, forLog] = response.body.tee();
      new Response(forLog).text().then((text) => {
        entry.text = text;
      });
      return new Response(forClient, { status: response.status, headers: response.headers });
    };
    const errors = [];
    const client = new ChatClient({
      connection: fetchServerSentEvents(`${url}/ag-ui`, { fetchClient }),
      onError: (error) => errors.push(error),
    });

    await client.sendMessage('delete notes.txt');
    await waitUntil(() => requests[0]?.text !== undefined, { what: 'the first response' });
    assert.deepEqual(errors, [], 'the client accepted every event of the first run');
    const events = sseData(requests[0].text);
    assert.equal(events.at(-1).type, 'RUN_FINISHED');
    assert.equal(events.at(-1).outcome.type, 'interrupt');
    const toolgateState = events.find((e) => e.type === 'STATE_SNAPSHOT').snapshot;
    assert.ok(toolgateState.toolgate.pendingApprovals.length === 1, 'the server sent its pending list');

    const interrupts = client.getInterrupts();
    assert.equal(interrupts.length, 1, 'the client shows the interrupt');
    const [interrupt] = interrupts;
    assert.equal(interrupt.id, toolgateState.toolgate.pendingApprovals[0].interruptId);
    assert.equal(interrupt.kind, 'unbound', 'reason 2: toolgate interrupts carry no TanStack binding');
    assert.equal(interrupt.canResolve, false);
    const call = client
      .getMessages()
      .flatMap((m) => m.parts)
      .find((p) => p.type === 'tool-call');
    assert.ok(call, 'the client holds the tool call');
    assert.equal(call.name, 'delete_file');

    // The only way TanStack offers to answer an unbound interrupt.
    await client.resumeInterruptsUnsafe([{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }]);
    await waitUntil(() => requests[1]?.text !== undefined, { what: 'the resume response' });
    const resume = requests[1].body;
    assert.deepEqual(resume.resume, [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }]);
    assert.deepEqual(resume.state, {}, 'reason 1: the client does not send the state snapshot back');
    const answer = sseData(requests[1].text);
    const runError = answer.find((e) => e.type === 'RUN_ERROR');
    assert.ok(runError, `the server refused the resume: ${requests[1].text}`);
    assert.equal(runError.code, 'no_pending_interrupts');
    assert.equal(prompts('tanstack-approve').length, 1, 'nothing ran and the model was not called again');
  });
});
