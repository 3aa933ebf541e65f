#!/usr/bin/env bash
# Two witnesses on loopback for trying witness cosigning on one machine (the
# README's Witnesses section): omniwitness processes (scripts/witness.sh
# builds them from the Go module proxy into .cache/bin) that know one log,
# run by sdk/typescript/test/witnessd (internal/witnessproc).
#
#   scripts/local-witness.sh start DIR ORIGIN VKEY   start them; print their witness policy (a quorum of both)
#   scripts/local-witness.sh stop DIR                stop them
#
# VKEY is the log's checkpoint verifier key, or a file holding it (custody
# checkpoint --verifier-key). DIR holds their keys, databases and logs. They
# run until stop (or until their holder process is killed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,12p' "$0" >&2; exit 2; }

start() {
  local dir=$1 origin=$2 vkey=$3
  [ -f "$vkey" ] && vkey=$(head -1 "$vkey")
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/holder.pid" ] && kill -0 "$(cat "$dir/holder.pid")" 2>/dev/null; then
    echo "local-witness.sh: witnesses already run in $dir (stop them first)" >&2; exit 1
  fi
  bin=$("$root/scripts/witness.sh" | tail -1)
  (cd "$root" && go build -o "$bin/witnessd" ./sdk/typescript/test/witnessd)
  rm -f "$dir/stdin" "$dir/policy"
  mkfifo "$dir/stdin"
  # witnessd stops the witnesses when its standard input closes: a sleep
  # holds the fifo open until stop kills it.
  CUSTODY_WITNESS_BIN=$bin "$bin/witnessd" -origin "$origin" -vkey "$vkey" -dir "$dir" -policy-out "$dir/policy" \
    <"$dir/stdin" >"$dir/witnessd.out" 2>"$dir/witnessd.log" &
  echo $! >"$dir/witnessd.pid"
  sleep 2147483647 >"$dir/stdin" &
  echo $! >"$dir/holder.pid"
  for _ in $(seq 600); do
    [ -s "$dir/policy" ] && { cat "$dir/policy"; return; }
    kill -0 "$(cat "$dir/witnessd.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "local-witness.sh: the witnesses did not start:" >&2
  cat "$dir/witnessd.log" >&2
  stop "$dir"
  exit 1
}

stop() {
  local dir=$1
  [ -f "$dir/holder.pid" ] && kill "$(cat "$dir/holder.pid")" 2>/dev/null || true
  if [ -f "$dir/witnessd.pid" ]; then
    local pid
    pid=$(cat "$dir/witnessd.pid")
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/holder.pid" "$dir/witnessd.pid" "$dir/stdin"
}

case "${1:-}" in
start) [ $# = 4 ] || usage; start "$2" "$3" "$4" ;;
stop) [ $# = 2 ] || usage; stop "$2" ;;
*) usage ;;
esac
