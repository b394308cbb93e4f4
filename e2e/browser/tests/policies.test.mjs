// Approval policies and sticky decisions in the page, against `toolgate serve --config
// fixtures/policies.toml` with the scripted model fixtures/policies.json:
//
//   turn 0: get_weather {Paris}          asked by the rule `ask-weather`
//           delete_file {/etc/passwd}    refused by the rule `no-etc`, nobody is asked
//           delete_file {tmp/a.txt}      asked by the tool itself (delete_file always asks)
//   turn 1: delete_file {tmp/b.txt}      asked, unless a sticky decision of this chat decides it
//   turn 2: text
//
// Each scenario is a new chat, so it plays the script from turn 0 and its sticky decisions
// (scoped to the chat) do not leak into the others.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { card, close, launch, promptParts, scenario, send, shot, traces, waitForState, waitIdle } from './harness.mjs';

before(launch);
after(close);

const FIXTURE = 'policies';
const ASK_WEATHER = 'Asked because: rule `ask-weather` matched tool `get_weather`';
const DENY_ETC = 'Denied: rule `no-etc` matched tool `delete_file`, /path = "/etc/passwd": system files stay untouched';

// Sends the request and waits for the first answer: two cards waiting, one refused.
async function start(page) {
  await send(page, 'Check the Paris weather, then clean up /etc/passwd and my temp files');
  await waitForState(page, 'call-weather', 'approval-requested');
  await waitForState(page, 'call-etc', 'output-denied');
  await waitForState(page, 'call-a', 'approval-requested');
  await waitIdle(page);
}

const reason = (page, toolCallId) => card(page, toolCallId).getByTestId('tool-reason');
const chatId = (page) => decodeURIComponent(/#chat=([^&]+)/.exec(page.url())[1]);
const decisionItems = (page) => page.getByTestId('decisions-list').getByTestId('decision');

async function openDecisions(page) {
  await page.getByTestId('decisions-button').click();
  await page.getByTestId('decisions-panel').waitFor();
  assert.equal(await page.getByTestId('decisions-button').getAttribute('aria-expanded'), 'true');
}

// The body of the next POST to `url` (a glob) once `action` has run.
async function postedBody(page, url, action) {
  const [request] = await Promise.all([page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith(url)), action()]);
  return JSON.parse(request.postData());
}

test(
  'policy a. an ask rule: the card says which rule asked; the reason survives a reload and goes back to the server',
  scenario('policy-a-ask', FIXTURE, async (page, name) => {
    const before = traces(FIXTURE).length;
    await start(page);
    const weather = card(page, 'call-weather');
    assert.equal(await reason(page, 'call-weather').innerText(), ASK_WEATHER);
    assert.equal(await reason(page, 'call-weather').getAttribute('data-decision'), 'ask');
    assert.equal(await reason(page, 'call-weather').evaluate((node) => node.children.length), 0, 'plain text');
    assert.equal(await weather.getByTestId('approve-button').isEnabled(), true);
    // The data parts are no bubbles of their own: the rule is named once, on its card.
    assert.equal(await page.getByText('rule `ask-weather`').count(), 1);
    assert.equal(await page.locator('[data-testid="message"][data-role="assistant"] [data-testid="text-part"]').count(), 1);
    await shot(page, `${name}-1-asked`);

    // The reason is part of the stored conversation.
    await page.reload();
    await waitForState(page, 'call-weather', 'approval-requested');
    assert.equal(await reason(page, 'call-weather').innerText(), ASK_WEATHER);
    assert.equal(await reason(page, 'call-etc').innerText(), DENY_ETC);

    // ... and of the messages the page sends back.
    await card(page, 'call-weather').getByTestId('approve-button').click();
    const body = await postedBody(page, '/api/chat', () => card(page, 'call-a').getByTestId('approve-button').click());
    const parts = body.messages.at(-1).parts.filter((part) => part.type === 'data-toolgate-reason');
    const weatherPart = parts.find((part) => part.id === 'call-weather');
    assert.deepEqual(Object.keys(weatherPart).sort(), ['data', 'id', 'type']);
    assert.equal(weatherPart.data.toolCallId, 'call-weather');
    assert.equal(weatherPart.data.decision, 'ask');
    assert.equal(typeof weatherPart.data.approvalId, 'string');
    assert.equal(`Asked because: ${weatherPart.data.reason}`, ASK_WEATHER);
    assert.equal(parts.find((part) => part.id === 'call-etc')?.data.decision, 'deny');

    // Without a sticky decision the next delete asks again.
    await waitForState(page, 'call-b', 'approval-requested');
    await waitIdle(page);
    await waitForState(page, 'call-weather', 'output-available');
    assert.equal(await reason(page, 'call-weather').innerText(), ASK_WEATHER, 'the reason stays on the answered card');
    await shot(page, `${name}-2-continued`);

    // The refused call reaches the model as denied, with the rule's reason (from the stored reason part).
    const continuation = traces(FIXTURE).slice(before).at(-1);
    const denied = promptParts(continuation).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-etc');
    assert.equal(denied.output.type, 'execution-denied');
    assert.match(denied.output.reason, /rule `no-etc`/);
  }),
);

test(
  'policy b. a deny rule: the card says which rule refused the call and offers nothing to answer',
  scenario('policy-b-deny', FIXTURE, async (page, name) => {
    await start(page);
    const etc = card(page, 'call-etc');
    assert.equal(await etc.getByTestId('tool-state-label').innerText(), 'Denied');
    assert.equal(await reason(page, 'call-etc').innerText(), DENY_ETC);
    assert.equal(await reason(page, 'call-etc').getAttribute('data-decision'), 'deny');
    assert.equal(await etc.getAttribute('data-decision'), null, 'no person decided');
    for (const testid of ['approve-button', 'deny-button', 'edit-button', 'always-allow-button', 'never-allow-button']) {
      assert.equal(await etc.getByTestId(testid).count(), 0, `no ${testid}`);
    }
    assert.equal(await etc.getByTestId('tool-output').count(), 0, 'nothing ran');
    assert.equal(await page.getByTestId('pending-note').innerText(), '2 tool calls are waiting for you. The assistant continues once all are answered.');
    await etc.scrollIntoViewIfNeeded();
    await shot(page, `${name}-1-refused`);
  }),
);

test(
  'policy c. "Always allow in this chat": the decision is listed, the next delete runs without asking, "Revoke" removes it',
  scenario('policy-c-always-allow', FIXTURE, async (page, name) => {
    const before = traces(FIXTURE).length;
    await start(page);
    await openDecisions(page);
    await page.getByTestId('decisions-note').filter({ hasText: 'No sticky decisions for this chat.' }).waitFor();
    assert.equal(await decisionItems(page).count(), 0);

    const a = card(page, 'call-a');
    const saved = await postedBody(page, '/api/decisions', () => a.getByTestId('always-allow-button').click());
    assert.deepEqual(saved, { action: 'allow', tool: 'delete_file', scope: 'conversation', conversationId: chatId(page) });
    await waitForState(page, 'call-a', 'approval-responded');
    assert.equal(await a.getAttribute('data-decision'), 'approved');

    // The panel refreshes after the decision is added.
    const item = decisionItems(page).first();
    await item.waitFor();
    assert.equal(await decisionItems(page).count(), 1);
    assert.equal(await item.getAttribute('data-action'), 'allow');
    assert.equal(await item.getAttribute('data-tool'), 'delete_file');
    assert.equal(await item.getByTestId('decision-action').innerText(), 'Always allow');
    assert.equal(await item.getByTestId('decision-scope').innerText(), 'in this chat');
    assert.equal(await item.getByTestId('decision-expiry').innerText(), 'no expiry');
    assert.equal(await item.getByTestId('decision-input').count(), 0, 'any input');
    assert.equal(traces(FIXTURE).length - before, 1, 'no request while the weather call waits');
    await shot(page, `${name}-1-decision-listed`);

    // The weather call is still asked by its rule; once it is answered the chat continues, and the
    // second delete (turn 1) runs without a card asking.
    await card(page, 'call-weather').getByTestId('approve-button').click();
    await page.getByText('All done with the clean-up.').waitFor();
    await waitIdle(page);
    await waitForState(page, 'call-a', 'output-available');
    const b = card(page, 'call-b');
    await waitForState(page, 'call-b', 'output-available');
    assert.deepEqual(JSON.parse(await b.getByTestId('tool-output').innerText()), { deleted: 'tmp/b.txt' });
    assert.equal(await b.getAttribute('data-decision'), null, 'nobody was asked');
    assert.equal(await b.getByTestId('tool-reason').count(), 0);
    assert.equal(await page.getByTestId('chat-status').getAttribute('data-status'), 'ready');
    await shot(page, `${name}-2-ran-without-asking`);

    const calls = traces(FIXTURE).slice(before);
    assert.equal(calls.length, 3, 'the request, then one continuation through turns 1 and 2');
    const result = promptParts(calls[2]).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-b');
    assert.deepEqual(result.output, { type: 'json', value: { deleted: 'tmp/b.txt' } });

    // Revoke, with the keyboard: the list empties and focus stays in the panel.
    await item.getByTestId('revoke-button').focus();
    await page.keyboard.press('Enter');
    await page.getByTestId('decisions-note').filter({ hasText: 'No sticky decisions for this chat.' }).waitFor();
    assert.equal(await decisionItems(page).count(), 0);
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'decisions-close');
    await shot(page, `${name}-3-revoked`);
    await page.keyboard.press('Escape');
    await page.getByTestId('decisions-panel').waitFor({ state: 'hidden' });
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'decisions-button');
  }),
);

test(
  'policy d. "Never allow": the call is denied, and the next delete is refused by the sticky decision',
  scenario('policy-d-never', FIXTURE, async (page, name) => {
    await start(page);
    const saved = await postedBody(page, '/api/decisions', () => card(page, 'call-a').getByTestId('never-allow-button').click());
    assert.deepEqual(saved, { action: 'deny', tool: 'delete_file', scope: 'conversation', conversationId: chatId(page) });
    await waitForState(page, 'call-a', 'approval-responded');
    assert.equal(await card(page, 'call-a').getAttribute('data-decision'), 'denied');
    assert.equal(await card(page, 'call-a').getByTestId('tool-denial-reason').innerText(), 'never allow (sticky decision)');

    await card(page, 'call-weather').getByTestId('approve-button').click();
    await page.getByText('All done with the clean-up.').waitFor();
    await waitIdle(page);
    await waitForState(page, 'call-a', 'output-denied');
    await waitForState(page, 'call-b', 'output-denied');
    assert.match(await reason(page, 'call-b').innerText(), /^Denied: sticky decision `[^`]+` \(never allow `delete_file` in this conversation/);
    assert.equal(await card(page, 'call-b').getByTestId('approve-button').count(), 0);
    await shot(page, `${name}-1-refused-by-decision`);

    await openDecisions(page);
    const item = decisionItems(page).first();
    await item.waitFor();
    assert.equal(await item.getAttribute('data-action'), 'deny');
    assert.equal(await item.getByTestId('decision-action').innerText(), 'Never allow');
    await item.getByTestId('revoke-button').click();
    await page.getByTestId('decisions-note').filter({ hasText: 'No sticky decisions for this chat.' }).waitFor();
  }),
);

test(
  'policy e. "Always allow this input": listed with its exact input; a delete of another file still asks',
  scenario('policy-e-exact-input', FIXTURE, async (page, name) => {
    await start(page);
    const saved = await postedBody(page, '/api/decisions', () =>
      card(page, 'call-a').getByTestId('always-allow-input-button').click(),
    );
    assert.deepEqual(saved, {
      action: 'allow',
      tool: 'delete_file',
      scope: 'conversation',
      conversationId: chatId(page),
      input: { path: 'tmp/a.txt' },
    });
    await waitForState(page, 'call-a', 'approval-responded');

    await openDecisions(page);
    const item = decisionItems(page).first();
    await item.waitFor();
    assert.deepEqual(JSON.parse(await item.getByTestId('decision-input').innerText()), { path: 'tmp/a.txt' });
    assert.match(await item.innerText(), /exact input/);
    await shot(page, `${name}-1-exact-input`);

    await card(page, 'call-weather').getByTestId('approve-button').click();
    await waitForState(page, 'call-b', 'approval-requested');
    await waitIdle(page);
    await waitForState(page, 'call-a', 'output-available');
    assert.equal(await card(page, 'call-b').getByTestId('always-allow-button').isEnabled(), true);
  }),
);

test(
  'policy f. a sticky decision the server refuses: the card shows its error and stays unanswered',
  scenario('policy-f-refused-decision', FIXTURE, async (page, name) => {
    await start(page);
    await page.route('**/api/decisions', (route) =>
      route.request().method() === 'POST'
        ? route.fulfill({
            status: 403,
            contentType: 'application/json',
            body: JSON.stringify({ error: { code: 'forbidden', message: 'only admins may make sticky decisions' } }),
          })
        : route.continue(),
    );
    const a = card(page, 'call-a');
    await a.getByTestId('always-allow-button').click();
    const error = a.getByTestId('sticky-error');
    await error.waitFor();
    assert.match(await error.innerText(), /only admins may make sticky decisions/);
    assert.match(await error.innerText(), /forbidden/);
    assert.equal(await a.getAttribute('data-state'), 'approval-requested');
    assert.equal(await a.getByTestId('approve-button').isEnabled(), true);
    await shot(page, `${name}-1-error`);

    // The plain buttons still work, and the error goes with the answer.
    await page.unroute('**/api/decisions');
    await a.getByTestId('approve-button').click();
    await waitForState(page, 'call-a', 'approval-responded');
    assert.equal(await a.getByTestId('sticky-error').count(), 0);
  }),
);

test(
  'policy g. narrow (mobile) layout: the sticky buttons and the decisions panel fit the screen',
  scenario(
    'policy-g-narrow',
    FIXTURE,
    async (page, name) => {
      await start(page);
      const width = page.viewportSize().width;
      const a = card(page, 'call-a');
      await a.scrollIntoViewIfNeeded();
      for (const testid of ['approve-button', 'always-allow-button', 'always-allow-input-button', 'never-allow-button']) {
        const box = await a.getByTestId(testid).boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= width, `${testid} is on screen`);
      }
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, 'no horizontal scrolling');
      await shot(page, `${name}-1-card`);

      await a.getByTestId('always-allow-button').click();
      await openDecisions(page);
      await decisionItems(page).first().waitFor();
      const box = await page.getByTestId('decisions-panel').boundingBox();
      assert.ok(box.x >= 0 && box.x + box.width <= width, 'the panel is on screen');
      const revoke = await decisionItems(page).first().getByTestId('revoke-button').boundingBox();
      assert.ok(revoke.x + revoke.width <= width, 'its buttons too');
      await shot(page, `${name}-2-panel`);
    },
    { width: 390, height: 844 },
  ),
);
