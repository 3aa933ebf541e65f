#!/usr/bin/env bash
# Builds the witnesses custody's tests and benchmarks run against, from the
# Go module proxy, into .cache/bin (git-ignored), unless they are there:
#
#   omniwitness  github.com/transparency-dev/witness/cmd/omniwitness
#   litewitness  filippo.io/torchwood/cmd/litewitness (keys in an ssh-agent)
#
#   scripts/witness.sh          # build what is missing, print the folder
#   scripts/witness.sh --force  # build again
#
# Versions are pinned here; the tests find the binaries in .cache/bin (or
# $CUSTODY_WITNESS_BIN). litewitness also needs ssh-agent and ssh-add
# (Debian: openssh-client), and the tests sqlite3, which this script
# installs with apt-get when they are missing and it runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."

OMNIWITNESS_VERSION=v0.0.0-20260720115447-2e1c6971d19e
TORCHWOOD_VERSION=v0.9.0

bin="${CUSTODY_WITNESS_BIN:-$PWD/.cache/bin}"
mkdir -p "$bin"
force=0
[ "${1:-}" = "--force" ] && force=1

stamp="$bin/.witness-versions"
want="omniwitness $OMNIWITNESS_VERSION litewitness $TORCHWOOD_VERSION"
if [ $force = 0 ] && [ -x "$bin/omniwitness" ] && [ -x "$bin/litewitness" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$bin"
  exit 0
fi

# litewitness keeps its key in an ssh-agent; the tests write its database
# with the sqlite3 command.
need=()
command -v ssh-agent >/dev/null && command -v ssh-add >/dev/null || need+=(openssh-client)
command -v sqlite3 >/dev/null || need+=(sqlite3)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q "${need[@]}" >&2 || { apt-get update -q >&2 && apt-get install -y -q "${need[@]}" >&2; }
  else
    echo "witness.sh: litewitness needs ${need[*]} (install them)" >&2
    exit 1
  fi
fi

# go install with a version builds outside this module: the witnesses'
# dependencies never enter custody's go.mod.
export GOFLAGS=-mod=mod
echo "witness.sh: building omniwitness@$OMNIWITNESS_VERSION and litewitness@$TORCHWOOD_VERSION into $bin" >&2
GOBIN="$bin" go install "github.com/transparency-dev/witness/cmd/omniwitness@$OMNIWITNESS_VERSION" &
p1=$!
GOBIN="$bin" go install "filippo.io/torchwood/cmd/litewitness@$TORCHWOOD_VERSION" &
p2=$!
wait $p1
wait $p2
echo "$want" >"$stamp"
echo "$bin"
