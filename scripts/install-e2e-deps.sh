#!/usr/bin/env bash
# Install what the dashboard end-to-end test (tests/e2e/dashboard.mjs) needs:
#   - Debian's Chromium (+ a CJK-capable font) at /usr/bin/chromium
#   - the pinned playwright-core from tests/e2e/package-lock.json
# Idempotent: does nothing when both are already present.
# Never downloads a browser build (no `playwright install`); playwright-core
# drives the system Chromium via CHROMIUM / /usr/bin/chromium.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E="$ROOT/tests/e2e"
CHROMIUM_BIN="${CHROMIUM:-/usr/bin/chromium}"

if [ -x "$CHROMIUM_BIN" ]; then
    echo "install-e2e-deps: chromium present at $CHROMIUM_BIN"
elif [ "$(id -u)" = "0" ]; then
    echo "install-e2e-deps: $CHROMIUM_BIN missing; running: apt-get update && apt-get install -y chromium fonts-wqy-microhei"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y chromium fonts-wqy-microhei
    if [ ! -x "$CHROMIUM_BIN" ]; then
        echo "install-e2e-deps: still no executable at $CHROMIUM_BIN after apt-get install" >&2
        exit 1
    fi
else
    echo "install-e2e-deps: $CHROMIUM_BIN missing and not root; install it with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y chromium fonts-wqy-microhei" >&2
    exit 1
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "install-e2e-deps: node/npm not found (Node >= 20 required)" >&2
    exit 1
fi

if [ -d "$E2E/node_modules/playwright-core" ]; then
    echo "install-e2e-deps: playwright-core present in $E2E/node_modules"
else
    echo "install-e2e-deps: running: npm ci --prefix tests/e2e"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$E2E" --no-audit --no-fund
fi
echo "install-e2e-deps: done"
