#!/usr/bin/env bash
# The TypeScript SDK's suite (sdk/typescript): installs Node.js >= 20 from
# Debian when it is missing, builds the custody binary the tests serve,
# installs the SDK's dependencies from its lock file (npm ci), compiles it,
# rebuilds the console's browser bundle of it (console/assets/sdk.js) and
# fails if it differs from the committed one, and runs its tests with node's own test runner against real servers.
# Each test file starts its own `custody serve` on a free loopback port and
# stops it when done; the failover test serves one log from a throwaway
# PostgreSQL cluster (scripts/postgres.sh, port $CUSTODY_TS_PGPORT or 54333)
# with two servers; the witness test runs two omniwitness processes
# (scripts/witness.sh builds them; test/witnessd starts them). About 10-20 s on 2 cores once npm's cache is warm.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null || [ "$(node_major)" -lt 20 ]; then
  echo "== installing Node.js and npm from Debian"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "Node.js >= 20 and npm are needed (apt-get install nodejs npm)" >&2
    exit 1
  fi
fi
if [ "$(node_major)" -lt 20 ]; then
  echo "Node.js $(node --version) is too old: the SDK needs Node.js >= 20 (AbortSignal.any, fetch streams)" >&2
  exit 1
fi
echo "== node $(node --version), npm $(npm --version)"

echo "== building custody for the SDK's tests"
mkdir -p "$root/.cache/ts"
go build -o "$root/.cache/ts/custody" ./cmd/custody
export CUSTODY_BIN="$root/.cache/ts/custody"

echo "== witnesses for the witness test (scripts/witness.sh; cached in .cache/bin)"
export CUSTODY_WITNESS_BIN=$(scripts/witness.sh | tail -1)
go build -o "$root/.cache/ts/witnessd" ./sdk/typescript/test/witnessd
export CUSTODY_TS_WITNESSD="$root/.cache/ts/witnessd"

echo "== a throwaway PostgreSQL for the failover test (scripts/postgres.sh)"
pgdir=$(mktemp -d /tmp/custody-ts-pg.XXXXXX)
chmod 755 "$pgdir"
export PGPORT=${CUSTODY_TS_PGPORT:-54333}
trap 'PGPORT=$PGPORT "$root/scripts/postgres.sh" stop "$pgdir/pg" >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
if [ "$(id -u)" = 0 ]; then "$root/scripts/postgres.sh" install; fi
if pg_url=$("$root/scripts/postgres.sh" start "$pgdir/pg" 2>/dev/null | tail -1) && [ -n "$pg_url" ]; then
  export CUSTODY_TEST_PG=$pg_url
  echo "PostgreSQL at $pg_url"
else
  echo "no PostgreSQL: the failover test will skip (and fail with CI set)"
fi

cd sdk/typescript
echo "== npm ci (from package-lock.json)"
npm ci --no-audit --no-fund --cache "$root/.cache/npm" >/dev/null
echo "== tsc"
npm run --silent build
echo "== the console's SDK bundle: console/assets/sdk.js rebuilt from src/ and compared, then checked against the Node build (console/sdkbuild)"
(cd "$root/console/sdkbuild" && npm ci --no-audit --no-fund --cache "$root/.cache/npm" >/dev/null && node build.mjs --check && node --test sdk.test.mjs)
echo "== npm pack --dry-run (what would be published)"
npm pack --dry-run --cache "$root/.cache/npm" 2>&1 | grep -E "^npm notice (name|version|total files|[0-9.]+[kM]?B +(dist/index|README|package))" || true
echo "== node --test"
node --test --test-concurrency=1 --test-timeout=180000 test/*.test.mjs
echo "== the package as a new user installs it (scripts/ts-pack.sh)"
bash "$root/scripts/ts-pack.sh"
