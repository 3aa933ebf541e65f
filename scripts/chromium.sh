#!/usr/bin/env bash
# Installs Debian's chromium when it is missing, for the replay page's
# render test (TestReplayHTMLRendersInChromium) and
# scripts/replay-screenshot.sh. Prints the browser's path.
set -euo pipefail
for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; exit 0; fi
done
if [ "$(id -u)" != 0 ]; then
  echo "chromium is missing: run as root, or apt-get install chromium" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
command -v chromium
