#!/usr/bin/env bash
# Builds versitygw, the S3-compatible gateway custody's publication tests
# and benchmarks run against, from the Go module proxy into .cache/bin
# (git-ignored), unless it is there:
#
#   versitygw  github.com/versity/versitygw/cmd/versitygw (POSIX backend)
#
#   scripts/s3.sh          # build it if missing, print the folder
#   scripts/s3.sh --force  # build again
#
# The version is pinned here; the tests find the binary in .cache/bin (or
# $CUSTODY_S3_BIN) and start it themselves on loopback in a temporary
# folder: versitygw --access K --secret S --port 127.0.0.1:PORT posix DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSITYGW_VERSION=v1.8.0

bin="${CUSTODY_S3_BIN:-$PWD/.cache/bin}"
mkdir -p "$bin"
force=0
[ "${1:-}" = "--force" ] && force=1

stamp="$bin/.s3-versions"
want="versitygw $VERSITYGW_VERSION"
if [ $force = 0 ] && [ -x "$bin/versitygw" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$bin"
  exit 0
fi

# go install with a version builds outside this module: versitygw's
# dependencies never enter custody's go.mod.
export GOFLAGS=-mod=mod
echo "s3.sh: building versitygw@$VERSITYGW_VERSION into $bin" >&2
GOBIN="$bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
echo "$want" >"$stamp"
echo "$bin"
