// Package failover holds the tests of many custody servers on one
// PostgreSQL log, run as real processes: a paused leader is fenced, the
// leader is killed under load and another takes over without losing or
// duplicating an acknowledged entry, and the database goes away and comes
// back. It has no code of its own.
//
// The tests need a PostgreSQL server (CUSTODY_TEST_PG, see
// storage/storagetest) and, for the database-away test, the PostgreSQL
// binaries to run a cluster of their own (scripts/postgres.sh). They skip
// without them, except when CI is set.
//
// Every server runs with machine-local folders of its own (HOME and the
// XDG folders, where the signed head is kept), as on separate machines.
// TestFrozenLeader reaches PostgreSQL through a proxy per server that
// holds the leader's COMMIT, then pauses the leader (SIGSTOP) or passes
// nothing more with the sockets left open; CUSTODY_FAULT_ROUNDS sets its
// rounds per kind (default 2) and CUSTODY_FAULT_REPORT a file for its
// figures. TestDatabaseDiskFull mounts a 1 MiB tmpfs as a tablespace
// (root only). scripts/failover-drill.sh runs the long drill.
//
// TestCutLeaderAnswersHeld cuts the leader off the same way while it
// holds appends at each stage of its pipeline, and TestLeaseRenewedLate
// pauses the only server past its lease.
//
// CUSTODY_FAILOVER_KILLS sets how many times the failover test kills the
// leader (default 3; the long mode is 20 or more), CUSTODY_FAILOVER_CLIENTS
// how many clients append (default 64). Every fault kind (paused,
// partitioned, killed) measures the time from the fault to another server
// leading and to the acceptance of an append sent after the fault by a
// client that tries the faulty leader first, and appends one line of
// figures to CUSTODY_FAULT_REPORT.
package failover
