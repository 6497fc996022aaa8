//! The document tier's search index, kept in memory beside `memory.db`: BM25 postings
//! over every document (updated as documents come and go) and the documents' vectors
//! of one space (synced from the `vectors` table by rowid, which the embedder's
//! connection writes). Built on the first search, so a daemon that never looks up a
//! document never pays for it. Without it every lookup re-read and re-tokenised the
//! whole tier (~1 s per turn at 100k documents).

use std::collections::HashMap;

use rusqlite::Connection;

use super::retrieve::{self, Bm25};

/// Rebuild the BM25 postings when this share of its documents has been removed.
const REBUILD_REMOVED: f64 = 0.25;

pub struct DocIndex {
    bm25: Bm25,
    /// BM25 document number → document id (`None` once removed).
    ids: Vec<Option<String>>,
    number: HashMap<String, usize>,
    /// The vectors' space and the highest `vectors.rowid` read.
    space: String,
    rowid: i64,
    /// Unit vectors, row after row in one buffer (a scan is a tight dot-product loop);
    /// `dense_doc[r]` is row r's document number (`usize::MAX` once removed), and
    /// `dense_row` the way back.
    dense: Vec<f32>,
    dense_doc: Vec<usize>,
    dense_row: HashMap<usize, usize>,
    dim: usize,
}

/// The text a document is searched by.
pub fn doc_text(summary: &str, content: &str) -> String {
    format!("{summary} {content}")
}

impl DocIndex {
    /// Reads every document of `conn`.
    pub fn build(conn: &Connection) -> rusqlite::Result<Self> {
        let mut ix = Self {
            bm25: Bm25::new(),
            ids: Vec::new(),
            number: HashMap::new(),
            space: String::new(),
            rowid: 0,
            dense: Vec::new(),
            dense_doc: Vec::new(),
            dense_row: HashMap::new(),
            dim: 0,
        };
        let mut st = conn.prepare("SELECT id, summary, content FROM documents ORDER BY created_at_ms")?;
        let rows = st.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })?;
        for row in rows {
            let (id, summary, content) = row?;
            ix.add(&id, &doc_text(&summary, &content));
        }
        tracing::debug!(documents = ix.number.len(), "document index built");
        Ok(ix)
    }

    pub fn add(&mut self, id: &str, text: &str) {
        if self.number.contains_key(id) {
            return;
        }
        let n = self.bm25.add(text);
        self.ids.push(Some(id.to_owned()));
        self.number.insert(id.to_owned(), n);
    }

    /// Forgets a document. Returns whether a rebuild is due (many removals).
    pub fn remove(&mut self, id: &str) -> bool {
        if let Some(n) = self.number.remove(id) {
            self.bm25.remove(n);
            self.ids[n] = None;
            if let Some(r) = self.dense_row.remove(&n) {
                self.dense_doc[r] = usize::MAX;
            }
        }
        self.bm25.removed() as f64 > REBUILD_REMOVED * self.bm25.len().max(1) as f64
    }

    /// Reads vectors of `space` written since the last sync (all of them when the
    /// space changed).
    pub fn sync_vectors(&mut self, conn: &Connection, space: &str) -> rusqlite::Result<()> {
        if space != self.space {
            self.space = space.to_owned();
            self.rowid = 0;
            self.dense.clear();
            self.dense_doc.clear();
            self.dense_row.clear();
            self.dim = 0;
        }
        let mut st = conn.prepare_cached(
            "SELECT rowid, ref, vec FROM vectors WHERE kind = 'document' AND space = ?1 AND rowid > ?2 ORDER BY rowid",
        )?;
        let rows = st.query_map(rusqlite::params![space, self.rowid], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, Vec<u8>>(2)?))
        })?;
        for row in rows {
            let (rowid, id, blob) = row?;
            self.rowid = self.rowid.max(rowid);
            if let (Some(&n), Some(mut v)) = (self.number.get(&id), super::embed::from_blob(&blob)) {
                if self.dim == 0 {
                    self.dim = v.len();
                }
                if v.len() != self.dim {
                    continue;
                }
                super::embed::normalize(&mut v);
                match self.dense_row.get(&n) {
                    Some(&r) => self.dense[r * self.dim..(r + 1) * self.dim].copy_from_slice(&v),
                    None => {
                        self.dense_row.insert(n, self.dense_doc.len());
                        self.dense_doc.push(n);
                        self.dense.extend_from_slice(&v);
                    }
                }
            }
        }
        Ok(())
    }

    /// Document ids best first: BM25, fused with the dense ranking of `qv` (only
    /// documents at cosine ≥ `dense_min` vote on the dense side).
    pub fn search(&self, text: &str, qv: Option<&[f32]>, dense_min: f32, top_k: usize) -> Vec<String> {
        let bm25 = self.bm25.rank(text);
        let order = match qv {
            Some(q) if !self.dense_doc.is_empty() && q.len() == self.dim => {
                let mut q = q.to_vec();
                super::embed::normalize(&mut q);
                let mut d: Vec<(usize, f32)> = self
                    .dense
                    .chunks_exact(self.dim)
                    .zip(&self.dense_doc)
                    .filter(|(_, n)| **n != usize::MAX)
                    .map(|(v, &n)| (n, super::embed::dot(v, &q)))
                    .filter(|(_, s)| *s >= dense_min)
                    .collect();
                d.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                retrieve::rrf(&[bm25, d.into_iter().map(|(n, _)| n).collect()], retrieve::RRF_K)
            }
            _ => bm25,
        };
        order
            .into_iter()
            .filter_map(|n| self.ids.get(n).cloned().flatten())
            .take(top_k)
            .collect()
    }
}
