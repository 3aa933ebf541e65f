#!/usr/bin/env bash
# The Python SDK's suite (sdk/python): a virtual environment under
# .cache/python/venv (git-ignored) with the pinned dependencies of
# sdk/python/requirements-ci.txt, the SDK installed from the clone as a user
# would (pip install ./sdk/python), the custody binary the tests serve, the
# Go canon helper and the TypeScript SDK for the differential test, two
# omniwitness witnesses (scripts/witness.sh) for the witness test, a
# throwaway PostgreSQL for the failover test (scripts/postgres.sh, port
# $CUSTODY_PY_PGPORT or 54335), then pytest. Each test starts its own
# `custody serve` on a free loopback port. With CI set nothing skips:
# a missing component fails the test; pytest finding no test fails too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache="$root/.cache/python"
mkdir -p "$cache"

py=${PYTHON:-python3}
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "== Python >= 3.10 is needed (found: $("$py" --version 2>&1 || echo none))" >&2
  exit 1
fi
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing python3-venv from Debian"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    echo "python3-venv is needed (apt-get install python3-venv)" >&2
    exit 1
  fi
fi
echo "== $("$py" --version)"

venv="$cache/venv"
if [ ! -x "$venv/bin/python" ]; then
  echo "== creating $venv"
  "$py" -m venv "$venv"
fi
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@"; }
echo "== pinned dependencies (sdk/python/requirements-ci.txt)"
pip install -r sdk/python/requirements-ci.txt
echo "== pip install ./sdk/python (from the clone, as the README says)"
pip install --no-build-isolation --no-deps --force-reinstall ./sdk/python
"$venv/bin/python" -c 'import custody, sys; print("custody-sdk", custody.__version__, "from", custody.__file__)'

echo "== building custody and the Go canon helper for the tests"
go build -o "$cache/custody" ./cmd/custody
go build -o "$cache/canonhelper" ./sdk/python/tests/canonhelper
export CUSTODY_BIN="$cache/custody" CUSTODY_CANONHELPER="$cache/canonhelper"

echo "== witnesses for the witness test (scripts/witness.sh; cached in .cache/bin)"
CUSTODY_WITNESS_BIN=$(scripts/witness.sh | tail -1)
export CUSTODY_WITNESS_BIN
go build -o "$cache/witnessd" ./sdk/typescript/test/witnessd
export CUSTODY_WITNESSD="$cache/witnessd"

if command -v node >/dev/null; then
  echo "== the TypeScript SDK for the differential test (npm ci when needed, tsc)"
  (cd sdk/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund --cache "$root/.cache/npm" >/dev/null; } && npm run --silent build)
fi

echo "== a throwaway PostgreSQL for the failover test (scripts/postgres.sh)"
pgdir=$(mktemp -d /tmp/custody-py-pg.XXXXXX)
chmod 755 "$pgdir"
export PGPORT=${CUSTODY_PY_PGPORT:-54335}
trap 'PGPORT=$PGPORT "$root/scripts/postgres.sh" stop "$pgdir/pg" >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
if [ "$(id -u)" = 0 ]; then "$root/scripts/postgres.sh" install; fi
if pg_url=$("$root/scripts/postgres.sh" start "$pgdir/pg" 2>/dev/null | tail -1) && [ -n "$pg_url" ]; then
  export CUSTODY_TEST_PG=$pg_url
  echo "PostgreSQL at $pg_url"
else
  echo "no PostgreSQL: the failover test will skip (and fail with CI set)"
fi

echo "== pytest (sdk/python/tests)"
cd sdk/python
set +e
"$venv/bin/python" -m pytest -p no:cacheprovider -q "$@" tests
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "pytest collected no test: that is a failure here" >&2
  exit 1
fi
exit "$rc"
