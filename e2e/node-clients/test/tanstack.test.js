// `@tanstack/ai-client` (ChatClient + fetchServerSentEvents, which speaks AG-UI RunAgentInput / events)
// against `POST /ag-ui`, through a whole approval round trip with the client's own API.
//
// Two things in @tanstack/ai-client 0.33.2 used to stop this:
//  1. Its RunAgentInput builder always sends `state: {}`, so the STATE_SNAPSHOT listing the pending approvals
//     never comes back. The server now keeps each thread's open interrupts in its store (the default SQLite
//     store) and matches the resume against them.
//  2. It only lets an application answer interrupts that carry its binding metadata or its approval marker
//     (`metadata: {kind: "approval", toolName, input}`). toolgate's interrupts carry that marker, so the client
//     offers `resolveInterrupt` (canResolve: true) and submits the answer itself.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatClient, fetchServerSentEvents } from '@tanstack/ai-client';
import { promptsAtLeast, server, sseData, waitUntil } from '../lib/servers.js';
import { hasAguiRoute } from '../lib/agui.js';
import { assertCleanPrompt, toolResults } from '../lib/prompt.js';

describe('@tanstack/ai-client ChatClient against /ag-ui', () => {
  test('approve: the client resolves the interrupt, the server resumes from its stored interrupts, the tool runs once', async (t) => {
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

    const interrupts = client.getInterrupts();
    assert.equal(interrupts.length, 1, 'the client shows the interrupt');
    const [interrupt] = interrupts;
    assert.equal(interrupt.id, events.at(-1).outcome.interrupts[0].id);
    assert.equal(interrupt.canResolve, true, 'the approval marker makes the interrupt answerable');
    assert.equal((await promptsAtLeast('tanstack-approve', 1)).length, 1);

    interrupt.resolveInterrupt({ approved: true });
    await waitUntil(() => requests[1]?.text !== undefined, {
      what: 'the resume response',
      describe: () => JSON.stringify(client.getInterruptState()),
    });
    const resume = requests[1].body;
    assert.deepEqual(resume.resume.map((entry) => [entry.interruptId, entry.status, entry.payload?.approved]), [
      [interrupt.id, 'resolved', true],
    ]);
    assert.deepEqual(resume.state, {}, 'the client still sends no state: the server used the interrupts it kept');
    const answer = sseData(requests[1].text);
    assert.equal(answer.find((e) => e.type === 'RUN_ERROR'), undefined, requests[1].text);
    const result = answer.find((e) => e.type === 'TOOL_CALL_RESULT');
    assert.ok(result, requests[1].text);
    assert.equal(result.toolCallId, 'call-del-1');
    assert.deepEqual(JSON.parse(result.content), { deleted: 'notes.txt' });
    assert.equal(answer.at(-1).type, 'RUN_FINISHED');
    assert.equal(answer.at(-1).outcome?.type ?? 'success', 'success');
    assert.deepEqual(errors, []);

    const all = await promptsAtLeast('tanstack-approve', 2);
    assert.equal(all.length, 2, 'the model was called once more, after the tool ran');
    assertCleanPrompt(all[1]);
    assert.deepEqual(toolResults(all[1])['call-del-1'].output, { type: 'json', value: { deleted: 'notes.txt' } });
  });
});
