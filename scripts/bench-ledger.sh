#!/usr/bin/env bash
# The approval round trip over HTTP without a store, with SQLite and with Postgres, at 1 and 16 connections.
#
#   scripts/bench-ledger.sh [CONVERSATIONS] [RUNS]
#
# Builds the load test (crates/toolgate-server/examples/load_test.rs) in release mode, starts a throwaway
# Postgres on loopback (scripts/with-postgres.sh), and runs, for each store and concurrency, CONVERSATIONS
# conversations (default 1000): a first turn (an approval request) and the approved continuation (the tool
# runs, the model answers). Each cell runs RUNS times (default 3; the stores alternate between runs, so a slow
# moment of the machine hits every store alike) and reports the run with the median throughput. Loopback
# only, bounded by the conversation count. Prints one table (markdown). `sqlite-full` is SQLite with
# `--store-sync full` (every commit synced to the disk).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONVERSATIONS="${1:-1000}"
RUNS="${2:-3}"
cd "$ROOT"
cargo build --quiet --release -p toolgate-server --example load_test
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/load_test"
export BIN CONVERSATIONS RUNS

bash scripts/with-postgres.sh bash -c '
  set -euo pipefail
  stores=(none sqlite sqlite-full "$TOOLGATE_TEST_POSTGRES_URL")
  declare -A results
  status=0
  for run in $(seq "$RUNS"); do
    for store in "${stores[@]}"; do
      for connections in 1 16; do
        case "$store" in
          sqlite-full) out="$(TOOLGATE_STORE_SYNC=full "$BIN" "$CONVERSATIONS" "$connections" sqlite)" || status=1 ;;
          *) out="$("$BIN" "$CONVERSATIONS" "$connections" "$store")" || status=1 ;;
        esac
        grep "^first error" <<<"$out" >&2 || true
        rps="$(sed -n "s/.*throughput: \([0-9]*\) requests\/s.*/\1/p" <<<"$out")"
        p50="$(sed -n "s/.*p50: \([0-9.]*\) ms.*/\1 ms/p" <<<"$out")"
        p99="$(sed -n "s/.*p99: \([0-9.]*\) ms.*/\1 ms/p" <<<"$out")"
        errors="$(sed -n "s/^errors: \([0-9]*\),.*/\1/p" <<<"$out")"
        results["$store $connections"]+="$rps | $p50 | $p99 | $errors"$'"'"'\n'"'"'
      done
    done
  done
  echo "| store | connections | requests/s | p50 | p99 | errors |"
  echo "|---|---:|---:|---:|---:|---:|"
  for store in "${stores[@]}"; do
    for connections in 1 16; do
      median="$(printf "%s" "${results["$store $connections"]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")"
      name="$store"
      case "$store" in postgres*) name=postgres ;; esac
      echo "| $name | $connections | $median |"
    done
  done
  exit "$status"
'
