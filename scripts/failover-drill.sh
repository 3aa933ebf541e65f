#!/usr/bin/env bash
# The fault drill of a PostgreSQL cluster of custody servers: every fault
# kind the failover tests know, many rounds each, with a throwaway
# PostgreSQL (scripts/postgres.sh) and real witnesses (scripts/witness.sh).
# CI runs the short version (the same tests, 2 to 3 rounds) in .ci/postgres.
#
#   scripts/failover-drill.sh [ROUNDS]      # default 20 rounds per fault kind
#
# It prints one line per fault kind (paused, partitioned, killed): rounds,
# acknowledged appends, lost and split views (both must be 0: the tests
# fail otherwise), and the time from the fault to another server leading
# and to the acceptance of an append sent after the fault, by a client
# that tries the faulty leader first (p50, max). The machine's load is
# printed with them. The disk-full round needs root (it mounts a tmpfs).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
report=$(mktemp /tmp/custody-drill.XXXXXX)
pgdir=$(mktemp -d /tmp/custody-drill-pg.XXXXXX)
chmod 755 "$pgdir"
export PGPORT=${CUSTODY_DRILL_PGPORT:-54391}
trap 'scripts/postgres.sh stop "$pgdir/pg" >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
CUSTODY_TEST_PG=$(scripts/postgres.sh start "$pgdir/pg" | tail -1)
export CUSTODY_TEST_PG
export CUSTODY_WITNESS_BIN=$(scripts/witness.sh | tail -1)

echo "== frozen leader: paused between batch and COMMIT, and partitioned with sockets open ($rounds rounds each)"
CUSTODY_FAULT_ROUNDS=$rounds CUSTODY_FAULT_REPORT=$report \
  go test ./failover -run 'TestFrozenLeader' -count=1 -timeout 60m
echo "== leader killed under load ($rounds kills)"
CUSTODY_FAILOVER_KILLS=$rounds CUSTODY_FAULT_REPORT=$report \
  go test ./failover -run 'TestFailoverUnderLoad' -count=1 -timeout 60m
echo "== a cut leader answers what it holds; a late renewal; the Go, TypeScript and Python clients move on; a follower that never signed takes over; the database away; disk full"
go test ./failover -run 'TestCutLeaderAnswersHeld|TestLeaseRenewedLate|TestClientsMoveOn|TestNeverSignedTakesOver|TestDatabaseAway|TestDatabaseDiskFull' -count=1 -v -timeout 30m |
  grep -E '^ *(---|ok|FAIL)|full:|after the (cut|send|leader was)|stepped down .* after the cut'
echo "== witnesses: 2-of-3 quorum under continuous appends"
CUSTODY_WITNESS_REPORT=$report go test ./witness/cosign -run TestQuorumUnderContinuousAppends -count=1
echo "== figures (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
cat "$report"
rm -f "$report"
