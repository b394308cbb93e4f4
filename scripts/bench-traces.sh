#!/usr/bin/env bash
# The approval round trip, stateless (`none`) and stored (`sqlite`), at 1 and 16 connections: with OpenTelemetry
# traces exported over OTLP/HTTP to a local collector and GET /metrics scraped every second ("on"), against
# neither ("off"), in the same run.
#
#   scripts/bench-traces.sh [CONVERSATIONS] [RUNS]
#
# Builds the load test (crates/toolgate-server/examples/load_test.rs) and the collector (toolgate-bench's
# `otlp_sink`: decodes each export and counts its spans) in release mode, starts the collector on a free
# loopback port, and runs each cell RUNS times (default 3; off and on alternate within a run, so a slow moment
# of the machine hits both alike), CONVERSATIONS conversations each (default 1000: a first turn and the approved
# continuation). Reports the run with the median throughput per cell, the median of the runs' own ratios
# on ÷ off (each off run and the on run right after it: a machine whose speed drifts hits both alike), and the
# spans the collector received. Loopback only, bounded by the conversation count; not part of CI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONVERSATIONS="${1:-1000}"
RUNS="${2:-3}"
cd "$ROOT"
cargo build --quiet --release -p toolgate-server --example load_test
cargo build --quiet --release -p toolgate-bench --bin otlp_sink
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
BIN="$TARGET/examples/load_test"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
log=$(mktemp)
"$TARGET/otlp_sink" "127.0.0.1:$port" >"$log" 2>&1 &
sink=$!
trap 'kill "$sink" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 50); do
  grep -q "listening on" "$log" && break
  sleep 0.1
done
grep -q "listening on" "$log" || { cat "$log" >&2; echo "the collector did not start" >&2; exit 1; }

# One load test: prints "RPS | P50 | P99 | ERRORS".
cell() {
  local mode=$1 store=$2 connections=$3 out
  local -a otel=(env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT -u OTEL_SERVICE_NAME
    -u OTEL_EXPORTER_OTLP_PROTOCOL -u OTEL_TRACES_SAMPLER -u OTEL_BSP_SCHEDULE_DELAY -u TOOLGATE_BENCH_SCRAPE)
  if [ "$mode" = on ]; then
    otel+=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" OTEL_SERVICE_NAME=toolgate-bench TOOLGATE_BENCH_SCRAPE=1)
  fi
  # A failed run (errors, a tool run twice) still reports its numbers; the errors column shows it.
  out="$("${otel[@]}" "$BIN" "$CONVERSATIONS" "$connections" "$store")" || true
  grep "^first error" <<<"$out" >&2 || true
  local rps p50 p99 errors
  rps="$(sed -n "s/.*throughput: \([0-9]*\) requests\/s.*/\1/p" <<<"$out")"
  p50="$(sed -n "s/.*p50: \([0-9.]*\) ms.*/\1 ms/p" <<<"$out")"
  p99="$(sed -n "s/.*p99: \([0-9.]*\) ms.*/\1 ms/p" <<<"$out")"
  errors="$(sed -n "s/^errors: \([0-9]*\),.*/\1/p" <<<"$out")"
  echo "$rps | $p50 | $p99 | $errors"
}

declare -A results ratios
for _ in $(seq "$RUNS"); do
  for store in none sqlite; do
    for connections in 1 16; do
      off="$(cell off "$store" "$connections")"
      on="$(cell on "$store" "$connections")"
      results["$store $connections off"]+="$off"$'\n'
      results["$store $connections on"]+="$on"$'\n'
      ratios["$store $connections"]+="$(awk -v on="${on%% *}" -v off="${off%% *}" \
        'BEGIN { if (off > 0) printf "%.3f", on / off; else print 0 }')"$'\n'
    done
  done
done

median() { printf "%s" "$1" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p"; }
echo "| round trip | connections | off: requests/s | p50 | p99 | errors | on: requests/s | p50 | p99 | errors | on ÷ off (median of the runs') |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for store in none sqlite; do
  for connections in 1 16; do
    off="$(median "${results["$store $connections off"]}")"
    on="$(median "${results["$store $connections on"]}")"
    ratio="$(median "${ratios["$store $connections"]}")"
    echo "| $store | $connections | $off | $on | $ratio |"
  done
done
echo
echo "spans received by the collector: $(curl -s "http://127.0.0.1:$port/count")"
