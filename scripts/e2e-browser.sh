#!/usr/bin/env bash
# End-to-end tests of the web page in headless Chromium (e2e/browser).
#
# Installs Debian's chromium if /usr/bin/chromium is missing (needs root, as in CI),
# installs playwright-core (no browser download), builds `toolgate` (or runs $TOOLGATE_BIN), starts one
# `toolgate serve` per scripted model in e2e/browser/fixtures/ on free 127.0.0.1 ports
# (prompt traces and data dirs in a temp dir; a fixture NAME.json with a sibling NAME.toml
# is served with `--config NAME.toml`, its approval policy, one with a sibling NAME.tokens with
# `--tokens-file NAME.tokens`, and one with a sibling NAME.oidc signs people in with OpenID Connect at a
# mock provider (e2e/browser/oidc-provider.mjs, oauth2-mock-server) this script starts on loopback
# first; a NAME.toml naming `@SMTP_PORT@` mails an SMTP sink this script starts, see below, and one naming
# `@FIXTURES@` gets this fixtures directory's path there, for the scripts of its [[agent]] models; a sibling
# NAME.args holds more `toolgate serve` arguments, one a line, e.g. `--no-receipts`), plus one
# with the local default model when
# it has been pulled (`toolgate model pull`; TOOLGATE_E2E_REQUIRE_LOCAL=1 makes its absence
# an error, as in CI), runs the tests with `node --test` (TOOLGATE_E2E_BIN: the command, for the tests
# that run `toolgate audit verify`), and always stops the servers.
# Screenshots go to ci-artifacts/screenshots/.
#
# Usage: scripts/e2e-browser.sh [--update-docs-screenshot]
#   --update-docs-screenshot  also rewrite docs/screenshot-approval.png (1280x800)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E="$ROOT/e2e/browser"
READY_TIMEOUT_SECS="${TOOLGATE_E2E_READY_TIMEOUT:-30}" # waiting for /healthz
CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
export CHROMIUM_PATH

log() { printf '[e2e-browser] %s\n' "$*" >&2; }

update_docs=0
for arg in "$@"; do
  case "$arg" in
    --update-docs-screenshot) update_docs=1 ;;
    *) log "unknown argument: $arg"; exit 2 ;;
  esac
done

start=$(date +%s)

# 1. Chromium from Debian (never a downloaded browser).
if [ ! -x "$CHROMIUM_PATH" ]; then
  log "installing Debian chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi
log "$("$CHROMIUM_PATH" --version 2>/dev/null | head -n 1)"

# 2. playwright-core, pinned in package-lock.json.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ -f "$E2E/package-lock.json" ]; then
  (cd "$E2E" && npm ci --no-audit --no-fund --loglevel=error)
else
  (cd "$E2E" && npm install --no-audit --no-fund --loglevel=error)
fi

# 3. The server binary.
source "$ROOT/scripts/toolgate-bin.sh"

# 4. One server per fixture.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-browser.XXXXXX")"
PIDS=()
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    for logfile in "$WORK"/*.log; do
      [ -s "$logfile" ] && { log "--- $(basename "$logfile")"; tail -n 20 "$logfile" >&2; }
    done
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# N distinct free ports: all sockets are open at once, so no port is handed out twice.
free_ports() {
  node -e '
    const net = require("net");
    const sockets = Array.from({ length: Number(process.argv[1]) }, () => net.createServer());
    Promise.all(sockets.map((s) => new Promise((resolve) => s.listen(0, "127.0.0.1", resolve)))).then(() => {
      console.log(sockets.map((s) => s.address().port).join(" "));
      sockets.forEach((s) => s.close());
    });' "$1"
}

fixtures=("$E2E"/fixtures/*.json)
read -r -a ports <<<"$(free_ports "$(( ${#fixtures[@]} + 3 ))")"
entries=()

# An SMTP sink (crates/toolgate-testkit/smtp_sink.py, aiosmtpd), when a fixture's config mails people
# (its NAME.toml names `@SMTP_PORT@`): each message lands in $TOOLGATE_E2E_MAIL_DIR as NNNNNN.json with its
# decoded text. It exits when this script's end closes its standard input (a FIFO held open on fd 9).
SMTP_PORT="${ports[$(( ${#fixtures[@]} + 2 ))]}"
export TOOLGATE_E2E_MAIL_DIR="$WORK/mail"
if grep -qs '@SMTP_PORT@' "$E2E"/fixtures/*.toml; then
  mkdir -p "$TOOLGATE_E2E_MAIL_DIR"
  mkfifo "$WORK/smtp.stdin"
  python3 "$ROOT/crates/toolgate-testkit/smtp_sink.py" "$TOOLGATE_E2E_MAIL_DIR" --port "$SMTP_PORT" \
    <"$WORK/smtp.stdin" >"$WORK/smtp.log" 2>&1 &
  PIDS+=("$!")
  exec 9>"$WORK/smtp.stdin"
  for _ in $(seq 1 100); do
    grep -qx "$SMTP_PORT" "$WORK/smtp.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -qx "$SMTP_PORT" "$WORK/smtp.log" || { log "the SMTP sink did not start"; cat "$WORK/smtp.log" >&2; exit 1; }
fi

# The mock OpenID Connect provider, when a fixture signs in with it (NAME.oidc: its client and principal).
oidc_fixtures=()
for fixture in "${fixtures[@]}"; do
  [ -f "${fixture%.json}.oidc" ] && oidc_fixtures+=("${fixture%.json}.oidc")
done
ISSUER=""
if [ "${#oidc_fixtures[@]}" -gt 0 ]; then
  provider_port="${ports[$(( ${#fixtures[@]} + 1 ))]}"
  ISSUER="http://127.0.0.1:$provider_port"
  (cd "$E2E" && exec node oidc-provider.mjs "$provider_port" "${oidc_fixtures[@]}") >"$WORK/oidc-provider.log" 2>&1 &
  PIDS+=("$!")
  # The servers discover it at start: wait (bounded) until it answers.
  if ! node -e '
    const url = process.argv[1] + "/.well-known/openid-configuration";
    const deadline = Date.now() + Number(process.argv[2]) * 1000;
    (async () => {
      while (!(await fetch(url).then((r) => r.ok, () => false))) {
        if (Date.now() > deadline) { console.error("no answer from " + url); process.exit(1); }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();' "$ISSUER" "$READY_TIMEOUT_SECS"; then
    log "the mock OIDC provider did not come up within ${READY_TIMEOUT_SECS}s"
    exit 1
  fi
fi
for i in "${!fixtures[@]}"; do
  fixture="${fixtures[$i]}"
  name="$(basename "$fixture" .json)"
  port="${ports[$i]}"
  config=()
  policy="${fixture%.json}.toml"
  if [ -f "$policy" ] && grep -qE '@SMTP_PORT@|@FIXTURES@' "$policy"; then
    sed -e "s/@SMTP_PORT@/$SMTP_PORT/g" -e "s|@FIXTURES@|$E2E/fixtures|g" "$policy" >"$WORK/$name.toml"
    policy="$WORK/$name.toml"
  fi
  [ -f "$policy" ] && config=(--config "$policy")
  # A sibling NAME.tokens (a tokens file) makes that server ask for a bearer token.
  tokens="${fixture%.json}.tokens"
  [ -f "$tokens" ] && config+=(--tokens-file "$tokens")
  # A sibling NAME.oidc makes that server sign people in at the mock provider.
  oidc="${fixture%.json}.oidc"
  provider=""
  if [ -f "$oidc" ]; then
    client_id="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).clientId)' "$oidc")"
    config+=(--oidc-issuer "$ISSUER" --oidc-client-id "$client_id" --public-url "http://127.0.0.1:$port")
    provider="$ISSUER"
  fi
  # A sibling NAME.args: more serve arguments, one a line.
  args="${fixture%.json}.args"
  if [ -f "$args" ]; then
    while IFS= read -r arg; do
      [ -n "$arg" ] && config+=("$arg")
    done <"$args"
  fi
  "$BIN" serve --model "script:$fixture" --addr "127.0.0.1:$port" \
    --trace-prompts "$WORK/$name.prompts.jsonl" --data-dir "$WORK/$name-data" \
    ${config[@]+"${config[@]}"} >"$WORK/$name.log" 2>&1 &
  PIDS+=("$!")
  entries+=("$name|http://127.0.0.1:$port/|$WORK/$name.prompts.jsonl|$provider")
done
# The real local model (server name "local"): the default model, or TOOLGATE_LOCAL_MODEL.
LOCAL_MODEL="${TOOLGATE_LOCAL_MODEL:-$("$BIN" model path)}"
if [ -f "$LOCAL_MODEL" ]; then
  port="${ports[${#fixtures[@]}]}"
  "$BIN" serve --model "local:$LOCAL_MODEL" --addr "127.0.0.1:$port" \
    --trace-prompts "$WORK/local.prompts.jsonl" --data-dir "$WORK/local-data" \
    >"$WORK/local.log" 2>&1 &
  PIDS+=("$!")
  entries+=("local|http://127.0.0.1:$port/|$WORK/local.prompts.jsonl")
elif [ "${TOOLGATE_E2E_REQUIRE_LOCAL:-0}" = 1 ]; then
  log "no local model at $LOCAL_MODEL (run scripts/setup-local-model.sh)"
  exit 1
else
  log "NOTICE: no local model at $LOCAL_MODEL: the local-model scenarios are skipped"
fi
# {"<fixture>": {"url", "trace", "provider"?}} for the tests (`provider`: the OIDC issuer it signs in at).
TOOLGATE_E2E_SERVERS="$(node -e '
  const servers = {};
  for (const entry of process.argv.slice(1)) {
    const [name, url, trace, provider] = entry.split("|");
    servers[name] = provider ? { url, trace, provider } : { url, trace };
  }
  console.log(JSON.stringify(servers));' "${entries[@]}")"
export TOOLGATE_E2E_SERVERS
TOOLGATE_E2E_BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" # absolute: the tests run in e2e/browser
export TOOLGATE_E2E_BIN

# 5. Wait (bounded) until every server answers /healthz.
if ! node -e '
  const urls = Object.values(JSON.parse(process.env.TOOLGATE_E2E_SERVERS)).map((s) => s.url + "healthz");
  const deadline = Date.now() + Number(process.argv[1]) * 1000;
  const up = (url) => fetch(url).then((r) => r.ok, () => false);
  (async () => {
    for (const url of urls) {
      while (!(await up(url))) {
        if (Date.now() > deadline) { console.error("no answer from " + url); process.exit(1); }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  })();' "$READY_TIMEOUT_SECS"; then
  log "the servers did not come up within ${READY_TIMEOUT_SECS}s"
  exit 1
fi
log "${#PIDS[@]} servers ready after $(( $(date +%s) - start )) s"

# 6. The tests.
mkdir -p "$ROOT/ci-artifacts/screenshots"
export TOOLGATE_E2E_SCREENSHOTS="${TOOLGATE_E2E_SCREENSHOTS:-$ROOT/ci-artifacts/screenshots}"
if [ "$update_docs" -eq 1 ]; then
  mkdir -p "$ROOT/docs"
  export TOOLGATE_E2E_DOCS_SCREENSHOT="$ROOT/docs/screenshot-approval.png"
fi
# Bounded: a hung browser must not hang CI.
(cd "$E2E" && timeout --kill-after=10 "${TOOLGATE_E2E_TEST_TIMEOUT:-1200}" \
  node --test --test-concurrency=1 --test-timeout=300000 --test-reporter=spec tests/)
log "passed in $(( $(date +%s) - start )) s; screenshots in ci-artifacts/screenshots/"
