//! Search over memory, shared by the tiers: the in-memory indexes (BM25 + vectors),
//! their quantised vectors, the rankers `homed eval` compares, TF-IDF.

pub mod docindex;
pub mod quant;
pub mod retrieve;
pub mod tfidf;
