#!/usr/bin/env bash
# The call-gating API's clients, with the agent frameworks' real packages, against a real `toolgate serve`
# (loopback only).
#
#   scripts/e2e-agent-clients.sh [--no-install] [--only python|node]
#
# 1. Python: a venv in e2e/agent-clients/.venv with the pinned frameworks of e2e/agent-clients/requirements.txt
#    (LangChain, LangGraph, the OpenAI Agents SDK, Pydantic AI, pytest); clients/python built as a wheel and
#    installed from it. Node: `npm ci` in clients/typescript (pinned by its package-lock.json: ai 6 and 7,
#    @openai/agents, openapi-typescript, typescript), then `tsc`.
# 2. `cargo build -p toolgate-cli` (or $TOOLGATE_BIN, when set).
# 3. One `toolgate serve` on a free 127.0.0.1 port, with e2e/agent-clients/server/config.toml (who approves
#    what), a tokens file of four users and a SQLite store in the run directory; a bounded wait on /healthz.
# 4. The tests, the Python and the TypeScript groups at once: clients/python's unit tests and `mypy --strict`;
#    e2e/agent-clients/python (pytest: the client, LangChain/LangGraph on GenericFakeChatModel, the OpenAI Agents
#    SDK on a scripted Model, Pydantic AI on FunctionModel); clients/typescript/test (node --test: the client, the
#    AI SDK 6 and 7 on MockLanguageModelV3, the OpenAI Agents JS SDK on a scripted Model). Each adapter runs its
#    framework's plain and streaming entry points; approvals are voted in the inbox (`POST /api/approvals/{id}`)
#    by other users, approved, denied and by a quorum of two; for the client and each adapter, an agent process
#    killed with SIGKILL while it waits is restarted with the same key: one approval, one run.
# 5. No drift: the TypeScript client's src/openapi.ts is generated again from the server's /openapi.json and
#    must equal the committed one (the Python tests compare the client's fields with the same document).
#
# Exit status: non-zero if anything failed. Prints `e2e-agent-clients: N passed, N failed` at the end.
# Environment: TOOLGATE_E2E_KEEP=1 keeps the run directory (server log, store); it is kept on failure too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E="$ROOT/e2e/agent-clients"
TS="$ROOT/clients/typescript"
VENV="$E2E/.venv"
HEALTH_TIMEOUT_SECS="${TOOLGATE_E2E_HEALTH_TIMEOUT:-15}"
TEST_TIMEOUT_SECS="${TOOLGATE_E2E_TEST_TIMEOUT:-300}"

log() { printf '[e2e-agent-clients] %s\n' "$*" >&2; }

install=1
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --only)
      [ $# -ge 2 ] || { log "--only needs python or node"; exit 2; }
      only="$2"
      shift
      ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) log "unknown argument: $1"; exit 2 ;;
  esac
  shift
done
case "$only" in ""|python|node) ;; *) log "--only takes python or node, not $only"; exit 2 ;; esac
want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

for tool in python3 node npm curl; do
  command -v "$tool" >/dev/null 2>&1 || { log "missing $tool"; exit 1; }
done

RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-agent-clients.XXXXXX")"
SERVER_PID=""
TEST_PIDS=()
passed=0
failed=0
failures=()

cleanup() {
  local status=$?
  local pid
  for pid in ${TEST_PIDS[@]+"${TEST_PIDS[@]}"}; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "${TOOLGATE_E2E_KEEP:-0}" = 1 ] || [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
    log "run directory kept: $RUN_DIR"
  else
    rm -rf "$RUN_DIR"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$(date +%s)

# 1. Packages, exactly as pinned.
if want python; then
  if [ "$install" = 1 ] || [ ! -x "$VENV/bin/python" ]; then
    log "python venv in e2e/agent-clients/.venv (requirements.txt)"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    timeout 900 "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$E2E/requirements.txt"
  fi
  log "building the toolgate-client wheel"
  timeout 300 "$VENV/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$RUN_DIR/wheels" "$ROOT/clients/python"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$RUN_DIR"/wheels/toolgate_client-*.whl
fi
if want node; then
  if [ "$install" = 1 ] || [ ! -d "$TS/node_modules" ]; then
    log "npm ci in clients/typescript"
    (cd "$TS" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
  fi
  log "tsc in clients/typescript"
  (cd "$TS" && node node_modules/typescript/bin/tsc -p tsconfig.json)
fi

# 2. The server binary.
source "$ROOT/scripts/toolgate-bin.sh"

# 3. One server for every test: each test marks its calls with a fresh memo.
free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}
printf '{"tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol", "tok-erin": "erin"}\n' >"$RUN_DIR/tokens.json"
chmod 600 "$RUN_DIR/tokens.json"
URL=""
for attempt in 1 2 3; do
  port="$(free_port)"
  "$BIN" serve --tools none --model "script:$E2E/server/model.json" --config "$E2E/server/config.toml" \
    --tokens-file "$RUN_DIR/tokens.json" --data-dir "$RUN_DIR/data" \
    --addr "127.0.0.1:$port" >"$RUN_DIR/server.log" 2>&1 &
  SERVER_PID=$!
  deadline=$(( $(date +%s) + HEALTH_TIMEOUT_SECS ))
  while [ "$(date +%s)" -le "$deadline" ] && kill -0 "$SERVER_PID" 2>/dev/null; do
    if curl -fsS --max-time 1 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      URL="http://127.0.0.1:$port"
      break 2
    fi
    sleep 0.05
  done
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  log "the server did not become healthy on port $port (attempt $attempt); log:"
  sed 's/^/    /' "$RUN_DIR/server.log" >&2 || true
done
[ -n "$URL" ] || { log "cannot start toolgate serve"; exit 1; }
log "toolgate serve at $URL"

# start_tests NAME COMMAND...: starts COMMAND in the background (the groups below run at once), its output in
# $RUN_DIR/NAME.out; finish_tests NAME waits for it, prints its output and sets `status` to its exit status.
declare -A TEST_PID_OF
start_tests() {
  local name="$1"
  shift
  log "$name: started"
  (exec timeout "$TEST_TIMEOUT_SECS" "$@") >"$RUN_DIR/$name.out" 2>&1 &
  TEST_PID_OF[$name]=$!
  TEST_PIDS+=($!)
}
finish_tests() {
  status=0
  wait "${TEST_PID_OF[$1]}" || status=$?
  log "$1: exit status $status"
  cat "$RUN_DIR/$1.out"
}

# count_pytest NAME OUT STATUS: adds pytest's closing counts; a run that counted nothing is one failure.
count_pytest() {
  local name="$1" out="$2" status="$3" line p f e
  line=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$out" | tail -n 1 || true)
  p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
  e=$(echo "$line" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || echo 0)
  passed=$((passed + p))
  failed=$((failed + f + e))
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    failures+=("$name")
    [ -n "$line" ] || failed=$((failed + 1))
  fi
}

# The groups run at once: the Python suites and mypy, and the TypeScript suite (node --test runs its files at
# once too), so the agents' waits and the frameworks' imports overlap.
if want python; then
  start_tests python-unit "$VENV/bin/python" -m pytest -p no:cacheprovider "$ROOT/clients/python/tests"
  start_tests python-types bash -c "cd '$ROOT/clients/python' && exec '$VENV/bin/mypy' --strict --cache-dir '$RUN_DIR/mypy' src"
  start_tests python-e2e env TOOLGATE_E2E_URL="$URL" "$VENV/bin/python" -m pytest -p no:cacheprovider "$E2E/python"
fi
if want node; then
  start_tests node env TOOLGATE_E2E_URL="$URL" bash -c "cd '$TS' && exec node --test --test-reporter=spec test/core.test.mjs test/ai-sdk.test.mjs test/openai-agents.test.mjs test/restart.test.mjs"
fi

if want python; then
  finish_tests python-unit
  count_pytest "python-unit" "$RUN_DIR/python-unit.out" "$status"
  finish_tests python-types # mypy --strict on clients/python (the package is typed: py.typed)
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("python-types")
  fi
  finish_tests python-e2e
  count_pytest "python-e2e" "$RUN_DIR/python-e2e.out" "$status"
fi

if want node; then
  finish_tests node
  p=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$RUN_DIR/node.out" | tail -n 1)
  f=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$RUN_DIR/node.out" | tail -n 1)
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if [ "$status" -ne 0 ] || [ -z "$p" ]; then
    failures+=("node")
    [ -n "$p" ] || failed=$((failed + 1))
  fi

  log "no drift: clients/typescript/src/openapi.ts against the server's /openapi.json"
  if (cd "$TS" && node scripts/generate.mjs "$URL/openapi.json" "$RUN_DIR/openapi.ts") &&
    diff -u "$TS/src/openapi.ts" "$RUN_DIR/openapi.ts"; then
    passed=$((passed + 1))
  else
    log "src/openapi.ts differs from the server's schemas: run \`node scripts/generate.mjs URL/openapi.json\` in clients/typescript"
    failed=$((failed + 1))
    failures+=("openapi-drift")
  fi
fi

log "done in $(( $(date +%s) - started )) s"
echo "e2e-agent-clients: $passed passed, $failed failed"
if [ ${#failures[@]} -gt 0 ]; then
  log "failed: ${failures[*]}"
  exit 1
fi
