// A held call whose request carries a progressToken gets `notifications/progress` (every 10 s) while it waits:
// `--hold 12s`, so at least one arrives before the "Approval pending" result.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { countLines, prepareGateway, startGateway, stopGateway, text } from "../lib/harness.mjs";

for (const transport of ["stdio", "http"]) {
  describe(`progress while held over ${transport}`, { timeout: 120_000 }, () => {
    let setup;
    let gateway;

    before(async () => {
      setup = prepareGateway({ prefix: `progress-${transport}`, principal: "e2e-carol" });
      gateway = await startGateway({
        setup,
        transport,
        clientName: `e2e-node-progress-${transport}`,
        flags: ["--hold", "12s", "--retry-window", "10m"],
      });
      await gateway.client.listTools();
    });

    after(async () => {
      await stopGateway(gateway);
    });

    test("at least one progress notification before the pending result", async () => {
      const progress = [];
      const started = Date.now();
      let resultAt = null;
      const result = await gateway.client.callTool(
        { name: "count__bump", arguments: { label: "slow" } },
        undefined,
        {
          timeout: 60_000,
          onprogress: (notification) => progress.push({ at: Date.now() - started, ...notification }),
        },
      );
      resultAt = Date.now() - started;
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.ok(text(result).startsWith("Approval pending"), text(result));
      assert.equal(result._meta?.["toolgate/approval"]?.state, "pending", JSON.stringify(result._meta));
      assert.ok(progress.length >= 1, `no progress notification in ${resultAt} ms`);
      assert.ok(
        progress.every((item) => item.at <= resultAt),
        JSON.stringify(progress),
      );
      assert.ok(resultAt >= 11_000, `held ${resultAt} ms, --hold is 12 s`);
      assert.deepEqual(countLines(setup), []);
    });
  });
}
