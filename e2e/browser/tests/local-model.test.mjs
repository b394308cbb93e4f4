// The web page against `toolgate serve` with the real local default model (SmolLM2-135M-Instruct,
// tool choice `auto`). The model's words are not asserted, only the structure: which tool it
// calls, the approval card's states, what ran, and the results the model received (prompt trace).
// Skipped when scripts/e2e-browser.sh found no pulled model (CI requires it).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { close, hasServer, launch, promptParts, scenario, send, shot, traces, waitForState, waitIdle } from './harness.mjs';

const skip = !hasServer('local') && 'no local model was pulled (scripts/setup-local-model.sh)';
// A cold model on a small CPU needs seconds per answer; the page waits as long as it takes.
const SLOW = 180_000;

before(launch);
after(close);

const cards = (page) => page.locator('[data-testid="tool-card"]');
const assistantText = (page) => page.locator('[data-testid="text-part"][data-role="assistant"]');

// Asks for a deletion and returns the approval card, its call id and input.
async function requestDeletion(page) {
  page.setDefaultTimeout(SLOW);
  await send(page, 'Delete the file notes.txt');
  const pending = page.locator('[data-testid="tool-card"][data-state="approval-requested"]');
  await pending.waitFor();
  assert.equal(await cards(page).count(), 1, 'one call');
  assert.equal(await pending.getAttribute('data-tool-name'), 'delete_file');
  const id = await pending.getAttribute('data-tool-call-id');
  const input = JSON.parse(await pending.getByTestId('tool-input').innerText());
  assert.equal(typeof input.path, 'string', 'the input has a path');
  return { card: pending, id, input };
}

// The result of call `id` in the prompt of the model call that followed the answer.
function resultSentToModel(before, id) {
  const continuation = traces('local').slice(before).find((trace) =>
    promptParts(trace).some((part) => part.type === 'tool-result' && part.toolCallId === id),
  );
  assert.ok(continuation, 'the model was called with the result');
  return promptParts(continuation).find((part) => part.type === 'tool-result' && part.toolCallId === id).output;
}

test(
  'local model: "delete a file" asks for approval; approved, the tool runs and the model answers in text',
  { skip },
  scenario('local-a-approve', 'local', async (page, name) => {
    const before = traces('local').length;
    const { id, input } = await requestDeletion(page);
    await shot(page, `${name}-1-approval-requested`);

    await page.locator(`[data-tool-call-id="${id}"]`).getByTestId('approve-button').click();
    await waitForState(page, id, 'output-available');
    await waitIdle(page);
    const done = page.locator(`[data-tool-call-id="${id}"]`);
    assert.deepEqual(JSON.parse(await done.getByTestId('tool-output').innerText()), { deleted: input.path });
    assert.equal(await cards(page).count(), 1, 'the model does not call again');
    assert.ok((await assistantText(page).last().innerText()).trim().length > 0, 'the model answers in text');
    await shot(page, `${name}-2-completed`);

    assert.deepEqual(resultSentToModel(before, id), { type: 'json', value: { deleted: input.path } });
  }),
);

test(
  'local model: denied with a reason, nothing runs and the model receives execution-denied',
  { skip },
  scenario('local-b-deny', 'local', async (page, name) => {
    const before = traces('local').length;
    const reason = 'I still need it';
    const { card, id } = await requestDeletion(page);
    await card.getByTestId('deny-button').click();
    await card.getByTestId('deny-reason-input').fill(reason);
    await card.getByTestId('confirm-deny-button').click();
    await waitForState(page, id, 'output-denied');
    await waitIdle(page);
    const denied = page.locator(`[data-tool-call-id="${id}"]`);
    assert.equal(await denied.getByTestId('tool-output').count(), 0, 'nothing ran');
    assert.equal(await cards(page).count(), 1, 'the model does not call again');
    await shot(page, `${name}-1-denied`);

    assert.deepEqual(resultSentToModel(before, id), { type: 'execution-denied', reason });
  }),
);

test(
  'local model: a request no tool serves gets a text answer and no tool card',
  { skip },
  scenario('local-c-text', 'local', async (page, name) => {
    page.setDefaultTimeout(SLOW);
    await send(page, 'Write a haiku about autumn');
    await assistantText(page).first().waitFor();
    await waitIdle(page);
    assert.ok((await assistantText(page).last().innerText()).trim().length > 0);
    assert.equal(await cards(page).count(), 0);
    await shot(page, `${name}-1-answer`);
  }),
);
