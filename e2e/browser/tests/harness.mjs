// Shared setup of the browser tests: the servers started by scripts/e2e-browser.sh,
// headless Debian Chromium through playwright-core, screenshots and prompt traces.

import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../../..');

export const SCREENSHOTS = process.env.TOOLGATE_E2E_SCREENSHOTS ?? path.join(ROOT, 'ci-artifacts/screenshots');
export const DOCS_SCREENSHOT = process.env.TOOLGATE_E2E_DOCS_SCREENSHOT || null;
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

// `{"<fixture>": {"url": "http://127.0.0.1:PORT", "trace": "/tmp/.../prompts.jsonl"}}`
const SERVERS = JSON.parse(process.env.TOOLGATE_E2E_SERVERS ?? '{}');

// True when scripts/e2e-browser.sh started a server for `fixture`.
export const hasServer = (fixture) => Boolean(SERVERS[fixture]);

export function server(fixture) {
  const entry = SERVERS[fixture];
  if (!entry) throw new Error(`no server for fixture "${fixture}"; run the tests through scripts/e2e-browser.sh`);
  return entry;
}

// Every prompt the scripted model received so far (one JSON line per model call).
export function traces(fixture) {
  let text = '';
  try {
    text = readFileSync(server(fixture).trace, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

// Flattens the content parts of one prompt, for searching.
export function promptParts(trace) {
  return trace.prompt.flatMap((message) =>
    Array.isArray(message.content) ? message.content.map((part) => ({ role: message.role, ...part })) : [],
  );
}

let context;
let profileDir;
let browser; // for isolated contexts (other people), launched when first needed

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launch() {
  profileDir = mkdtempSync(path.join(tmpdir(), 'toolgate-chromium-'));
  mkdirSync(SCREENSHOTS, { recursive: true });
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: CHROMIUM_ARGS,
  });
  return context;
}

// Another browser context, sharing nothing with the default one (cookies, storage): another person.
export async function isolatedContext() {
  browser ??= await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  return browser.newContext({ viewport: { width: 1280, height: 800 } });
}

export async function close() {
  await context?.close();
  await browser?.close();
  browser = undefined;
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
}

// A fresh page on the server of `fixture`; a new page is a new chat. `on` picks the
// browser context (the default one unless given, e.g. from `isolatedContext()`).
export async function openChat(fixture, viewport = { width: 1280, height: 800 }, on = context) {
  const page = await on.newPage();
  await page.setViewportSize(viewport);
  page.setDefaultTimeout(15_000);
  const problems = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => message.type() === 'error' && problems.push(`console: ${message.text()}`));
  page.problems = problems;
  await page.goto(server(fixture).url);
  await page.getByTestId('composer-input').waitFor();
  return page;
}

export async function shot(page, name) {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`) });
}

// Runs one scenario; on failure saves a screenshot of the page as it was.
export function scenario(name, fixture, body, viewport) {
  return async () => {
    const page = await openChat(fixture, viewport);
    try {
      await body(page, name);
      const errors = page.problems.filter((problem) => problem.startsWith('page error'));
      if (errors.length) throw new Error(`uncaught errors in the page:\n${errors.join('\n')}`);
    } catch (error) {
      await shot(page, `${name}-FAILED`).catch(() => {});
      if (page.problems.length) error.message += `\n${page.problems.join('\n')}`;
      throw error;
    } finally {
      await page.close();
    }
  };
}

export async function send(page, text) {
  await page.getByTestId('composer-input').fill(text);
  await page.getByTestId('send-button').click();
}

export const card = (page, toolCallId) => page.locator(`[data-testid="tool-card"][data-tool-call-id="${toolCallId}"]`);

export async function waitForState(page, toolCallId, state) {
  await page.locator(`[data-testid="tool-card"][data-tool-call-id="${toolCallId}"][data-state="${state}"]`).waitFor();
}

// Waits until the page is idle again (no request in flight).
export async function waitIdle(page) {
  await page.waitForFunction(() => {
    const status = document.querySelector('[data-testid="chat-status"]')?.dataset.status;
    return status !== 'submitted' && status !== 'streaming';
  });
}
