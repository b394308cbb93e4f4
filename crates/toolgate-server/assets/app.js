// toolgate web client.
//
// A small, dependency-free chat client that speaks the Vercel AI SDK v6 UI
// message stream and keeps the same client-side state the SDK's `Chat` keeps:
// a list of UIMessages whose parts (`step-start`, `text`, `reasoning`,
// `tool-<name>` / `dynamic-tool`) are built up chunk by chunk. The person
// answers approval requests on tool cards; once every pending decision of
// the last assistant message is made, the whole history is POSTed again and
// the response continues that same assistant message.

const API = 'api/chat';

// Tools the browser itself answers (client-executed tools of the demo toolkit).
const CLIENT_TOOLS = new Set(['ask_user']);

// ---------------------------------------------------------------------------
// State

// The conversation id lives in the URL (`#chat=ID`): a reload keeps it, and the page
// restores the conversation the server stored (pending approvals included).
const chatIdInUrl = () => /(?:^#|&)chat=([^&]+)/.exec(location.hash)?.[1];
const initialChatId = chatIdInUrl() ? decodeURIComponent(chatIdInUrl()) : null;

const state = {
  chatId: initialChatId ?? newId('chat'),
  messages: [], // UIMessage[], exactly what is POSTed
  status: 'ready', // 'ready' | 'submitted' | 'streaming' | 'error'
  error: null, // {title, detail, retry} shown in the banner
  abort: null, // AbortController of the request in flight
};

// UI-only state, kept out of the messages so they stay protocol-clean.
const drafts = new Map(); // toolCallId -> {mode: 'deny' | 'edit', reason, text, error}
const streamedInput = new Map(); // toolCallId -> input JSON text received so far
const unsentOutputs = new Set(); // toolCallIds of client tool outputs not yet sent
const stickyRequests = new Map(); // toolCallId -> {saving} | {error}: a sticky decision being saved from a card

function newId(prefix) {
  const random = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random().toString(16).slice(2)}`;
  return `${prefix}-${random}`;
}

// The data part the server sends before an approval request or a denial: why the call waits or was refused.
const REASON_PART = 'data-toolgate-reason';

const isToolPart = (part) => part.type === 'dynamic-tool' || part.type.startsWith('tool-');
const toolName = (part) => (part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length));
const busy = () => state.status === 'submitted' || state.status === 'streaming';
const lastMessage = () => state.messages.at(-1);

function findToolPart(message, toolCallId) {
  if (!message) return undefined;
  // Newest first, like the SDK: a call id is looked up in the message being streamed.
  for (let i = message.parts.length - 1; i >= 0; i--) {
    const part = message.parts[i];
    if (isToolPart(part) && part.toolCallId === toolCallId) return part;
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// The UI message stream: SSE frames `data: <chunk json>\n\n`, ended by `data: [DONE]`.

async function* readChunks(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = frame
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data && data !== '[DONE]') yield JSON.parse(data);
    }
  }
}

// Applies one chunk to the response being streamed. `run` holds the message
// the response writes into and the open text/reasoning parts by chunk id.
function applyChunk(run, chunk) {
  if (chunk.type !== 'start' && !run.message) startMessage(run, undefined);
  switch (chunk.type) {
    case 'start':
      return startMessage(run, chunk.messageId);
    case 'start-step':
      run.blocks.clear(); // text ids are only unique within a step
      return run.message.parts.push({ type: 'step-start' });
    case 'text-start':
    case 'reasoning-start': {
      const part = { type: chunk.type.split('-')[0], text: '', state: 'streaming' };
      run.blocks.set(chunk.id, part);
      return run.message.parts.push(part);
    }
    case 'text-delta':
    case 'reasoning-delta':
      return void (blockPart(run, chunk).text += chunk.delta);
    case 'text-end':
    case 'reasoning-end':
      return void (blockPart(run, chunk).state = 'done');
    case 'tool-input-start':
      return startToolPart(run, chunk);
    case 'tool-input-delta': {
      const text = (streamedInput.get(chunk.toolCallId) ?? '') + chunk.inputTextDelta;
      streamedInput.set(chunk.toolCallId, text);
      return void (toolPart(run, chunk.toolCallId).input = parseLoosely(text));
    }
    case 'tool-input-available': {
      const part = findToolPart(run.message, chunk.toolCallId) ?? startToolPart(run, chunk);
      return Object.assign(part, { state: 'input-available', input: chunk.input });
    }
    case 'tool-input-error': {
      const part = findToolPart(run.message, chunk.toolCallId) ?? startToolPart(run, chunk);
      return Object.assign(part, { state: 'output-error', input: chunk.input, errorText: chunk.errorText });
    }
    case 'tool-approval-request': {
      // The call waits for a person. The approval id (not the call id) is what the answer refers to.
      const part = toolPart(run, chunk.toolCallId);
      part.state = 'approval-requested';
      part.approval = { id: chunk.approvalId, ...(chunk.signature ? { signature: chunk.signature } : {}) };
      return;
    }
    case 'tool-output-available': {
      // Updates the existing part in place, so an earlier `approval` object is kept.
      const part = toolPart(run, chunk.toolCallId);
      part.state = 'output-available';
      part.output = chunk.output;
      if (chunk.preliminary) part.preliminary = true;
      else delete part.preliminary;
      return;
    }
    case 'tool-output-error':
      return void Object.assign(toolPart(run, chunk.toolCallId), { state: 'output-error', errorText: chunk.errorText });
    case 'tool-output-denied':
      // No reason on the wire: the part's `approval` already holds the person's answer.
      return void (toolPart(run, chunk.toolCallId).state = 'output-denied');
    case 'error':
      run.failed = true;
      return showError({ title: 'The response failed', detail: chunk.errorText });
    case 'message-metadata':
      return void (run.message.metadata = chunk.messageMetadata);
    case 'file':
      return run.message.parts.push({ type: 'file', url: chunk.url, mediaType: chunk.mediaType });
    case 'source-url':
    case 'source-document':
      return run.message.parts.push({ ...chunk });
    default:
      if (chunk.type.startsWith('data-') && !chunk.transient) upsertDataPart(run.message, chunk);
      // finish, finish-step, abort: nothing to keep.
      return;
  }
}

// A data part is kept as `{type, id, data}`, as the SDK keeps it: a later
// chunk with the same type and id replaces the earlier part in place.
function upsertDataPart(message, chunk) {
  const part = chunk.id == null ? { type: chunk.type, data: chunk.data } : { type: chunk.type, id: chunk.id, data: chunk.data };
  const index = chunk.id == null ? -1 : message.parts.findIndex((p) => p.type === chunk.type && p.id === chunk.id);
  if (index >= 0) message.parts[index] = part;
  else message.parts.push(part);
}

// The server's reason for a call (`{decision: 'ask' | 'deny', reason}`), if it sent one.
function reasonFor(message, toolCallId) {
  const data = message.parts.find((part) => part.type === REASON_PART && part.id === toolCallId)?.data;
  if (typeof data?.reason !== 'string') return undefined;
  return { decision: data.decision, reason: data.reason };
}

// `start`: a continuation keeps writing into the last assistant message when
// the server sends its id (or none); any other id starts a new message.
function startMessage(run, messageId) {
  const last = lastMessage();
  if (last?.role === 'assistant' && (!messageId || messageId === last.id)) {
    run.message = last;
  } else {
    run.message = { id: messageId ?? newId('msg'), role: 'assistant', parts: [] };
    state.messages.push(run.message);
  }
}

function startToolPart(run, chunk) {
  const part = chunk.dynamic
    ? { type: 'dynamic-tool', toolName: chunk.toolName, toolCallId: chunk.toolCallId, state: 'input-streaming' }
    : { type: `tool-${chunk.toolName}`, toolCallId: chunk.toolCallId, state: 'input-streaming' };
  if (chunk.providerExecuted != null) part.providerExecuted = chunk.providerExecuted;
  run.message.parts.push(part);
  return part;
}

function blockPart(run, chunk) {
  const part = run.blocks.get(chunk.id);
  if (!part) throw new Error(`The stream refers to an unknown text part "${chunk.id}".`);
  return part;
}

function toolPart(run, toolCallId) {
  const part = findToolPart(run.message, toolCallId);
  if (!part) throw new Error(`No tool invocation found for tool call ID "${toolCallId}".`);
  return part;
}

// Best effort for partial input JSON while it streams; the final input comes with `tool-input-available`.
function parseLoosely(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------
// Requests

// POSTs the whole history, as `DefaultChatTransport` does, and streams the answer.
async function submit() {
  const body = {
    id: state.chatId,
    messages: state.messages,
    trigger: 'submit-message',
    messageId: lastMessage()?.id,
  };
  unsentOutputs.clear();
  clearError();
  const abort = new AbortController();
  state.abort = abort;
  setStatus('submitted');

  const run = { message: null, blocks: new Map(), failed: false };
  try {
    const response = await authFetch(API, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: abort.signal,
    });
    if (!response.ok) throw await httpError(response);
    setStatus('streaming');
    for await (const chunk of readChunks(response.body)) {
      applyChunk(run, chunk);
      scheduleRender();
    }
  } catch (error) {
    if (abort.signal.aborted) return;
    run.failed = true;
    showError(error.banner ?? { title: 'Something went wrong', detail: error.message, retry: !run.message });
  } finally {
    if (state.abort === abort) state.abort = null;
  }
  if (abort.signal.aborted) return;
  finishText(run.message);
  setStatus(run.failed ? 'error' : 'ready');
  refreshAudit();
  refreshDecisions();
  if (!run.failed) continueIfComplete();
}

// ---------------------------------------------------------------------------
// Sign-in. With a tokens file or JWT bearer tokens the server answers 401 to
// a request without a valid token. The page then asks for a token once, keeps
// it for this tab (sessionStorage, never localStorage), sends it with every
// request, and shows who the server takes it for (`GET api/me`). A 401 later
// (a revoked or expired token) asks again.
//
// With OpenID Connect (`signIn: "oidc"`) the server signed the person in
// before it served this page, and requests ride its session cookie: the page
// never asks for a token. A 401 (its 401s say `X-Toolgate-Sign-In: oidc`)
// means the session ended, so the page reloads, which sends the browser to
// the identity provider; "Sign out" goes to `auth/logout`.

const TOKEN_KEY = 'toolgate.token';
const RELOADED_KEY = 'toolgate.signInReload';
let signInMode = null; // `signIn` of `GET api/me` once known

const oidcRefusal = (response) => signInMode === 'oidc' || response.headers.get('x-toolgate-sign-in') === 'oidc';

// Reloads to sign in again, unless this tab did so moments ago (a loop would never end).
function signInAgain() {
  let last = 0;
  try {
    last = Number(sessionStorage.getItem(RELOADED_KEY) ?? 0);
    sessionStorage.removeItem(TOKEN_KEY); // a token from another mode would shadow the session
    sessionStorage.setItem(RELOADED_KEY, String(Date.now()));
  } catch {
    // No storage: reload all the same.
  }
  if (Date.now() - last < 10_000) {
    showError({ title: 'Signed out', detail: 'The session ended and signing in again did not help. Reload the page to try again.' });
    return;
  }
  location.reload();
}

function storedToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

async function authFetch(url, options = {}) {
  const headers = new Headers(options.headers ?? {});
  const token = storedToken();
  if (token) headers.set('authorization', `Bearer ${token}`);
  const response = await fetch(url, { ...options, headers });
  if (response.status === 401) {
    if (oidcRefusal(response)) signInAgain();
    else askForToken(token ? await refusalMessage(response.clone()) : '');
  }
  return response;
}

async function refusalMessage(response) {
  try {
    return (await response.json())?.error?.message ?? 'The token was refused.';
  } catch {
    return 'The token was refused.';
  }
}

function askForToken(message) {
  const error = $('#signin-error');
  error.textContent = message;
  error.hidden = !message;
  const dialog = $('#signin');
  if (!dialog.open) dialog.showModal();
  $('#signin-token').focus();
}

// Asks the server who this is; false when it wants a token first.
async function whoAmI() {
  let me;
  try {
    const response = await authFetch('api/me');
    if (!response.ok) return response.status !== 401;
    me = await response.json();
  } catch {
    return true; // Offline: the page works as far as it can.
  }
  signInMode = me.signIn;
  $('#who').hidden = !me.principal;
  $('#who-name').textContent = me.principal ?? '';
  $('#sign-out').hidden = me.signIn !== 'token' && me.signIn !== 'oidc';
  return true;
}

function setupSignIn() {
  const dialog = $('#signin');
  dialog.addEventListener('cancel', (event) => event.preventDefault()); // Escape does not skip it
  $('#signin-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = $('#signin-token').value.trim();
    if (!token) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch {
      // Storage refused (private mode): the token lasts until the page reloads.
    }
    if (await whoAmI()) {
      $('#signin-token').value = '';
      dialog.close();
      restoreConversation();
      refreshAudit();
      refreshDecisions();
    }
  });
  $('#sign-out').addEventListener('click', () => {
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // Nothing kept.
    }
    // Relative, so that it works below a path prefix too.
    if (signInMode === 'oidc') location.assign('auth/logout');
    else location.reload();
  });
}

// ---------------------------------------------------------------------------
// Server-side conversations and the audit log (with a store; without one both
// endpoints answer 404 and the page works as before).

function rememberChatId() {
  history.replaceState(null, '', `#chat=${encodeURIComponent(state.chatId)}`);
}

async function restoreConversation() {
  if (!initialChatId) return;
  try {
    const response = await authFetch(`api/chats/${encodeURIComponent(initialChatId)}`);
    if (!response.ok) return;
    const stored = await response.json();
    if (Array.isArray(stored.messages) && state.messages.length === 0 && state.chatId === initialChatId) {
      state.messages = stored.messages;
      render();
      scrollToBottom();
    }
  } catch {
    // Offline or no store: start empty, as a new page would.
  }
}

const audit = { open: false, events: [], note: '', toggle: '#audit-toggle', panel: '#audit-panel', refresh: refreshAudit };

// The side panels (audit log, sticky decisions) share one place: opening one closes the other.
const panels = () => [audit, decisions];

function togglePanel(which) {
  const open = !which.open;
  for (const other of panels()) if (other !== which && other.open) showPanel(other, false);
  showPanel(which, open);
  if (open) which.refresh();
  else $(which.toggle).focus(); // the close button is gone: focus goes back to the toggle
}

function showPanel(which, open) {
  which.open = open;
  $(which.toggle).setAttribute('aria-expanded', String(open));
  $(which.panel).hidden = !open;
  $('.app').classList.toggle('has-panel', panels().some((panel) => panel.open));
}

async function refreshAudit() {
  if (!audit.open) return;
  const chatId = state.chatId;
  try {
    const response = await authFetch(`api/audit?conversation=${encodeURIComponent(chatId)}`);
    if (chatId !== state.chatId) return;
    if (response.status === 404) {
      Object.assign(audit, { events: [], note: 'This server keeps no audit log (it runs with --store none).' });
    } else if (!response.ok) {
      Object.assign(audit, { events: [], note: `The audit log could not be read (HTTP ${response.status}).` });
    } else {
      const text = await response.text();
      const events = text.split('\n').filter((line) => line.trim() !== '').map((line) => JSON.parse(line));
      Object.assign(audit, { events, note: events.length === 0 ? 'No approvals in this conversation yet.' : '' });
    }
  } catch (error) {
    Object.assign(audit, { events: [], note: `The audit log could not be read: ${error.message}` });
  }
  renderAudit();
}

const AUDIT_LABEL = {
  issued: 'Asked',
  approved: 'Approved',
  denied: 'Denied',
  edited: 'Edited',
  executed: 'Ran',
  failed: 'Failed',
  expired: 'Expired',
  interrupted: 'Interrupted',
  rejected: 'Refused answer',
};

function auditDetail(event) {
  const data = event.data ?? {};
  switch (event.kind) {
    case 'issued':
      return `${data.toolName ?? ''} ${JSON.stringify(data.input ?? {})}`;
    case 'edited':
      return `${JSON.stringify(data.originalInput)} → ${JSON.stringify(data.editedInput)}`;
    case 'denied':
      return data.reason ?? '';
    case 'executed':
      return JSON.stringify(data.result?.value ?? data.result ?? '');
    case 'failed':
      return JSON.stringify(data.error ?? '');
    case 'rejected':
      return data.why ?? '';
    default:
      return '';
  }
}

function renderAudit() {
  const list = $('#audit-events');
  const items = audit.events.map((event) =>
    el(
      'li',
      { class: 'audit-event', 'data-testid': 'audit-event', 'data-kind': event.kind },
      el('span', { class: 'audit-time' }, new Date(event.at).toLocaleTimeString()),
      el('span', { class: `audit-kind audit-kind-${event.kind}` }, AUDIT_LABEL[event.kind] ?? event.kind),
      el('span', { class: 'audit-who' }, event.principal ?? ''),
      el('code', { class: 'audit-call' }, event.toolCallId),
      el('span', { class: 'audit-detail' }, auditDetail(event)),
    ),
  );
  list.replaceChildren(...items);
  $('#audit-note').textContent = audit.note;
}

// ---------------------------------------------------------------------------
// Sticky decisions: a person's "always allow" / "never allow", kept by the
// server (`/api/decisions`) and applied to later calls without asking.

const DECISIONS_API = 'api/decisions';

const decisions = {
  open: false,
  list: [], // as the server lists them: {id, action, tool, input?, scope, createdAt, expiresAt?, createdBy?, note?}
  note: '',
  error: '', // a revoke that failed
  revoking: new Set(), // ids with a DELETE in flight
  reads: 0, // GETs started: only the newest one's answer is shown
  toggle: '#decisions-toggle',
  panel: '#decisions-panel',
  refresh: refreshDecisions,
};

async function refreshDecisions() {
  if (!decisions.open) return;
  const chatId = state.chatId;
  const read = ++decisions.reads;
  const stale = () => read !== decisions.reads || chatId !== state.chatId;
  try {
    const response = await authFetch(`${DECISIONS_API}?conversation=${encodeURIComponent(chatId)}`);
    if (stale()) return;
    if (!response.ok) {
      const error = await httpError(response);
      Object.assign(decisions, { list: [], note: `The sticky decisions could not be read: ${errorLine(error)}` });
    } else {
      const list = (await response.json())?.decisions;
      if (stale()) return;
      const valid = Array.isArray(list) ? list : [];
      Object.assign(decisions, { list: valid, note: valid.length === 0 ? 'No sticky decisions for this chat.' : '' });
    }
  } catch (error) {
    if (stale()) return;
    Object.assign(decisions, { list: [], note: `The sticky decisions could not be read: ${error.message}` });
  }
  renderDecisions();
}

// Saves a sticky decision; resolves to null, or the error to show.
async function saveDecision(body) {
  try {
    const response = await authFetch(DECISIONS_API, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return response.ok ? null : errorLine(await httpError(response));
  } catch (error) {
    return error.message;
  }
}

async function revokeDecision(id) {
  if (decisions.revoking.has(id)) return;
  const list = $('#decisions-list');
  const hadFocus = list.contains(document.activeElement);
  const position = decisions.list.findIndex((decision) => decision.id === id);
  decisions.revoking.add(id);
  renderDecisions();
  let error = '';
  try {
    // The server revokes what the listing showed: the decisions of this chat (and wider ones).
    const url = `${DECISIONS_API}/${encodeURIComponent(id)}?conversation=${encodeURIComponent(state.chatId)}`;
    const response = await authFetch(url, { method: 'DELETE' });
    if (!response.ok) error = errorLine(await httpError(response));
  } catch (failure) {
    error = failure.message;
  }
  decisions.revoking.delete(id);
  decisions.error = error ? `The decision was not revoked: ${error}` : '';
  await refreshDecisions();
  renderDecisions();
  // The button that had focus is gone: keep the keyboard in the list.
  if (hadFocus && decisions.open && !list.contains(document.activeElement)) {
    const buttons = list.querySelectorAll('[data-testid="revoke-button"]');
    (buttons[Math.min(position, buttons.length - 1)] ?? $('#decisions-close')).focus();
  }
}

const STICKY_LABEL = { allow: 'Always allow', deny: 'Never allow' };

function scopeText(scope) {
  switch (scope?.kind) {
    case 'conversation':
      return scope.conversationId === state.chatId ? 'in this chat' : `in chat ${scope.conversationId}`;
    case 'principal':
      return `for ${scope.principal}`;
    case 'global':
      return 'everywhere';
    default:
      return JSON.stringify(scope ?? null);
  }
}

function expiryText(expiresAt) {
  if (expiresAt == null) return 'no expiry';
  const when = new Date(expiresAt).toLocaleString();
  return expiresAt <= Date.now() ? `expired ${when}` : `expires ${when}`;
}

function decisionItem(decision) {
  const label = STICKY_LABEL[decision.action] ?? decision.action;
  const made = [`added ${new Date(decision.createdAt).toLocaleString()}`, decision.createdBy && `by ${decision.createdBy}`];
  return el(
    'li',
    {
      class: 'decision',
      'data-testid': 'decision',
      'data-decision-id': decision.id,
      'data-action': decision.action,
      'data-tool': decision.tool,
    },
    el('span', { class: `decision-action decision-action-${decision.action}`, 'data-testid': 'decision-action' }, label),
    el('code', { class: 'decision-tool', 'data-testid': 'decision-tool' }, decision.tool),
    button('Revoke', 'revoke-button', () => revokeDecision(decision.id), 'btn-small btn-secondary decision-revoke', {
      disabled: decisions.revoking.has(decision.id),
      'aria-label': `Revoke: ${label.toLowerCase()} ${decision.tool} ${scopeText(decision.scope)}`,
    }),
    decision.input !== undefined && decision.input !== null
      ? el('div', { class: 'decision-input' }, el('span', { class: 'decision-input-label' }, 'exact input'), jsonBlock(decision.input, 'decision-input'))
      : el('span', { class: 'decision-any muted' }, 'any input'),
    el(
      'span',
      { class: 'decision-meta' },
      el('span', { 'data-testid': 'decision-scope' }, scopeText(decision.scope)),
      ' · ',
      el('span', { 'data-testid': 'decision-expiry' }, expiryText(decision.expiresAt)),
      ' · ',
      made.filter(Boolean).join(' '),
    ),
    decision.note ? el('span', { class: 'decision-note' }, decision.note) : null,
  );
}

function renderDecisions() {
  $('#decisions-list').replaceChildren(...decisions.list.map(decisionItem));
  $('#decisions-note').textContent = decisions.note;
  const error = $('#decisions-error');
  error.textContent = decisions.error;
  error.hidden = !decisions.error;
}

// A 4xx/5xx answer carries `{"error": {"code", "message"}}` (or `{"error": "message"}`).
async function httpError(response) {
  let code = `HTTP ${response.status}`;
  let detail = response.statusText || 'The server did not accept the request.';
  try {
    const text = await response.text();
    const json = JSON.parse(text);
    const error = json?.error;
    code = error?.code ?? code;
    detail = typeof error === 'string' ? error : (error?.message ?? json?.message ?? text);
  } catch {
    // Not JSON: keep the status line.
  }
  const error = new Error(detail);
  error.banner = { title: 'The server refused the request', code, detail, retry: true };
  return error;
}

// One line for an error of a side request: the message and, from an HTTP answer, its code.
function errorLine(error) {
  const code = error.banner?.code;
  return code ? `${error.message} (${code})` : error.message;
}

// Text parts still open when a stream breaks off are closed.
function finishText(message) {
  for (const part of message?.parts ?? []) {
    if ((part.type === 'text' || part.type === 'reasoning') && part.state === 'streaming') part.state = 'done';
  }
}

function sendUserMessage(text) {
  const trimmed = text.trim();
  if (!trimmed || busy()) return false;
  state.messages.push({ id: newId('user'), role: 'user', parts: [{ type: 'text', text: trimmed }] });
  submit();
  return true;
}

// The SDK's `sendAutomaticallyWhen`: continue once the last assistant message
// has no open question left and at least one answer that the server has not seen.
function continueIfComplete() {
  const message = lastMessage();
  if (busy() || message?.role !== 'assistant') return;
  const tools = message.parts.filter(isToolPart);
  const waiting = tools.some((part) => waitsForPerson(part) || part.state === 'input-streaming');
  const answered = tools.some((part) => part.state === 'approval-responded' || unsentOutputs.has(part.toolCallId));
  if (answered && !waiting) submit();
}

const isClientTool = (part) => CLIENT_TOOLS.has(toolName(part)) && !part.providerExecuted;
const waitsForPerson = (part) =>
  part.state === 'approval-requested' || (part.state === 'input-available' && isClientTool(part));

// ---------------------------------------------------------------------------
// The person's answers

// Approve or deny: the part goes to `approval-responded` with the decision in
// `approval` (toolgate's extension: `editedInput` replaces the model's input).
function decide(toolCallId, { approved, reason, editedInput }) {
  const part = findToolPart(lastMessage(), toolCallId);
  if (!part || part.state !== 'approval-requested' || busy()) return;
  part.state = 'approval-responded';
  part.approval = { ...part.approval, approved };
  if (reason) part.approval.reason = reason;
  if (editedInput !== undefined) part.approval.editedInput = editedInput;
  drafts.delete(toolCallId);
  stickyRequests.delete(toolCallId);
  render();
  continueIfComplete();
}

// Takes back a decision that has not been sent yet (other requests still wait).
function undecide(toolCallId) {
  const part = findToolPart(lastMessage(), toolCallId);
  if (!part || part.state !== 'approval-responded' || busy()) return;
  part.state = 'approval-requested';
  part.approval = { id: part.approval.id, ...(part.approval.signature ? { signature: part.approval.signature } : {}) };
  render();
}

// A client-executed tool's result, as the SDK's `addToolOutput` records it.
function answerClientTool(toolCallId, output) {
  const part = findToolPart(lastMessage(), toolCallId);
  if (!part || part.state !== 'input-available' || busy()) return;
  Object.assign(part, { state: 'output-available', output });
  unsentOutputs.add(toolCallId);
  render();
  continueIfComplete();
}

// The sticky decisions a card offers: what is saved, and how the card's own call is then answered.
const STICKY = {
  'allow-tool': { action: 'allow', exactInput: false, answer: { approved: true } },
  'allow-input': { action: 'allow', exactInput: true, answer: { approved: true } },
  never: { action: 'deny', exactInput: false, answer: { approved: false, reason: 'never allow (sticky decision)' } },
};

// Saves a sticky decision for this chat, then answers the card's call (and any
// other call waiting in this message that the decision covers) as the plain
// button would. When the server refuses it, the card shows why and stays open.
async function stick(toolCallId, kind) {
  const part = findToolPart(lastMessage(), toolCallId);
  if (!part || part.state !== 'approval-requested' || busy() || stickyRequests.get(toolCallId)?.saving) return;
  const sticky = STICKY[kind];
  const chatId = state.chatId;
  const body = { action: sticky.action, tool: toolName(part), scope: 'conversation', conversationId: chatId };
  if (sticky.exactInput) body.input = part.input ?? {};
  stickyRequests.set(toolCallId, { saving: true });
  render();
  const error = await saveDecision(body);
  if (chatId !== state.chatId) return;
  if (error) {
    stickyRequests.set(toolCallId, { error });
    return render();
  }
  stickyRequests.delete(toolCallId);
  decisions.error = '';
  refreshDecisions();
  const covered = (other) =>
    other.state === 'approval-requested' &&
    toolName(other) === body.tool &&
    (!sticky.exactInput || sameJson(other.input ?? {}, body.input));
  const others = (lastMessage()?.parts ?? []).filter((other) => isToolPart(other) && other !== part && covered(other));
  // The clicked card last: its answer may be the one that completes the message.
  for (const call of [...others, part]) decide(call.toolCallId, sticky.answer);
}

// JSON equality, as the server compares a decision's input (key order does not matter).
function sameJson(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && sameJson(a[key], b[key]));
}

function newChat() {
  state.abort?.abort();
  Object.assign(state, { chatId: newId('chat'), messages: [], status: 'ready', error: null, abort: null });
  rememberChatId();
  decisions.error = '';
  refreshAudit();
  refreshDecisions();
  drafts.clear();
  streamedInput.clear();
  unsentOutputs.clear();
  stickyRequests.clear();
  render();
  $('#composer-input').focus();
}

// ---------------------------------------------------------------------------
// Status and errors

function setStatus(status) {
  state.status = status;
  render();
}

function showError(error) {
  state.error = error;
  scheduleRender();
}

function clearError() {
  state.error = null;
  scheduleRender();
}

// ---------------------------------------------------------------------------
// Rendering: each message and part is rebuilt only when what it shows changed.

const $ = (selector) => document.querySelector(selector);
const rendered = new Map(); // key -> {node, signature}
let renderQueued = false;

function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    render();
  });
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value == null || value === false) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : value);
  }
  node.append(...children.flat().filter((child) => child != null && child !== false));
  return node;
}

function render() {
  const pinned = isScrolledToBottom();
  renderStatus();
  renderBanner();
  $('#welcome').hidden = state.messages.length > 0;
  $('#send-button').disabled = busy();
  $('#composer').dataset.busy = String(busy());
  renderMessages();
  if (pinned) scrollToBottom();
}

const STATUS_TEXT = { ready: 'Ready', submitted: 'Thinking…', streaming: 'Responding…', error: 'Error' };

function renderStatus() {
  const pending = pendingDecisions();
  const status = state.status === 'ready' && pending > 0 ? 'waiting' : state.status;
  const pill = $('#chat-status');
  pill.dataset.status = status;
  pill.querySelector('.status-text').textContent =
    status === 'waiting' ? `Waiting for you (${pending})` : STATUS_TEXT[state.status];
}

function pendingDecisions() {
  return (lastMessage()?.parts ?? []).filter((part) => isToolPart(part) && waitsForPerson(part)).length;
}

function renderBanner() {
  const banner = $('#error-banner');
  banner.hidden = !state.error;
  if (!state.error) return;
  banner.querySelector('.banner-title-text').textContent = state.error.title;
  const code = banner.querySelector('.banner-code');
  code.textContent = state.error.code ?? '';
  code.hidden = !state.error.code;
  banner.querySelector('.banner-detail').replaceChildren(...richText(state.error.detail ?? ''));
  $('#error-retry').hidden = !state.error.retry;
}

function renderMessages() {
  const list = $('#messages');
  const keep = new Set();
  const nodes = state.messages.map((message) => messageNode(message, keep));
  if (showTyping()) nodes.push(typingNode(keep));
  syncChildren(list, nodes);
  for (const key of rendered.keys()) if (!keep.has(key)) rendered.delete(key);
}

// Reuses a cached node when its signature is unchanged.
function cached(key, signature, build, keep) {
  keep.add(key);
  const hit = rendered.get(key);
  if (hit && hit.signature === signature) return hit.node;
  const node = build();
  if (hit) restoreFocus(hit.node, node);
  rendered.set(key, { node, signature });
  return node;
}

function syncChildren(parent, nodes) {
  nodes.forEach((node, index) => {
    if (parent.children[index] !== node) parent.insertBefore(node, parent.children[index] ?? null);
  });
  while (parent.children.length > nodes.length) parent.lastElementChild.remove();
}

function messageNode(message, keep) {
  const key = `message:${message.id}`;
  keep.add(key);
  let entry = rendered.get(key);
  if (!entry) {
    const body = el('div', { class: 'message-body' });
    const node = el(
      'li',
      { class: `message message-${message.role}`, 'data-testid': 'message', 'data-role': message.role },
      message.role === 'assistant' ? el('div', { class: 'avatar', 'aria-hidden': 'true' }, 'tg') : null,
      body,
    );
    entry = { node, signature: null, body };
    rendered.set(key, entry);
  }
  entry.node.dataset.messageId = message.id;
  const children = message.parts.map((part, index) => partNode(message, part, index, keep)).filter(Boolean);
  if (message === lastMessage() && message.role === 'assistant') {
    const pending = pendingDecisions();
    if (pending > 0 && !busy()) children.push(pendingNote(message, pending, keep));
  }
  syncChildren(entry.body, children);
  return entry.node;
}

function partNode(message, part, index, keep) {
  const last = message === lastMessage();
  if (part.type === 'text') {
    if (!part.text) return null;
    const key = `${message.id}:${index}`;
    const sig = `${part.state}:${part.text}`;
    return cached(key, sig, () => textNode(part, message.role), keep);
  }
  if (part.type === 'reasoning') {
    if (!part.text) return null;
    return cached(`${message.id}:${index}`, `${part.state}:${part.text}`, () => reasoningNode(part), keep);
  }
  if (isToolPart(part)) {
    const draft = drafts.get(part.toolCallId);
    const context = {
      last,
      busy: busy(),
      pending: last ? pendingDecisions() : 0,
      draftMode: draft?.mode,
      streamed: streamedInput.get(part.toolCallId),
      reason: reasonFor(message, part.toolCallId),
      sticky: stickyRequests.get(part.toolCallId),
    };
    const sig = JSON.stringify([part, context]);
    return cached(`tool:${part.toolCallId}`, sig, () => toolCard(part, context), keep);
  }
  if (part.type === 'file') {
    return cached(`${message.id}:${index}`, part.url, () => el('a', { class: 'file-part', href: part.url, target: '_blank', rel: 'noopener' }, part.filename ?? part.mediaType), keep);
  }
  return null; // step-start, sources and data parts are not shown
}

function textNode(part, role) {
  const streaming = part.state === 'streaming';
  return el(
    'div',
    { class: `text-part${streaming ? ' is-streaming' : ''}`, 'data-testid': 'text-part', 'data-role': role },
    richText(part.text),
  );
}

function reasoningNode(part) {
  return el(
    'details',
    { class: 'reasoning', 'data-testid': 'reasoning-part' },
    el('summary', {}, part.state === 'streaming' ? 'Thinking…' : 'Reasoning'),
    el('p', {}, part.text),
  );
}

// Plain text with `code` spans; everything goes in as text nodes.
function richText(text) {
  return text.split(/(`[^`\n]+`)/).map((piece) =>
    piece.length > 2 && piece.startsWith('`') && piece.endsWith('`') ? el('code', {}, piece.slice(1, -1)) : piece,
  );
}

function typingNode(keep) {
  return cached(
    'typing',
    'typing',
    () =>
      el(
        'li',
        { class: 'message message-assistant', 'data-testid': 'typing-indicator' },
        el('div', { class: 'avatar', 'aria-hidden': 'true' }, 'tg'),
        el('div', { class: 'message-body' }, el('div', { class: 'typing', 'aria-label': 'The assistant is thinking' }, el('span'), el('span'), el('span'))),
      ),
    keep,
  );
}

// Dots while the request is in flight and nothing of the answer has arrived yet.
function showTyping() {
  return state.status === 'submitted' || (state.status === 'streaming' && lastMessage()?.role !== 'assistant');
}

function pendingNote(message, pending, keep) {
  const text =
    pending === 1
      ? 'One tool call is waiting for you. The assistant continues once you answer.'
      : `${pending} tool calls are waiting for you. The assistant continues once all are answered.`;
  return cached(`pending:${message.id}`, text, () => el('p', { class: 'pending-note', 'data-testid': 'pending-note' }, text), keep);
}

// ---------------------------------------------------------------------------
// Tool cards

// What a card says about its part: a label and a tone for each state.
function describe(part, context) {
  const approval = part.approval;
  switch (part.state) {
    case 'input-streaming':
      return { label: 'Preparing call', tone: 'running', spinner: true };
    case 'input-available':
      return isClientTool(part)
        ? { label: 'Needs your answer', tone: 'ask' }
        : { label: 'Running', tone: 'running', spinner: true };
    case 'approval-requested':
      return { label: 'Waiting for approval', tone: 'waiting' };
    case 'approval-responded':
      return approval.approved
        ? { label: approval.editedInput !== undefined ? 'Approved with edits' : 'Approved', tone: 'approved', spinner: context.busy }
        : { label: 'Denied', tone: 'denied' };
    case 'output-available':
      return { label: part.preliminary ? 'Running' : 'Completed', tone: 'done', spinner: part.preliminary };
    case 'output-error':
      return { label: 'Failed', tone: 'failed' };
    case 'output-denied':
      return { label: 'Denied', tone: 'denied' };
    default:
      return { label: part.state, tone: 'running' };
  }
}

function toolCard(part, context) {
  const name = toolName(part);
  const view = describe(part, context);
  const id = part.toolCallId;
  return el(
    'section',
    {
      class: `tool-card tone-${view.tone}`,
      'data-testid': 'tool-card',
      'data-tool-call-id': id,
      'data-tool-name': name,
      'data-state': part.state,
      'data-decision': part.approval?.approved == null ? null : part.approval.approved ? 'approved' : 'denied',
      'aria-label': `Tool call ${name}: ${view.label}`,
    },
    el(
      'header',
      { class: 'tool-head' },
      el('span', { class: 'tool-icon', 'aria-hidden': 'true' }, toolGlyph(part)),
      el('span', { class: 'tool-title' }, el('span', { class: 'tool-kind' }, 'Tool call'), el('code', { class: 'tool-name' }, name)),
      el(
        'span',
        { class: 'badge', 'data-testid': 'tool-state-label' },
        view.spinner ? el('span', { class: 'spinner', 'aria-hidden': 'true' }) : el('span', { class: 'badge-dot', 'aria-hidden': 'true' }),
        view.label,
      ),
    ),
    askReason(context),
    cardBody(part, context),
    provenance(part),
    actionSection(part, context),
  );
}

// Why a person is asked about this call (plain text: rule names and inputs come from the server).
function askReason(context) {
  if (context.reason?.decision !== 'ask') return null;
  return el(
    'p',
    { class: 'tool-reason', 'data-testid': 'tool-reason', 'data-decision': 'ask' },
    `Asked because: ${context.reason.reason}`,
  );
}

// Input and result side by side on wide screens.
function cardBody(part, context) {
  const input = inputSection(part, context);
  const result = resultSection(part, context);
  if (!input && !result) return null;
  return el('div', { class: `tool-body${input && result ? ' has-result' : ''}` }, input, result);
}

// Who let the call run, once it ran.
function provenance(part) {
  if (part.state !== 'output-available' && part.state !== 'output-error') return null;
  const approval = part.approval;
  const text = !approval
    ? isClientTool(part)
      ? 'Answered by you'
      : 'Ran without asking: no approval was needed'
    : approval.editedInput !== undefined
      ? 'Approved by you, with your edited input'
      : 'Approved by you';
  return el('p', { class: 'tool-meta', 'data-testid': 'tool-provenance' }, text);
}

function toolGlyph(part) {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 20 20');
  const path = document.createElementNS(svg.namespaceURI, 'path');
  const shapes = {
    'approval-requested': 'M10 2.5l6 2.5v4.5c0 4-2.6 6.8-6 8-3.4-1.2-6-4-6-8V5z',
    'output-denied': 'M5 5l10 10M15 5L5 15',
    'output-error': 'M10 3l8 14H2zM10 8v4M10 14.5v.01',
    'output-available': 'M4 10.5l4 4 8-9',
    ask: 'M4 4.5h12v8H9l-3.5 3v-3H4zM8.5 7.2a1.6 1.6 0 1 1 2.2 1.5c-.5.2-.7.5-.7 1M10 11.2v.01',
  };
  let shape = part.state;
  if (part.state === 'approval-responded') shape = part.approval.approved ? 'output-available' : 'output-denied';
  if (part.state === 'input-available' && isClientTool(part)) shape = 'ask';
  path.setAttribute('d', shapes[shape] ?? 'M7 4l-4 6 4 6M13 4l4 6-4 6');
  svg.append(path);
  return svg;
}

function inputSection(part, context) {
  const edited = part.approval?.editedInput;
  if (part.state === 'input-streaming') {
    return field('Input', el('pre', { class: 'code', 'data-testid': 'tool-input' }, context.streamed ?? ''));
  }
  if (edited !== undefined) {
    return el(
      'div',
      {},
      field('Input (edited by you)', jsonBlock(edited, 'tool-input')),
      el('details', { class: 'original-input' }, el('summary', {}, "The model's original input"), jsonBlock(part.input, 'tool-original-input')),
    );
  }
  if (context.draftMode === 'edit' && part.state === 'approval-requested') return null;
  return field('Input', jsonBlock(part.input ?? {}, 'tool-input'));
}

function resultSection(part, context) {
  const approval = part.approval;
  switch (part.state) {
    case 'output-available':
      return field(part.preliminary ? 'Output so far' : 'Output', jsonBlock(part.output, 'tool-output'));
    case 'output-error':
      return field('Error', el('div', { class: 'callout callout-failed', 'data-testid': 'tool-error' }, part.errorText));
    case 'output-denied':
    case 'approval-responded':
      if (approval?.approved !== false) return part.state === 'output-denied' ? refusal(context.reason) : null;
      return field(
        'Your decision',
        el(
          'div',
          { class: 'callout callout-denied' },
          el('strong', {}, part.state === 'output-denied' ? 'Denied, the tool did not run.' : 'Denied.'),
          approval.reason
            ? el('span', { class: 'reason' }, 'Reason: ', el('q', { 'data-testid': 'tool-denial-reason' }, approval.reason))
            : el('span', { class: 'reason muted' }, 'No reason given.'),
        ),
      );
    default:
      return null;
  }
}

// A call refused without the person's "deny" (a policy rule, a sticky decision, the tool's own check):
// the server's reason is how the person learns why.
function refusal(reason) {
  return field(
    'Refused',
    el(
      'div',
      { class: 'callout callout-denied' },
      el('strong', {}, 'The tool did not run.'),
      reason?.decision === 'deny'
        ? el('span', { class: 'reason', 'data-testid': 'tool-reason', 'data-decision': 'deny' }, `Denied: ${reason.reason}`)
        : el('span', { class: 'reason muted' }, 'No reason given.'),
    ),
  );
}

function field(label, content) {
  return el('div', { class: 'field' }, el('div', { class: 'field-label' }, label), content);
}

// Pretty JSON with light syntax colouring (text nodes only).
function jsonBlock(value, testid) {
  const text = value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  const pre = el('pre', { class: 'code', 'data-testid': testid });
  if (typeof value === 'string') {
    pre.append(text);
    return pre;
  }
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let at = 0;
  for (const match of text.matchAll(token)) {
    pre.append(text.slice(at, match.index));
    const [whole, string, colon, literal, number] = match;
    if (string) {
      pre.append(el('span', { class: colon ? 'j-key' : 'j-str' }, string), colon ?? '');
    } else {
      pre.append(el('span', { class: literal ? 'j-lit' : 'j-num' }, literal ?? number));
    }
    at = match.index + whole.length;
  }
  pre.append(text.slice(at));
  return pre;
}

function actionSection(part, context) {
  if (!context.last) return null;
  if (part.state === 'approval-requested') return approvalActions(part, context);
  if (part.state === 'approval-responded' && !context.busy) {
    return el(
      'div',
      { class: 'tool-foot actions-quiet' },
      el('span', { class: 'muted' }, context.pending > 0 ? 'Sent once the other requests are answered.' : 'Not sent yet.'),
      button('Change decision', 'undo-button', () => undecide(part.toolCallId), 'btn-link'),
    );
  }
  if (part.state === 'input-available' && isClientTool(part)) return clientToolForm(part, context);
  return null;
}

function button(label, testid, onclick, variant = '', attributes = {}) {
  return el('button', { type: 'button', class: `btn ${variant}`, 'data-testid': testid, onclick, ...attributes }, label);
}

function approvalActions(part, context) {
  const id = part.toolCallId;
  const disabled = context.busy || Boolean(context.sticky?.saving);
  const draft = drafts.get(id);
  const open = (mode) => () => {
    drafts.set(id, { mode, reason: '', text: JSON.stringify(part.input ?? {}, null, 2), error: null });
    render();
  };
  const close = () => {
    drafts.delete(id);
    render();
  };
  if (draft?.mode === 'deny') return denyForm(part, draft, close);
  if (draft?.mode === 'edit') return editForm(part, draft, close);
  return el(
    'div',
    { class: 'tool-foot approval-bar' },
    el('p', { class: 'question' }, 'Run ', el('code', {}, toolName(part)), ' with this input?'),
    el(
      'div',
      { class: 'button-row' },
      button('Approve', 'approve-button', () => decide(id, { approved: true }), 'btn-approve', { disabled }),
      button('Deny…', 'deny-button', open('deny'), 'btn-deny', { disabled, 'aria-label': 'Deny (asks for an optional reason)' }),
      button('Edit input…', 'edit-button', open('edit'), 'btn-secondary', { disabled }),
    ),
    stickyActions(part, context, disabled),
  );
}

// "Always allow" / "Never allow": remembered for this chat, and this call is answered too.
function stickyActions(part, context, disabled) {
  const id = part.toolCallId;
  const name = toolName(part);
  const error = context.sticky?.error;
  return el(
    'div',
    { class: 'sticky-bar' },
    el(
      'div',
      { class: 'sticky-row', role: 'group', 'aria-label': `Remember a decision about ${name} for this chat` },
      el('span', { class: 'sticky-label', 'aria-hidden': 'true' }, context.sticky?.saving ? 'Saving…' : 'Remember:'),
      button('Always allow in this chat', 'always-allow-button', () => stick(id, 'allow-tool'), 'btn-small btn-sticky', {
        disabled,
        title: `Approve this call and let later ${name} calls in this chat run without asking`,
      }),
      button('Always allow this input', 'always-allow-input-button', () => stick(id, 'allow-input'), 'btn-small btn-sticky', {
        disabled,
        title: `Approve this call and let ${name} calls with exactly this input run without asking`,
      }),
      button('Never allow', 'never-allow-button', () => stick(id, 'never'), 'btn-small btn-sticky btn-deny', {
        disabled,
        title: `Deny this call and refuse every later ${name} call in this chat`,
      }),
    ),
    error
      ? el('p', { class: 'field-error', role: 'alert', 'data-testid': 'sticky-error' }, `The decision was not saved: ${error}`)
      : null,
  );
}

function denyForm(part, draft, close) {
  const id = part.toolCallId;
  const inputId = `deny-reason-${id}`;
  const confirm = () => decide(id, { approved: false, reason: draft.reason.trim() || undefined });
  const input = el('input', {
    id: inputId,
    type: 'text',
    class: 'text-input',
    'data-testid': 'deny-reason-input',
    placeholder: 'e.g. Keep this file, I still need it',
    maxlength: '500',
    oninput: (event) => (draft.reason = event.target.value),
    onkeydown: (event) => {
      if (event.key === 'Enter') confirm();
      if (event.key === 'Escape') close();
    },
  });
  input.value = draft.reason;
  focusOnce(draft, input);
  return el(
    'div',
    { class: 'tool-foot panel' },
    el('label', { for: inputId, class: 'field-label' }, 'Reason for denying (optional, the assistant sees it)'),
    input,
    el(
      'div',
      { class: 'button-row' },
      button('Deny call', 'confirm-deny-button', confirm, 'btn-deny-solid'),
      button('Cancel', 'cancel-button', close, 'btn-ghost'),
    ),
  );
}

function editForm(part, draft, close) {
  const id = part.toolCallId;
  const areaId = `edit-input-${id}`;
  const error = el('p', { class: 'field-error', 'data-testid': 'edit-error', role: 'alert' });
  const approve = button('Approve edited', 'approve-edited-button', () => {
    const parsed = validateInput(draft.text);
    if (parsed.ok) decide(id, { approved: true, editedInput: parsed.value });
  }, 'btn-approve');
  const check = () => {
    const parsed = validateInput(draft.text);
    error.textContent = parsed.ok ? '' : parsed.error;
    error.hidden = parsed.ok;
    approve.disabled = !parsed.ok;
    area.setAttribute('aria-invalid', String(!parsed.ok));
  };
  const area = el('textarea', {
    id: areaId,
    class: 'code-editor',
    'data-testid': 'edit-input-textarea',
    spellcheck: 'false',
    rows: String(Math.min(14, Math.max(4, draft.text.split('\n').length + 1))),
    'aria-describedby': `${areaId}-help`,
    oninput: (event) => {
      draft.text = event.target.value;
      check();
    },
    onkeydown: (event) => event.key === 'Escape' && close(),
  });
  area.value = draft.text;
  check();
  focusOnce(draft, area);
  return el(
    'div',
    { class: 'tool-foot panel' },
    el('label', { for: areaId, class: 'field-label' }, 'Edit the input (JSON), then approve'),
    area,
    el('p', { id: `${areaId}-help`, class: 'help' }, 'The tool runs with your version; the assistant sees the edited call.'),
    error,
    el('div', { class: 'button-row' }, approve, button('Cancel', 'cancel-button', close, 'btn-ghost')),
  );
}

// Moves focus into a form the first time it opens (later rebuilds keep focus where it is).
function focusOnce(draft, control) {
  if (draft.focused) return;
  draft.focused = true;
  queueMicrotask(() => control.focus());
}

// An edited input must be a JSON object (tool inputs are objects).
function validateInput(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `Not valid JSON: ${error.message}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, error: 'The input must be a JSON object, like {"path": "notes.txt"}.' };
  }
  return { ok: true, value };
}

// The answer form of a client-executed tool (ask_user): the text becomes the tool's output.
function clientToolForm(part, context) {
  const id = part.toolCallId;
  const inputId = `answer-${id}`;
  const input = el('input', {
    id: inputId,
    type: 'text',
    class: 'text-input',
    'data-testid': 'client-tool-input',
    placeholder: 'Type your answer',
    disabled: context.busy,
  });
  const send = (event) => {
    event.preventDefault();
    if (input.value.trim()) answerClientTool(id, input.value.trim());
  };
  return el(
    'form',
    { class: 'tool-foot panel', onsubmit: send },
    el('label', { for: inputId, class: 'field-label' }, part.input?.question ?? 'The assistant asks you'),
    el(
      'div',
      { class: 'inline-form' },
      input,
      el('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'client-tool-submit', disabled: context.busy }, 'Send answer'),
    ),
  );
}

// Keeps keyboard focus on the same control when a card is rebuilt.
function restoreFocus(oldNode, newNode) {
  const focused = document.activeElement;
  if (!focused || !oldNode.contains(focused) || !focused.dataset.testid) return;
  const twin = newNode.querySelector(`[data-testid="${focused.dataset.testid}"]`);
  if (twin) queueMicrotask(() => twin.focus());
}

// ---------------------------------------------------------------------------
// Scrolling and the composer

function isScrolledToBottom() {
  const scroller = $('#conversation');
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
}

function scrollToBottom() {
  const scroller = $('#conversation');
  scroller.scrollTop = scroller.scrollHeight;
}

function autosize(area) {
  area.style.height = 'auto';
  area.style.height = `${Math.min(area.scrollHeight, 200)}px`;
}

function setup() {
  const input = $('#composer-input');
  const send = () => {
    if (sendUserMessage(input.value)) {
      input.value = '';
      autosize(input);
      scrollToBottom();
    }
  };
  $('#composer').addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  input.addEventListener('input', () => autosize(input));
  for (const chip of document.querySelectorAll('[data-suggestion]')) {
    chip.addEventListener('click', () => {
      input.value = chip.dataset.suggestion;
      autosize(input);
      input.focus();
    });
  }
  $('#new-chat').addEventListener('click', newChat);
  for (const which of panels()) {
    $(which.toggle).addEventListener('click', () => togglePanel(which));
    $(`${which.panel} .panel-close`).addEventListener('click', () => togglePanel(which));
    $(which.panel).addEventListener('keydown', (event) => event.key === 'Escape' && which.open && togglePanel(which));
  }
  rememberChatId();
  setupSignIn();
  whoAmI().then((known) => known && restoreConversation());
  $('#error-dismiss').addEventListener('click', clearError);
  $('#error-retry').addEventListener('click', () => !busy() && submit());
  render();
  input.focus();
}

setup();
