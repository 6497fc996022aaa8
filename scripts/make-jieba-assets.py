#!/usr/bin/env python3
"""Rebuilds actors/assets/jieba.zst from jieba-rs' dict.txt and idf.txt.

Why: the kernel embeds jieba's dictionary (word, frequency, tag) and its IDF table
(word, idf). Compressed separately they took 3.31 MB of the binary, because most of
the IDF table's 270k words repeat the dictionary's. Here every word is written once:
the dictionary's lines carry an index into the table of the 3,328 distinct IDF values,
and the IDF words that are not in the dictionary follow. zstd -22: 2.14 MB. The
kernel (`homeagent_actors::memory::keywords`) rebuilds both texts at load; same data,
same segmentation, same keywords (issue: `homed` <= 25 MB).

Format (UTF-8 lines):
  1. the distinct IDF values, as written in idf.txt, separated by spaces;
  2. one line per dictionary line: `word freq tag i`, i the index of the word's IDF
     value or `-` when the IDF table has no such word;
  3. a line `#`;
  4. `word i` for each IDF word that is not in the dictionary, in idf.txt's order.

Usage: python3 scripts/make-jieba-assets.py ~/.cargo/registry/src/*/jieba-rs-0.8.1/src/data
"""
import subprocess
import sys

src = sys.argv[1]
idf, order = {}, []
for line in open(f"{src}/idf.txt", encoding="utf-8"):
    line = line.rstrip("\n")
    if not line:
        continue
    word, value = line.rsplit(" ", 1)
    idf[word] = value
    order.append(word)
values = sorted(set(idf.values()), key=float)
index = {v: i for i, v in enumerate(values)}
out = [" ".join(values)]
seen = set()
for line in open(f"{src}/dict.txt", encoding="utf-8"):
    line = line.rstrip("\n")
    if not line:
        continue
    word = line.split(" ")[0]
    if len(line.split(" ")) != 3:
        sys.exit(f"dictionary line without a tag: {line!r}")
    seen.add(word)
    out.append(f"{line} {index[idf[word]] if word in idf else '-'}")
out.append("#")
out.extend(f"{w} {index[idf[w]]}" for w in order if w not in seen)
text = ("\n".join(out) + "\n").encode("utf-8")
packed = subprocess.run(["zstd", "--ultra", "-22", "-q", "-c"], input=text, capture_output=True, check=True).stdout
open("actors/assets/jieba.zst", "wb").write(packed)
print(f"actors/assets/jieba.zst: {len(packed)} bytes from {len(text)}")
