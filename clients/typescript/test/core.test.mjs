// The TypeScript client against a real `toolgate serve`: decisions, waits, the exactly-once claim, quorum and
// the stream (restarts: restart.test.mjs).
import assert from "node:assert/strict";
import { test } from "node:test";
import { AlreadyStarted, Denied, Gate } from "../dist/index.js";
import { decideWhenAsked, newMemo, TOKENS, URL, vote, waitFor } from "./helpers.mjs";

const alice = () => new Gate(URL, TOKENS.alice);

test("a rule allows and denies at once", async () => {
  const memo = newMemo();
  assert.deepEqual(await alice().check("read_balance", { memo }), { memo });
  await assert.rejects(alice().check("delete_account", { memo }), (error) => {
    assert.ok(error instanceof Denied);
    assert.match(error.reason, /accounts are closed by support/);
    return true;
  });
});

test("an approver's denial carries the reason", async () => {
  const memo = newMemo();
  const votes = decideWhenAsked(memo, [["bob", "deny"]], { reason: "not this month" });
  await assert.rejects(alice().check("transfer_money", { memo }, { timeout: 30 }), (error) => {
    assert.ok(error instanceof Denied);
    assert.match(error.reason, /not this month/);
    return true;
  });
  assert.deepEqual(await votes, [200]);
});

test("a gated function waits for its approver, runs once, and a retry returns the recorded output", async () => {
  const memo = newMemo();
  const runs = [];
  const transfer = alice().gated("transfer_money", async ({ amount }) => (runs.push(amount), { sent: amount }), {
    key: (input) => `transfer-${input.memo}`,
  });
  const votes = decideWhenAsked(memo, [["erin", "approve"], ["bob", "approve"]]);
  assert.deepEqual(await transfer({ amount: 40, memo }), { sent: 40 });
  assert.deepEqual(await votes, [404, 200]);
  assert.deepEqual(await transfer({ amount: 40, memo }), { sent: 40 });
  assert.deepEqual(runs, [40]);
});

test("a quorum of two decides; a second start is refused", async () => {
  const memo = newMemo();
  const gate = alice();
  const decision = await gate.submit("wire_funds", { amount: 9000, memo }, { idempotencyKey: memo });
  assert.equal(decision.decision, "pending");
  assert.equal(decision.quorum, 2);
  const approval = await waitFor(memo);
  assert.equal(await vote(approval.id, "bob", "approve"), 200);
  assert.equal((await gate.get(decision.callId, { wait: 1 })).state, "pending");
  assert.equal(await vote(approval.id, "carol", "approve"), 200);
  const outcome = await gate.decide("wire_funds", { amount: 9000, memo }, { idempotencyKey: memo });
  assert.equal(outcome.kind, "approved");
  assert.equal((await gate.start(outcome.callId)).state, "started");
  await assert.rejects(gate.start(outcome.callId), AlreadyStarted);
  const finished = await gate.finish(outcome.callId, { output: "wired" });
  assert.equal(finished.state, "finished");
  assert.equal(finished.output, "wired");
});

test("the stream follows a call until it is decided", async () => {
  const memo = newMemo();
  const gate = alice();
  const decision = await gate.submit("transfer_money", { memo }, { idempotencyKey: memo });
  const abort = new AbortController();
  const events = gate.stream({ ids: [decision.callId], signal: abort.signal });
  const first = await events.next();
  assert.equal(first.value.state, "pending");
  assert.equal(await vote((await waitFor(memo)).id, "bob", "approve"), 200);
  let later = (await events.next()).value;
  while (later.state === "pending") later = (await events.next()).value;
  await events.return(); // closes the response
  abort.abort();
  assert.equal(later.callId, decision.callId);
  assert.equal(later.state, "approved");
  assert.deepEqual(later.input, { memo });
});
