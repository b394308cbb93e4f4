// In-band approval: the official SDK client declares the elicitation capability (form mode) and answers the
// gateway's `elicitation/create` as each test wishes; over stdio and over streamable HTTP.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { countLines, prepareGateway, readLog, startGateway, stopGateway, text } from "../lib/harness.mjs";

const DECISIONS = ["approve", "approve_always", "deny"];

for (const transport of ["stdio", "http"]) {
  describe(`elicitation over ${transport}`, { timeout: 180_000 }, () => {
    let setup;
    let gateway;
    // What the client answers to the next elicitation request (a test sets it before its call).
    let answer = () => ({ action: "decline" });

    before(async () => {
      setup = prepareGateway({
        prefix: `elicit-${transport}`,
        principal: "e2e-bob",
        rules: [
          {
            name: "no-forbidden",
            action: "deny",
            tool: "fs__write_file",
            reason: "forbidden files stay untouched",
            input: { "/path": { glob: "**/forbidden*" } },
          },
        ],
      });
      fs.writeFileSync(path.join(setup.fsDir, "hello.txt"), "hello from the e2e test\n");
      gateway = await startGateway({
        setup,
        transport,
        clientName: `e2e-node-${transport}`,
        elicit: (params) => answer(params),
      });
    });

    after(async () => {
      await stopGateway(gateway);
    });

    /** Calls a tool; resolves to {result, asked}: the elicitation requests this call caused. */
    async function call(name, args) {
      const before = gateway.elicitations.length;
      const result = await gateway.client.callTool({ name, arguments: args });
      return { result, asked: gateway.elicitations.slice(before) };
    }

    const listing = () => fs.readdirSync(setup.fsDir).sort();

    test("tools/list offers fs__* and count__* with schemas and annotations", async () => {
      const { tools } = await gateway.client.listTools();
      const names = tools.map((tool) => tool.name);
      for (const name of ["fs__read_text_file", "fs__write_file", "fs__list_directory", "count__bump", "count__peek"]) {
        assert.ok(names.includes(name), `${name} missing from ${names.join(", ")}`);
      }
      assert.ok(names.every((name) => name.startsWith("fs__") || name.startsWith("count__")), names.join(", "));
      const write = tools.find((tool) => tool.name === "fs__write_file");
      assert.equal(write.inputSchema.type, "object");
      assert.ok(write.inputSchema.properties.path && write.inputSchema.properties.content, JSON.stringify(write.inputSchema));
      assert.equal(write.annotations?.destructiveHint, true, JSON.stringify(write.annotations));
      const read = tools.find((tool) => tool.name === "fs__read_text_file");
      assert.equal(read.annotations?.readOnlyHint, true, JSON.stringify(read.annotations));
      const bump = tools.find((tool) => tool.name === "count__bump");
      assert.equal(bump.outputSchema?.properties?.count?.type, "number", JSON.stringify(bump.outputSchema));
      assert.ok(bump.inputSchema.properties.label, JSON.stringify(bump.inputSchema));
    });

    test("a trusted read-only tool runs without asking", async () => {
      answer = () => assert.fail("no elicitation expected for fs__read_text_file");
      const { result, asked } = await call("fs__read_text_file", { path: path.join(setup.fsDir, "hello.txt") });
      assert.equal(asked.length, 0);
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(text(result), "hello from the e2e test\n");
      const peek = await call("count__peek", {});
      assert.equal(peek.asked.length, 0);
      assert.equal(text(peek.result), "count 0");
    });

    test("fs__write_file asks by elicitation; approve writes the file and returns upstream's result", async () => {
      const target = path.join(setup.fsDir, "approved.txt");
      // Keys in sorted order, so the pretty JSON of the input reads the same whichever order the gateway keeps.
      const args = { content: "written after approval", path: target };
      answer = () => ({ action: "accept", content: { decision: "approve" } });
      const { result, asked } = await call("fs__write_file", args);
      assert.equal(asked.length, 1, "exactly one elicitation");
      const [request] = asked;
      assert.ok(request.mode === undefined || request.mode === "form", `mode ${request.mode}`);
      assert.match(request.message, /fs__write_file/);
      assert.ok(
        request.message.includes(JSON.stringify(args, null, 2)),
        `the message shows the input as pretty JSON:\n${request.message}`,
      );
      const schema = request.requestedSchema;
      assert.equal(schema.type, "object");
      assert.equal(schema.properties.decision.type, "string");
      assert.deepEqual(schema.properties.decision.enum, DECISIONS);
      assert.equal(schema.properties.reason.type, "string");
      assert.deepEqual(schema.required, ["decision"]);

      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(text(result), `Successfully wrote to ${target}`);
      assert.deepEqual(result.structuredContent, { content: `Successfully wrote to ${target}` });
      assert.equal(fs.readFileSync(target, "utf8"), "written after approval");
    });

    test("deny with a reason: nothing written, `denied by the user: <reason>`", async () => {
      const before = listing();
      answer = () => ({ action: "accept", content: { decision: "deny", reason: "not in this directory" } });
      const { result, asked } = await call("fs__write_file", {
        content: "must not be written",
        path: path.join(setup.fsDir, "denied.txt"),
      });
      assert.equal(asked.length, 1);
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.equal(text(result), "denied by the user: not in this directory");
      assert.deepEqual(listing(), before);
    });

    for (const [label, reply] of [
      ["deny without a reason", { action: "accept", content: { decision: "deny" } }],
      ["decline", { action: "decline" }],
      ["cancel", { action: "cancel" }],
    ]) {
      test(`${label}: nothing written, \`denied by the user: the user declined\``, async () => {
        const before = listing();
        answer = () => reply;
        const { result, asked } = await call("fs__write_file", {
          content: "must not be written",
          path: path.join(setup.fsDir, `${label.replace(/\W+/g, "-")}.txt`),
        });
        assert.equal(asked.length, 1);
        assert.equal(result.isError, true, JSON.stringify(result));
        assert.equal(text(result), "denied by the user: the user declined");
        assert.deepEqual(listing(), before);
      });
    }

    test("a declined count__bump never reaches upstream; the error result is valid for a tool with an outputSchema", async () => {
      await gateway.client.listTools(); // the client checks results against the tools' output schemas
      answer = () => ({ action: "decline" });
      const { result, asked } = await call("count__bump", { label: "declined" });
      assert.equal(asked.length, 1);
      assert.match(asked[0].message, /count__bump/);
      assert.equal(result.isError, true);
      assert.equal(text(result), "denied by the user: the user declined");
      assert.deepEqual(countLines(setup), []);
    });

    test("count__bump approved runs once and returns its structured result", async () => {
      answer = () => ({ action: "accept", content: { decision: "approve" } });
      const { result, asked } = await call("count__bump", { label: "approved" });
      assert.equal(asked.length, 1);
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(text(result), "bumped approved #1");
      assert.deepEqual(result.structuredContent, { count: 1 });
      assert.deepEqual(countLines(setup), ["approved"]);
    });

    test("a [[rule]] deny never reaches upstream and asks no one", async () => {
      const before = listing();
      answer = () => assert.fail("no elicitation expected for a policy denial");
      const target = path.join(setup.fsDir, "forbidden-plans.txt");
      const { result, asked } = await call("fs__write_file", { content: "secret", path: target });
      assert.equal(asked.length, 0);
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.ok(text(result).startsWith("denied by policy: "), text(result));
      assert.match(text(result), /no-forbidden/);
      assert.match(text(result), /forbidden files stay untouched/);
      assert.equal(fs.existsSync(target), false);
      assert.deepEqual(listing(), before);
    });

    // Last: it changes what later fs__write_file calls of this client do.
    test("approve_always: the next fs__write_file (other arguments) is not asked again", async () => {
      answer = () => ({ action: "accept", content: { decision: "approve_always" } });
      const first = path.join(setup.fsDir, "always-1.txt");
      const one = await call("fs__write_file", { content: "one", path: first });
      assert.equal(one.asked.length, 1);
      assert.ok(!one.result.isError, JSON.stringify(one.result));
      assert.equal(fs.readFileSync(first, "utf8"), "one");

      answer = () => assert.fail("approve_always: no further elicitation expected");
      const second = path.join(setup.fsDir, "always-2.txt");
      const two = await call("fs__write_file", { content: "two", path: second });
      assert.equal(two.asked.length, 0, "asked again after approve_always");
      assert.ok(!two.result.isError, JSON.stringify(two.result));
      assert.equal(text(two.result), `Successfully wrote to ${second}`);
      assert.equal(fs.readFileSync(second, "utf8"), "two");
    });

    test("the gateway is still alive", () => {
      assert.ok(gateway.pid, `no gateway pid; log:\n${readLog(gateway)}`);
      process.kill(gateway.pid, 0);
    });
  });
}
