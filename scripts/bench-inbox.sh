#!/usr/bin/env bash
# The inbox at scale, on SQLite and on Postgres: 100,000 pending approvals over 10,000 conversations and
# 50 approvers (10 groups of 5, quorum 2), then GET /api/approvals?state=pending&limit=50, first and deciding
# votes through POST /api/approvals/{id}, and 1,000 open GET /api/approvals/stream connections (the server's
# RSS before, held 20 s while votes land, after). Prints one markdown table.
#
#   scripts/bench-inbox.sh [--sqlite | --postgres] [--quick] [-- INBOX_BENCH_ARGS...]
#
#   --sqlite     SQLite only;  --postgres   Postgres only (default: both, SQLite first)
#   --quick      a smoke run: 10,000 approvals, 200 streams held 6 s (about a minute per store)
#   after --     passed to inbox_bench (see `inbox_bench --help`), e.g. `-- --streams 500 --hold 60s`
#
# What it does (loopback only; every process it starts is stopped by its PID on every exit path):
# 1. builds `toolgate` and `inbox_bench` in release mode (once) and copies them to a temporary directory;
# 2. SQLite: runs inbox_bench with a fresh SQLite file in that directory; inbox_bench fills the store through
#    ApprovalStore::issue, writes a tokens file and the [groups] config, starts `toolgate serve` on a free
#    loopback port (a scripted model: nothing needs the network), measures, and stops it;
# 3. Postgres: the same against a throwaway PostgreSQL server (scripts/with-postgres.sh, which installs
#    Debian's postgresql if needed).
# Env: TOOLGATE_LOG (the server's log filter; default info, as `toolgate serve` runs by default).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '7,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
log() { echo "bench-inbox: $*" >&2; }

# run_bench LABEL STORE ROWS_ONLY: one inbox_bench run in its own work directory (under $WORK); it prints
# its table (or only its rows) to stdout. Its PID and its server's are stopped by `cleanup` if it is cut off.
run_bench() {
  local label="$1" store="$2" rows_only="$3" dir="$WORK/$1" extra=()
  mkdir -p "$dir"
  ((rows_only)) && extra+=(--rows-only)
  "$BENCH" --toolgate "$TOOLGATE" --store "$store" --work-dir "$dir" --label "$label" \
    "${MODE_ARGS[@]}" "${extra[@]}" "${BENCH_ARGS[@]}" &
  local pid=$!
  echo "$pid" >"$dir/bench.pid"
  wait "$pid"
}

# stop_pid FILE NAME: stops the process whose PID FILE holds, if it is still NAME (TERM, then KILL after 10 s).
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
  for dir in "$WORK"/*/; do
    [[ -d "$dir" ]] || continue
    stop_pid "$dir/bench.pid" inbox_bench
    stop_pid "$dir/toolgate.pid" toolgate
    if ((status != 0)) && [[ -s "$dir/toolgate.log" ]]; then
      log "last lines of $(basename "$dir")/toolgate.log:"
      tail -n 20 "$dir/toolgate.log" >&2
    fi
  done
  # The outer run owns the directory; the run inside with-postgres only its part of it.
  [[ -n "${INBOX_BENCH_INNER:-}" ]] || rm -rf "$WORK"
  exit "$status"
}

# Inside scripts/with-postgres.sh (the script runs itself there): the Postgres run alone.
if [[ "${1:-}" == --inner-postgres ]]; then
  INBOX_BENCH_INNER=1
  read -r -a MODE_ARGS <<<"$INBOX_BENCH_MODE"
  BENCH_ARGS=("${@:2}")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  run_bench postgres "$TOOLGATE_TEST_POSTGRES_URL" "$INBOX_BENCH_ROWS_ONLY"
  exit 0
fi

STORES=(sqlite postgres)
QUICK=0
BENCH_ARGS=()
while (($#)); do
  case "$1" in
    --sqlite) STORES=(sqlite) ;;
    --postgres) STORES=(postgres) ;;
    --quick) QUICK=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
MODE_ARGS=()
if ((QUICK)); then
  MODE_ARGS=(--approvals 10000 --conversations 1000 --list-requests 200 --votes 100 --streams 200 --hold 6s)
fi

# 1,000 streams need 1,000 sockets in the server and 1,000 in the bench.
if (($(ulimit -n) < 4096)); then ulimit -n "$(ulimit -Hn)" 2>/dev/null || true; fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench-inbox.XXXXXX")"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
log "cargo build --release (toolgate, inbox_bench)"
(cd "$ROOT" && cargo build --quiet --release -p toolgate-cli --bin toolgate -p toolgate-bench --bin inbox_bench)
# Copies: another build replacing target/release/* mid-run must not change what is measured.
cp "$TARGET_DIR/release/toolgate" "$TARGET_DIR/release/inbox_bench" "$WORK/"
TOOLGATE="$WORK/toolgate"
BENCH="$WORK/inbox_bench"
REVISION="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "toolgate ${REVISION} (release, log filter ${TOOLGATE_LOG:-info})$( ((QUICK)) && echo ', --quick')"

rows_only=0
for store in "${STORES[@]}"; do
  case "$store" in
    sqlite) log "SQLite"; run_bench sqlite sqlite "$rows_only" ;;
    postgres)
      log "Postgres (scripts/with-postgres.sh)"
      export WORK BENCH TOOLGATE INBOX_BENCH_MODE="${MODE_ARGS[*]}" INBOX_BENCH_ROWS_ONLY="$rows_only"
      bash "$ROOT/scripts/with-postgres.sh" bash "${BASH_SOURCE[0]}" --inner-postgres "${BENCH_ARGS[@]}"
      ;;
  esac
  rows_only=1
done
