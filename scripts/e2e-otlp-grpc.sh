#!/usr/bin/env bash
# End-to-end test of OpenTelemetry traces over OTLP/gRPC (the OTLP/HTTP ones are tested in
# crates/toolgate-cli/tests/traces.rs): a gRPC collector (e2e/otlp-grpc/sink.py, on grpcio and
# opentelemetry-proto installed from PyPI into a temporary virtual environment) on a free loopback port,
# `toolgate serve` exporting to it with OTEL_EXPORTER_OTLP_PROTOCOL=grpc and a batch delay of a minute, one
# chat request that asks for an approval, then SIGTERM: the spans arrive because the server flushes them as
# it shuts down.
#
# Usage: scripts/e2e-otlp-grpc.sh   (TOOLGATE_BIN=path skips the build)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[e2e-otlp-grpc] %s\n' "$*" >&2; }
source "$ROOT/scripts/toolgate-bin.sh"

WORK="$(mktemp -d)"
SINK_PID=""
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  if [ -n "$SINK_PID" ]; then kill "$SINK_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
check() {
  if grep -qF -- "$2" "$WORK/sink.log"; then
    passed=$((passed + 1))
    log "ok: $1"
  else
    failed=$((failed + 1))
    log "FAILED: $1 (no \`$2\` among what the collector received:)"
    sed 's/^/    | /' "$WORK/sink.log" >&2
  fi
}

log "installing grpcio and opentelemetry-proto into a virtual environment"
if ! python3 -m venv "$WORK/venv" >/dev/null 2>&1; then
  # Debian's python3 makes virtual environments with its python3-venv package.
  log "installing python3-venv"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  rm -rf "$WORK/venv"
  python3 -m venv "$WORK/venv"
fi
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check grpcio opentelemetry-proto

"$WORK/venv/bin/python" "$ROOT/e2e/otlp-grpc/sink.py" 300 >"$WORK/sink.log" 2>&1 &
SINK_PID=$!
for _ in $(seq 1 100); do
  grep -q "^port " "$WORK/sink.log" && break
  sleep 0.1
done
PORT="$(awk '/^port /{print $2}' "$WORK/sink.log")"
[ -n "$PORT" ] || { cat "$WORK/sink.log" >&2; log "the collector did not start"; exit 1; }

OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
  OTEL_SERVICE_NAME=toolgate-e2e OTEL_BSP_SCHEDULE_DELAY=60000 TOOLGATE_LOG=info \
  "$BIN" serve --addr 127.0.0.1:0 --data-dir "$WORK/data" \
  --model "script:$ROOT/examples/request-approval/script.json" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 300); do
  URL="$(grep -o 'serving on http://[0-9.:]*' "$WORK/server.log" | head -n 1 | sed 's/^serving on //')" || true
  [ -n "$URL" ] && break
  sleep 0.1
done
[ -n "$URL" ] || { cat "$WORK/server.log" >&2; log "the server did not start"; exit 1; }

body='{"id": "chat-1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}]}'
curl -sf -H 'content-type: application/json' -d "$body" "$URL/api/chat" >"$WORK/chat.txt"
grep -q '"type":"tool-approval-request"' "$WORK/chat.txt" || { cat "$WORK/chat.txt" >&2; log "no approval request"; }

kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
SERVER_PID=""
sleep 1

check "the chat request's span, by route template" "span toolgate-e2e POST /api/chat"
check "the model call's span" "span toolgate-e2e chat scripted"
check "the approval's span" "span toolgate-e2e approval requested"

echo "e2e-otlp-grpc: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
