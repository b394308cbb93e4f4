// `@ag-ui/client`'s HttpAgent against the server's `POST /ag-ui`, recording every request and event.

import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

/** True when the server has the AG-UI route (a build from before it was wired answers 404/405). */
export async function hasAguiRoute(url) {
  const response = await fetch(`${url}/ag-ui`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: '{}',
  });
  await response.arrayBuffer();
  return response.status !== 404 && response.status !== 405;
}

/** One AG-UI thread driven by a real HttpAgent. */
export class AguiThread {
  constructor({ url, threadId = `thread-${randomUUID()}` }) {
    this.requests = [];
    this.runs = [];
    const recordingFetch = async (input, init) => {
      const entry = { body: JSON.parse(init.body), status: undefined };
      this.requests.push(entry);
      const response = await fetch(input, init);
      entry.status = response.status;
      return response;
    };
    this.agent = new HttpAgent({ url: `${url}/ag-ui`, threadId, fetch: recordingFetch });
  }

  /** Appends a user message. */
  say(text) {
    this.agent.addMessage({ id: `user-${randomUUID()}`, role: 'user', content: text });
  }

  /**
   * Runs the agent once (`params` as for `runAgent`, e.g. `{resume}`); never throws.
   * Returns `{events, result, error}`; `events` are copies of what the subscriber saw, in order.
   */
  async run(params = {}) {
    const run = { events: [], result: undefined, error: undefined };
    this.runs.push(run);
    try {
      run.result = await this.agent.runAgent(params, {
        onEvent: ({ event }) => {
          run.events.push(structuredClone(event));
        },
      });
    } catch (error) {
      run.error = error;
    }
    return run;
  }
}

/** The event types of a run, in order. */
export function eventTypes(run) {
  return run.events.map((event) => event.type);
}

/** The events of one type. */
export function eventsOf(run, type) {
  return run.events.filter((event) => event.type === type);
}

/** The terminal event of a run. */
export function terminal(run) {
  return run.events.at(-1);
}

/** A resolved resume entry. */
export function resolved(interruptId, payload) {
  return { interruptId, status: 'resolved', payload };
}

/** The server's audit log (`GET /api/audit`, one JSON object per line), oldest first. */
export async function auditEvents(url) {
  const response = await fetch(`${url}/api/audit`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET /api/audit: ${response.status} ${text}`);
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}
