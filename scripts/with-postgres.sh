#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL server, then removes it.
#
#   bash scripts/with-postgres.sh cargo test -p toolgate-store
#
# Installs Debian's `postgresql` package if `initdb` is missing, creates a
# cluster in a fresh temp dir (as an unprivileged user: `toolgate-pg`, created
# if needed, when run as root), starts it on 127.0.0.1 on a free port with
# trust auth on loopback only, creates the database `toolgate`, and runs the
# command with
#   TOOLGATE_TEST_POSTGRES_URL=postgres://USER@127.0.0.1:PORT/toolgate
#   TOOLGATE_TEST_REQUIRE_POSTGRES=1
#   TOOLGATE_TEST_POSTGRES_CTL=A SCRIPT  (`$TOOLGATE_TEST_POSTGRES_CTL stop` and `... start` stop the
#                                         cluster and start it again on the same port, for the tests
#                                         of what a server does while its database is down)
# The server is stopped and the temp dir removed on every exit path; the
# script exits with the command's status. The command runs in the foreground
# (it keeps the terminal): Ctrl-C or a signal to the process group stops both
# at once; a TERM sent to this script's PID alone takes effect (and cleans up)
# when the command returns.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi

say() { echo "with-postgres: $*" >&2; }

# The newest installed server's bin directory.
find_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
      echo "$dir"
      return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"
    return 0
  fi
  return 1
}

if ! bindir=$(find_bindir); then
  say "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q postgresql
  bindir=$(find_bindir)
fi

# PostgreSQL refuses to run as root: use a system user then.
if [ "$(id -u)" -eq 0 ]; then
  pguser=toolgate-pg
  if ! id "$pguser" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$pguser" 2>/dev/null ||
      id "$pguser" >/dev/null 2>&1 || pguser=nobody
  fi
  as_pg() { runuser -u "$pguser" -- "$@"; }
  pguser_prefix="runuser -u $pguser --"
else
  pguser=$(id -un)
  as_pg() { "$@"; }
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-pg.XXXXXX")
data="$tmp/data"
sock="$tmp/sock"
mkdir -p "$sock"
if [ "$(id -u)" -eq 0 ]; then
  chown -R "$pguser" "$tmp"
fi

stop_server() {
  if [ -f "$data/postmaster.pid" ]; then
    if ! as_pg "$bindir/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1; then
      local pid
      pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
      if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
          kill -0 "$pid" 2>/dev/null || break
          sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
  fi
}

cleanup() {
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

as_pg "$bindir/initdb" -D "$data" -U "$pguser" -E UTF8 --locale=C --auth=trust --no-sync >"$tmp/initdb.log" 2>&1 || {
  cat "$tmp/initdb.log" >&2
  say "initdb failed"
  exit 1
}
# Trust, but only over the socket in the temp dir and on IPv4 loopback.
cat >"$data/pg_hba.conf" <<'EOF'
local all all               trust
host  all all 127.0.0.1/32  trust
EOF

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
  else
    echo $((20000 + RANDOM % 40000))
  fi
}

# The port may be taken between picking and binding: try a few.
started=
for _ in 1 2 3 4 5; do
  port=$(free_port)
  options="-c listen_addresses=127.0.0.1 -p $port -k $sock -c max_connections=300 -c fsync=off"
  options="$options -c synchronous_commit=off -c full_page_writes=off -c dynamic_shared_memory_type=mmap"
  if as_pg "$bindir/pg_ctl" -D "$data" -l "$tmp/server.log" -o "$options" -w -t 60 start >/dev/null 2>&1; then
    started=1
    break
  fi
  stop_server
done
if [ -z "$started" ]; then
  cat "$tmp/server.log" >&2 || true
  say "the server did not start"
  exit 1
fi

ready=
for _ in $(seq 1 100); do
  if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  cat "$tmp/server.log" >&2 || true
  say "the server does not answer"
  exit 1
fi

"$bindir/createdb" -h 127.0.0.1 -p "$port" -U "$pguser" toolgate

# `stop` or `start` the cluster as it was started (same port, same options).
cat >"$tmp/pg-ctl.sh" <<CTL
#!/usr/bin/env bash
set -euo pipefail
case "\${1:-}" in
  stop) ${pguser_prefix:-} "$bindir/pg_ctl" -D "$data" -m fast -w -t 30 stop ;;
  start) ${pguser_prefix:-} "$bindir/pg_ctl" -D "$data" -l "$tmp/server.log" -o "$options" -w -t 60 start ;;
  *) echo "usage: \$0 stop|start" >&2; exit 2 ;;
esac
CTL
chmod 755 "$tmp/pg-ctl.sh"

export TOOLGATE_TEST_POSTGRES_URL="postgres://$pguser@127.0.0.1:$port/toolgate"
export TOOLGATE_TEST_POSTGRES_CTL="$tmp/pg-ctl.sh"
export TOOLGATE_TEST_REQUIRE_POSTGRES=1
say "$("$bindir/postgres" --version | sed "s/^postgres (PostgreSQL) /PostgreSQL /") at $TOOLGATE_TEST_POSTGRES_URL"

set +e
"$@"
status=$?
set -e
exit "$status"
