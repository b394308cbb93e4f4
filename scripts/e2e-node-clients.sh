#!/usr/bin/env bash
# Interop tests: real JavaScript clients against `toolgate serve` (loopback only).
#
#   scripts/e2e-node-clients.sh [--no-install] [--only PHASE]...
#
# 1. `npm ci` in e2e/node-clients (pinned: the `ai` package at 6.0.201, 6.0.326 and 7.0.173, @ag-ui/client,
#    @tanstack/ai-client).
# 2. `cargo build -p toolgate-cli` (or $TOOLGATE_BIN, when set).
# 3. For each phase, one `toolgate serve` per scenario script (e2e/node-clients/scenarios/<dir>/<name>.json,
#    extra server flags from an optional <name>.args), each on a free 127.0.0.1 port with its own
#    --trace-prompts file and data dir, a bounded wait on /healthz, then `node --test` on the phase's files.
#    Servers are stopped after each phase and always on exit.
#    Each server runs in its scenario directory (e2e/node-clients/scenarios/<dir>), so relative paths in a
#    .args file (--config, --tokens-file) and in the files it names (an [[mcp]] server's script) resolve
#    there, wherever the script is run from. Its environment has TOOLGATE_E2E_SERVER_DIR, the server's own
#    run directory (its trace and data dir; stdio MCP servers of its --config inherit it); the manifest
#    names it as `dir`.
#
# Phases:
#   ui-strict        ai@6.0.201 (strict chunk schemas, no `signature` field)  scenarios/ui, default server
#   ui-latest        ai@6.0.326 (newest 6.x)                                    scenarios/ui, default server
#   ui-latest-sig    ai@6.0.326                                                 scenarios/ui, --signature-field
#   ui-v7            ai@7.0.173 (the current major)                             scenarios/ui, --signature-field
#   agui             @ag-ui/client HttpAgent and @tanstack/ai-client           scenarios/agui, against /ag-ui
#   agui-sig         @ag-ui/client HttpAgent                                   scenarios/agui, --signature-field
# The ui phases run test/ai-chat.test.js and test/out-of-band.test.js (approvals decided in the inbox, the
# server's own continuation, resumeStream and reloads; the out-of-band-* scenarios take --config and --tokens-file).
#
# Exit status: non-zero if anything failed. Prints `N passed, N failed, N skipped, N todo` (all phases) at the end
# (`todo`: tests of known gaps, marked in the test files with the gap; they run, and count neither way).
# Environment: TOOLGATE_E2E_KEEP=1 keeps the run directory (server logs, traces, manifests).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E="$ROOT/e2e/node-clients"
HEALTH_TIMEOUT_SECS="${TOOLGATE_E2E_HEALTH_TIMEOUT:-15}"
PHASE_TIMEOUT_SECS="${TOOLGATE_E2E_PHASE_TIMEOUT:-180}"

log() { printf '[e2e-node-clients] %s\n' "$*" >&2; }

install=1
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --only) only+=("$2"); shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) log "unknown argument: $1"; exit 2 ;;
  esac
  shift
done

for tool in node npm cargo curl; do
  command -v "$tool" >/dev/null 2>&1 || { log "missing $tool"; exit 1; }
done

RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-node.XXXXXX")"
SERVER_PIDS=()

TEST_PID=""

stop_servers() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${SERVER_PIDS[@]}"; do
    # Bounded: SIGKILL whatever has not stopped after ~5 s.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  SERVER_PIDS=()
}

cleanup() {
  local status=$?
  if [ -n "$TEST_PID" ]; then
    kill "$TEST_PID" 2>/dev/null || true
    wait "$TEST_PID" 2>/dev/null || true
  fi
  stop_servers
  if [ "${TOOLGATE_E2E_KEEP:-0}" = 1 ] || [ "$status" -ne 0 ]; then
    log "run directory kept: $RUN_DIR"
  else
    rm -rf "$RUN_DIR"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$(date +%s)

# 1. Node packages, exactly as locked.
if [ "$install" = 1 ]; then
  log "npm ci in e2e/node-clients"
  (cd "$E2E" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
fi
[ -d "$E2E/node_modules" ] || { log "e2e/node-clients/node_modules is missing: run without --no-install"; exit 1; }

# 2. The server binary.
source "$ROOT/scripts/toolgate-bin.sh"
# The servers run in their scenario directories: a relative path must not change its meaning there.
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
case "$RUN_DIR" in /*) ;; *) RUN_DIR="$PWD/$RUN_DIR" ;; esac

free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# start_server NAME SCRIPT DIR EXTRA_FLAGS... ; sets SERVER_URL (not run in a subshell, so the pid is recorded).
SERVER_URL=""
start_server() {
  local name="$1" script="$2" dir="$3"
  shift 3
  local attempt port pid deadline
  mkdir -p "$dir/data"
  for attempt in 1 2 3; do
    port="$(free_port)"
    # In the scenario directory (see the header); `exec` keeps the recorded pid the server's.
    (cd "$(dirname "$script")" && TOOLGATE_E2E_SERVER_DIR="$dir" exec "$BIN" serve --model "script:$script" \
      --addr "127.0.0.1:$port" --trace-prompts "$dir/trace.jsonl" --data-dir "$dir/data" "$@") \
      >"$dir/server.log" 2>&1 &
    pid=$!
    SERVER_PIDS+=("$pid")
    deadline=$(( $(date +%s) + HEALTH_TIMEOUT_SECS ))
    while [ "$(date +%s)" -le "$deadline" ]; do
      if ! kill -0 "$pid" 2>/dev/null; then
        break # exited (e.g. the port was taken meanwhile): try another port
      fi
      if curl -fsS --max-time 1 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
        SERVER_URL="http://127.0.0.1:$port"
        return 0
      fi
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    log "server for $name did not become healthy on port $port (attempt $attempt); log:"
    sed 's/^/    /' "$dir/server.log" >&2 || true
  done
  return 1
}

total_pass=0
total_fail=0
total_skip=0
total_todo=0
failed_phases=()

# run_phase PHASE SCENARIO_DIR AI_PACKAGE SIGNATURE_FIELD(0|1) TEST_FILES...
run_phase() {
  local phase="$1" scenarios="$2" ai_package="$3" signature="$4"
  shift 4
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $phase "* ]]; then
    return 0
  fi
  local dir="$RUN_DIR/$phase" manifest="$RUN_DIR/$phase/servers.json" script name flag entries=""
  local -a extra more
  mkdir -p "$dir"
  log "phase $phase: starting servers"
  shopt -s nullglob
  for script in "$E2E/scenarios/$scenarios"/*.json; do
    name="$(basename "$script" .json)"
    extra=()
    [ "$signature" = 1 ] && extra+=(--signature-field)
    if [ -f "${script%.json}.args" ]; then
      read -r -a more <"${script%.json}.args"
      for flag in "${more[@]}"; do
        [[ " ${extra[*]-} " == *" $flag "* ]] || extra+=("$flag")
      done
    fi
    start_server "$name" "$script" "$dir/$name" ${extra[@]+"${extra[@]}"} || { log "cannot start $name"; return 1; }
    entries+="${entries:+,}\"$name\":{\"url\":\"$SERVER_URL\",\"trace\":\"$dir/$name/trace.jsonl\",\"dir\":\"$dir/$name\"}"
  done
  printf '{"phase":"%s","signatureField":%s,"scenarios":{%s}}\n' \
    "$phase" "$([ "$signature" = 1 ] && echo true || echo false)" "$entries" >"$manifest"

  log "phase $phase: node --test $* (ai package: $ai_package)"
  local out="$dir/node-test.out" status=0
  # In the background so a signal reaches the trap at once (and the trap stops the test run too).
  (cd "$E2E" && TOOLGATE_E2E_SERVERS="$manifest" TOOLGATE_E2E_AI_PACKAGE="$ai_package" \
    exec timeout "$PHASE_TIMEOUT_SECS" node --test --test-reporter=spec "$@") >"$out" 2>&1 &
  TEST_PID=$!
  wait "$TEST_PID" || status=$?
  TEST_PID=""
  cat "$out"
  stop_servers
  local pass fail skip todo
  pass=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$out" | tail -n 1)
  skip=$(sed -n 's/^ℹ skipped \([0-9]*\)$/\1/p' "$out" | tail -n 1)
  fail=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$out" | tail -n 1)
  # `todo` tests (known gaps, marked in the test files) run and report, but pass or fail nothing.
  todo=$(sed -n 's/^ℹ todo \([0-9]*\)$/\1/p' "$out" | tail -n 1)
  total_pass=$(( total_pass + ${pass:-0} ))
  total_fail=$(( total_fail + ${fail:-0} ))
  total_skip=$(( total_skip + ${skip:-0} ))
  total_todo=$(( total_todo + ${todo:-0} ))
  if [ "$status" -ne 0 ] || [ "${fail:-0}" -ne 0 ] || [ -z "$pass" ]; then
    failed_phases+=("$phase")
    [ -z "$pass" ] && total_fail=$(( total_fail + 1 ))
  fi
  log "phase $phase: ${pass:-?} passed, ${fail:-?} failed, ${skip:-0} skipped, ${todo:-0} todo"
}

run_phase ui-strict ui ai-v6-strict 0 test/ai-chat.test.js test/out-of-band.test.js
run_phase ui-latest ui ai-v6-latest 0 test/ai-chat.test.js test/out-of-band.test.js
run_phase ui-latest-sig ui ai-v6-latest 1 test/ai-chat.test.js test/out-of-band.test.js
run_phase ui-v7 ui ai-v7 1 test/ai-chat.test.js test/out-of-band.test.js
run_phase agui agui ai-v6-latest 0 test/agui.test.js test/tanstack.test.js
run_phase agui-sig agui ai-v6-latest 1 test/agui.test.js

log "done in $(( $(date +%s) - started )) s"
echo "e2e-node-clients: $total_pass passed, $total_fail failed, $total_skip skipped, $total_todo todo"
if [ ${#failed_phases[@]} -gt 0 ]; then
  log "failed phases: ${failed_phases[*]}"
  exit 1
fi
