// The approval inbox. fixtures/inbox.toml routes `delete_file` to group finance (bob, carol,
// erin) with a quorum of 2, and fixtures/inbox.tokens signs in alice, bob and carol: alice asks in
// the chat and waits; bob and carol approve in their inboxes, each in their own browser context;
// the server then continues the run, and alice's page shows the output and the model's answer
// without her doing anything. The single-user server of fixtures/approvals (no principals) lists
// the chat's own approval in the inbox, where it can be edited and approved.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import {
  card,
  close,
  isolatedContext,
  launch,
  openChat,
  promptParts,
  scenario,
  send,
  server,
  shot,
  traces,
  waitForState,
  waitIdle,
} from './harness.mjs';

before(launch);
after(close);

async function signIn(page, token) {
  await page.getByTestId('sign-in').waitFor({ state: 'visible' });
  await page.getByTestId('sign-in-token').fill(token);
  await page.getByTestId('sign-in-submit').click();
  await page.getByTestId('sign-in').waitFor({ state: 'hidden' });
}

async function openInbox(page) {
  await page.getByTestId('inbox-button').click();
  await page.getByTestId('inbox-panel').waitFor();
}

const chatIdOf = (page) => decodeURIComponent(/#chat=([^&]+)/.exec(page.url())[1]);

// The inbox item of a chat's tool call, in the pending list or in "Recently decided".
const pendingItem = (page, chatId, toolCallId) =>
  page.locator(
    `[data-testid="inbox-list"] [data-testid="inbox-item"][data-conversation-id="${chatId}"][data-tool-call-id="${toolCallId}"]`,
  );
const recentItem = (page, chatId, toolCallId) =>
  page.locator(
    `[data-testid="inbox-recent"] [data-testid="inbox-item"][data-conversation-id="${chatId}"][data-tool-call-id="${toolCallId}"]`,
  );

// Runs a scenario with several people's pages; on failure saves a screenshot of each.
async function withPeople(name, body) {
  const contexts = [];
  const pages = {};
  // `isolated`: in a browser context of their own; `noStream`: where `api/approvals/stream` fails.
  const open = async (who, fixture, { isolated = false, noStream = false } = {}) => {
    let on;
    if (isolated) {
      on = await isolatedContext();
      contexts.push(on);
      if (noStream) await on.route('**/api/approvals/stream', (route) => route.abort());
    }
    pages[who] = await openChat(fixture, undefined, on);
    return pages[who];
  };
  try {
    await body(open);
    const errors = Object.entries(pages).flatMap(([who, page]) =>
      page.problems.filter((problem) => problem.startsWith('page error')).map((problem) => `${who}: ${problem}`),
    );
    if (errors.length) throw new Error(`uncaught errors in the pages:\n${errors.join('\n')}`);
  } catch (error) {
    for (const [who, page] of Object.entries(pages)) {
      await shot(page, `${name}-${who}-FAILED`).catch(() => {});
      if (page.problems.length) error.message += `\n${who}: ${page.problems.join(`\n${who}: `)}`;
    }
    throw error;
  } finally {
    for (const page of Object.values(pages)) await page.close().catch(() => {});
    for (const context of contexts) await context.close().catch(() => {});
  }
}

test('inbox: a call routed to group finance waits for two approvals, then the server continues the chat', () =>
  withPeople('inbox-routed', async (open) => {
    const name = 'inbox-routed';
    const before = traces('inbox').length;

    // alice asks; the call waits for finance, and her card offers no approve/deny, only "Withdraw".
    const alice = await open('alice', 'inbox');
    await signIn(alice, 'token-of-alice');
    await alice.evaluate(() => (window.__sameDocument = true));
    await send(alice, 'Please delete the old payroll export');
    await waitForState(alice, 'call-payroll', 'approval-requested');
    await waitIdle(alice);
    const payroll = card(alice, 'call-payroll');
    const waitingFor = payroll.getByTestId('waiting-for');
    assert.match(await waitingFor.innerText(), /^Waiting for group finance \(0 of 2\)$/);
    assert.match(await payroll.getByTestId('tool-reason').innerText(), /two approvals from finance/);
    assert.equal(await payroll.getByTestId('tool-state-label').innerText(), 'Waiting for approvers');
    assert.equal(await payroll.getByTestId('approve-button').count(), 0, 'alice is not an approver');
    assert.equal(await payroll.getByTestId('deny-button').count(), 0);
    assert.equal(await payroll.getByTestId('always-allow-button').count(), 0);
    assert.equal(await payroll.getByTestId('withdraw-button').isVisible(), true, 'the requester may withdraw');
    assert.equal(await alice.getByTestId('chat-status').getAttribute('data-status'), 'waiting');
    assert.match(await alice.getByTestId('chat-status').innerText(), /Waiting for approvers/);
    await alice.getByTestId('waiting-note').waitFor();
    const chatId = chatIdOf(alice);
    assert.equal(traces('inbox').length - before, 1, 'one model call so far');
    await shot(alice, `${name}-1-alice-waiting`);

    // bob's inbox lists it live, with everything he needs to decide.
    const bob = await open('bob', 'inbox', { isolated: true });
    await signIn(bob, 'token-of-bob');
    await bob.getByTestId('inbox-count').filter({ hasText: '1' }).waitFor();
    await openInbox(bob);
    await bob.locator('[data-testid="inbox-mode"][data-mode="live"]').waitFor();
    const bobItem = pendingItem(bob, chatId, 'call-payroll');
    await bobItem.waitFor();
    assert.equal(await bobItem.getByTestId('inbox-tool').innerText(), 'delete_file');
    assert.equal(await bobItem.getByTestId('inbox-requester').innerText(), 'alice');
    assert.equal(await bobItem.getByTestId('inbox-conversation').innerText(), chatId);
    assert.equal(await bobItem.getByTestId('inbox-tally').innerText(), '0 of 2');
    assert.deepEqual(JSON.parse(await bobItem.getByTestId('inbox-input').innerText()), { path: 'exports/payroll-2023.csv' });
    assert.match(await bobItem.getByTestId('inbox-reason').innerText(), /two approvals from finance/);
    assert.equal(await bobItem.getByTestId('inbox-edit-button').count(), 0, 'no edits with a quorum of 2');
    await shot(bob, `${name}-2-bob-inbox`);

    // A refused vote shows the server's message (an edit, slipped into the request, needs a single approver).
    await bob.route('**/api/approvals/*', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      const body = JSON.parse(route.request().postData());
      await route.continue({ postData: JSON.stringify({ ...body, editedInput: { path: 'other.csv' } }) });
    });
    await bobItem.getByTestId('inbox-approve-button').click();
    const refusal = bobItem.getByTestId('inbox-error');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), /cannot approve different inputs.*\(edit_needs_single_approver\)/);
    assert.equal(await bobItem.getByTestId('inbox-tally').innerText(), '0 of 2', 'nothing counted');
    await shot(bob, `${name}-3-bob-refused`);
    await bob.unroute('**/api/approvals/*');

    // bob approves: 1 of 2, his vote is listed, and he cannot vote again.
    await bobItem.getByTestId('inbox-approve-button').click();
    await bobItem.getByTestId('inbox-tally').filter({ hasText: '1 of 2' }).waitFor();
    await bobItem.getByTestId('inbox-my-vote').waitFor();
    assert.equal(await refusal.count(), 0, 'the earlier error is gone');
    assert.equal(await bobItem.getByTestId('inbox-approve-button').count(), 0, 'no second approval');
    assert.equal(await bobItem.locator('[data-testid="vote"][data-principal="bob"]').getAttribute('data-decision'), 'approve');
    await bob.getByTestId('inbox-count').waitFor({ state: 'hidden' });
    const again = await bob.evaluate(async (path) => {
      const response = await fetch(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${sessionStorage.getItem('toolgate.token')}` },
        body: JSON.stringify({ decision: 'approve' }),
      });
      return { status: response.status, body: await response.json() };
    }, `api/approvals/${await bobItem.getAttribute('data-approval-id')}`);
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'already_voted');
    await shot(bob, `${name}-4-bob-voted`);

    // alice's card follows: 1 of 2, bob's vote; nothing ran yet.
    await waitingFor.filter({ hasText: 'Waiting for group finance (1 of 2)' }).waitFor();
    await payroll.locator('[data-testid="vote"][data-principal="bob"]').waitFor();
    assert.equal(await payroll.getAttribute('data-state'), 'approval-requested');
    assert.equal(traces('inbox').length - before, 1, 'the model is not called before the quorum');
    await shot(alice, `${name}-5-alice-one-of-two`);

    // carol approves: the quorum is reached and the item leaves the pending list. Her page cannot
    // open the stream, so her inbox reads the list every few seconds instead.
    const carol = await open('carol', 'inbox', { isolated: true, noStream: true });
    await signIn(carol, 'token-of-carol');
    await openInbox(carol);
    await carol.locator('[data-testid="inbox-mode"][data-mode="polling"]').waitFor();
    const carolItem = pendingItem(carol, chatId, 'call-payroll');
    await carolItem.waitFor();
    assert.equal(await carolItem.getByTestId('inbox-tally').innerText(), '1 of 2');
    assert.match(await carolItem.getByTestId('inbox-votes').innerText(), /bob approved/);
    await carolItem.getByTestId('inbox-approve-button').click();
    await carolItem.waitFor({ state: 'detached' });
    await recentItem(carol, chatId, 'call-payroll').waitFor();
    await shot(carol, `${name}-6-carol-decided`);
    await pendingItem(bob, chatId, 'call-payroll').waitFor({ state: 'detached' });
    await recentItem(bob, chatId, 'call-payroll').waitFor();

    // alice did nothing: the server ran the call and the model answered; her page shows both.
    await waitForState(alice, 'call-payroll', 'output-available');
    await alice.getByText('Finance approved it: the payroll export is deleted.').waitFor();
    await waitIdle(alice);
    assert.deepEqual(JSON.parse(await payroll.getByTestId('tool-output').innerText()), {
      deleted: 'exports/payroll-2023.csv',
    });
    assert.equal(await payroll.getByTestId('tool-provenance').innerText(), 'Approved by bob and carol');
    assert.equal(await alice.locator('[data-testid="message"][data-role="assistant"]').count(), 1);
    assert.equal(await alice.getByTestId('chat-status').getAttribute('data-status'), 'ready');
    assert.equal(await alice.evaluate(() => window.__sameDocument), true, 'no reload');
    await shot(alice, `${name}-7-alice-completed`);

    // carol downloads the decision's signed receipt from "Recently decided": it names both votes.
    const decided = recentItem(carol, chatId, 'call-payroll');
    const [download] = await Promise.all([
      carol.waitForEvent('download'),
      decided.getByTestId('inbox-receipt-button').click(),
    ]);
    const receipt = JSON.parse(await readFile(await download.path(), 'utf8'));
    assert.equal(receipt.type, 'receipt');
    assert.equal(receipt.payload.approvalId, await decided.getAttribute('data-approval-id'));
    assert.deepEqual(receipt.payload.votes.map((vote) => vote.principal), ['bob', 'carol']);

    const calls = traces('inbox').slice(before);
    assert.equal(calls.length, 2, 'the request and the server-side continuation');
    const result = promptParts(calls[1]).find((p) => p.type === 'tool-result' && p.toolCallId === 'call-payroll');
    assert.deepEqual(result.output, { type: 'json', value: { deleted: 'exports/payroll-2023.csv' } });
  }));

test('inbox: after a reload, the requester withdraws a routed request; the call is denied and the chat goes on', () =>
  withPeople('inbox-withdraw', async (open) => {
    const name = 'inbox-withdraw';
    const alice = await open('alice', 'inbox');
    await signIn(alice, 'token-of-alice');
    await send(alice, 'Please delete the old payroll export');
    await waitForState(alice, 'call-payroll', 'approval-requested');
    await waitIdle(alice);
    // A reload restores the waiting request from the stored chat.
    await alice.reload();
    await waitForState(alice, 'call-payroll', 'approval-requested');
    const payroll = card(alice, 'call-payroll');
    assert.match(await payroll.getByTestId('waiting-for').innerText(), /^Waiting for group finance \(0 of 2\)$/);
    await payroll.getByTestId('withdraw-button').click();
    await waitForState(alice, 'call-payroll', 'output-denied');
    await waitIdle(alice);
    assert.equal(await payroll.getByTestId('tool-denial-reason').innerText(), 'withdrawn by the requester');
    assert.equal(await payroll.getByTestId('tool-output').count(), 0, 'nothing ran');
    await alice.getByText('Finance approved it').waitFor(); // the scripted model's next turn
    await shot(alice, `${name}-1-withdrawn`);
  }));

test(
  'inbox, single user: the chat\'s approval is listed; edited and approved there, the chat continues by itself',
  scenario('inbox-single-user', 'approvals', async (page, name) => {
    await page.evaluate(() => (window.__sameDocument = true));
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    await waitIdle(page);
    const chatId = chatIdOf(page);
    assert.equal(await card(page, 'call-delete').getByTestId('approve-button').isVisible(), true, 'decided here or there');

    await openInbox(page);
    const item = pendingItem(page, chatId, 'call-delete');
    await item.waitFor();
    assert.equal(await item.getByTestId('inbox-requester').innerText(), 'you');
    assert.equal(await item.getByTestId('inbox-tally').innerText(), '0 of 1');
    await item.getByTestId('inbox-edit-button').click();
    const editor = item.getByTestId('inbox-edit-input');
    assert.deepEqual(JSON.parse(await editor.inputValue()), { path: 'notes.txt' });
    await editor.fill('{"path": ');
    await item.getByTestId('inbox-edit-error').waitFor();
    assert.equal(await item.getByTestId('inbox-approve-edited-button').isDisabled(), true);
    await editor.fill('{"path": "drafts/notes.txt"}');
    await shot(page, `${name}-1-editing`);
    await item.getByTestId('inbox-approve-edited-button').click();
    await item.waitFor({ state: 'detached' });

    const delete_ = card(page, 'call-delete');
    await waitForState(page, 'call-delete', 'output-available');
    await page.getByText('Thanks, I followed your decision').waitFor();
    await waitIdle(page);
    assert.deepEqual(JSON.parse(await delete_.getByTestId('tool-output').innerText()), { deleted: 'drafts/notes.txt' });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
    await shot(page, `${name}-2-completed`);
  }),
);

test(
  "inbox: a notification's view link (approvals/{id}) opens the inbox on that approval",
  scenario('inbox-view-link', 'approvals', async (page, name) => {
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    await waitIdle(page);
    const chatId = chatIdOf(page);
    await openInbox(page);
    const listed = pendingItem(page, chatId, 'call-delete');
    await listed.waitFor();
    const id = await listed.getAttribute('data-approval-id');

    await page.goto(new URL(`approvals/${encodeURIComponent(id)}`, server('approvals').url).href);
    await page.getByTestId('inbox-panel').waitFor();
    assert.match(page.url(), new RegExp(`\\?approval=${encodeURIComponent(id)}`));
    const focused = page.locator(`[data-testid="inbox-item"][data-approval-id="${id}"]`);
    await focused.waitFor();
    assert.match(await focused.getAttribute('class'), /inbox-item-focus/);
    await shot(page, `${name}-focused`);
  }),
);
