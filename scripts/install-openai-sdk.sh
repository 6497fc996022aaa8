#!/usr/bin/env bash
# Install the official OpenAI SDKs for tests/openai_api.rs:
#   - Python: the `openai` package pinned in tests/openai/requirements.txt, from PyPI,
#     into a venv at DEST (default: .deps/openai-py of this checkout);
#   - JS: the `openai` package pinned in tests/openai/js/package-lock.json, from npm,
#     into tests/openai/js/node_modules (`npm ci`; skipped with a note without npm).
# Idempotent: does nothing for an SDK that is already there in the pinned version.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.deps/openai-py}"
REQ="$ROOT/tests/openai/requirements.txt"
WANT="$(sed -n 's/^openai==//p' "$REQ")"

JS="$ROOT/tests/openai/js"
JS_WANT="$(sed -n 's/.*"openai": "\(.*\)".*/\1/p' "$JS/package.json")"
if [ -f "$JS/node_modules/openai/package.json" ] && grep -q "\"version\": \"$JS_WANT\"" "$JS/node_modules/openai/package.json"; then
    echo "install-openai-sdk: openai (npm) $JS_WANT present in $JS/node_modules"
elif command -v npm >/dev/null 2>&1; then
    echo "install-openai-sdk: running: npm ci --prefix tests/openai/js"
    npm ci --prefix "$JS" --no-audit --no-fund
else
    echo "install-openai-sdk: npm not found; the JS SDK test will be skipped (Node >= 20 needed)" >&2
fi

if [ -x "$DEST/bin/python" ] && [ "$("$DEST/bin/python" -c 'import openai; print(openai.__version__)' 2>/dev/null)" = "$WANT" ]; then
    echo "install-openai-sdk: openai $WANT present in $DEST"
    exit 0
fi

PY="$(command -v python3 || true)"
if [ -z "$PY" ]; then
    echo "install-openai-sdk: python3 (with venv and pip) is needed to fetch the SDK from PyPI" >&2
    exit 1
fi
echo "install-openai-sdk: installing openai $WANT into $DEST"
rm -rf "$DEST"
"$PY" -m venv "$DEST"
"$DEST/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
got="$("$DEST/bin/python" -c 'import openai; print(openai.__version__)')"
if [ "$got" != "$WANT" ]; then
    echo "install-openai-sdk: expected openai $WANT in $DEST, found $got" >&2
    exit 1
fi
echo "install-openai-sdk: done"
