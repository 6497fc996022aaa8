#!/usr/bin/env bash
# Copies the WebUI's third-party browser files into static/vendor/ (committed; the
# daemon embeds them, so nothing is fetched at run time and Node is needed only here).
# Pinned versions; re-run after changing them and commit the result.
#   marked     — Markdown to HTML (MIT)
#   DOMPurify  — HTML sanitiser run on marked's output (Apache-2.0 OR MPL-2.0)
#   Cytoscape  — draws the memory page's entity graph (MIT)
#   xterm.js   — the terminal panel's emulator (MIT); its ES module build (smaller
#                than the UMD one), stored gzip-compressed: the daemon serves
#                xterm.mjs from xterm.mjs.gz (src/http/assets.rs)
set -euo pipefail
MARKED=18.2.1
DOMPURIFY=3.5.0
CYTOSCAPE=3.35.0
XTERM=6.0.0
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/static/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "marked@$MARKED" "dompurify@$DOMPURIFY" "cytoscape@$CYTOSCAPE" "@xterm/xterm@$XTERM" >/dev/null
mkdir -p marked dompurify cytoscape xterm "$out"
tar xzf "marked-$MARKED.tgz" -C marked
tar xzf "dompurify-$DOMPURIFY.tgz" -C dompurify
tar xzf "cytoscape-$CYTOSCAPE.tgz" -C cytoscape
tar xzf "xterm-xterm-$XTERM.tgz" -C xterm
# marked ships no minified UMD build since v5; its UMD file is small enough (53 kB).
cp marked/package/lib/marked.umd.js "$out/marked.umd.js"
cp marked/package/LICENSE "$out/marked.LICENSE.txt"
cp dompurify/package/dist/purify.min.js "$out/purify.min.js"
cp dompurify/package/LICENSE "$out/dompurify.LICENSE.txt"
cp cytoscape/package/dist/cytoscape.min.js "$out/cytoscape.min.js"
cp cytoscape/package/LICENSE "$out/cytoscape.LICENSE.txt"
sed '/^\/\/# sourceMappingURL=/d' xterm/package/lib/xterm.mjs | gzip -9n > "$out/xterm.mjs.gz"
cp xterm/package/css/xterm.css "$out/xterm.css"
cp xterm/package/LICENSE "$out/xterm.LICENSE.txt"
{
  echo "marked $MARKED (npm), lib/marked.umd.js (as marked.umd.js.gz, gzip -9n)"
  echo "dompurify $DOMPURIFY (npm), dist/purify.min.js (as purify.min.js.gz, gzip -9n)"
  echo "cytoscape $CYTOSCAPE (npm), dist/cytoscape.min.js (as cytoscape.min.js.gz, gzip -9n)"
  echo "@xterm/xterm $XTERM (npm), lib/xterm.mjs (as xterm.mjs.gz, gzip -9n) and css/xterm.css"
} > "$out/VERSIONS.txt"
# Strip the sourceMappingURL comments: the maps are not shipped.
sed -i '/^\/\/# sourceMappingURL=/d' "$out/marked.umd.js" "$out/purify.min.js" "$out/cytoscape.min.js"
# Stored gzip-compressed like xterm (the binary carries each once, at its compressed
# size; src/http/assets.rs serves X.js from X.js.gz).
gzip -9nf "$out/marked.umd.js" "$out/purify.min.js" "$out/cytoscape.min.js"
echo "vendored into $out:"; ls -l "$out"
