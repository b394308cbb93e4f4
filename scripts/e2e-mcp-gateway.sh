#!/usr/bin/env bash
# Interop tests of `toolgate mcp-gateway`: real MCP clients in front of real MCP servers (loopback only).
#
#   scripts/e2e-mcp-gateway.sh [--no-install] [--only node|python]
#
# 1. `npm ci` in e2e/mcp-gateway (pinned: @modelcontextprotocol/sdk, @modelcontextprotocol/server-filesystem).
# 2. `cargo build -p toolgate-cli` (or $TOOLGATE_BIN, when set).
# 3. `node --test` on e2e/mcp-gateway/test/*.test.mjs: the official TypeScript SDK client against the gateway
#    (over stdio and streamable HTTP) in front of the reference filesystem server and e2e/mcp-gateway/
#    counting-server.mjs: elicitation (approve, approve_always, deny, decline, cancel), [[rule]] denials,
#    out-of-band approvals through `toolgate approvals` on a SQLite store (held calls, pending results,
#    retries, exactly-once upstream runs, kill -9 and restart), progress notifications while held.
#    Each test starts its own gateways and kills them (and what they started) by PID.
# 4. e2e/mcp-gateway/python_client.py: the PyPI `mcp` client (pinned below, installed into a venv in the run
#    directory) over stdio, approving one write and denying another by elicitation.
#
# --no-install: no `npm ci` (node_modules must be there); the Python check uses $TOOLGATE_E2E_VENV (a venv
# with mcp==$MCP_PY_VERSION) when set, and otherwise still installs its venv (it has no other way to run).
# --only: just the node tests or just the Python check.
#
# Exit status: non-zero if anything failed. Prints `e2e-mcp-gateway: N passed, M failed` at the end (the node
# tests, plus the Python check as one test).
# Environment: TOOLGATE_E2E_KEEP=1 keeps the run directory (gateway logs, configs, stores; kept on failure too),
# TOOLGATE_E2E_VENV reuses a venv for the Python check.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E="$ROOT/e2e/mcp-gateway"
MCP_PY_VERSION="2.3.0"
NODE_TIMEOUT_SECS="${TOOLGATE_E2E_NODE_TIMEOUT:-600}"
PYTHON_TIMEOUT_SECS="${TOOLGATE_E2E_PYTHON_TIMEOUT:-180}"

log() { printf '[e2e-mcp-gateway] %s\n' "$*" >&2; }

install=1
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --only)
      [ $# -ge 2 ] || { log "--only needs node or python"; exit 2; }
      only="$2"
      shift
      ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) log "unknown argument: $1"; exit 2 ;;
  esac
  shift
done
case "$only" in ""|node|python) ;; *) log "--only takes node or python, not $only"; exit 2 ;; esac

for tool in node npm python3; do
  command -v "$tool" >/dev/null 2>&1 || { log "missing $tool"; exit 1; }
done

RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-mcp-gateway.XXXXXX")"
case "$RUN_DIR" in /*) ;; *) RUN_DIR="$PWD/$RUN_DIR" ;; esac
CHILD_PIDS=()

cleanup() {
  local status=$?
  local pid
  for pid in "${CHILD_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${CHILD_PIDS[@]}"; do
    # Bounded: SIGKILL whatever has not stopped after ~5 s.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "${TOOLGATE_E2E_KEEP:-0}" = 1 ] || [ "$status" -ne 0 ]; then
    log "run directory kept: $RUN_DIR"
  else
    rm -rf "$RUN_DIR"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_child OUT CMD...: runs CMD in the background (so a signal reaches the trap at once, and the trap stops
# it), its output to the file OUT (`-`: this script's own), and waits for it.
run_child() {
  local out="$1" status=0
  shift
  if [ "$out" = - ]; then
    "$@" &
  else
    "$@" >"$out" 2>&1 &
  fi
  CHILD_PIDS+=("$!")
  wait "$!" || status=$?
  CHILD_PIDS=()
  return "$status"
}

started=$(date +%s)

# 1. Node packages, exactly as locked.
# (The Python check needs them too: the reference filesystem server.)
if [ "$install" = 1 ]; then
  if [ -f "$E2E/package-lock.json" ]; then
    log "npm ci in e2e/mcp-gateway"
    (cd "$E2E" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
  else
    log "npm install in e2e/mcp-gateway (no package-lock.json)"
    (cd "$E2E" && timeout 600 npm install --no-audit --no-fund --loglevel=error)
  fi
fi
[ -d "$E2E/node_modules" ] || { log "e2e/mcp-gateway/node_modules is missing: run without --no-install"; exit 1; }

# 2. The gateway binary.
source "$ROOT/scripts/toolgate-bin.sh"
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
"$BIN" mcp-gateway --help >/dev/null 2>&1 || { log "$BIN has no working \`mcp-gateway\` subcommand"; exit 1; }

passed=0
failed=0
failures=()

# 3. The node tests.
if [ "$only" != python ]; then
  log "node --test (TypeScript SDK client; gateway $BIN)"
  out="$RUN_DIR/node-test.out"
  mkdir -p "$RUN_DIR/node"
  status=0
  run_child "$out" bash -c 'cd "$1" && shift && exec "$@"' _ "$E2E" \
    env TOOLGATE_BIN="$BIN" TOOLGATE_E2E_RUN_DIR="$RUN_DIR/node" \
    timeout "$NODE_TIMEOUT_SECS" node --test --test-reporter=spec \
    test/elicitation.test.mjs test/out-of-band.test.mjs test/progress.test.mjs || status=$?
  cat "$out"
  pass=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$out" | tail -n 1)
  fail=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$out" | tail -n 1)
  passed=$((passed + ${pass:-0}))
  failed=$((failed + ${fail:-0}))
  if [ -z "$pass" ]; then
    failed=$((failed + 1)) # the runner did not finish (a crash or the timeout)
  fi
  if [ "$status" -ne 0 ] || [ "${fail:-0}" -ne 0 ] || [ -z "$pass" ]; then
    failures+=("node (exit $status)")
  fi
  log "node: ${pass:-?} passed, ${fail:-?} failed"
fi

# 4. The Python check.
if [ "$only" != node ]; then
  python_ok=1
  venv="${TOOLGATE_E2E_VENV:-}"
  if [ -n "$venv" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null)" = "$MCP_PY_VERSION" ]; then
    log "Python check: reusing $venv"
  else
    [ -n "$venv" ] && log "TOOLGATE_E2E_VENV=$venv has no mcp==$MCP_PY_VERSION: installing one"
    [ "$install" = 0 ] && log "--no-install: the Python check still needs mcp==$MCP_PY_VERSION; installing it into the run directory"
    venv="$RUN_DIR/venv"
    log "python3 -m venv + pip install mcp==$MCP_PY_VERSION"
    if ! { python3 -m venv "$venv" &&
      timeout 600 "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION"; } >"$RUN_DIR/pip.log" 2>&1; then
      cat "$RUN_DIR/pip.log" >&2
      log "cannot install mcp==$MCP_PY_VERSION"
      python_ok=0
    fi
  fi
  if [ "$python_ok" = 1 ]; then
    log "python_client.py (PyPI mcp $MCP_PY_VERSION)"
    run_child - timeout "$PYTHON_TIMEOUT_SECS" "$venv/bin/python" "$E2E/python_client.py" \
      --bin "$BIN" --workdir "$RUN_DIR/python" || python_ok=0
  fi
  if [ "$python_ok" = 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("python")
  fi
fi

log "done in $(( $(date +%s) - started )) s"
[ "${#failures[@]}" -gt 0 ] && log "failed: ${failures[*]}"
echo "e2e-mcp-gateway: $passed passed, $failed failed"
[ "${#failures[@]}" -eq 0 ] && [ "$failed" -eq 0 ]
