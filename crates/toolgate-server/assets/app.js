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
const APPROVALS_API = 'api/approvals';

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
const sentAnswers = new Set(); // toolCallIds whose approval answers the server has received
const liveApprovals = new Map(); // approvalId -> inbox item of the open chat (fresher than its data part)
const withdrawals = new Map(); // toolCallId -> {saving} | {error}: a routed request being withdrawn

// Who is looking at the page (`GET api/me`): `principal` is null in single-user mode.
const viewer = { principal: null, groups: [] };

function newId(prefix) {
  const random = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random().toString(16).slice(2)}`;
  return `${prefix}-${random}`;
}

// The data part the server sends before an approval request or a denial: why the call waits or was refused.
const REASON_PART = 'data-toolgate-reason';
// The data part that reports where an approval routed to approvers stands (one per approval, replaced as it changes).
const APPROVAL_PART = 'data-toolgate-approval';
const GROUP_PREFIX = 'group:';

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
// Server-sent events: frames of `event:` and `data:` lines, each ended by a blank line.

async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const lines = buffer.slice(0, cut).split('\n');
      buffer = buffer.slice(cut + 2);
      const field = (name) => lines.filter((line) => line.startsWith(`${name}:`)).map((line) => line.slice(name.length + 1).replace(/^ /, ''));
      // Comment-only frames (`: keep-alive`) have no data.
      yield { event: field('event').at(-1) ?? 'message', data: field('data').join('\n') };
    }
  }
}

// The UI message stream: SSE frames `data: <chunk json>\n\n`, ended by `data: [DONE]`.
async function* readChunks(body) {
  for await (const { data } of readEvents(body)) {
    if (data && data !== '[DONE]') yield JSON.parse(data);
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
      if (chunk.providerMetadata) part.callProviderMetadata = chunk.providerMetadata;
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
  const answers = markAnswersSent();
  clearError();
  const abort = new AbortController();
  state.abort = abort;
  setStatus('submitted');

  const run = newRun();
  try {
    const response = await authFetch(API, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: abort.signal,
    });
    if (!response.ok) throw await httpError(response);
    await streamInto(run, response);
  } catch (error) {
    if (abort.signal.aborted) return;
    run.failed = true;
    showError(error.banner ?? { title: 'Something went wrong', detail: error.message, retry: !run.message });
  } finally {
    if (state.abort === abort) state.abort = null;
  }
  if (abort.signal.aborted) return;
  // Answers the server did not take are still the person's to change or send again.
  if (run.failed) for (const id of answers) sentAnswers.delete(id);
  finishRun(run);
}

const newRun = () => ({ message: null, blocks: new Map(), failed: false });

// Applies a response's chunks to the messages as they arrive.
async function streamInto(run, response) {
  setStatus('streaming');
  for await (const chunk of readChunks(response.body)) {
    applyChunk(run, chunk);
    scheduleRender();
  }
}

function finishRun(run) {
  finishText(run.message);
  setStatus(run.failed ? 'error' : 'ready');
  refreshAudit();
  refreshDecisions();
  if (!run.failed) continueIfComplete();
}

// The approval answers of the last message that go to the server now (their ids).
function markAnswersSent() {
  const ids = (lastMessage()?.parts ?? [])
    .filter((part) => isToolPart(part) && part.state === 'approval-responded' && !sentAnswers.has(part.toolCallId))
    .map((part) => part.toolCallId);
  for (const id of ids) sentAnswers.add(id);
  return ids;
}

// A stored conversation's answers are on record already.
function markStoredAnswersSent() {
  for (const part of lastMessage()?.parts ?? []) {
    if (isToolPart(part) && part.state === 'approval-responded') sentAnswers.add(part.toolCallId);
  }
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
// the identity provider; "Sign out" posts to `auth/logout`.

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
  viewer.principal = me.principal ?? null;
  viewer.groups = Array.isArray(me.groups) ? me.groups : [];
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
      startInbox();
      focusInboxItem();
    }
  });
  $('#sign-out').addEventListener('click', () => {
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // Nothing kept.
    }
    // A form POST (relative, so that it works below a path prefix too): signing out is never a GET,
    // which any other site could trigger with a link or an image.
    if (signInMode === 'oidc') {
      const form = document.createElement('form');
      form.method = 'post';
      form.action = 'auth/logout';
      document.body.append(form);
      form.submit();
    } else location.reload();
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
      markStoredAnswersSent();
      render();
      scrollToBottom();
    }
  } catch {
    // Offline or no store: start empty, as a new page would.
  }
}

const audit = {
  open: false,
  events: [],
  note: '',
  errors: new Map(), // seq -> why its receipt could not be downloaded, shown on its row
  toggle: '#audit-toggle',
  panel: '#audit-panel',
  refresh: refreshAudit,
};

// The side panels (audit log, sticky decisions) share one place: opening one closes the other.
const panels = () => [audit, decisions, inbox];

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
  voted: 'Voted',
  withdrawn: 'Withdrawn',
  continued: 'Continued on the server',
  escalated: 'Escalated',
  reminded: 'Reminded',
  notified: 'Notified',
  notification_failed: 'Notification failed',
  allowed: 'Allowed',
  granted: 'Ran on a grant',
  superseded: 'Superseded',
  shadowed: 'Shadow rule matched',
};

// Which events get a signed receipt, as the server signs them (`toolgate::receipt::has_receipt` and
// `has_call_receipt`): an approval's event unless it only tells (these kinds), so a kind added later gets
// one; an event without an approval when it decides a call or records how it ran.
const RECEIPTLESS_KINDS = new Set([
  'issued',
  'voted',
  'edited',
  'notified',
  'notification_failed',
  'reminded',
  'escalated',
  'continued',
  'shadowed',
  'rejected',
]);
const CALL_RECEIPT_KINDS = new Set(['allowed', 'denied', 'granted', 'executed', 'failed']);
const hasReceipt = (event) =>
  Number.isInteger(event.seq) && (event.approvalId ? !RECEIPTLESS_KINDS.has(event.kind) : CALL_RECEIPT_KINDS.has(event.kind));

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
    case 'voted':
      return `${event.principal ?? 'someone'}: ${data.decision ?? ''}${data.reason ? ` (${data.reason})` : ''}`;
    case 'escalated':
      return `added ${(data.added ?? []).join(', ')}`;
    case 'notified':
      return `${data.event ?? ''} via ${data.channel ?? ''}${data.recipient ? ` to ${data.recipient}` : ''}`;
    case 'notification_failed':
      return `${data.event ?? ''} via ${data.channel ?? ''}: ${data.error ?? ''}${data.final ? ' (gave up)' : ''}`;
    default:
      return '';
  }
}

// The tool of each approval and call in the log: `issued` events and those without an approval name it.
function auditTools(events) {
  const tools = new Map();
  for (const event of events) {
    const tool = event.data?.toolName;
    if (typeof tool !== 'string') continue;
    if (event.approvalId) tools.set(`approval:${event.approvalId}`, tool);
    tools.set(`call:${event.toolCallId}`, tool);
  }
  return (event) =>
    event.data?.toolName ?? tools.get(`approval:${event.approvalId}`) ?? tools.get(`call:${event.toolCallId}`) ?? 'a tool';
}

// One event's signed receipt (`GET /api/audit/{seq}/receipt`), saved as `receipt-{seq}.json`; a refusal
// (receipts off, not sealed yet) is shown on the event's row.
async function downloadEventReceipt(event) {
  const error = await saveReceipt(`api/audit/${event.seq}/receipt`, `receipt-${event.seq}.json`);
  if (error) audit.errors.set(event.seq, error);
  else audit.errors.delete(event.seq);
  renderAudit();
}

function auditReceiptButton(event, tool) {
  const download = () => downloadEventReceipt(event);
  return button('Download receipt', 'audit-receipt-button', download, 'btn-secondary btn-small audit-receipt', {
    'aria-label': `Download the signed receipt of the ${event.kind} event of ${tool}`,
  });
}

function renderAudit() {
  const list = $('#audit-events');
  const toolOf = auditTools(audit.events);
  const items = audit.events.map((event) => {
    const label = AUDIT_LABEL[event.kind] ?? event.kind;
    const error = audit.errors.get(event.seq);
    return el(
      'li',
      { class: 'audit-event', 'data-testid': 'audit-event', 'data-kind': event.kind, 'data-seq': String(event.seq) },
      el('span', { class: 'audit-time' }, new Date(event.at).toLocaleTimeString()),
      el('span', { class: `audit-kind audit-kind-${event.kind}` }, label),
      el('span', { class: 'audit-who' }, event.principal ?? ''),
      el('code', { class: 'audit-call' }, event.toolCallId),
      el('span', { class: 'audit-detail' }, auditDetail(event)),
      hasReceipt(event) ? auditReceiptButton(event, toolOf(event)) : null,
      error ? el('p', { class: 'field-error audit-receipt-error', role: 'alert', 'data-testid': 'audit-receipt-error' }, error) : null,
    );
  });
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
  grants: [], // `GET api/grants`: the grants made with approvals (bounded: `usesLeft`), shown beside the decisions
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
  await refreshGrants(chatId, stale);
  renderDecisions();
}

// Grants: bounded approvals (`GET api/grants`), listed with their uses left, revoked with `DELETE api/grants/{id}`.
const GRANTS_API = 'api/grants';

async function refreshGrants(chatId, stale) {
  try {
    const response = await authFetch(`${GRANTS_API}?conversation=${encodeURIComponent(chatId)}`);
    if (stale()) return;
    const list = response.ok ? (await response.json())?.grants : [];
    decisions.grants = Array.isArray(list) ? list.filter((grant) => grant && typeof grant.id === 'string') : [];
  } catch {
    decisions.grants = [];
  }
}

async function revokeGrant(id) {
  if (decisions.revoking.has(id)) return;
  decisions.revoking.add(id);
  renderDecisions();
  let error = null;
  try {
    const url = `${GRANTS_API}/${encodeURIComponent(id)}?conversation=${encodeURIComponent(state.chatId)}`;
    const response = await authFetch(url, { method: 'DELETE' });
    if (!response.ok) error = errorLine(await httpError(response));
  } catch (caught) {
    error = caught.message;
  }
  decisions.revoking.delete(id);
  decisions.error = error ? `The grant was not revoked: ${error}` : '';
  await refreshDecisions();
  renderDecisions();
}

function grantItem(grant) {
  const left = grant.usesLeft === undefined ? 'no limit' : `${grant.usesLeft} of ${grant.uses ?? grant.usesLeft} left`;
  const until = grant.expiresAt ? `until ${new Date(grant.expiresAt).toLocaleString()}` : 'until revoked';
  const by = grant.createdBy ? `by ${grant.createdBy}` : '';
  return el(
    'li',
    { class: 'decision grant', 'data-testid': 'grant', 'data-grant-id': grant.id, 'data-tool': grant.tool },
    el('span', { class: 'decision-action decision-action-allow', 'data-testid': 'grant-uses' }, `Granted: ${left}`),
    el('code', { class: 'decision-tool' }, grant.tool),
    button('Revoke', 'grant-revoke-button', () => revokeGrant(grant.id), 'btn-small btn-secondary decision-revoke', {
      disabled: decisions.revoking.has(grant.id),
      'aria-label': `Revoke the grant for ${grant.tool}`,
    }),
    grant.inputMatch ? jsonBlock(grant.inputMatch, 'grant-input') : el('span', { class: 'decision-any muted' }, 'any input'),
    el('span', { class: 'decision-made muted' }, [until, by].filter(Boolean).join(', ')),
  );
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
  const limited = decisions.grants.filter((grant) => grant.usesLeft !== undefined || grant.approvalId !== undefined);
  $('#decisions-list').replaceChildren(...decisions.list.map(decisionItem), ...limited.map(grantItem));
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
// has no open question left for this person and at least one answer that the
// server has not seen. Approvals in other hands (routed to other approvers) do
// not hold the answers back: the server records them and waits for the rest.
function continueIfComplete() {
  const message = lastMessage();
  if (busy() || message?.role !== 'assistant') return;
  const tools = message.parts.filter(isToolPart);
  const waiting = tools.some((part) => waitsForPerson(part, message) || part.state === 'input-streaming');
  const answered = tools.some(
    (part) => (part.state === 'approval-responded' && !sentAnswers.has(part.toolCallId)) || unsentOutputs.has(part.toolCallId),
  );
  if (answered && !waiting) submit();
}

const isClientTool = (part) => CLIENT_TOOLS.has(toolName(part)) && !part.providerExecuted;
const waitsForPerson = (part, message = lastMessage()) =>
  (part.state === 'approval-requested' && !inOtherHands(message, part)) || (part.state === 'input-available' && isClientTool(part));

// ---------------------------------------------------------------------------
// The person's answers

// Approve or deny: the part goes to `approval-responded` with the decision in
// `approval` (toolgate's extensions: `editedInput` replaces the model's input;
// `grant` lets the next calls like it run without asking).
function decide(toolCallId, { approved, reason, editedInput, grant }) {
  const part = findToolPart(lastMessage(), toolCallId);
  if (!part || part.state !== 'approval-requested' || busy()) return;
  part.state = 'approval-responded';
  part.approval = { ...part.approval, approved };
  if (reason) part.approval.reason = reason;
  if (editedInput !== undefined) part.approval.editedInput = editedInput;
  if (grant) part.approval.grant = grant;
  drafts.delete(toolCallId);
  stickyRequests.delete(toolCallId);
  answerCopies(lastMessage(), part);
  render();
  continueIfComplete();
}

// Takes back a decision that has not been sent yet (other requests still wait).
function undecide(toolCallId) {
  const part = findToolPart(lastMessage(), toolCallId);
  if (!part || part.state !== 'approval-responded' || busy() || sentAnswers.has(toolCallId)) return;
  part.state = 'approval-requested';
  part.approval = { id: part.approval.id, ...(part.approval.signature ? { signature: part.approval.signature } : {}) };
  answerCopies(lastMessage(), part);
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
  sentAnswers.clear();
  liveApprovals.clear();
  withdrawals.clear();
  render();
  $('#composer-input').focus();
}

// ---------------------------------------------------------------------------
// Approvals routed to others. A rule may send an `ask` to approvers (people or
// `group:NAME`) of whom `quorum` must approve. Their votes come in through the
// inbox (`/api/approvals`), not this chat; once the last approval of the step
// is decided the server continues the run itself. The page shows who the call
// waits for, lets the requester withdraw it, and picks up the server's run.

// Who decides the approval of a tool part and where it stands, from the
// freshest source: the inbox item, else the chat's `data-toolgate-approval`
// part, else the reason part's `approvers` and `quorum`. Null when the chat
// holds nothing of that kind (an approval the person decides alone, here).
function routingFor(message, part) {
  const id = part.approval?.id;
  if (!id || !message) return null;
  const reason = message.parts.find((other) => other.type === REASON_PART && other.id === part.toolCallId)?.data;
  const lookup = (key) =>
    liveApprovals.get(key) ?? message.parts.findLast((other) => other.type === APPROVAL_PART && other.id === key)?.data;
  const standing = standingApproval(id, lookup);
  const routedByRule = Array.isArray(reason?.approvers);
  const source =
    standing ?? (routedByRule ? { approvers: reason.approvers, quorum: reason.quorum, votes: [], state: 'pending' } : null);
  if (!source) return null;
  // An edit that needed other approvers made a new approval of the call: it is the one that stands.
  const superseded = Boolean(standing) && (standing.id ?? standing.approvalId) !== id;
  const approvers = Array.isArray(source.approvers) ? source.approvers : [];
  const quorum = Number(source.quorum) || 1;
  const votes = Array.isArray(source.votes) ? source.votes : [];
  const routed = routedByRule || quorum > 1 || approvers.some((approver) => approver !== viewer.principal);
  return {
    routed,
    approvers,
    quorum,
    votes,
    state: source.state ?? 'pending',
    waitingFor: typeof source.waitingFor === 'string' ? source.waitingFor : waitingText(approvers, quorum, votes),
    canDecide: mayVote(approvers, votes),
    superseded,
  };
}

// The approval that stands for `id` now, by `lookup` (an inbox item or a data
// part): itself, or the new approval an edit superseded it with (followed a few
// times at most).
function standingApproval(id, lookup) {
  let approval = lookup(id);
  for (let hops = 0; approval?.state === 'superseded' && approval.supersededBy && hops < 8; hops += 1) {
    const next = lookup(approval.supersededBy);
    if (!next) break;
    approval = next;
  }
  return approval;
}

// ``group finance (1 of 2)``, as the server words it.
function waitingText(approvers, quorum, votes) {
  const approvals = votes.filter((vote) => vote.decision === 'approve').length;
  return `${describeApprovers(approvers)} (${approvals} of ${quorum})`;
}

function describeApprovers(approvers) {
  const names = approvers.map((approver) =>
    approver.startsWith(GROUP_PREFIX) ? `group ${approver.slice(GROUP_PREFIX.length)}` : approver,
  );
  return names.join(', ') || 'you';
}

const isOwnVote = (vote) => (vote.principal ?? null) === viewer.principal;

// Whether this person may still vote: an approver (by name or group) who has not voted.
// Without principals (single-user mode) the one user decides everything.
function mayVote(approvers, votes) {
  if (votes.some(isOwnVote)) return false;
  if (viewer.principal == null) return true;
  return approvers.some(
    (approver) =>
      approver === viewer.principal ||
      (approver.startsWith(GROUP_PREFIX) && viewer.groups.includes(approver.slice(GROUP_PREFIX.length))),
  );
}

// An approval request this person does not answer here: routed to others, or decided outside this page.
function inOtherHands(message, part) {
  const routing = routingFor(message, part);
  // An answer whose edit was superseded by a new approval waits for that one's approvers.
  if (part.state === 'approval-responded') return Boolean(routing?.superseded);
  if (part.state !== 'approval-requested') return false;
  return Boolean(routing) && (routing.state !== 'pending' || (routing.routed && !routing.canDecide));
}

// Routed approvals of the last message that still wait for someone else's vote.
function othersPending() {
  const message = lastMessage();
  return (message?.parts ?? []).filter(
    (part) => isToolPart(part) && inOtherHands(message, part) && routingFor(message, part).state === 'pending',
  ).length;
}

// The approval ids of the step the last message holds open (asked, or answered and not yet run).
function stepApprovalIds() {
  const message = lastMessage();
  if (message?.role !== 'assistant') return [];
  return message.parts
    .filter((part) => isToolPart(part) && part.approval?.id && ['approval-requested', 'approval-responded'].includes(part.state))
    .map((part) => part.approval.id);
}

// True while the step waits for decisions made elsewhere (so the page keeps looking).
function awaitingServer() {
  const message = lastMessage();
  if (busy() || message?.role !== 'assistant' || watch.gaveUp === stepKey()) return false;
  return message.parts.some(
    (part) =>
      isToolPart(part) &&
      (inOtherHands(message, part) || (part.state === 'approval-responded' && sentAnswers.has(part.toolCallId))),
  );
}

// Every approval of the step is decided on the server, and this page has not run it: the server does.
function decidedOnServer() {
  const ids = stepApprovalIds();
  const live = (key) => liveApprovals.get(key);
  return ids.length > 0 && ids.every((id) => (standingApproval(id, live)?.state ?? 'pending') !== 'pending');
}

// An inbox item changes its chat card when others decide it, or once it is decided
// (a pending approval the person decides alone looks the same without it).
const worthShowing = (item) =>
  item.state !== 'pending' || (item.quorum ?? 1) > 1 || (item.approvers ?? []).some((approver) => approver !== viewer.principal);

const stepKey = () => `${state.chatId}:${stepApprovalIds().join(',')}`;

const WATCH_MS = 1500; // how often a chat waiting for others looks again
const PICKUP_TRIES = 20; // attempts to find the server's run once everything is decided
const PICKUP_MS = 750;
const watch = { timer: null, running: false, gaveUp: null };

// Looks again in a while when the chat waits for decisions made elsewhere.
function ensureWatching() {
  if (watch.timer || watch.running || !awaitingServer()) return;
  watch.timer = setTimeout(watchTick, WATCH_MS);
}

// Looks now (an inbox event said an approval of this chat changed).
function watchNow() {
  clearTimeout(watch.timer);
  watch.timer = null;
  watchTick();
}

async function watchTick() {
  watch.timer = null;
  if (watch.running) return;
  watch.running = true;
  try {
    await checkApprovals();
  } catch {
    // Offline for a moment: the next look tries again.
  } finally {
    watch.running = false;
  }
  ensureWatching();
}

// Reads where the step's approvals stand and, once all are decided, picks up the server's run.
async function checkApprovals() {
  const chatId = state.chatId;
  if (busy() || stepApprovalIds().length === 0) return;
  const url = `${APPROVALS_API}?state=all&limit=100&conversation=${encodeURIComponent(chatId)}`;
  const response = await authFetch(url);
  if (!response.ok || chatId !== state.chatId) return;
  const items = (await response.json())?.approvals;
  for (const item of Array.isArray(items) ? items : []) if (worthShowing(item)) liveApprovals.set(item.id, item);
  scheduleRender();
  if (decidedOnServer()) await pickUp(chatId);
}

// The server runs the step once its approvals are decided: follow its response
// while it runs (`GET api/chat/{id}/stream`), or read the stored chat once it ran.
async function pickUp(chatId) {
  const key = stepKey();
  for (let attempt = 0; attempt < PICKUP_TRIES; attempt++) {
    if (chatId !== state.chatId || busy() || stepKey() !== key) return;
    if (await resumeRun(chatId)) return;
    if (await reloadChat(chatId)) return;
    await new Promise((resolve) => setTimeout(resolve, PICKUP_MS));
  }
  watch.gaveUp = key; // e.g. expired: nothing will run; a reload shows what the server keeps
  scheduleRender();
}

// Follows the chat's running response, if there is one; true when it did.
async function resumeRun(chatId) {
  let response;
  try {
    response = await authFetch(`${API}/${encodeURIComponent(chatId)}/stream`);
  } catch {
    return false;
  }
  if (response.status !== 200 || !response.body) return false;
  if (chatId !== state.chatId || busy()) {
    response.body.cancel().catch(() => {});
    return false;
  }
  const abort = new AbortController();
  state.abort = abort;
  clearError();
  const run = newRun();
  try {
    await streamInto(run, response);
  } catch (error) {
    if (abort.signal.aborted) return true;
    run.failed = true;
    showError({ title: 'Following the response failed', detail: error.message });
  } finally {
    if (state.abort === abort) state.abort = null;
  }
  if (abort.signal.aborted) return true;
  markStoredAnswersSent();
  finishRun(run);
  // The stored chat is the canonical record (the decisions on record, the final approval parts).
  if (!run.failed && !busy()) await reloadChat(chatId);
  return true;
}

// Replaces the messages with the stored chat when the step moved on there; true when it did.
async function reloadChat(chatId) {
  try {
    const response = await authFetch(`api/chats/${encodeURIComponent(chatId)}`);
    if (!response.ok) return false;
    const stored = await response.json();
    if (chatId !== state.chatId || busy() || !Array.isArray(stored.messages)) return false;
    const before = stepKey();
    state.messages = stored.messages;
    markStoredAnswersSent();
    render();
    refreshAudit();
    return stepKey() !== before;
  } catch {
    return false;
  }
}

// The requester takes back a request that waits for others (`DELETE api/approvals/{id}`):
// it is denied ("withdrawn by the requester") and the server goes on with the step.
async function withdraw(part) {
  const id = part.toolCallId;
  if (withdrawals.get(id)?.saving) return;
  withdrawals.set(id, { saving: true });
  render();
  const chatId = state.chatId;
  let error = '';
  try {
    const response = await authFetch(`${APPROVALS_API}/${encodeURIComponent(part.approval.id)}`, { method: 'DELETE' });
    if (response.ok) liveApprovals.set(part.approval.id, await response.json());
    else error = errorLine(await httpError(response));
  } catch (failure) {
    error = failure.message;
  }
  if (chatId !== state.chatId) return;
  if (error) withdrawals.set(id, { error });
  else withdrawals.delete(id);
  render();
  if (!error) watchNow();
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
  renderInboxCount();
  if (pinned) scrollToBottom();
  ensureWatching();
}

const STATUS_TEXT = { ready: 'Ready', submitted: 'Thinking…', streaming: 'Responding…', error: 'Error' };

function renderStatus() {
  const pending = pendingDecisions();
  const others = state.status === 'ready' && pending === 0 ? othersPending() : 0;
  const status = state.status === 'ready' && pending + others > 0 ? 'waiting' : state.status;
  const pill = $('#chat-status');
  pill.dataset.status = status;
  pill.querySelector('.status-text').textContent =
    pending > 0 && status === 'waiting'
      ? `Waiting for you (${pending})`
      : others > 0
        ? 'Waiting for approvers'
        : STATUS_TEXT[state.status];
}

function pendingDecisions() {
  const message = lastMessage();
  return (message?.parts ?? []).filter((part) => isToolPart(part) && waitsForPerson(part) && !isApprovalCopy(message, part))
    .length;
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
  if (message === lastMessage() && message.role === 'assistant' && !busy()) {
    const pending = pendingDecisions();
    const others = othersPending();
    if (pending > 0) children.push(pendingNote(message, pending, keep));
    else if (others > 0) children.push(othersNote(message, others, keep));
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
    if (agentCallOf(message, part)) return null; // drawn in its agent's card (subAgentSection)
    const context = toolContext(message, part, last);
    const sig = JSON.stringify([part, context]);
    return cached(`tool:${part.toolCallId}`, sig, () => toolCard(part, context), keep);
  }
  if (part.type === 'file') {
    return cached(`${message.id}:${index}`, part.url, () => el('a', { class: 'file-part', href: part.url, target: '_blank', rel: 'noopener' }, part.filename ?? part.mediaType), keep);
  }
  return null; // step-start, sources and data parts are not shown
}

// What a tool card shows besides its part: the page's state about the call, and a sub-agent's nested calls.
function toolContext(message, part, last) {
  const draft = drafts.get(part.toolCallId);
  const context = {
    last,
    busy: busy(),
    pending: last ? pendingDecisions() : 0,
    draftMode: draft?.mode,
    streamed: streamedInput.get(part.toolCallId),
    reason: reasonFor(message, part.toolCallId),
    sticky: stickyRequests.get(part.toolCallId),
    routing: routingFor(message, part),
    othersDecide: inOtherHands(message, part),
    sent: sentAnswers.has(part.toolCallId),
    withdrawal: withdrawals.get(part.toolCallId),
    gaveUp: last && watch.gaveUp === stepKey(),
    lineage: lineageOf(message, part),
    copy: isApprovalCopy(message, part),
    nested: nestedParts(message, part).map((nested) => ({ part: nested, context: toolContext(message, nested, last) })),
  };
  return context;
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

function othersNote(message, others, keep) {
  const text =
    others === 1
      ? 'A tool call waits for other approvers. The assistant continues on its own once they decide.'
      : `${others} tool calls wait for other approvers. The assistant continues on its own once they decide.`;
  return cached(`others:${message.id}`, text, () => el('p', { class: 'pending-note', 'data-testid': 'waiting-note' }, text), keep);
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
      if (context.copy) return { label: 'Waiting for a nested approval', tone: 'waiting', spinner: false };
      return context.othersDecide ? describeRouted(context.routing) : { label: 'Waiting for approval', tone: 'waiting' };
    case 'approval-responded':
      if (context.othersDecide) return describeRouted(context.routing);
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

// A request in other hands, by where its approval stands on the server.
function describeRouted(routing) {
  switch (routing.state) {
    case 'pending':
      return { label: 'Waiting for approvers', tone: 'waiting' };
    case 'denied':
    case 'withdrawn':
    case 'expired':
      return { label: ROUTED_LABEL[routing.state], tone: 'denied' };
    default:
      return { label: ROUTED_LABEL[routing.state] ?? routing.state, tone: 'approved', spinner: true };
  }
}

const ROUTED_LABEL = {
  pending: 'Waiting',
  approved: 'Approved',
  denied: 'Denied',
  withdrawn: 'Withdrawn',
  expired: 'Expired',
  executing: 'Running',
  executed: 'Ran',
  failed: 'Failed',
  interrupted: 'Interrupted',
  superseded: 'Edited: asked again',
};

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
    lineageLine(part, context),
    askReason(context),
    cardBody(part, context),
    subAgentSection(part, context),
    provenance(part, context),
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
function provenance(part, context) {
  if (part.state !== 'output-available' && part.state !== 'output-error') return null;
  if (context.copy) return null; // the nested card inside says who approved its call
  const approval = part.approval;
  const approvers = context.routing?.routed ? approvedBy(context.routing.votes) : '';
  const text = approvers
    ? `Approved by ${approvers}`
    : !approval
    ? isClientTool(part)
      ? 'Answered by you'
      : 'Ran without asking: no approval was needed'
    : approval.editedInput !== undefined
      ? 'Approved by you, with your edited input'
      : 'Approved by you';
  return el('p', { class: 'tool-meta', 'data-testid': 'tool-provenance' }, text);
}

// `bob and carol`: who approved, from the votes.
function approvedBy(votes) {
  const names = votes.filter((vote) => vote.decision === 'approve').map((vote) => vote.principal ?? 'you');
  return names.length > 1 ? `${names.slice(0, -1).join(', ')} and ${names.at(-1)}` : (names[0] ?? '');
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
        context.routing?.routed ? 'Decision' : 'Your decision',
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

// ---------------------------------------------------------------------------
// Sub-agents
//
// A sub-agent's call that needs approval surfaces in the root step as a tool part of its own, whose
// `callProviderMetadata.toolgate.subAgent.lineage` (and reason part) names the agent calls from the root
// down. It is drawn inside the card of the agent call it comes from (`lineage[0]`, a part of the same
// message), in a collapsible transcript with the agent's progress. That agent call's part carries a copy of
// the nested approval (the same approval id), as the stock AI SDK client needs it: the page answers both
// together, as `addToolApprovalResponse` does, and shows no buttons on the copy.

// The lineage of a sub-agent's call (`[{agent, toolCallId}]`), or null for a call of the root.
function lineageOf(message, part) {
  const meta = part.callProviderMetadata?.toolgate?.subAgent?.lineage;
  if (Array.isArray(meta) && meta.length) return meta;
  const data = message.parts.find((other) => other.type === REASON_PART && other.id === part.toolCallId)?.data;
  return Array.isArray(data?.lineage) && data.lineage.length ? data.lineage : null;
}

// The id of the agent call (a part of this message) a nested call is drawn in, or null.
function agentCallOf(message, part) {
  const first = lineageOf(message, part)?.[0]?.toolCallId;
  if (!first || first === part.toolCallId) return null;
  return message.parts.some((other) => isToolPart(other) && other.toolCallId === first) ? first : null;
}

// The nested calls drawn in the card of `agent`.
function nestedParts(message, agent) {
  return message.parts.filter((part) => isToolPart(part) && part !== agent && agentCallOf(message, part) === agent.toolCallId);
}

// True for an agent call's copy of one of its nested approvals.
function isApprovalCopy(message, part) {
  const id = part.approval?.id;
  if (!id || !message) return false;
  return nestedParts(message, part).some((nested) => nested.approval?.id === id);
}

// Answers (or takes back) every other part of the message with the same approval id, as the SDK does.
function answerCopies(message, part) {
  for (const other of message?.parts ?? []) {
    if (other === part || !isToolPart(other) || other.approval?.id !== part.approval?.id) continue;
    if (!['approval-requested', 'approval-responded'].includes(other.state)) continue;
    other.state = part.state;
    other.approval = { ...part.approval };
  }
}

// `manager › janitor › delete_file`.
function lineagePath(lineage, tool) {
  return [...lineage.map((step) => step.agent), tool].join(' \u203a ');
}

// A nested call's card names where it comes from.
function lineageLine(part, context) {
  if (!context.lineage) return null;
  return el('p', { class: 'tool-lineage', 'data-testid': 'tool-lineage' }, `Called by ${lineagePath(context.lineage, toolName(part))}`);
}

// An agent call's transcript: its progress (steps, calls, text) and its nested calls with their cards.
function subAgentSection(part, context) {
  const progress = part.output && typeof part.output === 'object' && part.output.status ? part.output : null;
  if (!context.nested.length && !(part.preliminary && progress)) return null;
  const steps = progress?.steps;
  const waitingCount = context.nested.filter((nested) => nested.part.state === 'approval-requested').length;
  const summary = [
    `Sub-agent ${progress?.agent ?? toolName(part)}`,
    steps ? `${steps} step${steps === 1 ? '' : 's'}` : null,
    waitingCount ? `${waitingCount} call${waitingCount === 1 ? '' : 's'} waiting for approval` : null,
  ]
    .filter(Boolean)
    .join(' · ');
  return el(
    'details',
    { class: 'subagent', 'data-testid': 'subagent-transcript', open: waitingCount > 0 || part.preliminary ? '' : null },
    el('summary', { class: 'subagent-summary' }, summary),
    progress?.text ? el('p', { class: 'subagent-text', 'data-testid': 'subagent-text' }, progress.text) : null,
    el('div', { class: 'subagent-calls' }, context.nested.map((nested) => toolCard(nested.part, nested.context))),
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
  if (!context.last || context.copy) return null; // a nested approval's copy is answered with the nested card
  if (part.state === 'approval-requested') {
    return context.othersDecide ? routedStatus(part, context) : approvalActions(part, context);
  }
  if (part.state === 'approval-responded' && context.othersDecide) return routedStatus(part, context);
  if (part.state === 'approval-responded' && !context.busy && context.sent) {
    return el(
      'div',
      { class: 'tool-foot actions-quiet' },
      el('span', { class: 'muted', 'data-testid': 'answer-recorded' }, 'Your answer is recorded. The assistant continues once the other approvals are decided.'),
    );
  }
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

// Where a request in other hands stands: who it waits for, their votes, and "Withdraw" while it is pending.
function routedStatus(part, context) {
  const routing = context.routing;
  const pending = routing.state === 'pending';
  const saving = Boolean(context.withdrawal?.saving);
  const error = context.withdrawal?.error;
  return el(
    'div',
    { class: 'tool-foot approval-bar routed-bar', 'data-testid': 'routed-status', 'data-approval-state': routing.state },
    el('p', { class: 'question', 'data-testid': 'waiting-for' }, routedLine(routing, context.gaveUp)),
    pending
      ? button(saving ? 'Withdrawing…' : 'Withdraw request', 'withdraw-button', () => withdraw(part), 'btn-secondary', {
          disabled: saving || context.busy,
          'aria-label': `Withdraw the request to run ${toolName(part)}`,
        })
      : null,
    votesList(routing.votes, 'routed-votes'),
    error ? el('p', { class: 'field-error', role: 'alert', 'data-testid': 'withdraw-error' }, `Not withdrawn: ${error}`) : null,
  );
}

function routedLine(routing, gaveUp) {
  if (routing.state === 'pending') return `Waiting for ${routing.waitingFor}`;
  if (gaveUp) return `${ROUTED_LABEL[routing.state] ?? routing.state}. Reload the page to see what the server did.`;
  const by = routing.state === 'approved' ? approvedBy(routing.votes) : '';
  return `${ROUTED_LABEL[routing.state] ?? routing.state}${by ? ` by ${by}` : ''}. The assistant continues…`;
}

// The votes cast so far: `bob approved`, `carol denied: reason`.
function votesList(votes, testid) {
  if (!votes.length) return null;
  return el(
    'ul',
    { class: 'votes', 'data-testid': testid, 'aria-label': 'Votes' },
    votes.map((vote) =>
      el(
        'li',
        { class: `vote vote-${vote.decision}`, 'data-testid': 'vote', 'data-principal': vote.principal ?? '', 'data-decision': vote.decision },
        el('strong', {}, vote.principal ?? 'you'),
        vote.decision === 'approve' ? ' approved' : ' denied',
        vote.reason ? `: ${vote.reason}` : '',
      ),
    ),
  );
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
  // Routed to approvers this person is one of: their answer is one vote; several approvers
  // cannot approve different inputs, and a sticky decision would answer for the others.
  const routing = context.routing?.routed ? context.routing : null;
  return el(
    'div',
    { class: 'tool-foot approval-bar' },
    el('p', { class: 'question' }, 'Run ', el('code', {}, toolName(part)), ' with this input?'),
    el(
      'div',
      { class: 'button-row' },
      button('Approve', 'approve-button', () => decide(id, { approved: true }), 'btn-approve', { disabled }),
      button('Deny…', 'deny-button', open('deny'), 'btn-deny', { disabled, 'aria-label': 'Deny (asks for an optional reason)' }),
      routing && routing.quorum > 1 ? null : button('Edit input…', 'edit-button', open('edit'), 'btn-secondary', { disabled }),
    ),
    routing
      ? el('p', { class: 'routed-note muted', 'data-testid': 'waiting-for' }, `Your vote counts toward ${routing.waitingFor}.`)
      : stickyActions(part, context, disabled),
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
      // A grant: "approve, and allow N more like this for …" (the server spends one use per call).
      button('Allow 5 more for 1 hour', 'allow-more-button', () => decide(id, { approved: true, grant: { uses: 5, within: '1h' } }), 'btn-small btn-sticky', {
        disabled,
        title: `Approve this call and let the next 5 ${name} calls in this chat run without asking, for one hour`,
      }),
    ),
    error
      ? el('p', { class: 'field-error', role: 'alert', 'data-testid': 'sticky-error' }, `The decision was not saved: ${error}`)
      : null,
  );
}

function denyForm(part, draft, close) {
  return reasonForm({
    draft,
    close,
    inputId: `deny-reason-${part.toolCallId}`,
    testIds: { input: 'deny-reason-input', confirm: 'confirm-deny-button', cancel: 'cancel-button' },
    placeholder: 'e.g. Keep this file, I still need it',
    label: 'Reason for denying (optional, the assistant sees it)',
    formClass: 'tool-foot panel',
    onConfirm: (reason) => decide(part.toolCallId, { approved: false, reason }),
  });
}

function editForm(part, draft, close) {
  return jsonEditForm({
    draft,
    close,
    areaId: `edit-input-${part.toolCallId}`,
    testIds: { area: 'edit-input-textarea', error: 'edit-error', approve: 'approve-edited-button', cancel: 'cancel-button' },
    help: 'The tool runs with your version; the assistant sees the edited call.',
    formClass: 'tool-foot panel',
    maxRows: 14,
    onApprove: (editedInput) => decide(part.toolCallId, { approved: true, editedInput }),
  });
}

// A form asking for an optional reason before a denial. `small`: compact buttons; `busy()`: a vote in flight.
function reasonForm({ draft, close, inputId, testIds, placeholder, label, formClass, small = false, busy = () => false, onConfirm }) {
  const size = small ? ' btn-small' : '';
  const confirm = () => onConfirm(draft.reason.trim() || undefined);
  const input = el('input', {
    id: inputId,
    type: 'text',
    class: 'text-input',
    'data-testid': testIds.input,
    placeholder,
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
    { class: formClass },
    el('label', { for: inputId, class: 'field-label' }, label),
    input,
    el(
      'div',
      { class: 'button-row' },
      button('Deny call', testIds.confirm, confirm, `btn-deny-solid${size}`, { disabled: busy() }),
      button('Cancel', testIds.cancel, close, `btn-ghost${size}`),
    ),
  );
}

// A form to edit a call's input as JSON (an object) before approving it.
function jsonEditForm({ draft, close, areaId, testIds, help, formClass, maxRows, small = false, busy = () => false, onApprove }) {
  const size = small ? ' btn-small' : '';
  const error = el('p', { class: 'field-error', 'data-testid': testIds.error, role: 'alert' });
  const approve = button('Approve edited', testIds.approve, () => {
    const parsed = validateInput(draft.text);
    if (parsed.ok) onApprove(parsed.value);
  }, `btn-approve${size}`);
  const check = () => {
    const parsed = validateInput(draft.text);
    error.textContent = parsed.ok ? '' : parsed.error;
    error.hidden = parsed.ok;
    approve.disabled = !parsed.ok || busy();
    area.setAttribute('aria-invalid', String(!parsed.ok));
  };
  const area = el('textarea', {
    id: areaId,
    class: 'code-editor',
    'data-testid': testIds.area,
    spellcheck: 'false',
    rows: String(Math.min(maxRows, Math.max(4, draft.text.split('\n').length + 1))),
    ...(help ? { 'aria-describedby': `${areaId}-help` } : {}),
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
    { class: formClass },
    el('label', { for: areaId, class: 'field-label' }, 'Edit the input (JSON), then approve'),
    area,
    help ? el('p', { id: `${areaId}-help`, class: 'help' }, help) : null,
    error,
    el('div', { class: 'button-row' }, approve, button('Cancel', testIds.cancel, close, `btn-ghost${size}`)),
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
// The inbox: approvals this person may decide, across chats. Live from
// `GET api/approvals/stream` (server-sent events, one `approval` event per
// item as it appears and changes); when the stream fails the page reads
// `GET api/approvals` every few seconds instead, and tries the stream again
// later. A vote is `POST api/approvals/{id}`.

const INBOX_POLL_MS = 3000;
const INBOX_RECENT = 10; // decided items kept in the "Recently decided" list

const inbox = {
  open: false,
  items: new Map(), // approval id -> pending item this person is an approver of
  recent: [], // decided items, newest first
  mode: 'off', // 'off' | 'live' | 'polling' | 'unavailable' | 'signed-out'
  note: '',
  errors: new Map(), // approval id -> the server's refusal of the last vote
  drafts: new Map(), // approval id -> {mode: 'deny' | 'edit', reason, text}
  voting: new Set(), // ids with a vote in flight
  nodes: new Map(), // approval id -> {node, signature}
  connection: null, // AbortController of the stream and polling
  focus: new URLSearchParams(location.search).get('approval'), // `?approval=ID`: a notification's "view" link
  toggle: '#inbox-toggle',
  panel: '#inbox-panel',
  refresh: () => renderInbox(),
};

const isApprover = (item) => mayVote(item.approvers ?? [], []);
const canVote = (item) => item.state === 'pending' && mayVote(item.approvers ?? [], item.votes ?? []);

// (Re)connects the inbox, e.g. after signing in.
function startInbox() {
  inbox.connection?.abort();
  const abort = new AbortController();
  inbox.connection = abort;
  inboxLoop(abort.signal);
}

async function inboxLoop(signal) {
  let failures = 0;
  while (!signal.aborted) {
    const outcome = await listenInbox(signal);
    if (signal.aborted || outcome === 'unavailable' || outcome === 'signed-out') return;
    failures = outcome === 'ended' ? 0 : failures + 1;
    // The stream failed or ended: read the list now and then, and try the stream again later.
    setInboxMode('polling');
    const retryAt = Date.now() + Math.min(30_000, INBOX_POLL_MS * (1 + failures));
    while (!signal.aborted && Date.now() < retryAt) {
      const polled = await pollInbox(signal);
      if (polled === 'unavailable' || polled === 'signed-out') return;
      await sleep(INBOX_POLL_MS, signal);
    }
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

// Follows the stream until it ends: 'ended' after a working stream, else why it did not open.
async function listenInbox(signal) {
  let response;
  try {
    response = await authFetch(`${APPROVALS_API}/stream`, { headers: { accept: 'text/event-stream' }, signal });
  } catch {
    return 'failed';
  }
  const refused = inboxRefusal(response);
  if (refused) return refused;
  if (!response.ok || !response.body) return 'failed';
  setInboxMode('live');
  const opened = Date.now();
  try {
    for await (const event of readEvents(response.body)) {
      if (event.event === 'approval' && event.data) applyInboxItem(JSON.parse(event.data));
    }
  } catch {
    // Cut off: poll, then connect again.
  }
  return Date.now() - opened > 10_000 ? 'ended' : 'failed';
}

// Reads the list once (pending and recently decided).
async function pollInbox(signal) {
  try {
    const response = await authFetch(`${APPROVALS_API}?state=all&limit=100`, { signal });
    const refused = inboxRefusal(response);
    if (refused) return refused;
    if (!response.ok) return 'failed';
    const items = (await response.json())?.approvals ?? [];
    if (signal?.aborted) return 'failed';
    const pending = new Set();
    for (const item of items) {
      if (item.state === 'pending') pending.add(item.id);
      applyInboxItem(item, { quiet: true });
    }
    // Listed before and pending no more, but not in this page of the list: gone.
    for (const id of inbox.items.keys()) if (!pending.has(id)) inbox.items.delete(id);
    renderInbox();
    return 'ok';
  } catch {
    return 'failed';
  }
}

// 'unavailable' without a store, 'signed-out' without a valid credential (the page asks for one).
function inboxRefusal(response) {
  if (response.status === 404) {
    setInboxMode('unavailable', 'This server keeps no approvals (it runs with --store none).');
    return 'unavailable';
  }
  if (response.status === 401) {
    setInboxMode('signed-out', 'Sign in to see the approvals waiting for you.');
    return 'signed-out';
  }
  return null;
}

function setInboxMode(mode, note = '') {
  inbox.mode = mode;
  inbox.note = note;
  renderInbox();
}

// One item from the stream, the list or a vote's answer.
function applyInboxItem(item, { quiet = false } = {}) {
  if (!item?.id) return;
  if (item.conversationId === state.chatId && (item.requester ?? null) === viewer.principal && worthShowing(item)) {
    // An approval of the open chat: its card shows it, and a decision may mean the server runs the step.
    liveApprovals.set(item.id, item);
    scheduleRender();
    if (item.state !== 'pending' && stepApprovalIds().includes(item.id)) watchNow();
  }
  if (!isApprover(item) && !inbox.items.has(item.id) && item.id !== inbox.focus) return;
  if (item.state === 'pending') {
    inbox.items.set(item.id, item);
  } else {
    inbox.items.delete(item.id);
    inbox.drafts.delete(item.id);
    inbox.recent = [item, ...inbox.recent.filter((other) => other.id !== item.id)]
      .sort((a, b) => String(b.createdAt).localeCompare(String(a.createdAt)))
      .slice(0, INBOX_RECENT);
  }
  if (!quiet) renderInbox();
}

// A vote: `{decision: 'approve' | 'deny', reason?, editedInput?}`. A refusal shows the server's message.
async function voteInbox(id, body) {
  if (inbox.voting.has(id)) return;
  inbox.voting.add(id);
  inbox.errors.delete(id);
  renderInbox();
  try {
    const response = await authFetch(`${APPROVALS_API}/${encodeURIComponent(id)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.ok) {
      inbox.drafts.delete(id);
      applyInboxItem(await response.json());
    } else {
      inbox.errors.set(id, errorLine(await httpError(response)));
      // Already voted, decided or expired: show where it stands now.
      if (response.status === 409 || response.status === 410) await reloadInboxItem(id);
    }
  } catch (error) {
    inbox.errors.set(id, error.message);
  }
  inbox.voting.delete(id);
  renderInbox();
}

async function reloadInboxItem(id) {
  try {
    const response = await authFetch(`${APPROVALS_API}/${encodeURIComponent(id)}`);
    if (response.ok) applyInboxItem(await response.json(), { quiet: true });
  } catch {
    // The error shown says enough.
  }
}

const newestFirst = (a, b) => String(b.createdAt).localeCompare(String(a.createdAt));

function renderInbox() {
  const pending = [...inbox.items.values()].sort(newestFirst);
  const shown = new Set([...pending, ...inbox.recent].map((item) => item.id));
  for (const id of inbox.nodes.keys()) if (!shown.has(id)) inbox.nodes.delete(id);
  syncChildren($('#inbox-list'), pending.map(inboxNode));
  syncChildren($('#inbox-recent'), inbox.recent.map(inboxNode));
  $('#inbox-recent-section').hidden = inbox.recent.length === 0;
  const mode = $('#inbox-mode');
  mode.dataset.mode = inbox.mode;
  mode.textContent = { live: 'Live', polling: 'Updating every few seconds' }[inbox.mode] ?? '';
  const note = inbox.note || (pending.length === 0 && inbox.mode !== 'off' ? 'Nothing waits for your decision.' : '');
  $('#inbox-note').textContent = note;
  renderInboxCount();
}

// The number on the Inbox button: approvals waiting for this person's vote.
function renderInboxCount() {
  const waiting = [...inbox.items.values()].filter(canVote).length;
  const count = $('#inbox-count');
  count.textContent = String(waiting);
  count.hidden = waiting === 0;
  $('#inbox-toggle').setAttribute('aria-label', waiting ? `Approval inbox, ${waiting} waiting for you` : 'Approval inbox');
}

// Rebuilds an item's node only when what it shows changed (a draft's text lives in its control).
function inboxNode(item) {
  const draft = inbox.drafts.get(item.id);
  const signature = JSON.stringify([item, draft?.mode, inbox.errors.get(item.id), inbox.voting.has(item.id), viewer, state.chatId]);
  const hit = inbox.nodes.get(item.id);
  if (hit && hit.signature === signature) return hit.node;
  const node = inboxItem(item);
  if (hit) restoreFocus(hit.node, node);
  inbox.nodes.set(item.id, { node, signature });
  return node;
}


// Opens the inbox on the approval a notification's "view" link names
// (`approvals/{id}` redirects to `?approval={id}`), whether or not it is still pending.
async function focusInboxItem() {
  if (!inbox.focus) return;
  if (!inbox.open) togglePanel(inbox);
  await reloadInboxItem(inbox.focus);
  renderInbox();
  const node = document.querySelector(`[data-approval-id="${CSS.escape(inbox.focus)}"]`);
  node?.scrollIntoView({ block: 'center' });
  node?.focus();
}

function inboxItem(item) {
  const votes = item.votes ?? [];
  const approvals = votes.filter((vote) => vote.decision === 'approve').length;
  const requester = item.requester ?? 'you';
  const error = inbox.errors.get(item.id);
  return el(
    'li',
    {
      class: `inbox-item inbox-item-${item.state}${item.id === inbox.focus ? ' inbox-item-focus' : ''}`,
      tabindex: item.id === inbox.focus ? '-1' : null,
      'data-testid': 'inbox-item',
      'data-approval-id': item.id,
      'data-tool-call-id': item.toolCallId,
      'data-conversation-id': item.conversationId,
      'data-state': item.state,
      'aria-label': `${item.tool} requested by ${requester}: ${ROUTED_LABEL[item.state] ?? item.state}`,
    },
    el(
      'div',
      { class: 'inbox-head' },
      el('code', { class: 'inbox-tool', 'data-testid': 'inbox-tool' }, item.tool),
      el('span', { class: `inbox-state inbox-state-${item.state}`, 'data-testid': 'inbox-state' }, ROUTED_LABEL[item.state] ?? item.state),
      el(
        'span',
        { class: 'inbox-tally', 'data-testid': 'inbox-tally', title: `${approvals} of ${item.quorum} approvals needed` },
        `${approvals} of ${item.quorum}`,
      ),
    ),
    el(
      'p',
      { class: 'inbox-meta' },
      'Requested by ',
      el('strong', { 'data-testid': 'inbox-requester' }, requester),
      ' in ',
      item.conversationId === state.chatId && (item.requester ?? null) === viewer.principal ? 'this chat' : 'chat ',
      item.conversationId === state.chatId && (item.requester ?? null) === viewer.principal
        ? null
        : el('code', { 'data-testid': 'inbox-conversation' }, item.conversationId),
      ` · ${new Date(item.createdAt).toLocaleTimeString()}`,
      item.state === 'pending' && item.expiresAt ? ` · expires ${new Date(item.expiresAt).toLocaleString()}` : '',
    ),
    item.lineage?.length ? el('p', { class: 'tool-lineage', 'data-testid': 'inbox-lineage' }, lineagePath(item.lineage, item.tool)) : null,
    item.reason ? el('p', { class: 'tool-reason inbox-reason', 'data-testid': 'inbox-reason' }, `Asked because: ${item.reason}`) : null,
    inboxDraftMode(item) === 'edit' ? null : field('Input', jsonBlock(item.input ?? {}, 'inbox-input')),
    el('p', { class: 'inbox-approvers muted' }, `Approvers: ${describeApprovers(item.approvers ?? [])}, ${item.quorum} needed`),
    votesList(votes, 'inbox-votes'),
    inboxActions(item),
    error ? el('p', { class: 'field-error', role: 'alert', 'data-testid': 'inbox-error' }, error) : null,
  );
}

const inboxDraftMode = (item) => (canVote(item) ? inbox.drafts.get(item.id)?.mode : undefined);

// Fetches a signed receipt (with the page's auth) and saves it as the file `name`:
// `toolgate audit verify --receipt FILE --keys JWKS_FILE` checks it offline. Returns why there is
// none (a line to show), or null once saved.
async function saveReceipt(path, name) {
  let response;
  try {
    response = await authFetch(path);
  } catch (error) {
    return `No receipt: ${error.message}`;
  }
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    return `No receipt: ${body?.error?.message ?? `HTTP ${response.status}`}`;
  }
  const url = URL.createObjectURL(await response.blob());
  const link = el('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
  return null;
}

// A decided approval's signed receipt (`GET /api/approvals/{id}/receipt`), saved as `receipt-{id}.json`.
async function downloadReceipt(item) {
  const error = await saveReceipt(`${APPROVALS_API}/${encodeURIComponent(item.id)}/receipt`, `receipt-${item.id}.json`);
  if (!error) return;
  inbox.errors.set(item.id, error);
  renderInbox();
}

function inboxActions(item) {
  if (item.state !== 'pending') {
    return button('Download receipt', 'inbox-receipt-button', () => downloadReceipt(item), 'btn-secondary btn-small', {
      'aria-label': `Download the signed receipt of ${item.tool}`,
    });
  }
  const own = (item.votes ?? []).find(isOwnVote);
  if (own) {
    const verb = own.decision === 'approve' ? 'approved' : 'denied';
    return el('p', { class: 'inbox-my-vote', 'data-testid': 'inbox-my-vote' }, `You ${verb}. Waiting for the other approvers.`);
  }
  if (!canVote(item)) return null;
  const draft = inbox.drafts.get(item.id);
  const close = () => {
    inbox.drafts.delete(item.id);
    renderInbox();
  };
  if (draft?.mode === 'deny') return inboxDenyForm(item, draft, close);
  if (draft?.mode === 'edit') return inboxEditForm(item, draft, close);
  if (draft?.mode === 'grant') return inboxGrantForm(item, draft, close);
  const open = (mode) => () => {
    inbox.drafts.set(item.id, { mode, reason: '', text: JSON.stringify(item.input ?? {}, null, 2), uses: 5, within: '1h' });
    renderInbox();
  };
  const disabled = inbox.voting.has(item.id);
  const what = `${item.tool} requested by ${item.requester ?? 'you'}`;
  return el(
    'div',
    { class: 'button-row inbox-actions' },
    button('Approve', 'inbox-approve-button', () => voteInbox(item.id, { decision: 'approve' }), 'btn-approve btn-small', {
      disabled,
      'aria-label': `Approve ${what}`,
    }),
    button('Deny…', 'inbox-deny-button', open('deny'), 'btn-deny btn-small', {
      disabled,
      'aria-label': `Deny ${what} (asks for an optional reason)`,
    }),
    // Several approvers cannot approve different inputs: edits only where one decides.
    item.quorum <= 1
      ? button('Edit input…', 'inbox-edit-button', open('edit'), 'btn-secondary btn-small', { disabled, 'aria-label': `Edit the input of ${what}` })
      : null,
    // A grant: one approver's "yes, and the next N like this"; a quorum cannot be granted away.
    item.quorum <= 1
      ? button('Approve, and allow more…', 'inbox-grant-button', open('grant'), 'btn-secondary btn-small', {
          disabled,
          'aria-label': `Approve ${what}, and allow more calls like it without asking`,
        })
      : null,
  );
}

// The durations a grant from the page may last.
const GRANT_WITHIN = [['15m', '15 minutes'], ['1h', '1 hour'], ['8h', '8 hours'], ['1d', '1 day']];

// "Approve, and allow N more like this for …": a grant in this chat (`grant` with the vote).
function inboxGrantForm(item, draft, close) {
  const usesId = `inbox-grant-uses-${item.id}`;
  const withinId = `inbox-grant-within-${item.id}`;
  const uses = el('input', {
    id: usesId,
    type: 'number',
    min: '1',
    max: '10000',
    class: 'text-input grant-uses',
    'data-testid': 'inbox-grant-uses',
    oninput: (event) => (draft.uses = Number(event.target.value)),
  });
  uses.value = String(draft.uses);
  const within = el(
    'select',
    { id: withinId, class: 'grant-within', 'data-testid': 'inbox-grant-within', onchange: (event) => (draft.within = event.target.value) },
    ...GRANT_WITHIN.map(([value, label]) => el('option', { value, ...(value === draft.within ? { selected: '' } : {}) }, label)),
  );
  const confirm = () => {
    const count = Math.trunc(draft.uses);
    if (!(count >= 1 && count <= 10000)) {
      inbox.errors.set(item.id, 'Allow between 1 and 10000 more calls.');
      renderInbox();
      return;
    }
    voteInbox(item.id, { decision: 'approve', grant: { uses: count, within: draft.within, scope: 'conversation' } });
  };
  focusOnce(draft, uses);
  return el(
    'div',
    { class: 'inbox-form grant-form', 'data-testid': 'inbox-grant-form' },
    el('p', { class: 'field-label' }, 'Approve, and let more ', el('code', {}, item.tool), ' calls in this chat run without asking:'),
    el('label', { for: usesId, class: 'field-label' }, 'How many more'),
    uses,
    el('label', { for: withinId, class: 'field-label' }, 'For'),
    within,
    el(
      'div',
      { class: 'button-row' },
      button('Approve and allow', 'inbox-confirm-grant-button', confirm, 'btn-approve btn-small', { disabled: inbox.voting.has(item.id) }),
      button('Cancel', 'inbox-cancel-button', close, 'btn-ghost btn-small'),
    ),
  );
}

function inboxDenyForm(item, draft, close) {
  return reasonForm({
    draft,
    close,
    inputId: `inbox-deny-${item.id}`,
    testIds: { input: 'inbox-deny-reason', confirm: 'inbox-confirm-deny-button', cancel: 'inbox-cancel-button' },
    placeholder: 'e.g. Not this month',
    label: 'Reason for denying (optional, the requester and the assistant see it)',
    formClass: 'inbox-form',
    small: true,
    busy: () => inbox.voting.has(item.id),
    onConfirm: (reason) => voteInbox(item.id, { decision: 'deny', ...(reason ? { reason } : {}) }),
  });
}

function inboxEditForm(item, draft, close) {
  return jsonEditForm({
    draft,
    close,
    areaId: `inbox-edit-${item.id}`,
    testIds: { area: 'inbox-edit-input', error: 'inbox-edit-error', approve: 'inbox-approve-edited-button', cancel: 'inbox-cancel-button' },
    formClass: 'inbox-form',
    maxRows: 12,
    small: true,
    busy: () => inbox.voting.has(item.id),
    onApprove: (editedInput) => voteInbox(item.id, { decision: 'approve', editedInput }),
  });
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
  whoAmI().then((known) => {
    if (!known) return;
    restoreConversation();
    startInbox();
    focusInboxItem();
  });
  $('#error-dismiss').addEventListener('click', clearError);
  $('#error-retry').addEventListener('click', () => !busy() && submit());
  render();
  input.focus();
}

setup();
