// Signed receipts from the audit panel: each event that gets a receipt has a "Download receipt" button
// (`GET /api/audit/{seq}/receipt`), saved as `receipt-{seq}.json` and verifiable alone with
// `toolgate audit verify --receipt FILE --keys JWKS` (TOOLGATE_E2E_BIN, set by scripts/e2e-browser.sh).
//
//   policies      (fixtures/policies.toml): turn 0 asks for get_weather {Paris} (rule `ask-weather`),
//                 denies delete_file {/etc/passwd} by the rule `no-etc` without an approval, and asks
//                 for delete_file {tmp/a.txt}
//   receipts-off  (fixtures/receipts-off.args: `--no-receipts`): the approvals script, no receipts

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { card, close, launch, scenario, send, server, shot, waitForState, waitIdle } from './harness.mjs';

before(launch);
after(close);

const run = promisify(execFile);

const auditEvent = (page, kind, toolCallId) =>
  page.locator(`[data-testid="audit-event"][data-kind="${kind}"]`).filter({ hasText: toolCallId });

async function openAudit(page, kind) {
  await page.getByTestId('audit-button').click();
  await page.locator(`[data-testid="audit-event"][data-kind="${kind}"]`).first().waitFor();
}

// Clicks the row's receipt button; returns the saved file's name and receipt.
async function download(page, row) {
  const [saved] = await Promise.all([page.waitForEvent('download'), row.getByTestId('audit-receipt-button').click()]);
  return { name: saved.suggestedFilename(), receipt: JSON.parse(await readFile(await saved.path(), 'utf8')) };
}

// `toolgate audit verify --receipt` of `receipt` under the server's JWKS: its exit code and output.
async function verifyAlone(dir, fixture, receipt, name) {
  const bin = process.env.TOOLGATE_E2E_BIN;
  assert.ok(bin, 'TOOLGATE_E2E_BIN names the toolgate command (scripts/e2e-browser.sh sets it)');
  const keys = path.join(dir, 'keys.json');
  const response = await fetch(new URL('.well-known/toolgate/receipt-keys', server(fixture).url));
  assert.equal(response.status, 200);
  await writeFile(keys, await response.text());
  const file = path.join(dir, name);
  await writeFile(file, JSON.stringify(receipt));
  try {
    const { stdout } = await run(bin, ['audit', 'verify', '--receipt', file, '--keys', keys]);
    return { code: 0, stdout };
  } catch (error) {
    return { code: error.code, stdout: error.stdout };
  }
}

test(
  'audit receipts: a rule\'s denial and an approval each download their own signed receipt, which verifies alone',
  scenario('audit-receipts', 'policies', async (page, name) => {
    const dialogs = [];
    page.on('dialog', (dialog) => dialogs.push(dialog.message()));
    await send(page, 'Check the Paris weather, then clean up /etc/passwd and my temp files');
    await waitForState(page, 'call-weather', 'approval-requested');
    await waitForState(page, 'call-etc', 'output-denied');
    await waitForState(page, 'call-a', 'approval-requested');
    await waitIdle(page);
    await card(page, 'call-weather').getByTestId('approve-button').click();
    await card(page, 'call-a').getByTestId('deny-button').click();
    await card(page, 'call-a').getByTestId('confirm-deny-button').click();
    await waitForState(page, 'call-weather', 'output-available');
    await waitIdle(page);

    await openAudit(page, 'executed');
    // Only the events that get a receipt have the button: not the requests.
    const issued = page.locator('[data-testid="audit-event"][data-kind="issued"]');
    assert.ok((await issued.count()) >= 2);
    assert.equal(await issued.getByTestId('audit-receipt-button').count(), 0, 'an issued event gets no receipt');

    // The rule's denial, decided without an approval: a call receipt.
    const denied = auditEvent(page, 'denied', 'call-etc');
    const deniedButton = denied.getByTestId('audit-receipt-button');
    assert.equal(await deniedButton.innerText(), 'Download receipt');
    const deniedLabel = await deniedButton.getAttribute('aria-label');
    assert.match(deniedLabel, /denied/);
    assert.match(deniedLabel, /delete_file/);
    const deniedSeq = Number(await denied.getAttribute('data-seq'));
    await shot(page, `${name}-1-audit`);
    const call = await download(page, denied);
    assert.equal(call.name, `receipt-${deniedSeq}.json`);
    assert.equal(call.receipt.type, 'receipt');
    assert.deepEqual(call.receipt.payload.event.seq, deniedSeq);
    assert.equal(call.receipt.payload.event.kind, 'denied');
    assert.equal(call.receipt.payload.approvalId, undefined, 'decided without an approval');
    assert.equal(call.receipt.payload.toolCallId, 'call-etc');
    assert.equal(call.receipt.payload.toolName, 'delete_file');
    assert.equal(call.receipt.payload.decision, 'deny');
    assert.match(call.receipt.payload.rule, /`no-etc`/);

    // The approval of the weather: an approval's receipt, naming its vote.
    const approved = auditEvent(page, 'approved', 'call-weather');
    assert.match(await approved.getByTestId('audit-receipt-button').getAttribute('aria-label'), /approved.*get_weather/);
    const approvedSeq = Number(await approved.getAttribute('data-seq'));
    const approval = await download(page, approved);
    assert.equal(approval.name, `receipt-${approvedSeq}.json`);
    assert.equal(approval.receipt.payload.event.seq, approvedSeq);
    assert.equal(approval.receipt.payload.event.kind, 'approved');
    assert.equal(approval.receipt.payload.toolCallId, 'call-weather');
    assert.equal(approval.receipt.payload.decision, 'approve');
    assert.equal(typeof approval.receipt.payload.approvalId, 'string');
    assert.equal(await page.getByTestId('audit-receipt-error').count(), 0);

    // Each verifies alone under the server's keys; an edited one does not.
    const dir = await mkdtemp(path.join(tmpdir(), 'toolgate-receipts-'));
    try {
      for (const { name: file, receipt } of [call, approval]) {
        const verified = await verifyAlone(dir, 'policies', receipt, file);
        assert.equal(verified.code, 0, verified.stdout);
        assert.match(verified.stdout, new RegExp(`"toolCallId": "${receipt.payload.toolCallId}"`));
      }
      const edited = structuredClone(call.receipt);
      edited.payload.decision = 'allow';
      const refused = await verifyAlone(dir, 'policies', edited, 'edited.json');
      assert.equal(refused.code, 1, refused.stdout);
      assert.match(refused.stdout, /^BROKEN bad signature/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    assert.deepEqual(dialogs, [], 'no alert');
  }),
);

test(
  'audit receipts: on a server with --no-receipts the button says why there is none, on the event\'s row',
  scenario('audit-receipts-off', 'receipts-off', async (page, name) => {
    const dialogs = [];
    page.on('dialog', (dialog) => dialogs.push(dialog.message()));
    await send(page, 'Please delete notes.txt');
    await waitForState(page, 'call-delete', 'approval-requested');
    await card(page, 'call-delete').getByTestId('approve-button').click();
    await waitForState(page, 'call-delete', 'output-available');
    await waitIdle(page);

    await openAudit(page, 'executed');
    const approved = auditEvent(page, 'approved', 'call-delete');
    let downloads = 0;
    page.on('download', () => downloads++);
    await approved.getByTestId('audit-receipt-button').click();
    const error = approved.getByTestId('audit-receipt-error');
    await error.waitFor();
    assert.equal(await error.getAttribute('role'), 'alert');
    assert.match(await error.innerText(), /^No receipt: this server signs no receipts \(.*--no-receipts\)$/);
    // Only that row says so.
    assert.equal(await page.getByTestId('audit-receipt-error').count(), 1);
    await shot(page, `${name}-1-no-receipt`);
    assert.equal(downloads, 0, 'nothing saved');
    assert.deepEqual(dialogs, [], 'no alert');
  }),
);
