#!/usr/bin/env bash
# Installs mkfs.ext4 (Debian's e2fsprogs) when it is missing: the
# disk-full tests make a small ext4 filesystem in a file and mount it.
# Needs root (CI runs as root).
set -euo pipefail
if command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /sbin/mkfs.ext4 ] || [ -x /usr/sbin/mkfs.ext4 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "e2fsprogs.sh: mkfs.ext4 is missing and installing it needs root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq e2fsprogs >/dev/null
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ]
