# Sourced by the scripts that run the `toolgate` command: sets BIN to it.
#
# With TOOLGATE_BIN set (CI builds the command once, with the tests, and passes it on) that file is used
# as it is; otherwise `cargo build -p toolgate-cli` builds it into the target directory. A separate build
# would compile the workspace a second time: `cargo test --workspace` unifies the dev-dependencies'
# features, so its artifacts differ from a plain build's.
# Expects ROOT (the repository) and a `log` function.

if [ -n "${TOOLGATE_BIN:-}" ]; then
  BIN="$TOOLGATE_BIN"
else
  log "cargo build -p toolgate-cli (the first build compiles llama.cpp: several minutes on 2 cores)"
  (cd "$ROOT" && cargo build -p toolgate-cli --locked)
  BIN="${CARGO_TARGET_DIR:-target}"
  case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
  BIN="$BIN/debug/toolgate"
fi
[ -x "$BIN" ] || { log "no toolgate command at $BIN"; exit 1; }
