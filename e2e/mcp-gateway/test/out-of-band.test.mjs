// Out-of-band approval: a client without the elicitation capability, a SQLite store in the test's data dir,
// `--hold 3s --retry-window 10m`; decisions made by `toolgate approvals approve|deny` from another process.
// The counting server's count file tells how often upstream really ran.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  approvalsCli,
  bumpOf,
  countLines,
  itemTool,
  kill9Gateway,
  listApprovals,
  prepareGateway,
  startGateway,
  stopGateway,
  text,
  waitForPending,
} from "../lib/harness.mjs";

const PRINCIPAL = "e2e-alice";
const CLIENT = "e2e-node-oob";
const PUBLIC_URL = "http://127.0.0.1:9/toolgate";
const HOLD_MS = 3000;
const FLAGS = ["--hold", "3s", "--retry-window", "10m", "--public-url", PUBLIC_URL];

describe("out-of-band approval (no elicitation, SQLite store)", { timeout: 300_000 }, () => {
  let setup;
  let gateway;
  const stopped = [];

  before(async () => {
    setup = prepareGateway({ prefix: "oob", principal: PRINCIPAL, bumpDelayMs: 300 });
    gateway = await startGateway({ setup, clientName: CLIENT, flags: FLAGS });
    await gateway.client.listTools(); // so the client checks every result against count__bump's outputSchema
  });

  after(async () => {
    for (const old of stopped) await stopGateway(old);
    await stopGateway(gateway);
  });

  const bump = (label, client = gateway.client) => client.callTool({ name: "count__bump", arguments: { label } });
  const runs = (label) => countLines(setup).filter((line) => line === label).length;

  /** Asserts a gateway's "Approval pending" result; resolves to the approval's id. */
  function assertPending(result) {
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.ok(text(result).startsWith("Approval pending"), text(result));
    const meta = result._meta?.["toolgate/approval"];
    assert.ok(meta, `no _meta["toolgate/approval"] in ${JSON.stringify(result)}`);
    assert.equal(meta.state, "pending");
    assert.equal(typeof meta.id, "string");
    assert.ok(text(result).includes(meta.id), `the text names the approval id ${meta.id}: ${text(result)}`);
    assert.equal(meta.url, `${PUBLIC_URL}/approvals/${meta.id}`);
    return meta.id;
  }

  /** Retries a call with the same arguments until its result is no longer "Approval pending". */
  async function settle(label, result) {
    for (let i = 0; i < 10 && result.isError && text(result).startsWith("Approval pending"); i++) {
      result = await bump(label);
    }
    return result;
  }

  test("approved while held: the held call returns upstream's result", async () => {
    const call = bump("in-time");
    const item = await waitForPending(setup, bumpOf("in-time"));
    await approvalsCli(setup, "approve", item.id);
    const result = await call;
    assert.ok(!result.isError, JSON.stringify(result));
    assert.equal(text(result), "bumped in-time #1");
    assert.deepEqual(result.structuredContent, { count: 1 });
    assert.equal(runs("in-time"), 1);
  });

  test("approvals list --output jsonl shows id, state, tool and input", async () => {
    const call = bump("listed");
    const item = await waitForPending(setup, bumpOf("listed"));
    const settled = (async () => {
      await approvalsCli(setup, "approve", item.id);
      return call;
    })();
    try {
      assert.equal(typeof item.id, "string");
      assert.equal(item.state, "pending");
      assert.deepEqual(item.input, { label: "listed" });
      assert.equal(item.tool, "count__bump", `tool of ${JSON.stringify(item)}`);
      assert.match(item.conversationId, /^mcp:/);
    } finally {
      await settled;
    }
  });

  test("not decided within --hold: a pending result; a retry attaches; approved, the retry gets the output once", async () => {
    const started = Date.now();
    const first = await bump("late");
    const held = Date.now() - started;
    const id = assertPending(first);
    assert.ok(held >= HOLD_MS - 500, `held ${held} ms, --hold is ${HOLD_MS} ms`);
    const pending = (await listApprovals(setup)).filter(bumpOf("late"));
    assert.deepEqual(
      pending.map((item) => item.id),
      [id],
    );

    // A retry while pending attaches to the same approval.
    const again = await bump("late");
    assert.equal(assertPending(again), id);
    assert.equal((await listApprovals(setup)).filter(bumpOf("late")).length, 1);
    assert.equal(runs("late"), 0, "upstream ran before the approval");

    await approvalsCli(setup, "approve", id);
    const before = countLines(setup).length;
    const result = await bump("late");
    assert.ok(!result.isError, JSON.stringify(result));
    assert.equal(text(result), `bumped late #${before + 1}`);
    assert.deepEqual(result.structuredContent, { count: before + 1 });

    // Within --retry-window the stored outcome comes back; upstream does not run again.
    const replay = await bump("late");
    assert.ok(!replay.isError, JSON.stringify(replay));
    assert.equal(text(replay), text(result));
    assert.equal(runs("late"), 1);
  });

  test("ten concurrent retries of an approved call: upstream runs once", async () => {
    const id = assertPending(await bump("concurrent"));
    await approvalsCli(setup, "approve", id);
    const settled = await Promise.all(Array.from({ length: 10 }, () => bump("concurrent")));
    for (const result of settled) {
      assert.ok(!result.isError, JSON.stringify(result));
      assert.match(text(result), /^bumped concurrent #\d+$/);
    }
    assert.equal(new Set(settled.map(text)).size, 1, settled.map(text).join(" | "));
    assert.equal(runs("concurrent"), 1);
  });

  test("ten concurrent calls held on one approval: one approval, upstream runs once", async () => {
    const calls = Array.from({ length: 10 }, () => bump("herd"));
    const item = await waitForPending(setup, bumpOf("herd"));
    await approvalsCli(setup, "approve", item.id);
    const settled = await Promise.all(calls.map(async (call) => settle("herd", await call)));
    for (const result of settled) {
      assert.ok(!result.isError, JSON.stringify(result));
    }
    assert.equal(new Set(settled.map(text)).size, 1, settled.map(text).join(" | "));
    const all = await listApprovals(setup, "--state", "all");
    assert.equal(all.filter(bumpOf("herd")).length, 1, JSON.stringify(all.filter(bumpOf("herd"))));
    assert.equal(runs("herd"), 1);
  });

  test("denied out of band by the requester: `denied by the user: <reason>`, upstream never runs", async () => {
    const call = bump("nope");
    const item = await waitForPending(setup, bumpOf("nope"));
    await approvalsCli(setup, "deny", "--reason", "nope", item.id);
    const result = await call;
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.equal(text(result), "denied by the user: nope");
    const replay = await bump("nope");
    assert.equal(replay.isError, true, JSON.stringify(replay));
    assert.equal(text(replay), "denied by the user: nope");
    assert.equal(runs("nope"), 0);
  });

  test("kill -9 while held, restart on the same store, approve, retry: the outcome, upstream ran once", async () => {
    const call = bump("restart").then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    const item = await waitForPending(setup, bumpOf("restart"));
    assert.ok(itemTool(item));
    await kill9Gateway(gateway);
    const lost = await call;
    assert.ok(lost.error, `the held call should fail with the connection, got ${JSON.stringify(lost.result)}`);
    stopped.push(gateway);

    gateway = await startGateway({ setup, clientName: CLIENT, flags: FLAGS });
    await gateway.client.listTools();
    await approvalsCli(setup, "approve", item.id);
    const before = countLines(setup).length;
    const result = await bump("restart");
    assert.ok(!result.isError, JSON.stringify(result));
    assert.equal(text(result), `bumped restart #${before + 1}`);
    const replay = await bump("restart");
    assert.equal(text(replay), text(result));
    assert.equal(runs("restart"), 1);
  });
});

describe("a rule with approvers goes out of band, also for a client that elicits", { timeout: 120_000 }, () => {
  const APPROVER = "e2e-bob";
  let setup;
  let gateway;

  before(async () => {
    setup = prepareGateway({
      prefix: "oob-approvers",
      principal: "e2e-dave",
      rules: [{ name: "bob-decides", action: "ask", tool: "count__bump", approvers: [APPROVER], reason: "bob signs off bumps" }],
    });
    gateway = await startGateway({
      setup,
      clientName: "e2e-node-approvers",
      flags: FLAGS,
      elicit: () => ({ action: "accept", content: { decision: "approve" } }),
    });
    await gateway.client.listTools();
  });

  after(async () => {
    await stopGateway(gateway);
  });

  // The approver's view of the same store.
  const bob = () => ({ ...setup, principal: APPROVER });
  const bump = (label) => gateway.client.callTool({ name: "count__bump", arguments: { label } });
  const runs = (label) => countLines(setup).filter((line) => line === label).length;

  test("approved by the rule's approver: no elicitation, the held call returns the result", async () => {
    const call = bump("by-bob");
    const item = await waitForPending(bob(), bumpOf("by-bob"));
    await approvalsCli(bob(), "approve", item.id);
    const result = await call;
    assert.ok(!result.isError, JSON.stringify(result));
    assert.equal(text(result), "bumped by-bob #1");
    assert.equal(gateway.elicitations.length, 0, JSON.stringify(gateway.elicitations));
    assert.equal(runs("by-bob"), 1);
  });

  test("denied by the rule's approver: `denied by e2e-bob: <reason>`, upstream never runs", async () => {
    const call = bump("bob-says-no");
    const item = await waitForPending(bob(), bumpOf("bob-says-no"));
    await approvalsCli(bob(), "deny", "--reason", "not now", item.id);
    const result = await call;
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.equal(text(result), `denied by ${APPROVER}: not now`);
    assert.equal(gateway.elicitations.length, 0, JSON.stringify(gateway.elicitations));
    assert.equal(runs("bob-says-no"), 0);
  });
});
