#!/usr/bin/env bash
# The call-gating API under load (SQLite): POST /api/calls for an allowed call beside the stateless chat round
# trip at 16 connections, then 10,000 calls long-polling at once (GET /api/calls/{id}?wait=60s): the server's RSS
# and CPU while they wait, and each deciding vote's time to its waiting client. Prints one markdown table.
#
#   scripts/bench-calls.sh [--quick] [-- CALLS_BENCH_ARGS...]
#
#   --quick      a smoke run: 2,000 requests, 1,000 long polls held 3 s, 100 votes
#   after --     passed to calls_bench (see `calls_bench --help`), e.g. `-- --waiters 20000`
#
# What it does (loopback only; every process it starts is stopped by its PID on every exit path): builds `toolgate`
# and `calls_bench` in release mode, copies them to a temporary directory, and runs calls_bench there; calls_bench
# starts `toolgate serve` twice on free loopback ports (`--store none` for the chat, `--store sqlite` for the calls;
# a scripted model: nothing needs the network) and stops each when done. Not run by CI's tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '7,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
log() { echo "bench-calls: $*" >&2; }

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
MODE_ARGS=()
((QUICK)) && MODE_ARGS=(--requests 2000 --warmup 200 --waiters 1000 --hold 3s --votes 100)

# 10,000 long polls need 10,000 sockets in the server and 10,000 in the bench.
if (($(ulimit -n) < 32768)); then ulimit -n "$(ulimit -Hn)" 2>/dev/null || true; fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench-calls.XXXXXX")"
stop_pid() {
  local file="$1" name="$2" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  [[ "$(ps -p "$pid" -o comm= 2>/dev/null || true)" == "$name" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid "$WORK/bench.pid" calls_bench
  stop_pid "$WORK/run/stateless.pid" toolgate
  stop_pid "$WORK/run/calls.pid" toolgate
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
log "cargo build --release --no-default-features (toolgate without the local model, calls_bench)"
(cd "$ROOT" && cargo build --quiet --release --no-default-features -p toolgate-cli --bin toolgate -p toolgate-bench --bin calls_bench)
cp "$TARGET_DIR/release/toolgate" "$TARGET_DIR/release/calls_bench" "$WORK/"
REVISION="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "toolgate ${REVISION} (release, log filter ${TOOLGATE_LOG:-info})$( ((QUICK)) && echo ', --quick')"
"$WORK/calls_bench" --toolgate "$WORK/toolgate" --work-dir "$WORK/run" "${MODE_ARGS[@]}" "${BENCH_ARGS[@]}" &
echo $! >"$WORK/bench.pid"
wait "$!"
