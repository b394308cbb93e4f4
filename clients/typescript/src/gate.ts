/**
 * `Gate`: the client of toolgate's call-gating API (`/api/calls`), on `fetch` alone.
 *
 * `submit`, `get`, `start` and `finish` are one request each. `check` submits and long-polls (at most 30 s a
 * request) until the call is decided, and returns the input to run or throws `Denied`/`Expired`. `run` and
 * `gated` add the exactly-once claim: the function runs only after `start` succeeded, and `finish` records its
 * result or error. A retry with the same idempotency key (or, without one, the same tool and input within the
 * server's retry window) attaches to the same call, so a restarted process waits on the same approval.
 */
import type { CallDecision, CallRequest, CallState } from "./types.js";
import { AlreadyStarted, Denied, Expired, Failed, ProtocolError, ToolgateError, errorFromResponse } from "./errors.js";

/** How long one long poll asks the server to hold, in seconds (the server's cap is 60). */
export const POLL_SECONDS = 30;

/** Options of `submit`, and of `check`/`run` which submit. */
export interface SubmitOptions {
  /** Attaches a retry to the same call (default: the server matches the same tool and input). */
  idempotencyKey?: string;
  /** The conversation the call belongs to (default: the gate's). */
  conversationId?: string;
  /** Shown to approvers with the call. */
  description?: string;
  /** The input's JSON Schema, for approvers' edits. */
  inputSchema?: Record<string, unknown>;
  /** Seconds the server may hold the answer until the call is decided (at most 60). */
  wait?: number;
}

/** Options of the calls that wait for a decision. */
export interface WaitOptions extends SubmitOptions {
  /** Give up (with `Expired`) after this many seconds; default: wait while the server holds the approval. */
  timeout?: number;
  /** Stops the waiting. */
  signal?: AbortSignal;
}

/** A call that may run: its id and the input to run (as approved, edited or not). */
export interface Approved {
  kind: "approved";
  callId: string;
  input: unknown;
}

/** A call an earlier attempt already ran: what it returned. */
export interface Finished {
  kind: "finished";
  callId: string;
  output: unknown;
}

/** A duration in the server's syntax (`"30s"`), clamped to 0..60 s. */
export function waitParam(seconds: number): string {
  return `${Math.max(0, Math.min(60, Math.floor(seconds)))}s`;
}

/** `undefined` while pending, what to do once decided; throws when the call must not run. */
export function settle(state: CallState): Approved | Finished | undefined {
  switch (state.state) {
    case "pending":
      return undefined;
    case "approved":
      return { kind: "approved", callId: state.callId, input: state.input };
    case "denied":
      throw new Denied(state.callId, state.reason ?? null);
    case "expired":
      throw new Expired(state.callId, state.reason ?? null);
    case "finished":
      if (state.error != null) {
        const error = typeof state.error === "string" ? state.error : JSON.stringify(state.error);
        throw new Failed(state.callId, error, state.output);
      }
      return { kind: "finished", callId: state.callId, output: state.output };
    case "started":
      throw new AlreadyStarted(state.callId, "the call is running elsewhere");
    case "interrupted":
      throw new AlreadyStarted(state.callId, "a run was started and never finished", "interrupted");
    default:
      throw new ProtocolError(`unknown call state ${JSON.stringify((state as { state: unknown }).state)}`);
  }
}

/** Options of a `Gate`. */
export interface GateOptions {
  /** The default conversation of the calls. */
  conversationId?: string;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

/** A client of one toolgate server, acting as the principal of `token` (a bearer token). */
export class Gate {
  readonly url: string;
  readonly conversationId: string | undefined;
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(url: string, token?: string, options: GateOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.#token = token;
    this.conversationId = options.conversationId;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  async #request(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const headers: Record<string, string> = {};
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await this.#fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new ToolgateError(`${method} ${path}: ${String(error)}`);
    }
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (!response.ok) throw errorFromResponse(response.status, parsed, text);
    return parsed;
  }

  /** `POST /api/calls`: asks for the call. */
  async submit(tool: string, input: unknown, options: SubmitOptions & { signal?: AbortSignal } = {}): Promise<CallDecision> {
    const body: CallRequest = { tool, input };
    const conversationId = options.conversationId ?? this.conversationId;
    if (conversationId !== undefined) body.conversationId = conversationId;
    if (options.idempotencyKey !== undefined) body.idempotencyKey = options.idempotencyKey;
    if (options.description !== undefined) body.description = options.description;
    if (options.inputSchema !== undefined) body.inputSchema = options.inputSchema;
    if (options.wait !== undefined) body.wait = waitParam(options.wait);
    return callObject<CallDecision>(await this.#request("POST", "/api/calls", body, options.signal));
  }

  /** `GET /api/calls/{id}`: the call's state; with `wait` (seconds), held until decided or the wait ends. */
  async get(callId: string, options: { wait?: number; signal?: AbortSignal } = {}): Promise<CallState> {
    const query = options.wait ? `?wait=${waitParam(options.wait)}` : "";
    return callObject<CallState>(
      await this.#request("GET", `/api/calls/${encodeURIComponent(callId)}${query}`, undefined, options.signal),
    );
  }

  /** `POST /api/calls/{id}/start`: the claim before the side effect; a second one throws `AlreadyStarted`. */
  async start(callId: string): Promise<CallState> {
    try {
      return callObject<CallState>(await this.#request("POST", `/api/calls/${encodeURIComponent(callId)}/start`));
    } catch (error) {
      if (error instanceof ToolgateError && error.code === "call_already_started") {
        throw new AlreadyStarted(callId, error.message);
      }
      throw error;
    }
  }

  /** `POST /api/calls/{id}/finish` with the run's `output`, or its `error`. */
  async finish(callId: string, outcome: { output: unknown } | { error: string }): Promise<CallState> {
    return callObject<CallState>(
      await this.#request("POST", `/api/calls/${encodeURIComponent(callId)}/finish`, outcome),
    );
  }

  /** Long-polls until the call is decided; past `timeout` seconds throws `Expired`. */
  async wait(callId: string, options: { timeout?: number; signal?: AbortSignal } = {}): Promise<CallState> {
    const deadline = options.timeout === undefined ? undefined : Date.now() + options.timeout * 1000;
    for (;;) {
      const left = deadline === undefined ? POLL_SECONDS : Math.min(POLL_SECONDS, (deadline - Date.now()) / 1000);
      const state = await this.get(callId, { wait: Math.max(left, 0), signal: options.signal });
      if (state.state !== "pending") return state;
      if (deadline !== undefined && Date.now() >= deadline) {
        throw new Expired(callId, `not decided within ${options.timeout} s`);
      }
    }
  }

  /** Submits and waits: `Approved` to run, `Finished` when an earlier attempt ran it; throws otherwise. */
  async decide(tool: string, input: unknown, options: WaitOptions = {}): Promise<Approved | Finished> {
    const decision = await this.submit(tool, input, options);
    if (decision.decision === "deny") {
      if (decision.state === "expired") throw new Expired(decision.callId, decision.reason ?? null);
      throw new Denied(decision.callId, decision.reason ?? null);
    }
    if (decision.decision === "allow" && decision.state === "approved") {
      return { kind: "approved", callId: decision.callId, input: decision.input };
    }
    for (;;) {
      const outcome = settle(await this.wait(decision.callId, options));
      if (outcome) return outcome;
    }
  }

  /** The input to run (as approved, edited or not), once the call is allowed; throws `Denied` or `Expired`. */
  async check(tool: string, input: unknown, options: WaitOptions = {}): Promise<unknown> {
    const outcome = await this.decide(tool, input, options);
    if (outcome.kind === "finished") throw new AlreadyStarted(outcome.callId, "the call was already run");
    return outcome.input;
  }

  /**
   * Gates, claims, runs `fn(inputToRun)` once and records the outcome; on a retry of a call that already
   * finished, returns the recorded output without running it again.
   */
  async run<I, R>(tool: string, input: I, fn: (input: I) => R | Promise<R>, options: WaitOptions = {}): Promise<R> {
    const outcome = await this.decide(tool, input, options);
    if (outcome.kind === "finished") return outcome.output as R;
    await this.start(outcome.callId);
    let result: R;
    try {
      result = await fn(outcome.input as I);
    } catch (error) {
      await this.finish(outcome.callId, { error: describe(error) });
      throw error;
    }
    await this.finish(outcome.callId, { output: asJson(result) });
    return result;
  }

  /** `fn` gated as `tool`: each call runs exactly once (see `run`); `key` gives a call's idempotency key. */
  gated<I, R>(
    tool: string,
    fn: (input: I) => R | Promise<R>,
    options: Omit<WaitOptions, "idempotencyKey"> & { key?: (input: I) => string } = {},
  ): (input: I) => Promise<R> {
    const { key, ...rest } = options;
    return (input: I) => this.run(tool, input, fn, { ...rest, idempotencyKey: key?.(input) });
  }

  /**
   * `GET /api/calls/stream`: the calls named by `ids` (default: all the caller's) as they stand, then each
   * change, until `signal` aborts.
   */
  async *stream(options: { ids?: string[]; signal?: AbortSignal } = {}): AsyncGenerator<CallState> {
    const { ids, signal } = options;
    const headers: Record<string, string> = { accept: "text/event-stream" };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    const query = ids?.length ? `?ids=${encodeURIComponent(ids.join(","))}` : "";
    const response = await this.#fetch(`${this.url}/api/calls/stream${query}`, { headers, signal });
    if (!response.ok || !response.body) {
      const text = await response.text();
      throw errorFromResponse(response.status, safeJson(text), text);
    }
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, "");
        buffer = buffer.slice(newline + 1);
        if (line.startsWith("data:")) yield callObject<CallState>(JSON.parse(line.slice(5).trim()));
      }
    }
  }
}

function callObject<T extends { callId: string }>(body: unknown): T {
  if (typeof body !== "object" || body === null || typeof (body as { callId?: unknown }).callId !== "string") {
    throw new ProtocolError(`expected a call object with a callId, got ${JSON.stringify(body)?.slice(0, 200)}`);
  }
  return body as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** An error as the text `finish` records. */
export function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** A result as JSON for `finish`: itself when it serializes, else its text. */
export function asJson(value: unknown): unknown {
  try {
    return value === undefined ? null : JSON.parse(JSON.stringify(value));
  } catch {
    return String(value);
  }
}
