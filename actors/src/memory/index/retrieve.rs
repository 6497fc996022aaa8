//! Ranking memory items against a query: BM25 over analysed words, dense cosine, and
//! their reciprocal-rank fusion (the `hybrid` retriever). Plain functions over texts
//! and vectors, shared by the agent's document lookup and `homed eval locomo`.
//!
//! The analyser lower-cases, splits Latin text into words (Snowball-stemmed, English
//! stop words dropped) and CJK runs into overlapping character bigrams (no dictionary,
//! so unknown names still match).

use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// The retrievers `homed eval` compares; the agent uses [`Retriever::Hybrid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Retriever {
    /// TF-IDF over character 1-2 grams, cosine (the spec's fallback space).
    Tfidf,
    /// Okapi BM25 over analysed words.
    Bm25,
    /// Dense cosine in the active embedder's space.
    Embed,
    /// Reciprocal-rank fusion of BM25 and dense (BM25 alone without vectors).
    Hybrid,
}

impl Retriever {
    pub const ALL: [Retriever; 4] = [Self::Tfidf, Self::Bm25, Self::Embed, Self::Hybrid];

    pub fn name(self) -> &'static str {
        match self {
            Self::Tfidf => "tfidf",
            Self::Bm25 => "bm25",
            Self::Embed => "embed",
            Self::Hybrid => "hybrid",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == s)
    }
}

/// English function words: frequent, carrying no topic.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before",
    "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "don", "down", "during", "each", "few",
    "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "ll", "me", "more", "most", "my",
    "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out",
    "over", "own", "re", "s", "same", "she", "should", "so", "some", "such", "t", "than", "that", "the", "their",
    "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "ve", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will",
    "with", "would", "you", "your", "yours",
];

fn stop_words() -> &'static std::collections::HashSet<&'static str> {
    static SET: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOP_WORDS.iter().copied().collect())
}

/// Is `word` (lower-case) an English function word? Shared with the name finder and
/// the summaries, so "The" or "And" never becomes a name or a topic.
pub fn is_stop_word(word: &str) -> bool {
    stop_words().contains(word)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// The terms of `text` (with repeats: BM25 counts them).
pub fn analyze(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    let stops = stop_words();
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |w: &mut String, out: &mut Vec<String>| {
        if !w.is_empty() {
            if !stops.contains(w.as_str()) {
                out.push(stemmer.stem(w).into_owned());
            }
            w.clear();
        }
    };
    // Overlapping bigrams, as CJK search engines do: single characters are too common
    // to carry meaning, bigrams already catch most words and names. A lone character
    // stays a unigram.
    let flush_cjk = |run: &mut Vec<char>, out: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1 => out.push(run[0].to_string()),
            _ => out.extend(run.windows(2).map(|w| w.iter().collect::<String>())),
        }
        run.clear();
    };
    for c in text.chars().flat_map(char::to_lowercase) {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, &mut out);
            word.push(c);
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

/// An in-memory BM25 index (k1 = 1.2, b = 0.75) with postings lists, so a query costs
/// in proportion to the documents sharing its terms, not to the whole collection.
///
/// Scoring runs on every turn over every remembered event that shares a word with the
/// input, so it uses Fx hashing (the keys are our own terms, not attacker-chosen hash
/// flooding input of consequence: a slow bucket costs one query) and a dense score array
/// instead of a map per query.
#[derive(Debug, Default, Clone)]
pub struct Bm25 {
    postings: rustc_hash::FxHashMap<String, Postings>,
    lens: Vec<u32>,
    total_len: u64,
    /// Removed documents: skipped when scoring (their postings stay until a rebuild).
    removed: Vec<bool>,
    removed_count: usize,
}

/// One term's postings: `(document, frequency)` in document order, and, once the term
/// is common ([`BLOCKED_MIN`] postings), the bounds of its score per window of
/// documents, so a top-k query can pass over windows that cannot reach it.
#[derive(Debug, Default, Clone)]
struct Postings {
    list: Vec<(u32, u16)>,
    blocks: Vec<Block>,
    /// The bound of the whole list, for a term too rare to have blocks.
    all: Block,
}

/// Documents per window of [`Block`]s: small enough that a window's bound is close to
/// its documents' scores, large enough that a million documents are ~2,000 windows.
const WINDOW: u32 = 512;
/// A term gets [`Block`]s once it has this many postings: below that, walking its
/// postings costs less than keeping bounds for them.
const BLOCKED_MIN: usize = 256;

/// What bounds a term's score over one window of documents: its highest frequency and
/// the shortest document there. BM25 grows with the one and falls with the other, so
/// `term_score(idf, max_f, min_len, avg)` is at least every score in the window under
/// any corpus statistics, and stays true as documents are added or removed.
#[derive(Debug, Clone, Copy, Default)]
struct Block {
    window: u32,
    /// Index of the window's first posting in the term's list.
    start: u32,
    max_f: u16,
    /// Saturated: a bound taken from a shorter length is still a bound.
    min_len: u16,
}

impl Postings {
    fn push(&mut self, doc: u32, f: u16, len: u32, lens: &[u32]) {
        if self.list.is_empty() {
            self.all.min_len = u16::MAX;
        }
        self.all.max_f = self.all.max_f.max(f);
        self.all.min_len = self.all.min_len.min(len.min(u32::from(u16::MAX)) as u16);
        self.list.push((doc, f));
        if self.list.len() == BLOCKED_MIN {
            for i in 0..self.list.len() {
                let (d, f) = self.list[i];
                let len = if d == doc { len } else { lens[d as usize] };
                self.widen(i, d, f, len);
            }
        } else if self.list.len() > BLOCKED_MIN {
            self.widen(self.list.len() - 1, doc, f, len);
        }
    }

    /// Counts posting `at` (`doc`, `f`, of length `len`) into its window's block.
    fn widen(&mut self, at: usize, doc: u32, f: u16, len: u32) {
        let len = len.min(u32::from(u16::MAX)) as u16;
        match self.blocks.last_mut() {
            Some(b) if b.window == doc / WINDOW => {
                b.max_f = b.max_f.max(f);
                b.min_len = b.min_len.min(len);
            }
            _ => self.blocks.push(Block {
                window: doc / WINDOW,
                start: at as u32,
                max_f: f,
                min_len: len,
            }),
        }
    }
}

const K1: f32 = 1.2;
const B: f32 = 0.75;

/// A query's terms as BM25 scores them: analysed, sorted, each once.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms = analyze(query);
    terms.sort();
    terms.dedup();
    terms
}

fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

fn term_score(idf: f32, f: u16, len: u32, avg: f32) -> f32 {
    let f = f as f32;
    idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len as f32 / avg))
}

/// The corpus statistics BM25 needs for one query's terms: rows, their total length,
/// and each term's document frequency (in [`query_terms`] order). Two indexes' stats
/// add up to those of one index holding both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermStats {
    pub n: u64,
    pub total_len: u64,
    pub df: Vec<u32>,
}

impl TermStats {
    /// The statistics of both corpora together (`None` if they were taken for
    /// different queries).
    pub fn add(&self, other: &TermStats) -> Option<TermStats> {
        (self.df.len() == other.df.len()).then(|| TermStats {
            n: self.n + other.n,
            total_len: self.total_len + other.total_len,
            df: self.df.iter().zip(&other.df).map(|(a, b)| a + b).collect(),
        })
    }

    /// The BM25 score of a row of length `len` with term frequencies `tf` under these
    /// statistics — the same arithmetic, in the same order, as [`Bm25::rank`].
    pub fn score(&self, len: u32, tf: &[u16]) -> f32 {
        if self.n == 0 || tf.len() != self.df.len() {
            return 0.0;
        }
        let n = self.n as f32;
        let avg = self.total_len as f32 / n;
        let mut acc = 0f32;
        for (&df, &f) in self.df.iter().zip(tf) {
            if df > 0 && f > 0 {
                acc += term_score(idf(n, df as f32), f, len, avg);
            }
        }
        acc
    }
}

impl Bm25 {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds an index of `docs` (document `i` is `docs[i]`).
    pub fn build<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        let mut ix = Self::new();
        for d in docs {
            ix.add(d);
        }
        ix
    }

    /// Adds a document; returns its number.
    pub fn add(&mut self, text: &str) -> usize {
        let id = self.lens.len() as u32;
        let terms = analyze(text);
        self.lens.push(terms.len() as u32);
        self.removed.push(false);
        self.total_len += terms.len() as u64;
        let mut tf: rustc_hash::FxHashMap<String, u16> = Default::default();
        for t in terms {
            let n = tf.entry(t).or_default();
            *n = n.saturating_add(1);
        }
        let len = self.lens[id as usize];
        for (t, n) in tf {
            self.postings.entry(t).or_default().push(id, n, len, &self.lens);
        }
        id as usize
    }

    /// Documents in the index, removed ones included.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Removed documents still holding postings (a caller rebuilds when many).
    pub fn removed(&self) -> usize {
        self.removed_count
    }

    /// Takes document `doc` out of the results.
    pub fn remove(&mut self, doc: usize) {
        if doc < self.lens.len() && !self.removed[doc] {
            self.removed[doc] = true;
            self.removed_count += 1;
            self.total_len -= u64::from(self.lens[doc]);
        }
    }

    /// Scores of the documents sharing at least one term with `query` (others score 0).
    pub fn scores(&self, query: &str) -> HashMap<usize, f32> {
        self.scored(query).into_iter().collect()
    }

    /// `(document, score)` of the documents sharing a term with `query`, by document.
    fn scored(&self, query: &str) -> Vec<(usize, f32)> {
        self.scored_terms(&query_terms(query))
    }

    /// `Self::scored` of terms already analysed ([`query_terms`]), in no particular
    /// order (callers rank by score, ties by document).
    ///
    /// Costs the postings read, not the collection: the per-document accumulators are a
    /// per-thread scratch kept between queries, and only the documents touched are reset
    /// after. A fresh `vec![0; n]` and a sort of the touched ids per query made a turn
    /// at a million remembered turns cost about 21 ms (`homed bench turn`).
    pub fn scored_terms(&self, terms: &[String]) -> Vec<(usize, f32)> {
        thread_local! {
            static ACC: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let n = (self.lens.len() - self.removed_count) as f32;
        if n == 0.0 {
            return Vec::new();
        }
        let avg = self.total_len as f32 / n;
        ACC.with_borrow_mut(|acc| {
            if acc.len() < self.lens.len() {
                acc.resize(self.lens.len(), 0.0);
            }
            // The documents touched, in the order first seen; a document is new when its
            // accumulator is still 0 (every term score is positive).
            let mut touched: Vec<usize> = Vec::new();
            for t in terms {
                let Some(Postings { list, .. }) = self.postings.get(t) else {
                    continue;
                };
                let idf = idf(n, list.len() as f32);
                for &(d, f) in list {
                    let d = d as usize;
                    if self.removed[d] {
                        continue;
                    }
                    if acc[d] == 0.0 {
                        touched.push(d);
                    }
                    acc[d] += term_score(idf, f, self.lens[d], avg);
                }
            }
            touched.into_iter().map(|d| (d, std::mem::take(&mut acc[d]))).collect()
        })
    }

    /// This index's statistics of `terms` (from [`query_terms`]), for scoring its rows
    /// together with another index's as if both were one ([`TermStats::add`]).
    pub fn term_stats(&self, terms: &[String]) -> TermStats {
        TermStats {
            n: (self.lens.len() - self.removed_count) as u64,
            total_len: self.total_len,
            df: terms
                .iter()
                .map(|t| self.postings.get(t).map_or(0, |p| p.list.len() as u32))
                .collect(),
        }
    }

    /// Document `doc`'s length and its frequency of each of `terms`.
    pub fn term_freqs(&self, doc: usize, terms: &[String]) -> (u32, Vec<u16>) {
        let tf = terms
            .iter()
            .map(|t| {
                self.postings.get(t).map_or(0, |Postings { list: l, .. }| {
                    // Postings are pushed in document order: sorted by document.
                    l.binary_search_by_key(&(doc as u32), |p| p.0).map_or(0, |i| l[i].1)
                })
            })
            .collect();
        (self.lens.get(doc).copied().unwrap_or(0), tf)
    }

    /// The live documents holding every one of `terms` (none for no terms), in
    /// document order: the rarest term's postings, each looked up in the others'.
    pub fn docs_with_all(&self, terms: &[String]) -> Vec<usize> {
        let mut lists: Vec<&[(u32, u16)]> = Vec::new();
        for t in terms {
            match self.postings.get(t) {
                Some(p) => lists.push(&p.list),
                None => return Vec::new(),
            }
        }
        lists.sort_by_key(|l| l.len());
        let Some((rarest, rest)) = lists.split_first() else {
            return Vec::new();
        };
        rarest
            .iter()
            .map(|&(d, _)| d)
            .filter(|&d| !self.removed[d as usize])
            .filter(|&d| rest.iter().all(|l| l.binary_search_by_key(&d, |p| p.0).is_ok()))
            .map(|d| d as usize)
            .collect()
    }

    /// Document numbers best first (only those with a positive score).
    pub fn rank(&self, query: &str) -> Vec<usize> {
        self.ranked(query).into_iter().map(|(d, _)| d).collect()
    }

    /// `(document, score)` best first (only positive scores).
    pub fn ranked(&self, query: &str) -> Vec<(usize, f32)> {
        self.ranked_terms(&query_terms(query), usize::MAX)
    }

    /// The best `top_k` of [`Self::ranked`] for terms already analysed: a partial
    /// selection, then a sort of the `top_k` only. A common word of a long memory
    /// matches every row, and sorting all of them for the 80 a turn reads was most of
    /// the lexical ranking's time.
    pub fn ranked_terms(&self, terms: &[String], top_k: usize) -> Vec<(usize, f32)> {
        self.ranked_terms_where(terms, top_k, &|_| true)
    }

    /// [`Self::ranked_terms`] among the documents `keep` accepts (a person's own
    /// words): the same windows and bounds — a bound over all documents bounds a part
    /// of them too.
    pub fn ranked_terms_where(
        &self,
        terms: &[String],
        top_k: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let order = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let blocked = || {
            terms
                .iter()
                .any(|t| self.postings.get(t).is_some_and(|p| !p.blocks.is_empty()))
        };
        if top_k > 0 && top_k < self.lens.len() && blocked() {
            let mut v = self.best_by_windows(terms, top_k, keep);
            v.sort_by(order);
            return v;
        }
        let mut v: Vec<(usize, f32)> = self
            .scored_terms(terms)
            .into_iter()
            .filter(|&(d, s)| s > 0.0 && keep(d))
            .collect();
        if top_k < v.len() {
            v.select_nth_unstable_by(top_k, order);
            v.truncate(top_k);
        }
        v.sort_by(order);
        v
    }
}

/// A candidate of [`Bm25::best_by_windows`], ordered so that a max-heap's top is the
/// worst kept: the lowest score, then the highest document.
#[derive(Debug, Clone, Copy)]
struct Kept(f32, usize);

impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Kept {}
impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Kept {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

/// A frequency above which a window's bound is not trusted to the last bit (the score's
/// rounding could then in principle order two close frequencies the wrong way): such a
/// window is always scored.
const BOUND_MAX_F: u16 = 256;

#[cfg(test)]
thread_local! {
    /// Windows [`Bm25::best_by_windows`] passed over (so a test can see it prunes).
    static WINDOWS_PASSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Bm25 {
    /// The best `top_k` of [`Self::scored_terms`] (unsorted), document-window at a time:
    /// a window whose score bound (the sum of its blocks' bounds, in query order) cannot
    /// beat the worst kept is passed over without reading its postings. A word in every
    /// remembered row (a name, "turn") then costs a bound per window, not a score per row.
    ///
    /// Exact: inside a window the terms are scored in query order, so every score is the
    /// bit-for-bit sum [`Self::scored_terms`] makes; a bound is a sum of upper bounds in
    /// the same order (rounding is monotonic); windows come in document order, so a
    /// window whose bound only ties the worst kept holds only documents that lose the tie.
    /// Held against the exhaustive ranking by a test on random corpora.
    fn best_by_windows(&self, terms: &[String], top_k: usize, keep: &dyn Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let live = self.lens.len() - self.removed_count;
        if live == 0 {
            return Vec::new();
        }
        let n = live as f32;
        let avg = self.total_len as f32 / n;
        struct Cursor<'a> {
            p: &'a Postings,
            idf: f32,
            /// The next posting to read.
            at: usize,
            /// The block of the window `at` is in (blocked terms only).
            block: usize,
        }
        let mut cur: Vec<Cursor> = terms
            .iter()
            .filter_map(|t| self.postings.get(t))
            .map(|p| Cursor {
                p,
                idf: idf(n, p.list.len() as f32),
                at: 0,
                block: 0,
            })
            .collect();
        let mut kept: std::collections::BinaryHeap<Kept> = std::collections::BinaryHeap::with_capacity(top_k + 1);
        let mut local = vec![0f32; WINDOW as usize];
        let mut touched: Vec<u32> = Vec::new();
        while let Some(w) = cur
            .iter()
            .filter_map(|c| c.p.list.get(c.at))
            .map(|&(d, _)| d / WINDOW)
            .min()
        {
            let (start, end) = (w * WINDOW, (w + 1) * WINDOW);
            if kept.len() == top_k {
                let mut bound = Some(0f32);
                for c in cur
                    .iter_mut()
                    .filter(|c| c.p.list.get(c.at).is_some_and(|&(d, _)| d < end))
                {
                    while c.p.blocks.get(c.block).is_some_and(|b| b.window < w) {
                        c.block += 1;
                    }
                    // A rare term without blocks is bounded by its whole list.
                    let b = c.p.blocks.get(c.block).filter(|b| b.window == w).unwrap_or(&c.p.all);
                    bound = match bound {
                        Some(sum) if b.max_f <= BOUND_MAX_F => {
                            Some(sum + term_score(c.idf, b.max_f, u32::from(b.min_len), avg))
                        }
                        // A bound not trusted: score the window.
                        _ => None,
                    };
                }
                let worst = kept.peek().copied().unwrap_or(Kept(0.0, 0));
                if bound.is_some_and(|ub| ub < worst.0 || (ub == worst.0 && start as usize > worst.1)) {
                    for c in cur.iter_mut() {
                        if c.p.blocks.is_empty() {
                            while c.p.list.get(c.at).is_some_and(|&(d, _)| d < end) {
                                c.at += 1;
                            }
                        } else if c.p.list.get(c.at).is_some_and(|&(d, _)| d < end) {
                            c.block += 1;
                            c.at = c.p.blocks.get(c.block).map_or(c.p.list.len(), |b| b.start as usize);
                        }
                    }
                    #[cfg(test)]
                    WINDOWS_PASSED.with(|n| n.set(n.get() + 1));
                    continue;
                }
            }
            for c in &mut cur {
                while let Some(&(d, f)) = c.p.list.get(c.at) {
                    if d >= end {
                        break;
                    }
                    c.at += 1;
                    if self.removed[d as usize] {
                        continue;
                    }
                    let slot = &mut local[(d - start) as usize];
                    if *slot == 0.0 {
                        touched.push(d);
                    }
                    *slot += term_score(c.idf, f, self.lens[d as usize], avg);
                }
            }
            for d in touched.drain(..) {
                let s = std::mem::take(&mut local[(d - start) as usize]);
                let k = Kept(s, d as usize);
                if s > 0.0 && (kept.len() < top_k || kept.peek().is_some_and(|worst| k < *worst)) && keep(d as usize) {
                    kept.push(k);
                    if kept.len() > top_k {
                        kept.pop();
                    }
                }
            }
        }
        kept.into_iter().map(|Kept(s, d)| (d, s)).collect()
    }
}

/// Indices of `vectors` by cosine with `query`, best first (`None` entries last, skipped).
pub fn dense_rank(query: &[f32], vectors: &[Option<&[f32]>]) -> Vec<usize> {
    let mut v: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i, crate::memory::embed::cosine(query, v))))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(i, _)| i).collect()
}

/// The rank constant of the fusion. Smaller than the customary 60: our lists are short
/// (a conversation, a document store), and the head of each list should dominate.
pub const RRF_K: f32 = 10.0;

/// Reciprocal-rank fusion: `Σ 1 / (k + rank)` over the lists (rank from 1), best first.
pub fn rrf(lists: &[Vec<usize>], k: f32) -> Vec<usize> {
    let mut score: HashMap<usize, f32> = HashMap::new();
    for list in lists {
        for (r, &d) in list.iter().enumerate() {
            *score.entry(d).or_default() += 1.0 / (k + r as f32 + 1.0);
        }
    }
    let mut v: Vec<(usize, f32)> = score.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(d, _)| d).collect()
}

/// Indices of `docs` by TF-IDF cosine with `query`, best first (only positive scores).
pub fn sparse_rank(
    query: &crate::memory::index::tfidf::Sparse,
    docs: &[crate::memory::index::tfidf::Sparse],
) -> Vec<usize> {
    let mut v: Vec<(usize, f32)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (i, crate::memory::index::tfidf::cosine(query, d)))
        .filter(|(_, s)| *s > 0.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(i, _)| i).collect()
}

/// The hybrid step on a BM25 ranking already made.
pub fn fuse(bm25: Vec<usize>, query_vec: Option<&[f32]>, vectors: &[Option<&[f32]>]) -> Vec<usize> {
    match query_vec {
        Some(q) if vectors.iter().any(Option::is_some) => rrf(&[bm25, dense_rank(q, vectors)], RRF_K),
        _ => bm25,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzer_stems_drops_stop_words_and_grams_cjk() {
        assert_eq!(analyze("The cats were running!"), ["cat", "run"]);
        assert_eq!(analyze("我住北京"), ["我住", "住北", "北京"]);
        assert_eq!(analyze("Go to 北京 now 猫"), ["go", "北京", "猫"]);
    }

    #[test]
    fn bm25_prefers_rare_matching_terms_and_ignores_non_matches() {
        let docs = [
            "I adopted a puppy",
            "the weather is nice",
            "puppy training classes",
            "weather again",
        ];
        let ix = Bm25::build(docs);
        let r = ix.rank("when did she adopt the puppy?");
        assert_eq!(r[0], 0, "{r:?}");
        assert!(r.contains(&2));
        assert!(!r.contains(&1) && !r.contains(&3));
        assert!(ix.rank("zebra").is_empty());
        let mut ix = ix;
        ix.remove(0);
        assert_eq!(ix.rank("adopt puppy"), vec![2], "a removed document is never found");
        assert_eq!(ix.removed(), 1);
    }

    #[test]
    fn the_best_k_are_the_head_of_the_whole_ranking() {
        // Ties (equal scores) included: the order is score, then row.
        let docs: Vec<String> = (0..200)
            .map(|i| format!("turn {i} {}", "again ".repeat(i % 7)))
            .collect();
        let ix = Bm25::build(docs.iter().map(String::as_str));
        let terms = query_terms("turn again");
        let all = ix.ranked_terms(&terms, usize::MAX);
        assert_eq!(all.len(), 200);
        for k in [0, 1, 7, 80, 199, 200, 500] {
            assert_eq!(ix.ranked_terms(&terms, k), all[..k.min(200)].to_vec(), "top {k}");
        }
    }

    /// The window-at-a-time top-k is the head of the exhaustive ranking, bit for bit,
    /// on corpora where some words are in every row (long and short rows, repeats,
    /// removed rows, ties), for every k.
    #[test]
    fn pruned_top_k_equals_the_exhaustive_ranking() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let words = [
            "turn", "garden", "lisbon", "piano", "marathon", "recipe", "bike", "concert",
        ];
        for round in 0..6 {
            let mut ix = Bm25::new();
            let rows = 3_000 + 700 * round;
            for i in 0..rows {
                let mut text = format!("turn {i} number {}", next(97));
                for _ in 0..next(6) {
                    text.push(' ');
                    text.push_str(words[next(words.len() as u64) as usize]);
                }
                if next(1_000) == 0 {
                    text.push_str(&" piano".repeat(300));
                }
                ix.add(&text);
            }
            for _ in 0..rows / 20 {
                ix.remove(next(rows as u64) as usize);
            }
            for q in [
                "turn 17",
                "turn",
                "garden piano",
                "turn 2 lisbon",
                "number 5 bike turn",
                "zebra",
            ] {
                let terms = query_terms(q);
                let mut all: Vec<(usize, f32)> =
                    ix.scored_terms(&terms).into_iter().filter(|(_, s)| *s > 0.0).collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                for k in [1, 5, 80, 400] {
                    let got = ix.ranked_terms(&terms, k);
                    assert_eq!(got, all[..k.min(all.len())].to_vec(), "round {round}, {q:?}, top {k}");
                    // Among a part of the rows (a person's own words): the same
                    // ranking, filtered.
                    let part = |d: usize| d % 3 == 1;
                    let want: Vec<(usize, f32)> = all.iter().copied().filter(|&(d, _)| part(d)).take(k).collect();
                    assert_eq!(
                        ix.ranked_terms_where(&terms, k, &part),
                        want,
                        "round {round}, {q:?}, top {k} of a part"
                    );
                }
            }
        }
        let passed = WINDOWS_PASSED.with(std::cell::Cell::get);
        assert!(passed > 50, "the bounds passed over only {passed} windows");
    }

    #[test]
    fn rrf_rewards_agreement() {
        let fused = rrf(&[vec![1, 2, 3], vec![4, 2, 5]], 10.0);
        assert_eq!(fused[0], 2, "{fused:?}");
        let fused = rrf(&[vec![5, 1], vec![5, 2]], 10.0);
        assert_eq!(fused[0], 5);
    }

    #[test]
    fn hybrid_without_vectors_is_bm25_and_dense_ranks_by_cosine() {
        let texts = ["red apple", "green pear", "red car"];
        let b = Bm25::build(texts).rank("red apple");
        assert_eq!(fuse(b.clone(), None, &[None, None, None]), b);
        let vs: Vec<Vec<f32>> = vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.7, 0.7]];
        let refs: Vec<Option<&[f32]>> = vs.iter().map(|v| Some(v.as_slice())).collect();
        assert_eq!(dense_rank(&[0.0, 1.0], &refs), vec![1, 2, 0]);
        assert_eq!(
            fuse(b.clone(), Some(&[0.0, 1.0]), &[None, None, None]),
            b,
            "no vectors: BM25"
        );
        let t = crate::memory::index::tfidf::Tfidf::train(texts);
        let docs: Vec<_> = texts.iter().map(|x| t.vectorize(x)).collect();
        assert_eq!(sparse_rank(&t.vectorize("pear"), &docs)[0], 1);
    }
}
