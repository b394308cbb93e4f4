#!/usr/bin/env bash
# `toolgate chat` driven as a person drives it: in a detached tmux session of a fixed size, keys typed with
# `send-keys`, the screen read with `capture-pane`, every wait a bounded poll for text on the screen.
#
# Checks: approve with `y`; deny with `n` and a reason; edit with `e` (invalid JSON, then a schema violation,
# each shown and asked again, then valid JSON: the edit is what runs); edit in $VISUAL; always allow with `a`
# (the tool's next call runs without asking); a client-executed tool (`ask_user`) answered at a prompt; Ctrl-C while a response streams stops it (the connection to the
# model is dropped) and the chat goes on; Ctrl-C at the prompt clears the line; Ctrl-D quits with status 0.
# Then the default local model once, if it is installed (`toolgate model pull`) or TOOLGATE_REQUIRE_LOCAL_MODEL=1:
# tolerant of its text, strict about the approval flow when it asks for one.
#
# Models: scripted (`--model script:FILE`) for everything but Ctrl-C. The scripted model answers at once and has
# no delay setting, so the Ctrl-C check uses a small OpenAI-compatible server written here in Python (stdlib
# only) that streams one word every 50 ms and logs when the client hangs up (`--model openai-compatible:...`).
#
# Installs Debian's `tmux` if it is missing. Uses its own tmux server (a socket in a temp dir), leaves the
# person's sessions alone, and stops everything it started on every exit path.
# Prints `e2e-terminal: N passed, N failed`; exits non-zero when a check failed.
# Usage: scripts/e2e-terminal.sh   (TOOLGATE_BIN=path skips the build)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[e2e-terminal] %s\n' "$*" >&2; }

if ! command -v tmux >/dev/null 2>&1; then
  log "installing tmux"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tmux >/dev/null
fi
PYTHON="${PYTHON:-python3}"

source "$ROOT/scripts/toolgate-bin.sh"

WORK="$(mktemp -d)"
SOCK="$WORK/tmux.sock"
SERVER_PID=""
cleanup() {
  tmux -S "$SOCK" kill-server >/dev/null 2>&1 || true
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); log "ok: $1"; }
fail() {
  failed=$((failed + 1))
  log "FAILED: $1"
  if [ -n "${2:-}" ]; then
    log "screen of $2:"
    screen "$2" | sed -e '/^[[:space:]]*$/d' -e 's/^/    | /' >&2 || true
  fi
}

# tmux on our own socket.
t() { tmux -S "$SOCK" "$@"; }
# One session lives as long as the script: a tmux server exits when its last session ends, and a
# `new-session` that reaches it while it shuts down fails with "server exited unexpectedly" (seen in CI
# between one case's `stop` and the next one's `start`).
t new-session -d -s keepalive "sleep 86400"
# Starts `toolgate chat ARGS...` in session NAME (120x50), in $WORK, without an editor and colors unless
# the environment given in CHAT_ENV says otherwise; the pane prints `[exit N]` when the command ends.
start() {
  local name=$1
  shift
  local command
  command="cd '$WORK' && env -u EDITOR -u VISUAL NO_COLOR=1 TERM=xterm-256color ${CHAT_ENV:-} '$BIN' chat"
  for arg in "$@"; do command+=" '$arg'"; done
  command+="; echo \"[exit \$?]\"; sleep 3600"
  t new-session -d -s "$name" -x 120 -y 50 "$command"
}
# The whole pane, scrollback included, wrapped lines joined.
screen() { t capture-pane -p -J -S - -t "$1"; }
# Whether the screen of NAME matches the extended regex (read whole first: no pipe for `grep -q` to cut).
shows() {
  local text
  text=$(screen "$1") || return 1
  grep -Eq -- "$2" <<<"$text"
}
# Whether the screen's last non-empty line matches (the chat waits at that prompt).
shows_last() {
  local text
  text=$(screen "$1") || return 1
  text=$(sed '/^[[:space:]]*$/d' <<<"$text" | tail -n 1)
  grep -Eq -- "$2" <<<"$text"
}
# Waits (polling, at most TIMEOUT seconds, default 20) until `shows NAME PATTERN`.
wait_for() {
  local deadline=$((SECONDS + ${3:-20}))
  while [ $SECONDS -lt $deadline ]; do
    if shows "$1" "$2"; then return 0; fi
    sleep 0.1
  done
  return 1
}
# Waits (the same way) until `shows_last NAME PATTERN`.
wait_last() {
  local deadline=$((SECONDS + ${3:-20}))
  while [ $SECONDS -lt $deadline ]; do
    if shows_last "$1" "$2"; then return 0; fi
    sleep 0.1
  done
  return 1
}
count() {
  local text
  text=$(screen "$1")
  grep -Ec -- "$2" <<<"$text" || true
}
# Types a line of text literally, then Enter.
type_line() { t send-keys -t "$1" -l -- "$2"; t send-keys -t "$1" Enter; }
key() { t send-keys -t "$1" "$2"; }
stop() { t kill-session -t "$1" >/dev/null 2>&1 || true; }

PROMPT='you> $'
KEYS='\[y\] approve once'

script() {
  cat >"$WORK/$1.json"
  echo "script:$WORK/$1.json"
}

# --- approve with y ---------------------------------------------------------------------------------------
model=$(script approve <<'JSON'
{"turns": [
  [{"type": "text", "text": "I will delete it."},
   {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
  [{"type": "text", "text": "Deleted notes.txt for you."}]
]}
JSON
)
start approve --model "$model" --store none
if wait_last approve "$PROMPT" && type_line approve "delete notes.txt" && wait_last approve "$KEYS.*›" \
  && wait_for approve 'tool call delete_file \(call-1\)' && key approve y \
  && wait_for approve '→ approved delete_file$' && wait_for approve '"deleted": "notes.txt"' \
  && wait_for approve 'Deleted notes.txt for you\.' && wait_last approve "$PROMPT"; then
  pass "y approves; the call runs and the model's answer streams"
else
  fail "y approves" approve
fi
stop approve

# --- deny with n and a reason -----------------------------------------------------------------------------
model=$(script deny <<'JSON'
{"turns": [
  [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
  [{"type": "text", "text": "Understood, I left it alone."}]
]}
JSON
)
start deny --model "$model" --store none
if wait_last deny "$PROMPT" && type_line deny "delete notes.txt" && wait_last deny "$KEYS.*›" \
  && key deny n && wait_last deny 'reason \(Enter to skip\):' && type_line deny "I still need it" \
  && wait_for deny '→ denied delete_file: I still need it' && wait_for deny '✗ delete_file denied: I still need it' \
  && wait_for deny 'Understood, I left it alone\.' && wait_last deny "$PROMPT"; then
  pass "n then a reason denies; the denial and the reason are shown"
else
  fail "n denies with a reason" deny
fi
stop deny

# --- edit with e: invalid JSON, a schema violation, then a valid edit --------------------------------------
model=$(script edit <<'JSON'
{"turns": [
  [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
  [{"type": "text", "text": "Done."}]
]}
JSON
)
start edit --model "$model" --store none
if wait_last edit "$PROMPT" && type_line edit "delete notes.txt" && wait_last edit "$KEYS.*›" \
  && key edit e && wait_last edit 'edit> \{"path":"notes.txt"\}$' \
  && key edit C-u && type_line edit '{"path": "old.txt"' && wait_for edit 'not valid JSON' \
  && wait_last edit 'edit> \{"path": "old.txt"$' \
  && key edit C-u && type_line edit '{"path": 5}' && wait_for edit 'delete_file refuses this input: .*not of type "string"' \
  && wait_last edit 'edit> \{"path": 5\}$' \
  && key edit C-u && type_line edit '{"path": "old.txt"}' \
  && wait_for edit 'path: "notes.txt" → "old.txt"' && wait_for edit '"deleted": "old.txt"' \
  && wait_last edit "$PROMPT"; then
  pass "e edits inline: invalid JSON and a schema violation are shown and asked again; the edit runs"
else
  fail "e edits inline" edit
fi
stop edit

# --- edit in $VISUAL ---------------------------------------------------------------------------------------
# An "editor" that edits without a person: the pane's command sets it for this session only.
CHAT_ENV="VISUAL='sed -i s/notes.txt/visual.txt/'" start visual --model "$model" --store none
if wait_last visual "$PROMPT" && type_line visual "delete notes.txt" && wait_last visual "$KEYS.*›" \
  && key visual e && wait_for visual 'path: "notes.txt" → "visual.txt"' \
  && wait_for visual '"deleted": "visual.txt"' && wait_last visual "$PROMPT"; then
  pass "e with \$VISUAL set edits the input in that editor"
else
  fail "e with \$VISUAL" visual
fi
stop visual

# --- always allow with a -----------------------------------------------------------------------------------
model=$(script always <<'JSON'
{"turns": [
  [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "a.txt"}}],
  [{"type": "text", "text": "First one done."}],
  [{"type": "tool-call", "toolCallId": "call-2", "toolName": "delete_file", "input": {"path": "b.txt"}}],
  [{"type": "text", "text": "Second one done."}]
]}
JSON
)
start always --model "$model" --store none
if wait_last always "$PROMPT" && type_line always "delete a.txt" && wait_last always "$KEYS.*›" \
  && key always a && wait_for always 'later delete_file calls in this chat run without asking \(sticky decision dec_' \
  && wait_for always '"deleted": "a.txt"' && wait_for always 'First one done\.' \
  && wait_last always "$PROMPT" && type_line always "delete b.txt" \
  && wait_for always '"deleted": "b.txt"' && wait_for always 'Second one done\.' && wait_last always "$PROMPT" \
  && [ "$(count always "$KEYS")" -eq 1 ]; then
  pass "a keeps a sticky decision for the chat: the next call runs without being asked"
else
  fail "a always allows" always
fi
stop always

# --- a client-executed tool: the person types its result -------------------------------------------------
model=$(script ask <<'JSON'
{"turns": [
  [{"type": "tool-call", "toolCallId": "q1", "toolName": "ask_user", "input": {"question": "Which file should I delete?"}}],
  [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "old.txt"}}],
  [{"type": "text", "text": "Deleted the one you named."}]
]}
JSON
)
start ask --model "$model" --store none
if wait_last ask "$PROMPT" && type_line ask "delete a file" \
  && wait_last ask 'answer> $' && wait_for ask '\? ask_user asks: Which file should I delete\?' \
  && type_line ask "old.txt" && wait_last ask "$KEYS.*›" && key ask y \
  && wait_for ask '"deleted": "old.txt"' && wait_for ask 'Deleted the one you named\.' && wait_last ask "$PROMPT"; then
  pass "ask_user: the question is shown, the typed answer is its result, the chat goes on"
else
  fail "ask_user" ask
fi
stop ask

# --- Ctrl-C while a response streams; Ctrl-C at the prompt; Ctrl-D -----------------------------------------
cat >"$WORK/slow_server.py" <<'PY'
# An OpenAI-compatible Chat Completions server that streams slowly. "slow" in the last user message: 400
# words, one every 50 ms, then "END-OF-ANSWER"; anything else: a short answer at once. Logs "hung up after N"
# when the client goes away mid-stream.
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def chunk(delta, finish=None):
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "slow",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return ("data: " + json.dumps(body) + "\n\n").encode()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
        slow = "slow" in text
        words = [f"w{i} " for i in range(400)] + ["END-OF-ANSWER"] if slow else ["quick ", "reply."]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        sent = 0
        try:
            self.wfile.write(chunk({"role": "assistant", "content": ""}))
            for word in words:
                self.wfile.write(chunk({"content": word}))
                self.wfile.flush()
                sent += 1
                if slow:
                    time.sleep(0.05)
            self.wfile.write(chunk({}, "stop"))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            print(f"finished {sent}", flush=True)
        except (BrokenPipeError, ConnectionResetError):
            print(f"hung up after {sent}", flush=True)
        self.close_connection = True

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()
PY
"$PYTHON" "$WORK/slow_server.py" >"$WORK/slow_server.log" 2>&1 &
SERVER_PID=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$WORK/slow_server.log")
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -z "$port" ]; then
  fail "the slow model server did not start: $(cat "$WORK/slow_server.log")"
else
  start keys --model "openai-compatible:http://127.0.0.1:$port/v1#slow" --store none
  hung_up() {
    local deadline=$((SECONDS + 10))
    while [ $SECONDS -lt $deadline ]; do
      grep -q '^hung up after' "$WORK/slow_server.log" && return 0
      sleep 0.1
    done
    return 1
  }
  if wait_last keys "$PROMPT" && type_line keys "tell me something slow" && wait_for keys 'w5 w6 ' \
    && key keys C-c && wait_for keys '\(stopped\)' && wait_last keys "$PROMPT" && hung_up \
    && ! shows keys 'END-OF-ANSWER' \
    && type_line keys "and now quickly" && wait_for keys '^quick reply\.' && wait_last keys "$PROMPT"; then
    pass "Ctrl-C mid-stream stops the response ($(grep '^hung up' "$WORK/slow_server.log")), the chat goes on"
  else
    fail "Ctrl-C mid-stream" keys
  fi
  if t send-keys -t keys -l "half a thought" && wait_last keys 'you> half a thought$' && key keys C-c \
    && wait_last keys "$PROMPT" && key keys C-d && wait_for keys '^\[exit 0\]$'; then
    pass "Ctrl-C at the prompt clears the line; Ctrl-D quits with status 0"
  else
    fail "Ctrl-C at the prompt, Ctrl-D" keys
  fi
  stop keys
fi

# --- the default local model -------------------------------------------------------------------------------
model_path="$("$BIN" model path 2>/dev/null || true)"
if [ -n "$model_path" ] && [ -f "$model_path" ]; then
  start local --store none
  if wait_last local "$PROMPT" 120 && type_line local "Delete the file notes.txt" \
    && wait_last local "($KEYS.*›|$PROMPT)" 180; then
    called=$(screen local | grep -Eo 'tool call [a-z_]+' | head -n 1 || true)
    if shows local "$KEYS"; then
      # The model asked: the flow must be complete.
      if key local y && wait_for local '→ approved ' \
        && wait_for local '(✓ [a-z_]+ result:|✗ [a-z_]+ (failed|denied))' 180 && wait_last local "$PROMPT" 180 \
        && ! shows local '^error:'; then
        pass "local model: it asked for approval ($called); y ran the call"
      else
        fail "local model: the approval flow" local
      fi
    elif ! shows local '^error:'; then
      pass "local model: answered without asking (${called:-text only})"
    else
      fail "local model: an error" local
    fi
  else
    fail "local model: no answer" local
  fi
  stop local
elif [ "${TOOLGATE_REQUIRE_LOCAL_MODEL:-}" = "1" ]; then
  fail "TOOLGATE_REQUIRE_LOCAL_MODEL=1 but the default model is not installed (at ${model_path:-?}); run toolgate model pull"
else
  log "skipped the local model: not installed (toolgate model pull)"
fi

echo "e2e-terminal: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
