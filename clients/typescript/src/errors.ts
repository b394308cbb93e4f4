/**
 * What the client throws. `ToolgateError` carries the server's stable error code (`{"error": {"code",
 * "message"}}`); the outcomes that mean "do not run it" are their own classes, so an agent can tell a denial
 * from a broken server.
 */

/** A request the server refused (`status`, `code`), or one that could not be made. */
export class ToolgateError extends Error {
  readonly status: number | undefined;
  readonly code: string | undefined;

  constructor(message: string, options: { status?: number; code?: string } = {}) {
    super(options.code ? `${options.code}: ${message}` : message);
    this.name = "ToolgateError";
    this.status = options.status;
    this.code = options.code;
  }
}

/** The server answered with something that is not the call-gating API's shape. */
export class ProtocolError extends ToolgateError {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

/** The call must not run: `callId` names it, `reason` says why. */
export class NotRun extends ToolgateError {
  readonly callId: string;
  readonly reason: string | null;

  constructor(callId: string, reason: string | null, code: string) {
    super(reason ?? code, { code });
    this.name = "NotRun";
    this.callId = callId;
    this.reason = reason;
  }
}

/** The call was denied (by a rule, a standing decision or an approver), with the reason. */
export class Denied extends NotRun {
  constructor(callId: string, reason: string | null) {
    super(callId, reason, "denied");
    this.name = "Denied";
  }
}

/** The approval expired before it was decided. */
export class Expired extends NotRun {
  constructor(callId: string, reason: string | null = null) {
    super(callId, reason ?? "the approval expired", "expired");
    this.name = "Expired";
  }
}

/** Another process claimed the run (409 `call_already_started`), or it was claimed and never finished. */
export class AlreadyStarted extends NotRun {
  constructor(callId: string, reason: string | null = null, code = "call_already_started") {
    super(callId, reason ?? "the call was already started", code);
    this.name = "AlreadyStarted";
  }
}

/** A call found finished with an error by a retry. */
export class Failed extends ToolgateError {
  readonly callId: string;
  readonly output: unknown;

  constructor(callId: string, error: string, output: unknown) {
    super(error, { code: "failed" });
    this.name = "Failed";
    this.callId = callId;
    this.output = output;
  }
}

/** The error an error response stands for: its `{"error": {"code", "message"}}`, else the status and text. */
export function errorFromResponse(status: number, body: unknown, text: string): ToolgateError {
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string") {
    const { code, message } = error as { code: string; message?: unknown };
    return new ToolgateError(String(message ?? ""), { status, code });
  }
  return new ToolgateError(`HTTP ${status}: ${text.slice(0, 200)}`, { status });
}

/** What a model is told when toolgate did not let a call run. */
export function denialText(tool: string, error: NotRun): string {
  return `The call to \`${tool}\` was not run: ${error.code}: ${error.reason ?? "no reason given"}`;
}
