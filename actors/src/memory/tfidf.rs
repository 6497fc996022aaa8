//! TF-IDF over character 1-2 grams (spec subsystems §1.6): the fallback vector space
//! when no embedding model is configured, and the one the context tier uses today.

use std::collections::{HashMap, HashSet};

/// A sparse vector: feature → weight.
pub type Sparse = HashMap<String, f32>;

/// Lower-cased character n-grams of length 1..=max_n, trimmed, de-duplicated.
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

/// Document frequencies of a corpus.
#[derive(Debug, Default, Clone)]
pub struct Tfidf {
    docs: usize,
    df: HashMap<String, usize>,
}

/// Features whose IDF is below this carry no signal (they are in nearly every document).
const MIN_IDF: f32 = 0.1;

impl Tfidf {
    /// Learns document frequencies from `docs`.
    pub fn train<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        let mut t = Tfidf::default();
        for d in docs {
            t.docs += 1;
            for g in ngrams(d, 2) {
                *t.df.entry(g).or_default() += 1;
            }
        }
        t
    }

    /// The vector of `text`. With fewer than 3 documents there is no IDF (tf only).
    pub fn vectorize(&self, text: &str) -> Sparse {
        let grams = ngrams(text, 2);
        let mut v = Sparse::new();
        for g in grams {
            // The tokenizer de-duplicates, so tf is 1 (normalised by the max, also 1).
            if self.docs < 3 {
                v.insert(g, 1.0);
                continue;
            }
            let df = self.df.get(&g).copied().unwrap_or(0);
            if df == 0 {
                continue;
            }
            let idf = ((self.docs as f32 + 1.0) / (df as f32 + 1.0)).ln();
            if idf >= MIN_IDF {
                v.insert(g, idf);
            }
        }
        v
    }
}

/// Cosine similarity; 0 when either vector is empty.
pub fn cosine(a: &Sparse, b: &Sparse) -> f32 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let dot: f32 = small.iter().filter_map(|(k, x)| large.get(k).map(|y| x * y)).sum();
    let na: f32 = a.values().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.values().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grams_are_lowercased_trimmed_and_unique() {
        assert_eq!(ngrams("Ab a", 2), ["a", "b", "ab"]);
        assert_eq!(ngrams("猫猫", 2), vec!["猫", "猫猫"]);
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
    }
}
