#!/usr/bin/env bash
# toolgate serve side by side with a stock Vercel AI SDK server: same approval-continuation bodies, same
# scripted model, the serde_json floor of each body, req/s, p50, p99 and peak RSS. Prints one markdown table.
#
#   scripts/bench-vs-ai-sdk.sh [--quick] [-- TOOLGATE_BENCH_ARGS...]
#
#   --quick   a smoke run: N = 10 and 100, 2 s per cell (under a minute; the full run takes a few minutes)
#   -- --soak 10m --sizes 1000 --connections 16   sustained load on toolgate alone, its RSS sampled every 20 s
#   -- --soak 10m --soak-stored --connections 16   the same with the stored round trip (toolgate --store sqlite)
#   after --   passed to toolgate-bench (see `toolgate-bench --help`), e.g. `-- --sizes 1000 --connections 16`
#
# What it does (loopback only, every run bounded in time and request count):
# 1. builds `toolgate` and `toolgate-bench` in release mode, and installs e2e/bench-ai-sdk with `npm ci`;
# 2. starts, on free loopback ports: `toolgate serve --store none --approval-secret S` with a script whose every
#    turn is the text "Done."; the AI SDK server (ai@6 streamText + UI message stream, a scripted model that
#    answers "Done.", toolgate's demo tools); and `toolgate serve --store sqlite` in a temporary data directory
#    with a script that asks to delete a file first (for the approval round trip with a durable store);
# 3. runs toolgate-bench against the three, which checks once per body that both servers run the approved call,
#    then measures; stops every server by its PID on every exit path.
#
# Env: TOOLGATE_LOG (toolgate's log filter; default info, as `toolgate serve` runs by default), NODE (default node),
# AI_SDK_VALIDATE=1 (the AI SDK server also runs `validateUIMessages` on each body; off by default, as in the
# stock route handler, while toolgate always parses strictly).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '5,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

QUICK=0
BENCH_ARGS=()
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

log() { echo "bench-vs-ai-sdk: $*" >&2; }
NODE="${NODE:-node}"
command -v "$NODE" >/dev/null || { log "node is needed (Node 20 or newer)"; exit 1; }
command -v npm >/dev/null || { log "npm is needed"; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench.XXXXXX")"
PIDS=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if ((status != 0)); then
    for file in "$WORK"/*.log; do
      [[ -s "$file" ]] && { log "last lines of $(basename "$file"):"; tail -n 20 "$file" >&2; }
    done
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
log "cargo build --release (toolgate, toolgate-bench)"
(cd "$ROOT" && cargo build --quiet --release -p toolgate-cli --bin toolgate -p toolgate-bench --bin toolgate-bench)
# Copies: another build replacing target/release/* mid-run must not change what is measured.
cp "$TARGET_DIR/release/toolgate" "$TARGET_DIR/release/toolgate-bench" "$WORK/"
TOOLGATE="$WORK/toolgate"
BENCH="$WORK/toolgate-bench"

log "npm ci (e2e/bench-ai-sdk)"
(cd "$ROOT/e2e/bench-ai-sdk" && npm ci --no-audit --no-fund --loglevel=error >"$WORK/npm.log" 2>&1) || {
  cat "$WORK/npm.log" >&2
  exit 1
}

# The same scripted model on both sides: every turn is the text "Done." (finish stop).
cat >"$WORK/done.json" <<'EOF'
{"turns": [[{"type": "text", "text": "Done."}]]}
EOF
# With a store: the first turn asks to delete a file (approval request), every later turn says "Done.".
cat >"$WORK/round-trip.json" <<'EOF'
{"turns": [
  [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
  [{"type": "text", "text": "Done."}]
]}
EOF
SECRET="bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# The serving line (toolgate_server::launch) is needed to learn the port, whatever TOOLGATE_LOG says.
export TOOLGATE_LOG="${TOOLGATE_LOG:-info},toolgate_server::launch=info"
export NO_COLOR=1

# wait_for FILE REGEX PID NAME: prints the first match of REGEX in FILE once it appears.
wait_for() {
  local file="$1" regex="$2" pid="$3" name="$4" match
  for _ in $(seq 1 600); do
    match="$(grep -oE "$regex" "$file" 2>/dev/null | head -n 1 || true)"
    if [[ -n "$match" ]]; then
      echo "$match"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { log "$name exited before it listened"; return 1; }
    sleep 0.1
  done
  log "$name did not listen within 60 s"
  return 1
}

start_toolgate() { # NAME SCRIPT STORE -> sets STARTED_URL, STARTED_PID
  local name="$1" script="$2" store="$3"
  "$TOOLGATE" serve --addr 127.0.0.1:0 --model "script:$script" --tools demo --store "$store" \
    --data-dir "$WORK/data-$name" --approval-secret "$SECRET" --max-body-bytes 67108864 \
    >"$WORK/$name.log" 2>&1 &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  STARTED_URL="$(wait_for "$WORK/$name.log" 'http://127\.0\.0\.1:[0-9]+' "$STARTED_PID" "$name")"
}

start_toolgate toolgate "$WORK/done.json" none
TOOLGATE_URL="$STARTED_URL" TOOLGATE_PID="$STARTED_PID"
start_toolgate toolgate-sqlite "$WORK/round-trip.json" sqlite
STORED_URL="$STARTED_URL" STORED_PID="$STARTED_PID"

PORT=0 VALIDATE="${AI_SDK_VALIDATE:-0}" "$NODE" "$ROOT/e2e/bench-ai-sdk/server.mjs" >"$WORK/ai-sdk.log" 2>&1 &
AI_SDK_PID=$!
PIDS+=("$AI_SDK_PID")
AI_SDK_PORT="$(wait_for "$WORK/ai-sdk.log" 'listening [0-9]+' "$AI_SDK_PID" "the AI SDK server" | cut -d' ' -f2)"
AI_SDK_URL="http://127.0.0.1:$AI_SDK_PORT"
log "toolgate $TOOLGATE_URL (pid $TOOLGATE_PID), toolgate sqlite $STORED_URL (pid $STORED_PID), AI SDK $AI_SDK_URL (pid $AI_SDK_PID)"

MODE_ARGS=()
if ((QUICK)); then
  MODE_ARGS=(--sizes 10,100 --duration 2s --warmup 500ms --floor-time 300ms --ceiling 1s)
fi

AI_VERSION="$("$NODE" -p 'require("'"$ROOT"'/e2e/bench-ai-sdk/node_modules/ai/package.json").version')"
REVISION="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
VALIDATION="$([[ "${AI_SDK_VALIDATE:-0}" == 1 ]] && echo 'with' || echo 'without')"
echo "toolgate ${REVISION} (release, log filter ${TOOLGATE_LOG}) vs ai@${AI_VERSION} on Node $("$NODE" --version)" \
  "(${VALIDATION} validateUIMessages)$( ((QUICK)) && echo ', --quick')"
echo
"$BENCH" \
  --toolgate "$TOOLGATE_URL" --toolgate-pid "$TOOLGATE_PID" --secret "$SECRET" \
  --ai-sdk "$AI_SDK_URL" --ai-sdk-pid "$AI_SDK_PID" \
  --toolgate-stored "$STORED_URL" --toolgate-stored-pid "$STORED_PID" --stored-label sqlite \
  "${MODE_ARGS[@]}" "${BENCH_ARGS[@]}"
