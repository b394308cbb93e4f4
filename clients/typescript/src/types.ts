/**
 * The call-gating API's bodies. They mirror the schemas of the server's `/openapi.json`; the end-to-end suite
 * regenerates `openapi.ts` from a running server and type-checks these against it, so they cannot drift.
 */

/** What `POST /api/calls` answers: decided at once, or waiting for approvers. */
export type Decision = "allow" | "deny" | "pending";

/** Where a call stands (`GET /api/calls/{id}`). */
export type State = "pending" | "approved" | "denied" | "expired" | "started" | "finished" | "interrupted";

/** The body of `POST /api/calls`. */
export interface CallRequest {
  tool: string;
  input: unknown;
  conversationId?: string;
  idempotencyKey?: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  wait?: string;
}

/** The answer of `POST /api/calls`: 200 with `allow`/`deny`, or 202 with `pending` and who decides. */
export interface CallDecision {
  callId: string;
  decision: Decision;
  reason?: string | null;
  approvalId?: string | null;
  approvers?: string[] | null;
  quorum?: number | null;
  expiresAt?: string | null;
  url?: string | null;
}

/** A call's state: `input` is what to run once approved (edited or not). */
export interface CallState {
  callId: string;
  state: State;
  tool?: string | null;
  input?: unknown;
  reason?: string | null;
  output?: unknown;
  error?: string | null;
  approvalId?: string | null;
  expiresAt?: string | null;
}
