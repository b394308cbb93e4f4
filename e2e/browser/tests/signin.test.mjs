// Sign-in on the page: a server with a tokens file (fixtures/signin.tokens) answers 401 without a
// bearer token, so the page asks for one, keeps it for the tab, shows who is signed in, and works;
// a wrong token is refused with the server's reason; signing out asks again.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { card, close, launch, scenario, send, shot, waitForState, waitIdle } from './harness.mjs';

before(launch);
after(close);

async function signIn(page, token) {
  await page.getByTestId('sign-in-token').fill(token);
  await page.getByTestId('sign-in-submit').click();
}

test(
  'sign-in: a token is asked once per tab, refused when wrong, and every request carries it',
  scenario('signin', 'signin', async (page, name) => {
    const dialog = page.getByTestId('sign-in');
    await dialog.waitFor({ state: 'visible' });
    assert.equal(await page.getByTestId('signed-in').isVisible(), false);
    await shot(page, `${name}-1-asked`);

    await signIn(page, 'not-a-token');
    const error = page.getByTestId('sign-in-error');
    await error.waitFor({ state: 'visible' });
    assert.match(await error.innerText(), /tokens file/);
    assert.equal(await dialog.isVisible(), true, 'still asking');

    await signIn(page, 'token-of-alice');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await page.locator('#who-name').innerText(), 'alice');
    await shot(page, `${name}-2-signed-in`);

    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    await card(page, 'call-delete').getByTestId('approve-button').click();
    await waitForState(page, 'call-delete', 'output-available');
    await waitIdle(page);

    // A reload keeps the token for the tab and restores the conversation the server stored.
    await page.reload();
    await waitForState(page, 'call-delete', 'output-available');
    assert.equal(await dialog.isVisible(), false, 'not asked again in the same tab');
    assert.equal(await page.locator('#who-name').innerText(), 'alice');

    await page.getByTestId('sign-out').click();
    await dialog.waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('toolgate.token')), null);
    assert.equal(await card(page, 'call-delete').count(), 0, 'nothing of the conversation without a token');
  }),
);
