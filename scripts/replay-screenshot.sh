#!/usr/bin/env bash
# Renders the demo's replay page in headless Chromium and saves the
# screenshot as docs/replay-demo.png (or $1): what an incident responder
# sees. Installs Debian's chromium first when it is missing
# (scripts/chromium.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/replay-demo.png}
browser=$(bash scripts/chromium.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/custody" ./cmd/custody
"$work/custody" demo --dir "$work/demo" --json >/dev/null
"$work/custody" replay --dir "$work/demo" --workflow wf_9f3a --html "$work/wf.html" >/dev/null
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --disable-dev-shm-usage --user-data-dir="$work/profile" \
  --hide-scrollbars --window-size=1280,2000 --screenshot="$out" "file://$work/wf.html" 2>/dev/null
echo "wrote $out"
