#!/usr/bin/env bash
# Installs the MCP parts the gate's end-to-end test drives, from npm, into
# the repository's .cache/mcp (git-ignored), once: the reference servers
# @modelcontextprotocol/server-filesystem and server-everything, and the
# TypeScript SDK (@modelcontextprotocol/sdk) whose Client is the agent.
# Versions are pinned here; change them here only.
#
#   scripts/mcp.sh          # install if missing; prints the folder
#
# The test reads CUSTODY_MCP_DIR (default <repo>/.cache/mcp).
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${CUSTODY_MCP_DIR:-$PWD/.cache/mcp}"
pkgs=(
  "@modelcontextprotocol/sdk@1.32.2"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-everything@2026.8.31"
)
stamp="$dir/.installed"
want=$(printf '%s\n' "${pkgs[@]}")
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$dir/node_modules" ]; then
  echo "$dir"
  exit 0
fi
command -v npm >/dev/null || { echo "scripts/mcp.sh: npm is needed (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"custody-mcp-cache","private":true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pkgs[@]}" >&2
printf '%s\n' "$want" >"$stamp"
echo "$dir"
