#!/usr/bin/env bash
# Install the official OpenAI Python SDK (pinned in tests/openai/requirements.txt) from
# PyPI into a venv at DEST (default: .deps/openai-py of this checkout), for
# tests/openai_api.rs. Idempotent: does nothing when DEST's python already imports the
# pinned version.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.deps/openai-py}"
REQ="$ROOT/tests/openai/requirements.txt"
WANT="$(sed -n 's/^openai==//p' "$REQ")"

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
