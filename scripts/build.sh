#!/usr/bin/env bash
# Builds custody and custody-verify into DIR (default ./bin), stamped with
# one version: $CUSTODY_VERSION, else `git describe`, with the commit and
# whether the work tree was modified. The Go toolchain stamps the commit
# itself only in a plain git checkout and when GOFLAGS does not say
# -buildvcs=false; this script stamps it at link time (internal/version)
# so a worktree or such a machine gets it too.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bin}
rev=$(git rev-parse HEAD 2>/dev/null || true)
modified=false
if [ -n "$rev" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  modified=true
fi
ver=${CUSTODY_VERSION:-$(git describe --tags --always 2>/dev/null || echo "(devel)")}
pkg=github.com/custodylog/custody/internal/version
ldflags="-X $pkg.Version=$ver -X $pkg.Revision=$rev -X $pkg.Modified=$modified"
mkdir -p "$out"
go build -ldflags "$ldflags" -o "$out/custody" ./cmd/custody
go build -ldflags "$ldflags" -o "$out/custody-verify" ./cmd/custody-verify
"$out/custody" version
