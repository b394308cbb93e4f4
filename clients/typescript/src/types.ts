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

/** The answer of `POST /api/calls`: 200 `CallDecided` (`allow`/`deny`) or 202 `CallPending`. */
export type CallDecision = CallDecided | CallPending;

/** A decided call: `allow` (start, run and finish it) or `deny`. */
export interface CallDecided {
  callId: string;
  decision: "allow" | "deny";
  state: State;
  reason?: string | null;
  input?: unknown;
}

/** A call waiting for a person. */
export interface CallPending {
  callId: string;
  decision: "pending";
  state: State;
  approvalId: string;
  approvers: string[];
  quorum: number;
  expiresAt?: string | null;
  url: string;
}

/** A call as it stands (`CallStatus`): `input` is what to run once approved (`edited` by an approver or not). */
export interface CallState {
  callId: string;
  state: State;
  tool: string;
  input: unknown;
  edited: boolean;
  reason?: string | null;
  approvalId: string;
  approvers: string[];
  quorum: number;
  expiresAt?: string | null;
  output?: unknown;
  error?: unknown;
}
