// Shared by the end-to-end tests of the TypeScript client (run by scripts/e2e-agent-clients.sh, which starts
// one `toolgate serve` with e2e/agent-clients/server/config.toml and passes its URL in TOOLGATE_E2E_URL).
// alice runs the agents; bob approves transfers; bob and carol (finance) approve big transfers and wires.
// Each test marks its calls' inputs with a fresh `memo` and finds its own approvals in the inbox by it.
import { randomUUID } from "node:crypto";

export const URL = process.env.TOOLGATE_E2E_URL;
if (!URL) throw new Error("TOOLGATE_E2E_URL is not set: run scripts/e2e-agent-clients.sh");
export const TOKENS = { alice: "tok-alice", bob: "tok-bob", carol: "tok-carol", erin: "tok-erin" };

export const newMemo = () => `m-${randomUUID().slice(0, 12)}`;
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const auth = (user) => ({ authorization: `Bearer ${TOKENS[user]}` });

/** The approvals whose input carries `memo`, as `user` sees them. */
export async function approvals(memo, { user = "bob", state = "all" } = {}) {
  const response = await fetch(`${URL}/api/approvals?state=${state}&limit=200`, { headers: auth(user) });
  if (!response.ok) throw new Error(`GET /api/approvals: ${response.status}`);
  const { approvals: items } = await response.json();
  return items.filter((a) => a.input && typeof a.input === "object" && a.input.memo === memo);
}

/** The pending approval of the test's call, once it appears. */
export async function waitFor(memo, { user = "bob", timeoutMs = 30_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const [pending] = await approvals(memo, { user, state: "pending" });
    if (pending) return pending;
    await sleep(50);
  }
  throw new Error(`no pending approval with memo ${memo} within ${timeoutMs} ms`);
}

/** A vote in the inbox; resolves to the HTTP status. */
export async function vote(id, user, decision, extra = {}) {
  const response = await fetch(`${URL}/api/approvals/${id}`, {
    method: "POST",
    headers: { ...auth(user), "content-type": "application/json" },
    body: JSON.stringify({ decision, ...extra }),
  });
  await response.text();
  return response.status;
}

/**
 * Waits for the approval (and for the promise `after`, when given), then casts `votes` ([user, decision] ...) in
 * order; resolves to their statuses.
 */
export async function decideWhenAsked(memo, votes, extra = {}, { after } = {}) {
  const approval = await waitFor(memo);
  await after;
  const statuses = [];
  for (const [user, decision] of votes) statuses.push(await vote(approval.id, user, decision, extra));
  return statuses;
}

/** A promise and the function that resolves it. */
export function signal() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}
