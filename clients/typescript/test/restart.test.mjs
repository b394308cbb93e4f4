// Exactly once across restarts, for the TypeScript client's `gated` and each adapter: an agent process
// (restart-agent.mjs, running the framework's real package on its mock model) is killed with SIGKILL while it
// waits on a gated call and started again with the same arguments (so the same key); the approval is voted in
// the inbox only then. The restarted agent must have attached to the first one's approval (one approval, by the
// API), the tool must have run once (one line in the runs file) and the agent must finish with the tool's
// result. The kinds run at once.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { approvals, newMemo, sleep, vote, waitFor } from "./helpers.mjs";

const AGENT = join(dirname(fileURLToPath(import.meta.url)), "restart-agent.mjs");

/** restart-agent.mjs running: its output so far, whether it waits, and its exit. */
function startAgent(kind, memo, runs) {
  const child = spawn(process.execPath, [AGENT, kind, memo, runs], { stdio: ["ignore", "pipe", "pipe"] });
  const agent = { child, out: "" };
  const append = (chunk) => (agent.out += chunk);
  child.stdout.on("data", append);
  child.stderr.on("data", append);
  agent.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
  agent.waiting = async () => {
    const deadline = Date.now() + 60_000;
    while (!agent.out.split("\n").includes("waiting")) {
      if (Date.now() > deadline || child.exitCode !== null) {
        throw new Error(`${kind}: never waited on the call:\n${agent.out}`);
      }
      await sleep(20);
    }
  };
  return agent;
}

const RESULTS = {
  core: "result: sent 70",
  ai6: "result: tool said: sent 70",
  ai7: "result: tool said: sent 70",
  "openai-agents": "result: tool said: sent 70",
};

describe("a killed agent resumes on the same approval and runs once", { concurrency: true }, () => {
  for (const [kind, expected] of Object.entries(RESULTS)) {
    test(kind, async () => {
      const memo = newMemo();
      const runs = join(mkdtempSync(join(tmpdir(), "tg-restart-")), "runs");
      const first = startAgent(kind, memo, runs);
      const approval = await waitFor(memo);
      await first.waiting();
      first.child.kill("SIGKILL");
      assert.equal(await first.exited, "SIGKILL");
      const second = startAgent(kind, memo, runs);
      await second.waiting();
      // The restarted agent waits on the first one's approval: it asked again and got the same call.
      assert.deepEqual((await approvals(memo)).map((a) => a.id), [approval.id]);
      assert.equal(await vote(approval.id, "bob", "approve"), 200);
      assert.equal(await second.exited, 0, second.out);
      assert.ok(second.out.split("\n").includes(expected), second.out);
      assert.deepEqual(readFileSync(runs, "utf8").trim().split("\n"), [memo]);
      const [executed, ...more] = await approvals(memo);
      assert.deepEqual([executed.state, executed.conversationId, more.length], ["executed", `api:restart-${memo}`, 0]);
    });
  }
});
