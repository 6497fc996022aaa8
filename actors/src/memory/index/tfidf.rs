//! TF-IDF over character 1-2 grams (spec subsystems §1.6): the fallback vector space
//! when no embedding model is configured, and the one the context prune uses.
//!
//! Grams are packed into integers (a character is at most 21 bits, so a bigram fits
//! in 43), never allocated as strings: the prune of a large window vectorises
//! every event, and string grams made it ~10× slower.

use std::collections::{HashMap, HashSet};

/// A gram: one character, or two with bit 42 set.
pub type Gram = u64;

/// A sparse vector, sorted by gram.
pub type Sparse = Vec<(Gram, f32)>;

/// Lower-cased character n-grams of length 1..=max_n, trimmed, de-duplicated, as
/// text (the readable form of [`grams`], kept for tests and debugging).
pub fn ngrams(text: &str, max_n: usize) -> Vec<String> {
    let chars: Vec<char> = text.to_lowercase().chars().collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for n in 1..=max_n {
        for w in chars.windows(n) {
            let g: String = w.iter().collect::<String>().trim().to_owned();
            if !g.is_empty() && seen.insert(g.clone()) {
                out.push(g);
            }
        }
    }
    out
}

/// The distinct 1- and 2-grams of `text`, with [`ngrams`]' trimming rule: a bigram
/// with a blank side is the unigram of its other side; blanks alone are no gram.
pub fn grams(text: &str) -> Vec<Gram> {
    let chars: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
    let mut out: Vec<Gram> = Vec::with_capacity(chars.len() * 2);
    for &c in &chars {
        if !c.is_whitespace() {
            out.push(c as Gram);
        }
    }
    for w in chars.windows(2) {
        // A bigram with a blank side trims to a unigram, which is already there.
        if !w[0].is_whitespace() && !w[1].is_whitespace() {
            out.push((1 << 42) | ((w[0] as Gram) << 21) | w[1] as Gram);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Document frequencies of a corpus.
#[derive(Debug, Default, Clone)]
pub struct Tfidf {
    docs: usize,
    df: HashMap<Gram, u32>,
}

/// Features whose IDF is below this carry no signal (they are in nearly every document).
const MIN_IDF: f32 = 0.1;

impl Tfidf {
    /// Learns document frequencies from `docs`.
    pub fn train<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        Self::fit(docs).0
    }

    /// Learns document frequencies and returns each document's grams too, so they are
    /// not extracted twice ([`Tfidf::vectorize_grams`]).
    pub fn fit<'a>(docs: impl IntoIterator<Item = &'a str>) -> (Self, Vec<Vec<Gram>>) {
        let mut t = Tfidf::default();
        let mut all = Vec::new();
        for d in docs {
            t.docs += 1;
            let g = grams(d);
            for &x in &g {
                *t.df.entry(x).or_default() += 1;
            }
            all.push(g);
        }
        (t, all)
    }

    /// The vector of `text`. With fewer than 3 documents there is no IDF (tf only).
    pub fn vectorize(&self, text: &str) -> Sparse {
        self.vectorize_grams(&grams(text))
    }

    /// The vector of a text's [`grams`] (sorted, distinct).
    pub fn vectorize_grams(&self, grams: &[Gram]) -> Sparse {
        let mut v = Sparse::with_capacity(grams.len());
        for &g in grams {
            // Grams are distinct, so tf is 1 (normalised by the max, also 1).
            if self.docs < 3 {
                v.push((g, 1.0));
                continue;
            }
            let df = self.df.get(&g).copied().unwrap_or(0);
            if df == 0 {
                continue;
            }
            let idf = ((self.docs as f32 + 1.0) / (df as f32 + 1.0)).ln();
            if idf >= MIN_IDF {
                v.push((g, idf));
            }
        }
        v
    }
}

/// Cosine similarity of two sorted sparse vectors; 0 when either is empty.
pub fn cosine(a: &Sparse, b: &Sparse) -> f32 {
    let (mut i, mut j, mut dot) = (0, 0, 0.0f32);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                dot += a[i].1 * b[j].1;
                i += 1;
                j += 1;
            }
        }
    }
    let na: f32 = a.iter().map(|x| x.1 * x.1).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x.1 * x.1).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grams_are_lowercased_trimmed_and_unique() {
        assert_eq!(ngrams("Ab a", 2), ["a", "b", "ab"]);
        assert_eq!(ngrams("猫猫", 2), vec!["猫", "猫猫"]);
        // The packed grams are the same set as the readable ones.
        for text in ["Ab a", "猫猫", "  x  y ", "Hello, 世界 hello"] {
            assert_eq!(grams(text).len(), ngrams(text, 2).len(), "{text:?}");
        }
        assert!(grams("   ").is_empty());
    }

    #[test]
    fn similar_texts_score_higher() {
        let docs = ["我喜欢猫", "今天天气很好", "明天去北京", "猫很可爱"];
        let t = Tfidf::train(docs);
        let q = t.vectorize("猫");
        let cat = t.vectorize(docs[0]);
        let weather = t.vectorize(docs[1]);
        assert!(cosine(&q, &cat) > cosine(&q, &weather));
        assert_eq!(cosine(&q, &Sparse::new()), 0.0);
        assert!((cosine(&cat, &cat) - 1.0).abs() < 1e-6);
    }
}
