#!/usr/bin/env python3
"""Rebuilds actors/assets/o200k_base.ranks.zst from tiktoken's o200k_base.tiktoken.

Why: the kernel counts tokens with OpenAI's o200k_base vocabulary. The text file that
tiktoken-rs embeds is 3.6 MB (base64 token + rank per line); the same table as the
token bytes in rank order, each behind a one-byte length, zstd -22, is 0.88 MB, and
that is what `homeagent_actors::memory::tokens` embeds (issue: `homed` <= 25 MB).

Usage: python3 scripts/make-o200k-ranks.py PATH/TO/o200k_base.tiktoken
(the file ships in the tiktoken-rs crate's `assets/` directory in ~/.cargo/registry).
"""
import base64
import subprocess
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
packed = subprocess.run(["zstd", "--ultra", "-22", "-q", "-c"], input=bytes(out), capture_output=True, check=True).stdout
with open("actors/assets/o200k_base.ranks.zst", "wb") as f:
    f.write(packed)
print(f"{expected} ranks written to actors/assets/o200k_base.ranks.zst ({len(packed)} bytes)")
