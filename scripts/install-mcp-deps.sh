#!/usr/bin/env bash
# Install the real MCP servers the MCP bridge tests (tests/mcp.rs) run:
#   @modelcontextprotocol/server-everything and -filesystem, pinned at 2026.8.31 in
#   tests/mcp/package.json and locked by tests/mcp/package-lock.json.
# Idempotent: does nothing when both executables are already installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/tests/mcp"
BIN="$DIR/node_modules/.bin"

if [ -x "$BIN/mcp-server-everything" ] && [ -x "$BIN/mcp-server-filesystem" ]; then
    echo "install-mcp-deps: MCP test servers present in $DIR/node_modules"
    exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "install-mcp-deps: node/npm not found (Node >= 20 required); install them with:" >&2
    echo "  apt-get install -y nodejs npm" >&2
    exit 1
fi
echo "install-mcp-deps: running: npm ci --prefix tests/mcp"
npm ci --prefix "$DIR" --no-audit --no-fund
echo "install-mcp-deps: done"
