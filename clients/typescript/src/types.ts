/**
 * The call-gating API's bodies, taken from `openapi.ts`, which `scripts/generate.mjs` generates from the
 * server's `/openapi.json` (the agent-clients suite regenerates it from a running server and fails on any
 * difference), so these cannot drift from the server.
 */
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** The body of `POST /api/calls`. */
export type CallRequest = Schemas["CallRequest"];

/** A decided call (200): `allow` (start, run and finish it) or `deny`. */
export type CallDecided = Schemas["CallDecided"];

/** A call waiting for a person (202). */
export type CallPending = Schemas["CallPending"];

/** The answer of `POST /api/calls`. */
export type CallDecision = CallDecided | CallPending;

/** A call as it stands (`CallStatus`): `input` is what to run once approved (`edited` by an approver or not). */
export type CallState = Schemas["CallStatus"];

/** The body of `POST /api/calls/{id}/finish`. */
export type FinishRequest = Schemas["FinishRequest"];

/** What `POST /api/calls` answers: decided at once, or waiting for approvers. */
export type Decision = CallDecision["decision"];

/** Where a call stands. */
export type State = CallState["state"];
