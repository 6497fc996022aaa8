#!/usr/bin/env bash
# Copies the WebUI's third-party browser files into static/vendor/ (committed; the
# daemon embeds them, so nothing is fetched at run time and Node is needed only here).
# Pinned versions; re-run after changing them and commit the result.
#   marked     — Markdown to HTML (MIT)
#   DOMPurify  — HTML sanitiser run on marked's output (Apache-2.0 OR MPL-2.0)
#   Cytoscape  — draws the memory page's entity graph (MIT)
set -euo pipefail
MARKED=18.2.1
DOMPURIFY=3.5.0
CYTOSCAPE=3.35.0
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/static/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "marked@$MARKED" "dompurify@$DOMPURIFY" "cytoscape@$CYTOSCAPE" >/dev/null
mkdir -p marked dompurify cytoscape "$out"
tar xzf "marked-$MARKED.tgz" -C marked
tar xzf "dompurify-$DOMPURIFY.tgz" -C dompurify
tar xzf "cytoscape-$CYTOSCAPE.tgz" -C cytoscape
# marked ships no minified UMD build since v5; its UMD file is small enough (53 kB).
cp marked/package/lib/marked.umd.js "$out/marked.umd.js"
cp marked/package/LICENSE "$out/marked.LICENSE.txt"
cp dompurify/package/dist/purify.min.js "$out/purify.min.js"
cp dompurify/package/LICENSE "$out/dompurify.LICENSE.txt"
cp cytoscape/package/dist/cytoscape.min.js "$out/cytoscape.min.js"
cp cytoscape/package/LICENSE "$out/cytoscape.LICENSE.txt"
{
  echo "marked $MARKED (npm), lib/marked.umd.js"
  echo "dompurify $DOMPURIFY (npm), dist/purify.min.js"
  echo "cytoscape $CYTOSCAPE (npm), dist/cytoscape.min.js"
} > "$out/VERSIONS.txt"
# Strip the sourceMappingURL comments: the maps are not shipped.
sed -i '/^\/\/# sourceMappingURL=/d' "$out/marked.umd.js" "$out/purify.min.js" "$out/cytoscape.min.js"
echo "vendored into $out:"; ls -l "$out"
