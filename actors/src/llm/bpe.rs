//! A byte-pair tokenizer over one flat table, for counting tokens (`llm::tokens`).
//!
//! Why not `tiktoken_rs::CoreBPE`, which this replaced: it keeps o200k's 200k tokens
//! three times over as separate heap `Vec<u8>`s (the encoder map, the decoder map and
//! a sorted copy), plus 128 regex clones: 27 MB requested (heaptrack) and +39.7 MB of
//! RSS to build (`homed bench tokens`), most of the idle daemon's 47 MB of anonymous
//! memory, against the runtime target of ≤ 30 MB RSS. Here the token bytes stay in the
//! one buffer they are unpacked into (`[len][bytes]` per rank), found through a table
//! of 4-byte ranks hashed by those bytes: 3.4 MB. The pre-tokenizing pattern and the merge rule are tiktoken's, so
//! the counts are the same; tests hold this against the crate on every kind of text.
//!
//! The merge rule: a piece that is not itself a token starts as single bytes; the
//! adjacent pair whose concatenation has the lowest rank is joined (the leftmost on a
//! tie) until no adjacent pair is a token. Short pieces do this on two small arrays on
//! the stack; long ones (an attacker's megabyte of `a`) with a heap of candidate
//! pairs, so a piece of n bytes costs O(n log n), not O(n²).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

/// A token's rank (its id).
pub type Rank = u32;

/// Pieces up to this many bytes are merged on the stack.
const SHORT: usize = 128;

/// Why a table could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("the token table is cut off at byte {0}")]
    Truncated(usize),
    #[error("the token table holds {found} tokens, expected {expected}")]
    Count { found: usize, expected: usize },
    #[error("the token table has an empty token at rank {0}")]
    Empty(usize),
    #[error("the pre-tokenizing pattern does not compile: {0}")]
    Pattern(String),
}

/// The tokenizer: the ranks' bytes, their index, and the pre-tokenizing pattern.
pub struct Bpe {
    /// `[len][bytes]` per token, in rank order (the unpacked table itself).
    table: Box<[u8]>,
    /// Where each rank's bytes start in `table` (after its length byte).
    starts: Box<[u32]>,
    /// Ranks, hashed by their bytes.
    index: HashTable<Rank>,
    hasher: FxBuildHasher,
    pattern: fancy_regex::Regex,
}

impl Bpe {
    /// Builds the tokenizer from a `[len][bytes]`-per-rank table of exactly `expected`
    /// tokens and a pre-tokenizing pattern.
    pub fn new(table: Box<[u8]>, expected: usize, pattern: &str) -> Result<Self, TableError> {
        let mut starts = Vec::with_capacity(expected);
        let mut at = 0usize;
        while at < table.len() {
            let len = table[at] as usize;
            if len == 0 {
                return Err(TableError::Empty(starts.len()));
            }
            if at + 1 + len > table.len() {
                return Err(TableError::Truncated(at));
            }
            starts.push((at + 1) as u32);
            at += 1 + len;
        }
        if starts.len() != expected {
            return Err(TableError::Count {
                found: starts.len(),
                expected,
            });
        }
        let pattern = fancy_regex::Regex::new(pattern).map_err(|e| TableError::Pattern(e.to_string()))?;
        let mut bpe = Self {
            table,
            starts: starts.into_boxed_slice(),
            index: HashTable::new(),
            hasher: FxBuildHasher,
            pattern,
        };
        let mut index = HashTable::with_capacity(expected);
        for rank in 0..expected as Rank {
            let bytes = bpe.bytes(rank);
            let hash = bpe.hasher.hash_one(bytes);
            // A byte string listed twice keeps its first (lowest) rank, as a map would.
            if index.find(hash, |&r| bpe.bytes(r) == bytes).is_none() {
                index.insert_unique(hash, rank, |&r| bpe.hasher.hash_one(bpe.bytes(r)));
            }
        }
        bpe.index = index;
        Ok(bpe)
    }

    /// The bytes of `rank`.
    fn bytes(&self, rank: Rank) -> &[u8] {
        let start = self.starts[rank as usize] as usize;
        let len = self.table[start - 1] as usize;
        &self.table[start..start + len]
    }

    /// The rank of the token `bytes`, if it is one.
    pub fn rank(&self, bytes: &[u8]) -> Option<Rank> {
        let hash = self.hasher.hash_one(bytes);
        self.index.find(hash, |&r| self.bytes(r) == bytes).copied()
    }

    /// How many tokens `text` is, without special tokens (tiktoken's
    /// `count_ordinary`).
    pub fn count(&self, text: &str) -> usize {
        let mut n = 0;
        let mut at = 0;
        for found in self.pattern.find_iter(text) {
            match found {
                Ok(m) => {
                    n += self.piece(m.as_str().as_bytes());
                    at = m.end();
                }
                // The pattern's backtracking limit (never seen on real text): the rest
                // is counted a token per byte, an over-estimate, which budgets survive.
                Err(e) => {
                    tracing::warn!("token count fell back to bytes after {at} bytes: {e}");
                    return n + text.len() - at;
                }
            }
        }
        n
    }

    /// Tokens of one pre-tokenized piece.
    fn piece(&self, piece: &[u8]) -> usize {
        match piece.len() {
            0 => 0,
            1 => 1,
            _ if self.rank(piece).is_some() => 1,
            len if len <= SHORT => self.merge_short(piece),
            _ => self.merge_long(piece),
        }
    }

    /// The rank of `piece[from..to]` as one token, or `Rank::MAX`.
    fn join(&self, piece: &[u8], from: usize, to: usize) -> Rank {
        self.rank(&piece[from..to]).unwrap_or(Rank::MAX)
    }

    /// The merge on the stack: `cut[i]` is where part `i` starts (`cut[parts]` is the
    /// end) and `pair[i]` the rank of parts `i` and `i + 1` joined.
    fn merge_short(&self, piece: &[u8]) -> usize {
        let len = piece.len();
        let mut cut = [0u8; SHORT + 1];
        let mut pair = [Rank::MAX; SHORT];
        for (i, c) in cut.iter_mut().enumerate().take(len + 1) {
            *c = i as u8;
        }
        for (i, p) in pair.iter_mut().enumerate().take(len - 1) {
            *p = self.join(piece, i, i + 2);
        }
        let mut parts = len;
        loop {
            let (mut best, mut at) = (Rank::MAX, 0);
            for (i, &r) in pair[..parts - 1].iter().enumerate() {
                if r < best {
                    (best, at) = (r, i);
                }
            }
            if best == Rank::MAX {
                return parts;
            }
            // Parts `at` and `at + 1` become one: its end cut goes, and so does the pair
            // that joined them; the pairs on either side are looked up anew.
            cut.copy_within(at + 2..parts + 1, at + 1);
            pair.copy_within(at + 1..parts - 1, at);
            parts -= 1;
            if at + 1 < parts {
                pair[at] = self.join(piece, cut[at] as usize, cut[at + 2] as usize);
            }
            if at > 0 {
                pair[at - 1] = self.join(piece, cut[at - 1] as usize, cut[at + 1] as usize);
            }
        }
    }

    /// The merge for long pieces. Parts are named by where they start; each knows its
    /// end, its left neighbour, and the rank of itself joined with its right neighbour.
    /// Candidate joins wait in a min-heap by (rank, start); one whose part has since
    /// changed is stale and skipped (a rank names one byte string, so an unchanged rank
    /// means an unchanged join).
    fn merge_long(&self, piece: &[u8]) -> usize {
        struct Part {
            end: usize,
            prev: usize,
            pair: Rank,
        }
        let len = piece.len();
        let mut parts: Vec<Part> = (0..len)
            .map(|i| Part {
                end: i + 1,
                prev: i.wrapping_sub(1),
                pair: if i + 2 <= len {
                    self.join(piece, i, i + 2)
                } else {
                    Rank::MAX
                },
            })
            .collect();
        let mut heap: BinaryHeap<Reverse<(Rank, usize)>> = parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.pair != Rank::MAX)
            .map(|(i, p)| Reverse((p.pair, i)))
            .collect();
        let mut count = len;
        while let Some(Reverse((rank, start))) = heap.pop() {
            if parts[start].pair != rank {
                continue;
            }
            let right = parts[start].end;
            let end = parts[right].end;
            parts[right].pair = Rank::MAX;
            parts[start].end = end;
            count -= 1;
            parts[start].pair = if end < len {
                parts[end].prev = start;
                self.join(piece, start, parts[end].end)
            } else {
                Rank::MAX
            };
            if parts[start].pair != Rank::MAX {
                heap.push(Reverse((parts[start].pair, start)));
            }
            if start > 0 {
                let prev = parts[start].prev;
                parts[prev].pair = self.join(piece, prev, end);
                if parts[prev].pair != Rank::MAX {
                    heap.push(Reverse((parts[prev].pair, prev)));
                }
            }
        }
        count
    }

    /// Bytes held by the tokenizer's tables (for the memory figures in the docs).
    pub fn table_bytes(&self) -> usize {
        self.table.len() + self.starts.len() * 4 + self.index.capacity() * (std::mem::size_of::<Rank>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy table: bytes a, b, c, then "ab", "bc", "abc", "cc".
    fn toy() -> Bpe {
        let mut t = Vec::new();
        for tok in ["a", "b", "c", "ab", "bc", "abc", "cc"] {
            t.push(tok.len() as u8);
            t.extend_from_slice(tok.as_bytes());
        }
        Bpe::new(t.into_boxed_slice(), 7, r"\S+|\s+").unwrap()
    }

    #[test]
    fn a_piece_merges_lowest_rank_first_and_leftmost_on_a_tie() {
        let bpe = toy();
        assert_eq!(bpe.rank(b"abc"), Some(5));
        assert_eq!(bpe.rank(b"ca"), None);
        // "abc" is a token.
        assert_eq!(bpe.count("abc"), 1);
        // "bcc": "bc" (4) before "cc" (6): [bc][c].
        assert_eq!(bpe.count("bcc"), 2);
        // "cccc": "cc" leftmost, then again: [cc][cc].
        assert_eq!(bpe.count("cccc"), 2);
        // "cab": [c][ab].
        assert_eq!(bpe.count("cab"), 2);
        // The long path agrees with the short one on a long piece of the same shape.
        let long = "abccab".repeat(60);
        assert!(long.len() > SHORT);
        assert_eq!(bpe.merge_long(long.as_bytes()), 60 * 3);
        for n in 2..=SHORT {
            let s = &long.as_bytes()[..n];
            assert_eq!(bpe.merge_long(s), bpe.merge_short(s), "{n}");
        }
    }

    #[test]
    fn bad_tables_are_refused_with_the_reason() {
        assert!(matches!(
            Bpe::new(vec![3, b'a'].into_boxed_slice(), 1, "."),
            Err(TableError::Truncated(0))
        ));
        assert!(matches!(
            Bpe::new(vec![1, b'a'].into_boxed_slice(), 2, "."),
            Err(TableError::Count { found: 1, expected: 2 })
        ));
        assert!(matches!(
            Bpe::new(vec![0].into_boxed_slice(), 1, "."),
            Err(TableError::Empty(0))
        ));
        assert!(matches!(
            Bpe::new(vec![1, b'a'].into_boxed_slice(), 1, "("),
            Err(TableError::Pattern(_))
        ));
    }
}
