// Sub-agents on the web page: a depth-2 gated call (the root's `manager` asks the `janitor`, whose
// delete_file call needs approval) appears inside its agent's card, in the agent's transcript, with its own
// approval card; approving it there continues the root (fixture `subagent`, with `subagent.toml`).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { card, close, launch, promptParts, scenario, send, shot, traces, waitForState, waitIdle } from './harness.mjs';

before(launch);
after(close);

const NESTED = 'call-m/call-j/call-d';

test(
  'sub-agents: the nested call shows its approval card under its agent call, and approving it continues the root',
  scenario('subagent-approve', 'subagent', async (page, name) => {
    const before = traces('subagent').length;
    await send(page, 'Please tidy up');
    await waitForState(page, NESTED, 'approval-requested');
    const manager = card(page, 'call-m');
    const nested = manager.getByTestId('subagent-transcript').locator(`[data-testid="tool-card"][data-tool-call-id="${NESTED}"]`);
    assert.equal(await nested.count(), 1, 'the nested card is inside the agent call');
    assert.equal(await page.locator(`#messages > li [data-tool-call-id="${NESTED}"]`).count(), 1, 'and only there');
    assert.equal(await nested.getAttribute('data-tool-name'), 'delete_file');
    assert.equal(await nested.getByTestId('tool-lineage').innerText(), 'Called by manager \u203a janitor \u203a delete_file');
    assert.match(await nested.getByTestId('tool-input').innerText(), /"path": "notes.txt"/);
    assert.equal(await manager.getByTestId('tool-state-label').first().innerText(), 'Waiting for a nested approval');
    assert.equal(await manager.locator(':scope > .tool-foot [data-testid="approve-button"]').count(), 0, 'no buttons on the copy');
    assert.equal(await page.getByTestId('approve-button').count(), 1, 'one question');
    await shot(page, `${name}-1-nested-approval`);

    await nested.getByTestId('approve-button').click();
    await page.getByText('All tidy: the janitor deleted notes.txt.').waitFor();
    await waitIdle(page);
    await waitForState(page, 'call-m', 'output-available');
    assert.equal(await manager.getByTestId('tool-output').first().innerText(), 'The janitor deleted notes.txt.');
    await shot(page, `${name}-2-root-answered`);

    // The root model's second call has the manager's answer as its tool result.
    const calls = traces('subagent').slice(before);
    const result = calls.flatMap(promptParts).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-m');
    assert.deepEqual(result?.output, { type: 'text', value: 'The janitor deleted notes.txt.' });
  }),
);
