#!/usr/bin/env bash
# custody beside a log on a database, in one run on this machine:
#
#   custody on Badger           (embedded, the default store)
#   custody on PostgreSQL       (Debian's, a throwaway cluster: scripts/postgres.sh)
#   Tessera v1.0.4, AWS driver  (MySQL-coordinated, S3 for tiles; here
#                                MariaDB from Debian, scripts/mariadb.sh, and
#                                versitygw, scripts/s3.sh)
#
# with the same clients, and prints one table; docs/BENCHMARKS.md ("PostgreSQL
# and Tessera's AWS driver on a database") explains each column and has the figures.
#
#   scripts/bench-peers.sh                 # default sizes, a few minutes on 2 cores
#   scripts/bench-peers.sh --quick         # small sizes, to check it runs (~1-2 min)
#   CLIENTS=64 CEILING_CLIENTS=4096 scripts/bench-peers.sh
#   KEEP=1 scripts/bench-peers.sh          # keep the folder with every JSON report
#
# Installs what is missing (PostgreSQL and MariaDB from apt, versitygw and
# Tessera from the Go module proxy), starts each server on loopback in a
# temporary folder as an unprivileged user, and stops them at the end.
# Ports: PEERS_PG_PORT (54339), PEERS_MARIADB_PORT (53307), PEERS_S3_PORT (57070).
# Not part of .ci/run (it installs MariaDB and builds Tessera); .ci/peers
# runs it with --quick.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
[ "${1:-}" = "--quick" ] && quick=1
CLIENTS=${CLIENTS:-64}
CEILING_CLIENTS=${CEILING_CLIENTS:-4096}
if [ $quick = 1 ]; then
  AUTH_N=${AUTH_N:-4000} HTTP_N=${HTTP_N:-3000} LEAVES=${LEAVES:-5000} CEILING_LEAVES=${CEILING_LEAVES:-20000}
  T_SLOW=${T_SLOW:-300} T_FAST=${T_FAST:-20000}
else
  AUTH_N=${AUTH_N:-40000} HTTP_N=${HTTP_N:-20000} LEAVES=${LEAVES:-20000} CEILING_LEAVES=${CEILING_LEAVES:-100000}
  # Tessera's AWS driver publishes a checkpoint at most once a second, so
  # CLIENTS clients waiting for publication append about CLIENTS/s.
  T_SLOW=${T_SLOW:-2000} T_FAST=${T_FAST:-100000}
fi

for t in go jq psql; do
  command -v $t >/dev/null 2>&1 || [ $t = psql ] || { echo "bench-peers.sh: $t is needed" >&2; exit 1; }
done
scripts/postgres.sh install
scripts/mariadb.sh install
s3bin=$(scripts/s3.sh)

work=$(mktemp -d /tmp/custody-peers.XXXXXX)
chmod 755 "$work"
s3pid=""
cleanup() {
  [ -n "$s3pid" ] && kill "$s3pid" 2>/dev/null || true
  scripts/mariadb.sh stop "$work/mariadb" >/dev/null 2>&1 || true
  scripts/postgres.sh stop "$work/pg" >/dev/null 2>&1 || true
  if [ "${KEEP:-0}" = 1 ]; then echo "bench-peers.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "== building custody and the Tessera peer (bench/peers/tessera, its own module)" >&2
go build -o "$work/custody" ./cmd/custody
(cd bench/peers/tessera && go build -o "$work/tessera-peer" .)

echo "== starting PostgreSQL, MariaDB and versitygw on loopback" >&2
pg=$(PGPORT=${PEERS_PG_PORT:-54339} scripts/postgres.sh start "$work/pg")
# WAL flush times in pg_stat_wal, for "what bounds the PostgreSQL figure".
psql "$pg" -qtAc "ALTER SYSTEM SET track_wal_io_timing = on" -c "SELECT pg_reload_conf()" >/dev/null
mysql=$(MARIADB_PORT=${PEERS_MARIADB_PORT:-53307} scripts/mariadb.sh start "$work/mariadb")
mpid=$(scripts/mariadb.sh pid "$work/mariadb")
s3port=${PEERS_S3_PORT:-57070}
s3key=peers$RANDOM s3secret=secret$RANDOM$RANDOM
mkdir -p "$work/s3"
"$s3bin/versitygw" --access "$s3key" --secret "$s3secret" --port "127.0.0.1:$s3port" posix "$work/s3" >"$work/versitygw.log" 2>&1 &
s3pid=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$s3port") 2>/dev/null && break
  sleep 0.1
done

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%FT%TZ)

tessera() {
  "$work/tessera-peer" --driver aws --mysql "$mysql" --s3-endpoint "http://127.0.0.1:$s3port" \
    --s3-access-key "$s3key" --s3-secret "$s3secret" --watch mariadbd="$mpid" --watch versitygw="$s3pid" "$@" \
    2>>"$work/tessera.log"
}

echo "== custody, Badger and PostgreSQL: ceiling, authorised in process, HTTP at $CLIENTS clients, log-only at $CLIENTS clients" >&2
"$work/custody" bench --phases ceiling,auth,http,logonly --appends "$AUTH_N" --http-appends "$HTTP_N" \
  --http-clients "$CLIENTS" --leaves "$LEAVES" --clients "$CLIENTS" --read-for 2s --store "$pg" \
  --tmpdir "$work" --json >"$work/custody-$CLIENTS.json"
echo "== Tessera AWS driver on MariaDB + versitygw: $T_SLOW entries from $CLIENTS clients, each waiting for publication" >&2
tessera --entries "$T_SLOW" --inflight "$CLIENTS" --await published >"$work/tessera-$CLIENTS.json"
echo "== custody log-only, Badger and PostgreSQL, $CEILING_CLIENTS clients" >&2
"$work/custody" bench --phases logonly --leaves "$CEILING_LEAVES" --clients "$CEILING_CLIENTS" --store "$pg" \
  --tmpdir "$work" --json >"$work/custody-$CEILING_CLIENTS.json"
echo "== Tessera AWS driver: $T_FAST entries from $CEILING_CLIENTS clients, waiting for publication, then for the future only" >&2
tessera --entries "$T_FAST" --inflight "$CEILING_CLIENTS" --await published >"$work/tessera-$CEILING_CLIENTS.json"
tessera --entries "$T_FAST" --inflight "$CEILING_CLIENTS" --await future >"$work/tessera-$CEILING_CLIENTS-future.json"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# One table. Columns: what, clients, appends/s, p50, p99, CPU per append of
# the benchmark process (clients included) and of the servers.
echo "custody beside Tessera on a database — $started, $(nproc) cores, load average $load_before before, $load_after after"
echo
{
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "log and store" "what is appended" clients appends/s "p50 ms" "p99 ms" "CPU µs/append, process" "CPU µs/append, servers"
  c64="$work/custody-$CLIENTS.json" cc="$work/custody-$CEILING_CLIENTS.json"
  row() { jq -r "$1" "$2"; }
  row '"custody, Badger\tauthorised, over HTTP\t\(.http_appends.inflight)\t\(.http_appends.per_sec|floor)\t\(.http_appends.p50_ms*10|round/10)\t\(.http_appends.p99_ms*10|round/10)\t\(.http_appends.cpu_us_per_op|floor)\t-"' "$c64"
  row '"custody, PostgreSQL\tauthorised, over HTTP\t\(.postgres.http_appends.inflight)\t\(.postgres.http_appends.per_sec|floor)\t\(.postgres.http_appends.p50_ms*10|round/10)\t\(.postgres.http_appends.p99_ms*10|round/10)\t\(.postgres.http_appends.cpu_us_per_op|floor)\tpostgres \(.postgres.server.http.cpu_us_per_op // 0|floor)"' "$c64"
  row '"custody, Badger\traw 400 B leaves\t\(.log_only_appends.inflight)\t\(.log_only_appends.per_sec|floor)\t\(.log_only_appends.p50_ms*10|round/10)\t\(.log_only_appends.p99_ms*10|round/10)\t\(.log_only_appends.cpu_us_per_op|floor)\t-"' "$c64"
  row '"custody, PostgreSQL\traw 400 B leaves\t\(.postgres.log_only_appends.inflight)\t\(.postgres.log_only_appends.per_sec|floor)\t\(.postgres.log_only_appends.p50_ms*10|round/10)\t\(.postgres.log_only_appends.p99_ms*10|round/10)\t\(.postgres.log_only_appends.cpu_us_per_op|floor)\tpostgres \(.postgres.server.logonly.cpu_us_per_op // 0|floor)"' "$c64"
  tr='"Tessera AWS, MariaDB+S3\traw 400 B leaves\(if (.ack|test("do not wait")) then ", future only" else "" end)\t\(.inflight)\t\(.appends_per_sec|floor)\t\(.p50_ms*10|round/10)\t\(.p99_ms*10|round/10)\t\(.cpu_us_per_op|floor)\tmariadbd \(.watched_cpu_us_per_op.mariadbd // 0|floor) + versitygw \(.watched_cpu_us_per_op.versitygw // 0|floor)"'
  row "$tr" "$work/tessera-$CLIENTS.json"
  row '"custody, Badger\traw 400 B leaves\t\(.log_only_appends.inflight)\t\(.log_only_appends.per_sec|floor)\t\(.log_only_appends.p50_ms*10|round/10)\t\(.log_only_appends.p99_ms*10|round/10)\t\(.log_only_appends.cpu_us_per_op|floor)\t-"' "$cc"
  row '"custody, PostgreSQL\traw 400 B leaves\t\(.postgres.log_only_appends.inflight)\t\(.postgres.log_only_appends.per_sec|floor)\t\(.postgres.log_only_appends.p50_ms*10|round/10)\t\(.postgres.log_only_appends.p99_ms*10|round/10)\t\(.postgres.log_only_appends.cpu_us_per_op|floor)\tpostgres \(.postgres.server.logonly.cpu_us_per_op // 0|floor)"' "$cc"
  row "$tr" "$work/tessera-$CEILING_CLIENTS.json"
  row "$tr" "$work/tessera-$CEILING_CLIENTS-future.json"
} | column -t -s $'\t' -o '  '
echo
jq -r '"custody, in process on Badger: authorised \(.authorized_appends.per_sec|floor)/s against a verify ceiling of \(.verify_ceiling_per_sec|floor)/s; on PostgreSQL \(.postgres.authorized_appends.per_sec|floor)/s"' "$work/custody-$CLIENTS.json"
echo
echo "PostgreSQL server, per append (what bounds the PostgreSQL figures):"
for f in "$work/custody-$CLIENTS.json" "$work/custody-$CEILING_CLIENTS.json"; do
  jq -r '.postgres.server | to_entries[] | "  \(.key) (\(.value.ops) appends): CPU \(.value.cpu_us_per_op // 0|floor) µs, \(.value.commits_per_op*1000|floor/1000) commits, \(.value.wal_bytes_per_op|floor) B WAL, \(.value.wal_syncs) WAL flushes of \(.value.wal_sync_ms_mean // 0 |.*100|floor/100) ms, flushing \(.value.wal_sync_busy // 0 |.*100|floor)% of the time"' "$f"
done
jq -r '"  custody commits (batches): HTTP \(.postgres.http_appends.mean_batch // 0|floor) entries in \(.postgres.http_appends.commit_ms // 0|.*10|round/10) ms (Badger: \(.http_appends.mean_batch // 0|floor) in \(.http_appends.commit_ms // 0|.*10|round/10) ms); authorised in process \(.postgres.authorized_appends.mean_batch // 0|floor) entries in \(.postgres.authorized_appends.commit_ms // 0|.*10|round/10) ms"' "$work/custody-$CLIENTS.json"
echo "MariaDB server, per entry (Tessera AWS, $CEILING_CLIENTS clients, published):"
jq -r '"  \(.server_per_entry | to_entries | map("\(.key) \(.value*1000|floor/1000)") | join(", ")); pushbacks \(.pushbacks)"' "$work/tessera-$CEILING_CLIENTS.json"
errs=$(jq -r '(.errors // [])[], (.postgres.errors // [])[]' "$work"/custody-*.json)
if [ -n "$errs" ]; then echo "errors:"; echo "$errs"; exit 1; fi
