// A one-time link from an e-mail, followed by a person signed in with OpenID Connect (attack 6 of the threat
// model). The server (fixtures/links-oidc.*) routes the deletion to finance and mails alice, in finance, a link;
// she opens it in the browser she signed in with, presses Approve, and the server runs the call. Before the
// link page sent `Referrer-Policy: same-origin`, the browser posted its form with `Origin: null` and the
// session cookie's origin check refused it (403 `cross_origin_request`); the Rust tests set `Origin` by hand,
// so none caught it.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { close, launch, promptParts, send, server, shot, traces, waitForState } from './harness.mjs';

const FIXTURE = 'links-oidc';
const MAIL_DIR = process.env.TOOLGATE_E2E_MAIL_DIR;
let context;

before(async () => {
  context = await launch();
});
after(close);

// The approve link of the first mail to `to`, once it arrives (bounded).
async function approveLink(to) {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const files = MAIL_DIR ? readdirSync(MAIL_DIR).filter((name) => name.endsWith('.json')) : [];
    for (const file of files.sort()) {
      const mail = JSON.parse(readFileSync(path.join(MAIL_DIR, file), 'utf8'));
      if (!mail.to.includes(to)) continue;
      const links = (mail.text ?? '').match(/http:\/\/127\.0\.0\.1:\d+\/a\/\S+/g) ?? [];
      assert.equal(links.length, 2, `an approve and a deny link: ${mail.text}`);
      return links[0];
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`no mail to ${to} in ${MAIL_DIR}`);
}

test('a signed-in approver follows the mailed link, approves, and the call runs', async () => {
  const { url } = server(FIXTURE);
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems = [];
  page.on('pageerror', (error) => problems.push(error.message));
  try {
    await page.goto(url);
    await page.getByTestId('signed-in').waitFor();
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    assert.equal(traces(FIXTURE).length, 1, 'the model waits for the decision');

    const link = await approveLink('alice@example.com');
    assert.ok(link.startsWith(url), `the link points at this server: ${link}`);
    const opened = await page.goto(link);
    assert.equal(opened.status(), 200);
    assert.equal(await opened.headerValue('referrer-policy'), 'same-origin');
    assert.equal(traces(FIXTURE).length, 1, 'opening the link decided nothing');
    await shot(page, 'links-oidc-1-link-page');

    const posted = page.waitForResponse((response) => response.url() === link && response.request().method() === 'POST');
    await page.getByRole('button', { name: 'Approve' }).click();
    const answer = await posted;
    const origin = await answer.request().headerValue('origin');
    assert.equal(origin, url.replace(/\/$/, ''), 'the form was posted with the page origin');
    assert.equal(answer.status(), 200, await answer.text());
    await shot(page, 'links-oidc-2-recorded');

    // The server continues the run itself: the second model call has the tool's result.
    const deadline = Date.now() + 20_000;
    while (traces(FIXTURE).length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    const calls = traces(FIXTURE);
    assert.equal(calls.length, 2, 'the model was called again after the approval');
    const result = promptParts(calls[1]).find((part) => part.type === 'tool-result' && part.toolCallId === 'call-delete');
    assert.ok(result, 'the approved call ran and its result reached the model');
    assert.deepEqual(problems, []);
  } catch (error) {
    await shot(page, 'links-oidc-FAILED').catch(() => {});
    throw error;
  } finally {
    await page.close();
  }
});
