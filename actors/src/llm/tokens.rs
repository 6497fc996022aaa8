//! Token counting with a real BPE tokenizer (OpenAI's `o200k_base`; the ranks ship
//! inside the binary: no download, no network).
//!
//! Why a real tokenizer: the byte estimate it replaces counted one token per byte, so
//! English budgets were about 4× too small and nothing said whether a prompt fits.
//! `o200k_base` is the vocabulary of current OpenAI models; for other vendors' models
//! it is an approximation, which the 0.8 × window target of the budget absorbs.
//! The counting itself is `llm::bpe`: tiktoken's pattern and merge rule over one
//! flat table (3.4 MB, where building `tiktoken_rs::CoreBPE` took +39.7 MB of RSS; the
//! idle daemon's RSS target is 30 MB). `tiktoken-rs` is kept for its pattern and, in
//! the tests, as the reference the counts are held against. `bpe-openai`, slightly
//! faster, embeds a precomputed 32 MB table, which more than doubled the release
//! binary (see `docs/DEPENDENCIES.md`).
//!
//! The ranks are our own compact copy (`actors/assets/o200k_base.ranks.zst`, made by
//! `scripts/make-o200k-ranks.py` from the crate's file: the token bytes in rank order,
//! each behind a one-byte length, zstd -22; 0.88 MB instead of the crate's 3.6 MB of
//! base64 text, which the binary does not link because nothing calls the crate's own
//! constructors).
//!
//! Counting is not free (a 100 KB text takes milliseconds), so callers on the hot path
//! count each remembered item once and keep the figure (passages store it in
//! `memory.db`; the context actor caches events' counts by id).

use std::sync::LazyLock;

use crate::llm::bpe::Bpe;

/// The o200k ranks: `[len][bytes]` per token, in rank order, zstd-compressed (0.17 MB
/// smaller than gzip -9, and the kernel has zstd for jieba's data already).
static RANKS_ZST: &[u8] = include_bytes!("../../assets/o200k_base.ranks.zst");
/// Tokens in `RANKS_ZST` (ranks 0..N; the special tokens, never counted here, follow).
const RANKS: usize = 199_998;
/// Bytes of `RANKS_ZST` unpacked. Known up front so it unpacks in one pass into its
/// final buffer: the frame was written with a 128 MB window, which streaming
/// decompression would allocate.
const RANKS_LEN: usize = 1_597_668;

static O200K: LazyLock<Bpe> = LazyLock::new(|| build().expect("the embedded o200k ranks are valid"));

/// Why the embedded ranks could not be made a tokenizer (a broken build: they are
/// compiled into the binary).
#[derive(Debug, thiserror::Error)]
pub enum RanksError {
    #[error("unpacking the o200k ranks: {0}")]
    Unpack(std::io::Error),
    #[error("the o200k ranks: {0}")]
    Table(#[from] super::bpe::TableError),
    #[error("the o200k ranks are truncated")]
    Truncated,
    /// `tiktoken_rs` refused them (its error, as it reads).
    #[error("the reference tokenizer: {0}")]
    Reference(String),
}

/// The embedded ranks unpacked.
fn unpack() -> Result<Vec<u8>, RanksError> {
    zstd::bulk::decompress(RANKS_ZST, RANKS_LEN).map_err(RanksError::Unpack)
}

/// Builds the tokenizer from the embedded ranks.
fn build() -> Result<Bpe, RanksError> {
    let table = unpack()?;
    Ok(Bpe::new(
        table.into_boxed_slice(),
        RANKS,
        tiktoken_rs::O200K_BASE_PAT_STR,
    )?)
}

/// The same embedded ranks as a `tiktoken_rs::CoreBPE` (what this module used before
/// `llm::bpe`): the baseline of `homed bench tokens`, built anew on each call.
pub fn reference() -> Result<tiktoken_rs::CoreBPE, RanksError> {
    let table = unpack()?;
    let mut encoder = rustc_hash::FxHashMap::with_capacity_and_hasher(RANKS, Default::default());
    let mut at = 0usize;
    while at < table.len() {
        let len = table[at] as usize;
        let token = table.get(at + 1..at + 1 + len).ok_or(RanksError::Truncated)?;
        encoder.insert(token.to_vec(), encoder.len() as tiktoken_rs::Rank);
        at += 1 + len;
    }
    let mut special = rustc_hash::FxHashMap::default();
    special.insert(tiktoken_rs::ENDOFTEXT.to_owned(), 199_999);
    special.insert(tiktoken_rs::ENDOFPROMPT.to_owned(), 200_018);
    tiktoken_rs::CoreBPE::new(encoder, special, tiktoken_rs::O200K_BASE_PAT_STR)
        .map_err(|e| RanksError::Reference(e.to_string()))
}

/// Bytes held by the tokenizer's tables (loads them first).
pub fn table_bytes() -> usize {
    O200K.table_bytes()
}

/// Tokens of `text` in `o200k_base`.
pub fn count(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    O200K.count(text)
}

/// [`count`], remembered for texts seen before (the system prompt, the tool schemas:
/// the same few thousand tokens every turn). Hashing is far cheaper than encoding.
pub fn count_memo(text: &str) -> usize {
    use std::hash::BuildHasher;
    static MEMO: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashMap<u64, usize>>> =
        std::sync::OnceLock::new();
    static STATE: std::sync::OnceLock<std::collections::hash_map::RandomState> = std::sync::OnceLock::new();
    /// Entries kept before the memo starts afresh: the prompt's messages repeat across
    /// the steps of a turn and the turns of a conversation (16 bytes an entry).
    const MAX: usize = 4096;
    let key = STATE.get_or_init(Default::default).hash_one(text);
    let memo = MEMO.get_or_init(Default::default);
    if let Some(&n) = memo.lock().get(&key) {
        return n;
    }
    let n = count(text);
    let mut m = memo.lock();
    if m.len() >= MAX {
        m.clear();
    }
    m.insert(key, n);
    n
}

/// [`count`] of a long text that changes a little from call to call, line by line
/// through [`count_memo`]: a prompt's recalled memory (the timeline moves on by a
/// turn, the relevant items mostly stay), where only the new lines need encoding.
///
/// The sum is the whole text's count. The text is cut only after a line break that is
/// followed by neither white space nor `/`, and no piece of o200k's pre-tokenizing
/// pattern spans such a cut: the only pieces that hold a line break are white space
/// (`\s*[\r\n]+`, `\s+(?!\S)`, `\s+`) or punctuation followed by line breaks and
/// slashes (` ?[^\s\p{L}\p{N}]+[\r\n/]*`). Nor does a cut change how the text before
/// it splits: the one lookahead, `\s+(?!\S)`, never ends a piece at a line break,
/// which `\s*[\r\n]+` (tried first) takes. Merges stay within pieces.
pub fn count_memo_lines(text: &str) -> usize {
    let (mut n, mut start) = (0, 0);
    for (i, _) in text.match_indices('\n') {
        // A line break is one byte: the next char starts right after it.
        let after = i + 1;
        if text[after..]
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '/')
        {
            n += count_memo(&text[start..after]);
            start = after;
        }
    }
    n + count_memo(&text[start..])
}

/// Loads the tokenizer's tables (about 100 ms the first time), so the first turn does
/// not pay for it. Idempotent.
pub fn warm_up() {
    let _ = count("warm up");
}

/// The longest prefix of `text` (cut at a char boundary, then at a word boundary when
/// there is one in the last fifth) whose count is at most `max_tokens`, with `…` when
/// something was cut. Used for a faithful extract of a very long item.
pub fn truncate(text: &str, max_tokens: usize) -> String {
    if count(text) <= max_tokens {
        return text.to_owned();
    }
    if max_tokens == 0 {
        return String::new();
    }
    // Binary search over char positions: O(log n) counts of the prefix.
    let idx: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let (mut lo, mut hi) = (0usize, idx.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        // One token is kept for the `…`.
        if count(&text[..idx[mid]]) < max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut cut = &text[..idx[lo]];
    if let Some(space) = cut.rfind(char::is_whitespace)
        && space * 5 >= cut.len() * 4
    {
        cut = &cut[..space];
    }
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_english_as_words_not_bytes() {
        let s = "My sister adopted a greyhound called Biscuit last spring.";
        let n = count(s);
        assert!(n > 8 && n < 16, "{n}");
        assert!(n * 3 < s.len(), "far below one per byte");
        assert_eq!(count(""), 0);
        assert!(count("我的猫叫咪咪") >= 3);
    }

    #[test]
    fn the_compact_ranks_count_like_the_crates_own_table() {
        let crate_bpe = tiktoken_rs::o200k_base_singleton();
        let mut texts: Vec<String> = [
            "My sister adopted a greyhound called Biscuit last spring.",
            "我的猫叫咪咪，住在北京。",
            "fn main() { println!(\"{}\", 1 + 2); } // ünïcödé ✓ 🙂",
            "  \n\n\t mixed   whitespace\r\n",
            "I'M SHOUTING, they're QUIETLY'S don't 1234567 3.14159 ---=== ***",
            "Ελληνικά, русский, עברית, العربية, हिन्दी, 日本語のテキスト, 한국어",
            "\u{0}\u{7f}\u{feff}\u{200b}zero-width\u{301}combining",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Pieces longer than the stack merge takes (the heap path), of each shape.
        texts.push("a".repeat(5000));
        texts.push("ab".repeat(700));
        texts.push("Supercalifragilisticexpialidocious".repeat(9));
        texts.push(" ".repeat(300) + "x");
        texts.push("\u{1F642}".repeat(80));
        texts.push("QmFzZTY0IGJsb2IgdGhhdCBpcyBsb25n".repeat(12));
        texts.push("数据库连接池配置参数说明".repeat(30));
        // The repository's own docs: prose, code, tables, both languages.
        for doc in [
            include_str!("../../../docs/ARCHITECTURE.md"),
            include_str!("../../../docs/DECISIONS.md"),
            include_str!("../agent/turn.rs"),
        ] {
            texts.push(doc.to_owned());
        }
        for text in &texts {
            let head: String = text.chars().take(40).collect();
            assert_eq!(count(text), crate_bpe.count_ordinary(text), "{head:?}");
        }
        // Every prefix of a mixed text (cuts inside words, numbers and characters).
        let mixed = "Ünïcode 🙂 naïve café 1,234.56 — 中文混排 tab\tend\r\n  ";
        for (i, _) in mixed.char_indices() {
            assert_eq!(
                count(&mixed[..i]),
                crate_bpe.count_ordinary(&mixed[..i]),
                "{:?}",
                &mixed[..i]
            );
        }
    }

    /// 3,000 texts of runs of `alphabet`'s characters (at most `runs.0` runs of at most
    /// `runs.1` repeats each), picked by a fixed-seed LCG so a failure replays.
    fn random_texts(alphabet: &str, mut seed: u64, runs: (usize, usize)) -> Vec<String> {
        let alphabet: Vec<char> = alphabet.chars().collect();
        let mut next = move |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % n
        };
        (0..3000)
            .map(|_| {
                let mut text = String::new();
                for _ in 0..next(runs.0) + 1 {
                    let c = alphabet[next(alphabet.len())];
                    for _ in 0..next(runs.1) + 1 {
                        text.push(c);
                    }
                }
                text
            })
            .collect()
    }

    #[test]
    fn random_texts_count_like_the_crate() {
        let crate_bpe = tiktoken_rs::o200k_base_singleton();
        // Characters of every class the pattern splits on.
        let alphabet = "aZéß中文ёЖ٣7 \t\n\r'sLL.,!?-_/🙂\u{301}\u{0}x";
        for text in random_texts(alphabet, 0x9e37_79b9_7f4a_7c15, (12, 6)) {
            assert_eq!(count(&text), crate_bpe.count_ordinary(&text), "{text:?}");
        }
    }

    #[test]
    fn counting_by_lines_is_counting_the_whole() {
        let mut texts: Vec<String> = [
            "line one.\n/slash after punctuation\n",
            "end.\n\n/two breaks, then a slash",
            "spaces before  \n  and after\n\tand a tab\n",
            "a\n\nb\r\nc\r\n\r\nd\n \n e",
            "trailing breaks\n\n\n",
            "\nleading break",
            "wide\u{3000}\nspace\n\u{3000}ideographic",
            "mark\n\u{301}combining\n'quote\n's\n123\n中文\n🙂",
            "",
            "\n",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        texts.push(include_str!("../../../docs/DECISIONS.md").to_owned());
        texts.push(include_str!("../agent/turn.rs").to_owned());
        // Random runs with many line breaks.
        texts.extend(random_texts(
            "aZé中7 \t\n\n\n\r's.,!-/🙂\u{301}\u{3000}",
            0x2545_f491_4f6c_dd1d,
            (16, 4),
        ));
        for text in &texts {
            assert_eq!(count_memo_lines(text), count(text), "{text:?}");
        }
    }

    #[test]
    fn truncation_fits_and_marks_the_cut() {
        let long = "word ".repeat(400);
        let t = truncate(&long, 50);
        assert!(count(&t) <= 50, "{}", count(&t));
        assert!(t.ends_with('…'));
        assert!(count(&t) >= 40, "uses most of the room: {}", count(&t));
        assert_eq!(truncate("short", 50), "short");
        assert_eq!(truncate("a b c", 0), "");
    }
}
