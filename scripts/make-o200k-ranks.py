#!/usr/bin/env python3
"""Rebuilds actors/assets/o200k_base.ranks.gz from tiktoken's o200k_base.tiktoken.

Why: the kernel counts tokens with OpenAI's o200k_base vocabulary. The text file that
tiktoken-rs embeds is 3.6 MB (base64 token + rank per line); the same table as the
token bytes in rank order, each behind a one-byte length, gzipped, is 1.05 MB, and
that is what `homeagent_actors::memory::tokens` embeds (issue: `homed` <= 25 MB).

Usage: python3 scripts/make-o200k-ranks.py PATH/TO/o200k_base.tiktoken
(the file ships in the tiktoken-rs crate's `assets/` directory in ~/.cargo/registry).
"""
import base64
import gzip
import sys

src = sys.argv[1]
out = bytearray()
expected = 0
for line in open(src, encoding="ascii"):
    line = line.strip()
    if not line:
        continue
    token, rank = line.split(" ")
    if int(rank) != expected:
        sys.exit(f"ranks are not consecutive at {rank}: the format needs them in order")
    expected += 1
    raw = base64.b64decode(token)
    if not 0 < len(raw) < 256:
        sys.exit(f"token of rank {rank} is {len(raw)} bytes long")
    out.append(len(raw))
    out += raw
# mtime=0: the same input gives the same bytes.
with open("actors/assets/o200k_base.ranks.gz", "wb") as f:
    f.write(gzip.compress(bytes(out), compresslevel=9, mtime=0))
print(f"{expected} ranks written to actors/assets/o200k_base.ranks.gz")
