#!/usr/bin/env bash
# A throwaway PostgreSQL for custody's tests, benchmarks and the local
# three-server demo: the Debian packages, a cluster in a folder of your
# choice, owned by an unprivileged user, listening on loopback only.
#
#   scripts/postgres.sh install       apt-get install postgresql if initdb is missing
#   scripts/postgres.sh start DIR     initdb DIR (first time) and start it; prints the URL
#   scripts/postgres.sh url DIR       prints the URL of the cluster in DIR
#   scripts/postgres.sh stop DIR      stop the cluster in DIR (the data stays)
#
# The URL printed by start is what CUSTODY_TEST_PG and `custody --store`
# take, e.g. postgres://custody@127.0.0.1:54329/custody?sslmode=disable.
# PGPORT chooses the port (default 54329). When run as root, the cluster
# belongs to the postgres user (or nobody), since PostgreSQL refuses to run
# as root.
set -euo pipefail

pgbin() {
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v pg_ctl)")"; return; fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$d" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
  return 1
}

install() {
  if pgbin >/dev/null; then return; fi
  echo "postgres.sh: installing PostgreSQL from the Debian packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  pgbin >/dev/null || { echo "postgres.sh: postgresql installed but pg_ctl not found" >&2; exit 1; }
}

# run CMD... as the cluster's owner.
owner() {
  if [ "$(id -u)" != 0 ]; then id -un; return; fi
  if id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}
as_owner() {
  local u; u=$(owner)
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null 2>&1; then runuser -u "$u" -- "$@"; else su -s /bin/sh "$u" -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

url() {
  local dir=$1 port
  port=$(cat "$dir/port" 2>/dev/null || echo "${PGPORT:-54329}")
  echo "postgres://custody@127.0.0.1:$port/custody?sslmode=disable"
}

start() {
  local dir=$1 bin port
  install
  bin=$(pgbin)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ "$(id -u)" = 0 ]; then chown "$(owner)" "$dir"; chmod 700 "$dir"; fi
  port=${PGPORT:-$(cat "$dir/port" 2>/dev/null || echo 54329)}
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -U custody --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      as_owner "$bin/initdb" -D "$dir/data" -U custody --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    # Loopback only, synchronous commit (custody acknowledges after fsync),
    # a socket folder the owner can write.
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = on
synchronous_commit = on
max_connections = 200
shared_buffers = 128MB
CONF
    echo "$port" >"$dir/port"
  fi
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >&2 ||
      { tail -20 "$dir/server.log" >&2; exit 1; }
  fi
  if ! as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U custody -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='custody'" | grep -q 1; then
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U custody custody
  fi
  url "$dir"
}

stop() {
  local dir=$1 bin
  bin=$(pgbin) || exit 0
  [ -f "$dir/data/PG_VERSION" ] || exit 0
  if as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
  fi
}

case "${1:-}" in
install) install ;;
start) [ $# = 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$2" ;;
stop) [ $# = 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
url) [ $# = 2 ] || { echo "usage: $0 url DIR" >&2; exit 2; }; url "$2" ;;
*) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
