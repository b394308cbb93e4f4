// The toolgate web page in headless Chromium against `toolgate serve` with scripted models
// (fixtures/*.json). Each scenario asserts on the page (data-testid, data-state) and on the
// prompts the model received (the server's --trace-prompts file).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  DOCS_SCREENSHOT,
  card,
  close,
  launch,
  promptParts,
  scenario,
  send,
  shot,
  traces,
  waitForState,
  waitIdle,
} from './harness.mjs';

before(launch);
after(close);

const assistantMessages = (page) => page.locator('[data-testid="message"][data-role="assistant"]');
const lastTrace = (fixture) => traces(fixture).at(-1);

test(
  'a. approve: the call runs, the card completes with the output, the assistant follows up',
  scenario('a-approve', 'approvals', async (page, name) => {
    const before = traces('approvals').length;
    await page.evaluate(() => (window.__sameDocument = true));
    await shot(page, `${name}-1-empty`);

    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    const delete_ = card(page, 'call-delete');
    assert.equal(await delete_.getAttribute('data-tool-name'), 'delete_file');
    assert.match(await delete_.getByTestId('tool-input').innerText(), /"path": "notes.txt"/);
    assert.equal(await delete_.getByTestId('tool-state-label').innerText(), 'Waiting for approval');
    assert.equal(await page.getByTestId('chat-status').getAttribute('data-status'), 'waiting');
    await shot(page, `${name}-2-approval-requested`);

    await delete_.getByTestId('approve-button').click();
    await waitForState(page, 'call-delete', 'output-available');
    await waitIdle(page);
    assert.equal(await delete_.getAttribute('data-decision'), 'approved');
    assert.equal(await delete_.getByTestId('tool-state-label').innerText(), 'Completed');
    assert.deepEqual(JSON.parse(await delete_.getByTestId('tool-output').innerText()), { deleted: 'notes.txt' });
    await page.getByText('Thanks, I followed your decision').waitFor();
    assert.equal(await assistantMessages(page).count(), 1, 'the continuation extends the same assistant message');
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
    await shot(page, `${name}-3-completed`);

    const [first, second] = traces('approvals').slice(before);
    assert.ok(first && second, 'two model calls: the request and the continuation');
    const result = promptParts(second).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-delete');
    assert.deepEqual(result.output, { type: 'json', value: { deleted: 'notes.txt' } });
  }),
);

test(
  'b. deny with a reason: the card shows it and the model receives execution-denied with it',
  scenario('b-deny', 'approvals', async (page, name) => {
    const before = traces('approvals').length;
    const reason = 'Keep it, I still need those notes';
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    const delete_ = card(page, 'call-delete');

    await delete_.getByTestId('deny-button').click();
    const reasonInput = delete_.getByTestId('deny-reason-input');
    await reasonInput.waitFor();
    assert.equal(await reasonInput.evaluate((input) => input === document.activeElement), true, 'focus moves to the reason');
    await reasonInput.fill(reason);
    await shot(page, `${name}-1-reason`);

    await delete_.getByTestId('confirm-deny-button').click();
    await waitForState(page, 'call-delete', 'output-denied');
    await waitIdle(page);
    assert.equal(await delete_.getByTestId('tool-state-label').innerText(), 'Denied');
    assert.equal(await delete_.getByTestId('tool-denial-reason').innerText(), reason);
    assert.equal(await delete_.getByTestId('tool-output').count(), 0, 'nothing ran');
    await page.getByText('Thanks, I followed your decision').waitFor();
    await shot(page, `${name}-2-denied`);

    const continuation = traces('approvals').slice(before)[1];
    assert.ok(continuation, 'the continuation reached the model');
    const result = promptParts(continuation).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-delete');
    assert.deepEqual(result.output, { type: 'execution-denied', reason });
  }),
);

test(
  'c. edit the input, then approve: the edited call runs and the model sees it',
  scenario('c-edit', 'approvals', async (page, name) => {
    const before = traces('approvals').length;
    const edited = { path: 'drafts/old-notes.txt' };
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    const delete_ = card(page, 'call-delete');

    await delete_.getByTestId('edit-button').click();
    const editor = delete_.getByTestId('edit-input-textarea');
    assert.deepEqual(JSON.parse(await editor.inputValue()), { path: 'notes.txt' }, 'prefilled with the input');
    await editor.fill('{"path": "drafts/old-notes.txt"');
    await delete_.getByTestId('edit-error').waitFor();
    assert.equal(await delete_.getByTestId('approve-edited-button').isDisabled(), true, 'invalid JSON blocks approval');
    await shot(page, `${name}-1-invalid-json`);

    await editor.fill(JSON.stringify(edited, null, 2));
    assert.equal(await delete_.getByTestId('edit-error').isHidden(), true);
    assert.equal(await delete_.getByTestId('approve-edited-button').isEnabled(), true);
    await shot(page, `${name}-2-edited`);

    await delete_.getByTestId('approve-edited-button').click();
    await waitForState(page, 'call-delete', 'output-available');
    await waitIdle(page);
    assert.deepEqual(JSON.parse(await delete_.getByTestId('tool-output').innerText()), { deleted: edited.path });
    assert.deepEqual(JSON.parse(await delete_.getByTestId('tool-input').innerText()), edited);
    await shot(page, `${name}-3-completed`);

    const continuation = traces('approvals').slice(before)[1];
    assert.ok(continuation, 'the continuation reached the model');
    const parts = promptParts(continuation);
    const call = parts.find((p) => p.type === 'tool-call' && p.toolCallId === 'call-delete');
    assert.deepEqual(call.input, edited, 'the prompt shows the edited call');
    const result = parts.find((p) => p.type === 'tool-result' && p.toolCallId === 'call-delete');
    assert.deepEqual(result.output, { type: 'json', value: { deleted: edited.path } });
  }),
);

test(
  'd. chained approvals: the continuation asks again, both approved without a reload',
  scenario('d-chained', 'chained', async (page, name) => {
    const before = traces('chained').length;
    await page.evaluate(() => (window.__sameDocument = true));
    await send(page, 'Clean up the old log, then pay Bob 5000');
    await waitForState(page, 'call-log', 'approval-requested');
    await shot(page, `${name}-1-first-approval`);

    await card(page, 'call-log').getByTestId('approve-button').click();
    await waitForState(page, 'call-pay', 'approval-requested');
    await waitIdle(page);
    await waitForState(page, 'call-log', 'output-available');
    assert.deepEqual(JSON.parse(await card(page, 'call-log').getByTestId('tool-output').innerText()), {
      deleted: 'logs/old.log',
    });
    assert.equal(await assistantMessages(page).count(), 1);
    await page.mouse.move(0, 0); // no hover effects in the picture
    await shot(page, `${name}-2-second-approval`);
    // The README picture: a finished call that needed approval and the next one waiting (1280x800).
    if (DOCS_SCREENSHOT) await page.screenshot({ path: DOCS_SCREENSHOT });

    await card(page, 'call-pay').getByTestId('approve-button').click();
    await waitForState(page, 'call-pay', 'output-available');
    await page.getByText('Both done: the log is deleted').waitFor();
    await waitIdle(page);
    assert.deepEqual(JSON.parse(await card(page, 'call-pay').getByTestId('tool-output').innerText()), {
      transferred: 5000,
      to: 'Bob',
    });
    assert.equal(await assistantMessages(page).count(), 1, 'one assistant message across both continuations');
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
    await shot(page, `${name}-3-completed`);

    const calls = traces('chained').slice(before);
    assert.equal(calls.length, 3, 'request, first continuation, second continuation');
    const results = promptParts(calls[2]).filter((p) => p.type === 'tool-result');
    assert.deepEqual(
      results.map((r) => [r.toolCallId, r.output.type]),
      [
        ['call-log', 'json'],
        ['call-pay', 'json'],
      ],
    );
  }),
);

test(
  'e1. a model error mid-stream shows the banner',
  scenario('e1-stream-error', 'model-error', async (page, name) => {
    await send(page, 'Summarise my inbox');
    const banner = page.getByTestId('error-banner');
    await banner.waitFor();
    await waitIdle(page);
    assert.match(await banner.innerText(), /overloaded/);
    assert.equal(await page.getByTestId('chat-status').getAttribute('data-status'), 'error');
    assert.equal(await page.getByTestId('send-button').isEnabled(), true, 'the composer works again');
    await page.getByText('Let me look into that').waitFor();
    await shot(page, `${name}-1-banner`);
    await page.getByTestId('error-banner-dismiss').click();
    await banner.waitFor({ state: 'hidden' });
  }),
);

test(
  'e2. an HTTP 400 from the server (a tampered approval) shows the banner and nothing runs',
  scenario('e2-http-error', 'approvals', async (page, name) => {
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    await waitIdle(page);
    const before = traces('approvals').length;
    // Tamper with the approval id on its way to the server: the server must refuse it.
    await page.route('**/api/chat', async (route) => {
      const body = JSON.parse(route.request().postData());
      for (const part of body.messages.at(-1).parts) if (part.approval) part.approval.id += 'X';
      await route.continue({ postData: JSON.stringify(body) });
    });
    await card(page, 'call-delete').getByTestId('approve-button').click();
    const banner = page.getByTestId('error-banner');
    await banner.waitFor();
    await waitIdle(page);
    // The server keeps the conversation (the default store): an approval id it never issued for this call is
    // refused before any signature is looked at.
    assert.match(await page.getByTestId('error-banner-title').innerText(), /history_mismatch/);
    assert.match(await page.getByTestId('error-banner-detail').innerText(), /approval id is not the one the server issued/);
    assert.equal(await card(page, 'call-delete').getAttribute('data-state'), 'approval-responded');
    assert.equal(await page.getByTestId('error-banner-retry').isVisible(), true);
    await shot(page, `${name}-1-banner`);
    assert.equal(traces('approvals').length, before, 'the model was not called');

    // Without the tampering, "Try again" goes through.
    await page.unroute('**/api/chat');
    await page.getByTestId('error-banner-retry').click();
    await waitForState(page, 'call-delete', 'output-available');
    await banner.waitFor({ state: 'hidden' });
    await shot(page, `${name}-2-retried`);
  }),
);

test(
  'f. a client-executed tool (ask_user): the answer goes back as the output and the chat continues',
  scenario('f-client-tool', 'client-tool', async (page, name) => {
    const before = traces('client-tool').length;
    await send(page, 'Book me a flight to Lisbon');
    await waitForState(page, 'call-ask', 'input-available');
    await waitIdle(page);
    const ask = card(page, 'call-ask');
    assert.equal(await ask.getByTestId('tool-state-label').innerText(), 'Needs your answer');
    await ask.getByTestId('client-tool-input').fill('Window, please');
    await shot(page, `${name}-1-question`);
    await ask.getByTestId('client-tool-submit').click();
    await waitForState(page, 'call-ask', 'output-available');
    await page.getByText('Your seat preference is saved').waitFor();
    await waitIdle(page);
    await shot(page, `${name}-2-answered`);

    const continuation = traces('client-tool').slice(before)[1];
    assert.ok(continuation, 'the continuation reached the model');
    const result = promptParts(continuation).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-ask');
    assert.deepEqual(result.output, { type: 'text', value: 'Window, please' });
  }),
);

test(
  'g. a mixed batch: harmless calls run, the chat continues only after every decision',
  scenario('g-mixed-batch', 'mixed-batch', async (page, name) => {
    const before = traces('mixed-batch').length;
    await send(page, 'Check the Paris forecast, delete the 2023 archive and pay Bob 5000');
    await waitForState(page, 'call-archive', 'approval-requested');
    await waitForState(page, 'call-invoice', 'approval-requested');
    await waitForState(page, 'call-weather', 'output-available');
    await waitIdle(page);
    assert.equal(await page.getByTestId('pending-note').isVisible(), true);
    await shot(page, `${name}-1-two-pending`);

    await card(page, 'call-archive').getByTestId('approve-button').click();
    await waitForState(page, 'call-archive', 'approval-responded');
    assert.equal(traces('mixed-batch').length - before, 1, 'no request while a decision is open');
    await shot(page, `${name}-2-one-answered`);

    const invoice = card(page, 'call-invoice');
    await invoice.getByTestId('deny-button').click();
    await invoice.getByTestId('deny-reason-input').fill('Wait for the corrected invoice');
    await invoice.getByTestId('deny-reason-input').press('Enter');
    await waitForState(page, 'call-archive', 'output-available');
    await waitForState(page, 'call-invoice', 'output-denied');
    await page.getByText('I applied both of your decisions').waitFor();
    await waitIdle(page);
    await shot(page, `${name}-3-completed`);

    const continuation = traces('mixed-batch').slice(before)[1];
    const results = Object.fromEntries(
      promptParts(continuation)
        .filter((p) => p.type === 'tool-result')
        .map((r) => [r.toolCallId, r.output]),
    );
    assert.deepEqual(results['call-archive'], { type: 'json', value: { deleted: 'reports/2023-archive.zip' } });
    assert.deepEqual(results['call-invoice'], { type: 'execution-denied', reason: 'Wait for the corrected invoice' });
    assert.equal(results['call-weather'].type, 'json');
  }),
);

test(
  'h. narrow (mobile) layout: the approval card and its buttons fit the screen',
  scenario(
    'h-narrow',
    'approvals',
    async (page, name) => {
      await send(page, 'Please delete notes.txt');
      await waitForState(page, 'call-delete', 'approval-requested');
      await waitIdle(page);
      const width = page.viewportSize().width;
      for (const testid of ['approve-button', 'deny-button', 'edit-button', 'always-allow-button', 'never-allow-button']) {
        const box = await card(page, 'call-delete').getByTestId(testid).boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= width, `${testid} is on screen`);
      }
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, 'no horizontal scrolling');
      await shot(page, `${name}-1-approval`);
      await card(page, 'call-delete').getByTestId('edit-button').click();
      await shot(page, `${name}-2-editor`);
    },
    { width: 390, height: 844 },
  ),
);

test(
  'reload: the stored conversation comes back with its pending approval, which still works; the audit view lists what happened',
  scenario('k-reload-audit', 'approvals', async (page, name) => {
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    assert.match(page.url(), /#chat=chat-/, 'the conversation id is in the address');

    await page.reload();
    await waitForState(page, 'call-delete', 'approval-requested');
    assert.equal(await page.getByTestId('chat-status').getAttribute('data-status'), 'waiting');
    await shot(page, `${name}-1-restored-pending`);
    await card(page, 'call-delete').getByTestId('approve-button').click();
    await waitForState(page, 'call-delete', 'output-available');
    await waitIdle(page);

    await page.reload();
    await waitForState(page, 'call-delete', 'output-available');
    assert.deepEqual(
      JSON.parse(await card(page, 'call-delete').getByTestId('tool-output').innerText()),
      { deleted: 'notes.txt' },
    );
    await page.getByTestId('audit-button').click();
    await page.locator('[data-testid="audit-event"][data-kind="executed"]').waitFor();
    const kinds = await page
      .locator('[data-testid="audit-event"]')
      .evaluateAll((nodes) => nodes.map((node) => node.dataset.kind));
    assert.deepEqual(kinds, ['issued', 'approved', 'executed']);
    await shot(page, `${name}-2-audit`);

    const before = page.url();
    await page.getByTestId('new-chat-button').click();
    assert.match(page.url(), /#chat=chat-/);
    assert.notEqual(page.url(), before, 'a new chat has a new id');
    await page.getByTestId('audit-note').filter({ hasText: 'No approvals in this conversation yet.' }).waitFor();
  }),
);
