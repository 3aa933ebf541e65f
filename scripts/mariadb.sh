#!/usr/bin/env bash
# A throwaway MariaDB for the Tessera peer benchmark (scripts/bench-peers.sh):
# the Debian packages, a data folder of your choice, owned by an
# unprivileged user, listening on loopback only. Nothing in custody itself
# uses MariaDB; it is the coordination database of Tessera's AWS driver.
#
#   scripts/mariadb.sh install       apt-get install mariadb-server if mariadbd is missing
#   scripts/mariadb.sh start DIR     install the data folder DIR (first time) and start; prints the DSN
#   scripts/mariadb.sh dsn DIR       prints the DSN of the instance in DIR
#   scripts/mariadb.sh pid DIR       prints the server's process id
#   scripts/mariadb.sh stop DIR      stop the instance in DIR (the data stays)
#
# The DSN is Go's MySQL driver form, what Tessera's storage/aws Config.DSN
# takes: tessera:tessera@tcp(127.0.0.1:PORT)/tessera. MARIADB_PORT chooses
# the port (default 53306). Durability is MariaDB's default and the one
# comparable to custody's PostgreSQL (synchronous_commit on):
# innodb_flush_log_at_trx_commit=1, the redo log is flushed and fsynced at
# every COMMIT. The server never runs as root: as root it runs as the
# mysql user (or nobody). Debian's own mariadb service is not touched.
set -euo pipefail

have() { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; }
mariadbd_bin() { command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd; }

install() {
  if have && command -v mariadb-install-db >/dev/null 2>&1; then return; fi
  echo "mariadb.sh: installing MariaDB from the Debian packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The package's service must not start (and keep port 3306) inside a
  # container or CI: policy-rc.d already forbids it there; say so anyway.
  apt-get update -qq >&2
  apt-get install -y -qq mariadb-server >&2
  have || { echo "mariadb.sh: mariadb-server installed but mariadbd not found" >&2; exit 1; }
}

owner() {
  if [ "$(id -u)" != 0 ]; then id -un; return; fi
  if id mysql >/dev/null 2>&1; then echo mysql; else echo nobody; fi
}
as_owner() {
  local u; u=$(owner)
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null 2>&1; then runuser -u "$u" -- "$@"; else su -s /bin/sh "$u" -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

port_of() { cat "$1/port" 2>/dev/null || echo "${MARIADB_PORT:-53306}"; }
dsn() { echo "tessera:tessera@tcp(127.0.0.1:$(port_of "$1"))/tessera"; }

running() { [ -f "$1/mariadbd.pid" ] && kill -0 "$(cat "$1/mariadbd.pid")" 2>/dev/null; }

start() {
  local dir=$1 port
  install
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ "$(id -u)" = 0 ]; then chown "$(owner)" "$dir"; chmod 700 "$dir"; fi
  port=${MARIADB_PORT:-$(port_of "$dir")}
  if [ ! -d "$dir/data/mysql" ]; then
    cat >"$dir/my.cnf" <<CONF
[mariadbd]
datadir = $dir/data
socket = $dir/mariadb.sock
pid-file = $dir/mariadbd.pid
port = $port
bind-address = 127.0.0.1
skip-name-resolve
log-error = $dir/server.log
innodb_flush_log_at_trx_commit = 1
innodb_buffer_pool_size = 128M
innodb_log_file_size = 256M
max_connections = 200
CONF
    chmod 644 "$dir/my.cnf"
    as_owner mariadb-install-db --defaults-file="$dir/my.cnf" --auth-root-authentication-method=normal \
      --skip-test-db >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
  fi
  if ! running "$dir"; then
    as_owner "$(mariadbd_bin)" --defaults-file="$dir/my.cnf" >/dev/null 2>&1 &
    local i
    for i in $(seq 1 120); do
      if mariadb --no-defaults -S "$dir/mariadb.sock" -u root -e 'SELECT 1' >/dev/null 2>&1; then break; fi
      sleep 0.5
    done
    mariadb --no-defaults -S "$dir/mariadb.sock" -u root -e 'SELECT 1' >/dev/null 2>&1 ||
      { echo "mariadb.sh: the server in $dir did not come up:" >&2; tail -20 "$dir/server.log" >&2; exit 1; }
  fi
  mariadb --no-defaults -S "$dir/mariadb.sock" -u root <<SQL
CREATE DATABASE IF NOT EXISTS tessera;
CREATE USER IF NOT EXISTS 'tessera'@'127.0.0.1' IDENTIFIED BY 'tessera';
GRANT ALL ON *.* TO 'tessera'@'127.0.0.1';
SQL
  dsn "$dir"
}

stop() {
  local dir=$1 pid i
  running "$dir" || exit 0
  pid=$(cat "$dir/mariadbd.pid")
  kill "$pid"
  for i in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.5; done
  echo "mariadb.sh: the server in $dir (pid $pid) did not stop in 60 s" >&2
  exit 1
}

case "${1:-}" in
install) install ;;
start) [ $# = 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$2" ;;
stop) [ $# = 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
dsn) [ $# = 2 ] || { echo "usage: $0 dsn DIR" >&2; exit 2; }; dsn "$2" ;;
pid) [ $# = 2 ] || { echo "usage: $0 pid DIR" >&2; exit 2; }; running "$2" && cat "$2/mariadbd.pid" ;;
*) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
