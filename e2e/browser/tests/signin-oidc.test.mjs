// Sign-in with OpenID Connect: a server started with --oidc-issuer (fixtures/signin-oidc.oidc) sends the
// browser to the mock provider (oidc-provider.mjs) on the first page load; it comes back signed in as the
// provider's principal, with an HttpOnly session cookie and no token asked for. The person asks for
// something that needs approval, approves it, the tool runs; signing out clears the cookie and sends the
// browser back to the provider (which, keeping no sign-in form, signs Alice in again at once).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { card, close, launch, promptParts, send, server, shot, traces, waitForState, waitIdle } from './harness.mjs';

const FIXTURE = 'signin-oidc';
let context;

before(async () => {
  context = await launch();
});
after(close);

const sessionCookie = async () => (await context.cookies()).find((cookie) => cookie.name === 'toolgate_session');

test('oidc sign-in: the page signs in at the provider, approves a tool call, and signs out', async () => {
  const { url, provider } = server(FIXTURE);
  assert.ok(provider, 'the script started the mock provider');
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems = [];
  page.on('pageerror', (error) => problems.push(error.message));
  const navigations = [];
  page.on('request', (request) => request.isNavigationRequest() && navigations.push(request.url()));
  try {
    await page.goto(url);
    await page.getByTestId('composer-input').waitFor();

    // Through the provider and back: an authorization request with PKCE, then the callback.
    const authorize = navigations.find((to) => to.startsWith(`${provider}/authorize?`));
    assert.ok(authorize, `went to the provider: ${navigations.join(' → ')}`);
    const asked = new URL(authorize).searchParams;
    assert.equal(asked.get('code_challenge_method'), 'S256');
    assert.ok(asked.get('code_challenge') && asked.get('state') && asked.get('nonce'));
    assert.equal(asked.get('redirect_uri'), `${url}auth/callback`);
    assert.ok(navigations.some((to) => to.startsWith(`${url}auth/callback?`)), 'came back through the callback');
    assert.equal(page.url().split('#')[0], url, 'back on the page (its #chat= aside)');

    await page.getByTestId('signed-in').waitFor();
    assert.equal(await page.locator('#who-name').innerText(), 'alice');
    assert.match(await page.getByTestId('signed-in').innerText(), /Signed in as alice/);
    assert.equal(await page.getByTestId('sign-in').isVisible(), false, 'no token is asked for');
    const cookie = await sessionCookie();
    assert.ok(cookie, 'a session cookie');
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Lax');
    assert.equal(await page.evaluate(() => document.cookie.includes('toolgate_session')), false, 'not readable by scripts');
    await shot(page, 'signin-oidc-1-signed-in');

    // Ask, approve, and the tool runs (the second model call has its result).
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    await shot(page, 'signin-oidc-2-asked');
    await card(page, 'call-delete').getByTestId('approve-button').click();
    await waitForState(page, 'call-delete', 'output-available');
    await waitIdle(page);
    const calls = traces(FIXTURE);
    assert.equal(calls.length, 2, 'the model was called again with the result');
    const result = promptParts(calls[1]).find((part) => part.type === 'tool-result' && part.toolCallId === 'call-delete');
    assert.ok(result, 'the tool ran and its result reached the model');
    await shot(page, 'signin-oidc-3-approved');

    // Sign out: auth/logout clears the cookie, and the page, asked for without it, sends the browser back
    // to the provider. (This mock provider keeps no sign-in form: it signs Alice straight back in, as a
    // provider with a session of its own would; Playwright cannot hold a navigation that is a redirect.)
    const loggedOut = page.waitForResponse((response) => response.url() === `${url}auth/logout`);
    const pageAgain = page.waitForResponse((response) => response.url() === url && response.request().isNavigationRequest());
    await page.getByTestId('sign-out').click();
    const out = await loggedOut;
    assert.equal(out.status(), 303);
    assert.match((await out.headerValue('set-cookie')) ?? '', /^toolgate_session=;.*Max-Age=0/);
    const again = await pageAgain;
    assert.equal(((await again.request().allHeaders()).cookie ?? '').includes('toolgate_session'), false, 'signed out');
    assert.equal(again.status(), 302, 'without a session the page sends the browser to sign in');
    assert.ok((await again.headerValue('location')).startsWith(`${provider}/authorize?`), 'back at the provider');
    await page.getByTestId('signed-in').waitFor();
    await shot(page, 'signin-oidc-4-signed-in-again');
    assert.deepEqual(problems, []);
  } catch (error) {
    await shot(page, 'signin-oidc-FAILED').catch(() => {});
    throw error;
  } finally {
    await page.close();
  }
});
