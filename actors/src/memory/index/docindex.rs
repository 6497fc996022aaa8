//! In-memory search indexes kept beside `memory.db`: BM25 postings over their texts
//! (updated as rows come and go) and the rows' vectors of one space (synced from the
//! `vectors` table by rowid, which the embedder's connection writes). Built on the
//! first search, so a daemon that never looks something up never pays for it. Without
//! them every lookup re-read and re-tokenised the whole tier (~1 s per turn at 100k
//! documents).
//!
//! Two indexes share this code: [`DocIndex`] over whole documents (`doc_query`, the
//! documents API) and [`RecallIndex`] over the units per-turn recall ranks — the
//! context window's events (built by the context tier) and the archived events'
//! passages (built by the document tier) — so a query finds the matching *passage*,
//! not a document header. Each tier ranks its own rows; [`merge`] ranks both tiers'
//! rows as one list from their scores.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;

use rusqlite::Connection;

use crate::memory::index::retrieve::{self, Bm25};
use crate::memory::text::period::{self, Period, Span};

/// Rebuild the BM25 postings when this share of its rows has been removed.
const REBUILD_REMOVED: f64 = 0.25;

/// What an index is keyed by, and which `vectors` rows belong to it.
pub trait IndexKey: Clone + Eq + Hash + Debug {
    /// The `vectors.kind` values of this index (an SQL list, quoted).
    const VECTOR_KINDS: &'static str;
    /// The key of a `vectors` row (`kind`, `ref`).
    fn from_vector(kind: &str, r: &str) -> Option<Self>;
}

/// Documents are keyed by their id.
impl IndexKey for String {
    const VECTOR_KINDS: &'static str = "'document'";
    fn from_vector(kind: &str, r: &str) -> Option<Self> {
        (kind == "document").then(|| r.to_owned())
    }
}

/// One unit of recall: a context event (by its row id) or a passage (by its row id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    Event(i64),
    Passage(i64),
}

impl IndexKey for Unit {
    const VECTOR_KINDS: &'static str = "'event', 'passage'";
    fn from_vector(kind: &str, r: &str) -> Option<Self> {
        let id = r.parse().ok()?;
        match kind {
            "event" => Some(Unit::Event(id)),
            "passage" => Some(Unit::Passage(id)),
            _ => None,
        }
    }
}

/// BM25 + dense vectors over rows keyed by `K`.
pub struct SearchIndex<K: IndexKey> {
    bm25: Bm25,
    /// BM25 row number → key (`None` once removed).
    ids: Vec<Option<K>>,
    number: HashMap<K, usize>,
    /// The vectors' space and the highest `vectors.rowid` read.
    space: String,
    rowid: i64,
    /// Unit vectors as `i8` codes, row after row in one buffer (a scan is a tight
    /// dot-product loop, `quant::scan`), and each row's scale; `dense_doc[r]` is row r's
    /// BM25 number (`usize::MAX` once removed), and `dense_row` the way back.
    dense: Vec<i8>,
    dense_scale: Vec<f32>,
    dense_doc: Vec<usize>,
    dense_row: HashMap<usize, usize>,
    dim: usize,
    /// Row number → who said it (an index into `speakers`; `NO_SPEAKER`: a row
    /// added without one, e.g. a document).
    speaker_of: Vec<u32>,
    /// Each speaker's name as analysed terms, and the way back from the name.
    speakers: Vec<Vec<String>>,
    speaker_ids: HashMap<String, u32>,
    /// Each speaker's other names as analysed terms, as they gave them
    /// ([`crate::memory::text::aliases::nicknames`]: "everyone calls me Mel").
    aliases: Vec<Vec<String>>,
    /// Row number → when it was said (`i64::MIN`: a row added without a time).
    ts_of: Vec<i64>,
    /// The last name mentioned of someone who does not speak here (and how many rows
    /// ago, less one), and when the last row was said: a row referring to "she" or
    /// "him" soon after is indexed with that name too ([`RecallIndex::add_unit`]).
    mentioned: Option<(String, u8)>,
    last_said: i64,
    /// How many live rows were said on each day (days since 1970-01-01): whether
    /// anything was said in a period is a lookup, not a scan.
    days: std::collections::BTreeMap<i64, u32>,
    /// Which index this is (unique per process): a [`Lexical`] half found in another
    /// one (the index was rebuilt in between, its rows renumbered) is computed again.
    epoch: u64,
}

/// The BM25 half of a search, ranked before the query's vector is known: per-turn
/// recall ranks it while the embedder is still working on the query, and
/// [`SearchIndex::finish`] fuses it with the dense side once the vector arrives.
#[derive(Debug, Clone)]
pub struct Lexical {
    epoch: u64,
    query: Query,
    /// Every matching row by score, best first (the fusion needs the whole ranking).
    bm25: Vec<(usize, f32)>,
}

/// A query as the indexes read it, read once per search: its terms, whom it names
/// and when it asks about.
#[derive(Debug, Clone)]
struct Query {
    terms: Vec<String>,
    /// The words of each person it names ([`name_mask`], [`people`]).
    people: Vec<Vec<String>>,
    /// The time it asks about ([`period::period`], against the kernel clock).
    period: Option<Period>,
}

impl Query {
    fn read(text: &str) -> Self {
        let terms = retrieve::query_terms(text);
        let people = people(&terms, &name_mask(text, &terms));
        Self {
            terms,
            people,
            period: period::period(text, crate::clock::now_ms()),
        }
    }
}

/// Source of [`SearchIndex::epoch`].
static EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The document index.
pub type DocIndex = SearchIndex<String>;
/// The recall index (window events and passages).
pub type RecallIndex = SearchIndex<Unit>;

/// The text a document is searched by.
pub fn doc_text(summary: &str, content: &str) -> String {
    format!("{summary} {content}")
}

impl<K: IndexKey> Default for SearchIndex<K> {
    fn default() -> Self {
        Self {
            bm25: Bm25::new(),
            ids: Vec::new(),
            number: HashMap::new(),
            space: String::new(),
            rowid: 0,
            dense: Vec::new(),
            dense_scale: Vec::new(),
            dense_doc: Vec::new(),
            dense_row: HashMap::new(),
            dim: 0,
            speaker_of: Vec::new(),
            speakers: Vec::new(),
            speaker_ids: HashMap::new(),
            aliases: Vec::new(),
            ts_of: Vec::new(),
            days: Default::default(),
            mentioned: None,
            last_said: i64::MIN,
            epoch: EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }
}

impl DocIndex {
    /// Reads every document of `conn`.
    pub fn build(conn: &Connection) -> rusqlite::Result<Self> {
        let mut ix = Self::default();
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
}

/// A row added without a speaker.
const NO_SPEAKER: u32 = u32::MAX;

/// Rows further apart than this are not one conversation: "she" in the later one
/// does not refer to a name in the earlier.
const SAME_CONVERSATION_MS: i64 = 30 * 60_000;

/// Whether `text` refers to a third person by a pronoun ("she", "him", "his" …).
fn refers_to_someone(text: &str) -> bool {
    text.split(|c: char| !c.is_alphabetic()).any(|w| {
        matches!(
            w,
            "she" | "She" | "her" | "Her" | "hers" | "he" | "He" | "him" | "Him" | "his" | "His"
        )
    })
}

impl RecallIndex {
    /// Adds a unit said by `speaker` at `ts_ms`, indexed by
    /// [`unit_text`]; who said it is kept apart too, for the
    /// ranking of a person's own words ([`merge`]).
    ///
    /// Cheap co-reference: a row that refers to someone as "she", "him" … is indexed
    /// with the last name of someone who does not speak here mentioned in one of the
    /// two rows before it, in the same conversation (rows less than
    /// `SAME_CONVERSATION_MS` apart) — "Had
    /// lunch with Anna." / "She's moving to Berlin." is found by "When is Anna
    /// moving?". Only the BM25 text gets the name; the row shows what was said.
    pub fn add_unit(&mut self, id: &Unit, ts_ms: i64, speaker: &str, text: &str) {
        if self.number.contains_key(id) {
            return;
        }
        if ts_ms.saturating_sub(self.last_said) > SAME_CONVERSATION_MS || ts_ms < self.last_said {
            self.mentioned = None;
        }
        self.last_said = ts_ms;
        let names: Vec<String> = crate::memory::text::names::english_names([text])
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n != speaker && !self.speaker_ids.contains_key(n.as_str()))
            .collect();
        let unit = unit_text(ts_ms, speaker, text);
        match &self.mentioned {
            Some((who, _)) if refers_to_someone(text) && !names.contains(who) => {
                self.add(id, &format!("{unit} ({who})"))
            }
            _ => self.add(id, &unit),
        }
        // A name is referred back to from the next two rows at most.
        self.mentioned = match names.last() {
            Some(last) => Some((last.clone(), 0)),
            None => self.mentioned.take().filter(|(_, n)| *n < 1).map(|(w, n)| (w, n + 1)),
        };
        let Some(&n) = self.number.get(id) else { return };
        let sid = match self.speaker_ids.get(speaker) {
            Some(&s) => s,
            None => {
                let s = self.speakers.len() as u32;
                self.speakers.push(retrieve::analyze(speaker));
                self.aliases.push(Vec::new());
                self.speaker_ids.insert(speaker.to_owned(), s);
                s
            }
        };
        for nick in crate::memory::text::aliases::nicknames(text) {
            let known = &mut self.aliases[sid as usize];
            for w in retrieve::analyze(&nick) {
                if !known.contains(&w) && !self.speakers[sid as usize].contains(&w) {
                    known.push(w);
                }
            }
        }
        self.speaker_of[n] = sid;
        self.ts_of[n] = ts_ms;
        *self.days.entry(ts_ms.div_euclid(86_400_000)).or_default() += 1;
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `8 May 2023`: how a unit's date is shown to BM25 (so "in May 2023" matches).
pub fn show_date(ts_ms: i64) -> String {
    let (y, m, d) = crate::memory::civil_from_days(ts_ms.div_euclid(86_400_000));
    format!("{d} {} {y}", MONTHS[(m - 1) as usize])
}

/// The text a unit is indexed by: its date in words, who said it, and what was said.
pub fn unit_text(ts_ms: i64, speaker: &str, text: &str) -> String {
    format!("{} {speaker}: {text}", show_date(ts_ms))
}

/// The text a unit is embedded by: who said it and what was said (no date: the
/// embedding model reads meaning, and names in questions match the speaker). Without
/// the speaker, LoCoMo's dense R@10 fell from 0.46 to 0.25.
pub fn vector_text(speaker: &str, text: &str) -> String {
    format!("{speaker}: {text}")
}

/// How many people a query can name for their own rankings ([`merge`]): each one
/// adds two lists to the fusion.
pub const MAX_PEOPLE: usize = 4;

/// Which of `terms` (a query's, [`retrieve::query_terms`]) are words of a name the
/// query mentions (`names::english_names`), as the name's place among the query's
/// first [`MAX_PEOPLE`] names: rows said by someone of that name are ranked again
/// among themselves ([`merge`]).
pub fn name_mask(text: &str, terms: &[String]) -> Vec<Option<u8>> {
    let mut person: HashMap<String, u8> = HashMap::new();
    for (i, (n, _)) in crate::memory::text::names::english_names([text])
        .into_iter()
        .take(MAX_PEOPLE)
        .enumerate()
    {
        for w in retrieve::analyze(&n) {
            person.entry(w).or_insert(i as u8);
        }
    }
    terms.iter().map(|t| person.get(t).copied()).collect()
}

/// How deep a BM25-only search ranks the whole list and the named person's part of it
/// before fusing them into `top_k`: a row below this depth in both scores less than
/// 2 / (K + depth + 1) < 1 / (K + top_k + 1), less than each of the whole list's first
/// `top_k` rows, so it could not be among the `top_k`; a row within it on one list
/// only misses less than 1 / (K + depth + 1) of its score.
fn lexical_depth(top_k: usize) -> usize {
    2 * (top_k + retrieve::RRF_K as usize + 1)
}

/// The words of each person `names` marks in `terms` ([`name_mask`]), by the
/// person's place.
fn people(terms: &[String], names: &[Option<u8>]) -> Vec<Vec<String>> {
    let mut people: Vec<Vec<String>> = Vec::new();
    for (t, n) in terms.iter().zip(names) {
        if let Some(n) = n {
            let n = *n as usize;
            if people.len() <= n {
                people.resize(n + 1, Vec::new());
            }
            people[n].push(t.clone());
        }
    }
    people
}

/// Whether the query's name word `w` names the speaker of `name` (analysed terms)
/// with `aliases`: a word of the name; a name they said they go by, unless it is a
/// word of a speaker's own name (`own_names`: saying "call me Melanie" does not make
/// one Melanie's scope); or the start of a word of the name (three letters at least)
/// unless someone here is called by it outright (`outright`) — "Mel" names Melanie
/// unless a Mel speaks here too.
fn names(w: &str, name: &[String], aliases: &[String], outright: &[&str], own_names: &[&str]) -> bool {
    name.iter().any(|x| x == w)
        || (aliases.iter().any(|x| x == w) && !own_names.contains(&w))
        || (w.chars().count() >= 3
            && name.iter().any(|x| x.len() > w.len() && x.starts_with(w))
            && !outright.contains(&w))
}

/// The scope of the rows said in the time the query asks about ([`Scored::scopes`]).
pub const PERIOD_SCOPE: u32 = 1 << MAX_PEOPLE;

/// Each scope's BM25 ranking in a search without a dense side (`None`: the whole
/// ranking's rows in the scope), in the order of [`each_scope`].
type ScopeRankings = Vec<Option<Vec<(usize, f32)>>>;

/// The scopes of a `scopes` set, one bit each ([`Scored::scopes`]).
fn each_scope(scopes: u32) -> impl Iterator<Item = u32> {
    (0..=MAX_PEOPLE as u32)
        .map(|i| 1 << i)
        .filter(move |bit| scopes & bit != 0)
}

/// How deep the dense ranking goes: below it a row's reciprocal rank (< 1/1,000) no
/// longer moves it into anyone's prompt, and a low cosine floor over a large memory
/// would otherwise sort most of its rows on every dense turn.
pub const DENSE_DEPTH: usize = 1024;

/// A row an index found, with what the hybrid ranking fuses: its BM25 score in its own
/// index (None: no query term), its length and frequency of each query term (so it can
/// be scored again under two indexes' joint statistics), and its cosine with the query
/// (None: no vector, or below `dense_min`).
#[derive(Debug, Clone, PartialEq)]
pub struct Scored<T> {
    pub row: T,
    pub bm25: Option<f32>,
    pub len: u32,
    pub tf: Vec<u16>,
    pub cos: Option<f32>,
    /// The query's scopes the row is in, one bit each: bit i said by the i-th person
    /// the query names ([`name_mask`]), [`PERIOD_SCOPE`] said in the time it asks
    /// about ([`period::period`]); 0: none.
    pub scopes: u32,
}

impl<T> Scored<T> {
    /// The same scores on another row (a unit resolved to what it says).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Scored<U> {
        Scored {
            row: f(self.row),
            bm25: self.bm25,
            len: self.len,
            tf: self.tf,
            cos: self.cos,
            scopes: self.scopes,
        }
    }
}

/// One index's answer: its best rows and its statistics of the query's terms.
/// Carrying statistics and frequencies rather than ranks lets rows of two indexes (the
/// context tier's events, the document tier's passages) be ranked exactly as if they
/// were one index: [`merge`].
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<T> {
    pub stats: retrieve::TermStats,
    pub rows: Vec<Scored<T>>,
}

impl<T> Default for Ranked<T> {
    fn default() -> Self {
        Self {
            stats: Default::default(),
            rows: Vec::new(),
        }
    }
}

impl<T> Ranked<T> {
    /// The same answer with each row resolved (rows `f` drops are left out).
    pub fn filter_map<U>(self, mut f: impl FnMut(T) -> Option<U>) -> Ranked<U> {
        Ranked {
            stats: self.stats,
            rows: self
                .rows
                .into_iter()
                .filter_map(|s| {
                    let Scored {
                        row,
                        bm25,
                        len,
                        tf,
                        cos,
                        scopes,
                    } = s;
                    f(row).map(|row| Scored {
                        row,
                        bm25,
                        len,
                        tf,
                        cos,
                        scopes,
                    })
                })
                .collect(),
        }
    }
}

/// The hybrid ranking over rows of several indexes, best first, at most `top_k`: BM25
/// under the indexes' joint statistics (the score one index over all their rows would
/// give) and dense by cosine, fused by reciprocal rank ([`retrieve::rrf`]) — what
/// [`SearchIndex::search`] does inside one index. Ties keep the lists' order.
///
/// When the query names someone who speaks in the memory ([`name_mask`],
/// [`RecallIndex::add_unit`]), two more rankings join per person named: each ranking
/// again, among that person's own words only (`Scored::scopes`). A time the query
/// asks about ("in June", "last week": [`period::period`]) is a scope the same way:
/// what was said then, ranked by each side. Why: a question about a person's
/// activities or family is answered by what that person said on the theme — in
/// LoCoMo every multi-hop evidence turn the prompt missed was the named person's own.
/// BM25 alone matches the name in their every turn (shortest first) and in every turn
/// that addresses them ("Thanks, Melanie!"); the dense side, embedding the query
/// without its names (`recall::meaning_query`), ranks by theme across everyone. The
/// person's own rows, ranked by each side, put "their words on the theme" first. On
/// the LoCoMo dev subset, live: hybrid 0.864 → 0.886 (multi-hop 0.641 → 0.726),
/// BM25 only 0.794 → 0.808.
pub fn merge<T>(lists: Vec<Ranked<T>>, top_k: usize) -> Vec<T> {
    let joint = lists
        .iter()
        .map(|l| Some(l.stats.clone()))
        .reduce(|a, b| a.and_then(|a| b.and_then(|b| a.add(&b))))
        .flatten();
    let all: Vec<Scored<T>> = lists.into_iter().flat_map(|l| l.rows).collect();
    let order_by = |key: &dyn Fn(&Scored<T>) -> Option<f32>| -> Vec<usize> {
        let mut v: Vec<(usize, f32)> = all
            .iter()
            .enumerate()
            .filter_map(|(i, s)| key(s).map(|x| (i, x)))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter().map(|(i, _)| i).collect()
    };
    let bm25 = order_by(&|s| {
        let score = match &joint {
            Some(j) if s.bm25.is_some() && j.n > 0 && s.tf.len() == j.df.len() => Some(j.score(s.len, &s.tf)),
            _ => s.bm25,
        };
        score.filter(|x| *x > 0.0)
    });
    let dense = order_by(&|s| s.cos);
    // Each scope's own rows (a named person's, a period's), by each ranking.
    let scopes = all.iter().fold(0, |acc, s| acc | s.scopes);
    let theirs = |list: &[usize], bit: u32| -> Vec<usize> {
        list.iter().copied().filter(|&i| all[i].scopes & bit != 0).collect()
    };
    let mut lists: Vec<Vec<usize>> = each_scope(scopes)
        .flat_map(|bit| [theirs(&bm25, bit), theirs(&dense, bit)])
        .collect();
    lists.extend([bm25, dense]);
    lists.retain(|l| !l.is_empty());
    let order = if lists.len() == 1 {
        lists.pop().unwrap_or_default()
    } else {
        retrieve::rrf(&lists, retrieve::RRF_K)
    };
    let mut slots: Vec<Option<T>> = all.into_iter().map(|s| Some(s.row)).collect();
    order.into_iter().filter_map(|i| slots[i].take()).take(top_k).collect()
}

impl<K: IndexKey> SearchIndex<K> {
    pub fn add(&mut self, id: &K, text: &str) {
        if self.number.contains_key(id) {
            return;
        }
        let n = self.bm25.add(text);
        self.ids.push(Some(id.clone()));
        self.speaker_of.push(NO_SPEAKER);
        self.ts_of.push(i64::MIN);
        self.number.insert(id.clone(), n);
    }

    /// Whether `id` is indexed.
    pub fn contains(&self, id: &K) -> bool {
        self.number.contains_key(id)
    }

    /// Rows indexed (removed ones excluded).
    pub fn len(&self) -> usize {
        self.number.len()
    }

    pub fn is_empty(&self) -> bool {
        self.number.is_empty()
    }

    /// Forgets a row. Returns whether a rebuild is due (many removals).
    pub fn remove(&mut self, id: &K) -> bool {
        if let Some(n) = self.number.remove(id) {
            self.bm25.remove(n);
            self.ids[n] = None;
            let ts = std::mem::replace(&mut self.ts_of[n], i64::MIN);
            if ts != i64::MIN {
                let day = ts.div_euclid(86_400_000);
                if let Some(c) = self.days.get_mut(&day) {
                    *c -= 1;
                    if *c == 0 {
                        self.days.remove(&day);
                    }
                }
            }
            if let Some(r) = self.dense_row.remove(&n) {
                self.dense_doc[r] = usize::MAX;
            }
        }
        self.bm25.removed() as f64 > REBUILD_REMOVED * self.bm25.len().max(1) as f64
    }

    /// Sets the vector of an indexed row (rows of another dimension than the first are
    /// ignored, as in a sync).
    fn put_vector(&mut self, id: K, v: &[f32]) {
        let Some(&n) = self.number.get(&id) else { return };
        if self.dim == 0 {
            self.dim = v.len();
        }
        if v.len() != self.dim {
            return;
        }
        let mut v = v.to_vec();
        crate::memory::embed::normalize(&mut v);
        let mut codes = Vec::with_capacity(self.dim);
        let scale = crate::memory::index::quant::quantize(&v, &mut codes);
        match self.dense_row.get(&n) {
            Some(&r) => {
                self.dense[r * self.dim..(r + 1) * self.dim].copy_from_slice(&codes);
                self.dense_scale[r] = scale;
            }
            None => {
                self.dense_row.insert(n, self.dense_doc.len());
                self.dense_doc.push(n);
                self.dense.extend_from_slice(&codes);
                self.dense_scale.push(scale);
            }
        }
    }

    /// Reads vectors of `space` written since the last sync (all of them when the
    /// space changed).
    pub fn sync_vectors(&mut self, conn: &Connection, space: &str) -> rusqlite::Result<()> {
        if space != self.space {
            self.space = space.to_owned();
            self.rowid = 0;
            self.dense.clear();
            self.dense_scale.clear();
            self.dense_doc.clear();
            self.dense_row.clear();
            self.dim = 0;
        }
        let mut st = conn.prepare_cached(&format!(
            "SELECT rowid, kind, ref, vec FROM vectors WHERE kind IN ({}) AND space = ?1 AND rowid > ?2 ORDER BY rowid",
            K::VECTOR_KINDS
        ))?;
        let rows = st.query_map(rusqlite::params![space, self.rowid], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Vec<u8>>(3)?,
            ))
        })?;
        for row in rows {
            let (rowid, kind, r, blob) = row?;
            self.rowid = self.rowid.max(rowid);
            let Some(id) = K::from_vector(&kind, &r) else { continue };
            if let Some(v) = crate::memory::embed::from_blob(&blob) {
                self.put_vector(id, &v);
            }
        }
        Ok(())
    }

    /// Keys best first: BM25, fused (reciprocal ranks, [`retrieve::rrf`]) with the
    /// dense ranking of `qv` (only rows at cosine ≥ `dense_min` vote on the dense side).
    /// The hybrid retriever of `retrieve`, over this index.
    pub fn search(&self, text: &str, qv: Option<&[f32]>, dense_min: f32, top_k: usize) -> Vec<K> {
        merge(vec![self.search_scored(text, qv, dense_min, top_k)], top_k)
    }

    /// The best `top_k` rows of [`Self::search`] with their scores and this index's
    /// statistics of the query's terms, for a [`merge`] with another index's answer.
    pub fn search_scored(&self, text: &str, qv: Option<&[f32]>, dense_min: f32, top_k: usize) -> Ranked<K> {
        let query = self.read(text);
        let terms = &query.terms;
        let dense = self.dense_ranking(qv, dense_min);
        // Without a dense side the answer is BM25's best `top_k`, selected without
        // sorting the rest — fused with the named person's best when someone named
        // speaks here, both to [`lexical_depth`]. The fusion with the dense side
        // needs the whole ranking (a row's rank on the side it is weak on counts too).
        let (bm25, their_bm25) = match self.scopes(&query) {
            _ if !dense.is_empty() => (self.bm25.ranked_terms(terms, usize::MAX), None),
            Some((present, t)) => {
                let depth = lexical_depth(top_k);
                // A person's rows by a windowed top-k of their own; the period's
                // from the whole list (`None`): a period little was said in would
                // make the window scan every row for the few that pass.
                let each = each_scope(present)
                    .map(|bit| {
                        (bit != PERIOD_SCOPE)
                            .then(|| self.bm25.ranked_terms_where(terms, depth, &|row| t(row) & bit != 0))
                    })
                    .collect();
                (self.bm25.ranked_terms(terms, depth), Some(each))
            }
            None => (self.bm25.ranked_terms(terms, top_k), None),
        };
        self.rank(&query, bm25, their_bm25, dense, top_k)
    }

    /// The BM25 half of [`Self::search_scored`], for [`Self::finish`] once the query's
    /// vector is known (or known not to come).
    pub fn lexical(&self, text: &str) -> Lexical {
        let query = self.read(text);
        Lexical {
            epoch: self.epoch,
            bm25: self.bm25.ranked_terms(&query.terms, usize::MAX),
            query,
        }
    }

    /// [`Self::search_scored`] from its BM25 half: the same answer as searching now.
    /// Rows added since `lexical` was ranked join on their vector only, rows removed
    /// since are left out, and a half from before a rebuild is ranked again.
    pub fn finish(&self, lexical: Lexical, qv: Option<&[f32]>, dense_min: f32, top_k: usize) -> Ranked<K> {
        let Lexical { epoch, query, bm25 } = lexical;
        let bm25 = if epoch == self.epoch {
            bm25
        } else {
            self.bm25.ranked_terms(&query.terms, usize::MAX)
        };
        let dense = self.dense_ranking(qv, dense_min);
        self.rank(&query, bm25, None, dense, top_k)
    }

    /// `text` read as a query of this index: the events its time is given by dated
    /// from this index's rows ([`Self::dated`]), once per search.
    fn read(&self, text: &str) -> Query {
        let mut query = Query::read(text);
        query.period = query.period.and_then(|p| self.dated(&p));
        query
    }

    /// The query's scopes of a row ([`Scored::scopes`]: bit i said by the query's
    /// i-th person, someone whose name shares a word with theirs; [`PERIOD_SCOPE`]
    /// said in its period), and the scopes a row here may be in (None: none — the
    /// query names no one who speaks here and no time).
    fn scopes<'a>(&'a self, query: &'a Query) -> Option<(u32, impl Fn(usize) -> u32 + 'a)> {
        let (people, period) = (&query.people, query.period.as_ref());
        if people.iter().all(|p| p.is_empty()) && period.is_none() {
            return None;
        }
        // The query's name words someone here is called by outright: a name's start is
        // then no one else's, and a word of a speaker's own name no one else's alias
        // ([`names`]).
        let of = |names: &[Vec<String>], w: &str| names.iter().flatten().any(|x| x == w);
        let words = || people.iter().flatten().map(String::as_str);
        let outright: Vec<&str> = words()
            .filter(|w| of(&self.speakers, w) || of(&self.aliases, w))
            .collect();
        let own_names: Vec<&str> = words().filter(|w| of(&self.speakers, w)).collect();
        let theirs: Vec<u32> = self
            .speakers
            .iter()
            .zip(&self.aliases)
            .map(|(name, aliases)| {
                people
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.iter().any(|w| names(w, name, aliases, &outright, &own_names)))
                    .fold(0, |acc, (i, _)| acc | 1 << i)
            })
            .collect();
        let said_then = move |row: usize| {
            period.is_some_and(|p| self.ts_of.get(row).is_some_and(|&ts| ts != i64::MIN && p.contains(ts)))
        };
        let mut present = theirs.iter().fold(0, |acc, s| acc | s);
        if period.is_some_and(|p| self.anything_said_in(p)) {
            present |= PERIOD_SCOPE;
        }
        if present == 0 {
            return None;
        }
        let scopes = move |row: usize| {
            let said_by = self
                .speaker_of
                .get(row)
                .and_then(|&s| theirs.get(s as usize))
                .copied()
                .unwrap_or(0);
            if said_then(row) {
                said_by | PERIOD_SCOPE
            } else {
                said_by
            }
        };
        Some((present, scopes))
    }

    /// `period` with the events it gives times by dated from what this index holds
    /// ("before the trip": the day the rows that name the trip were said on most, the
    /// earliest of equals; [`period::Anchor::span`]); an event no row names is no time.
    /// None when nothing of it is a time here.
    fn dated(&self, period: &Period) -> Option<Period> {
        let mut spans = period.spans.clone();
        for e in &period.events {
            let terms = retrieve::query_terms(&e.words);
            // The days the rows naming it were said on, sorted: a day's rows are one run
            // (a common word of a long memory names thousands of rows: a sort of plain
            // numbers, not a map insert each).
            let mut days: Vec<i64> = self
                .bm25
                .docs_with_all(&terms)
                .into_iter()
                .filter_map(|row| self.ts_of.get(row).copied())
                .filter(|&ts| ts != i64::MIN)
                .map(|ts| ts.div_euclid(86_400_000))
                .collect();
            days.sort_unstable();
            // The most talked-of day; the earliest of equals.
            let best = days
                .chunk_by(|a, b| a == b)
                .fold(None, |best: Option<(i64, usize)>, run| match best {
                    Some((_, n)) if n >= run.len() => best,
                    _ => Some((run[0], run.len())),
                });
            if let Some((day, _)) = best {
                spans.push(e.span(day, crate::clock::now_ms().div_euclid(86_400_000)));
            }
        }
        (!spans.is_empty()).then(|| Period {
            spans,
            events: Vec::new(),
        })
    }

    /// Whether a live row was said in `period` (a lookup in the days rows were said
    /// on, [`Period::contains`]'s rule).
    fn anything_said_in(&self, period: &Period) -> bool {
        period.spans.iter().any(|s| match *s {
            Span::Days { from, to } => self.days.range(from..to + period::TOLD_AFTER_DAYS).next().is_some(),
            Span::Month(_) => self.days.keys().any(|&d| period.contains(d * 86_400_000)),
        })
    }

    /// Rows by cosine with `qv`, best first (those at ≥ `dense_min`, at most
    /// [`DENSE_DEPTH`]; none without a vector of this index's dimension).
    fn dense_ranking(&self, qv: Option<&[f32]>, dense_min: f32) -> Vec<(usize, f32)> {
        match qv {
            Some(q) if !self.dense_doc.is_empty() && q.len() == self.dim => {
                let mut q = q.to_vec();
                crate::memory::embed::normalize(&mut q);
                let mut d: Vec<(usize, f32)> = Vec::new();
                crate::memory::index::quant::scan(
                    &self.dense,
                    &self.dense_scale,
                    &crate::memory::index::quant::Query::new(&q),
                    |r, cos| {
                        let n = self.dense_doc[r];
                        if n != usize::MAX && cos >= dense_min {
                            d.push((n, cos));
                        }
                    },
                );
                let better = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
                if d.len() > DENSE_DEPTH {
                    d.select_nth_unstable_by(DENSE_DEPTH, better);
                    d.truncate(DENSE_DEPTH);
                }
                d.sort_by(better);
                d
            }
            _ => Vec::new(),
        }
    }

    /// The best `top_k` of the BM25 ranking `bm25` (best first), fused with the dense
    /// one when there is one, and with both among each of the query's scopes (a
    /// named person's rows, what was said in its period: [`merge`]; `their_bm25`:
    /// each scope's BM25 ranking, already ranked, in the order of [`each_scope`];
    /// `None`: `bm25`'s rows in the scope).
    fn rank(
        &self,
        query: &Query,
        bm25: Vec<(usize, f32)>,
        their_bm25: Option<ScopeRankings>,
        dense: Vec<(usize, f32)>,
        top_k: usize,
    ) -> Ranked<K> {
        let terms = &query.terms;
        let theirs = self.scopes(query);
        let scopes = |row: usize| theirs.as_ref().map_or(0, |(_, t)| t(row));
        let picked: Vec<(usize, Option<f32>, Option<f32>)> = if dense.is_empty() && theirs.is_none() {
            bm25.into_iter().map(|(n, s)| (n, Some(s), None)).collect()
        } else {
            // Reciprocal-rank fusion (`retrieve::rrf`: the same sums in the same order,
            // ties by row), and only the best `top_k` sorted.
            let n = self.ids.len();
            let mut fusion = Fusion::new(n, dense.is_empty());
            fusion.vote(bm25.iter().map(|(row, _)| *row));
            fusion.vote(dense.iter().map(|(row, _)| *row));
            // Each scope's own rows, by each ranking ([`merge`]).
            if let Some((present, _)) = &theirs {
                for (i, bit) in each_scope(*present).enumerate() {
                    match their_bm25.as_ref().and_then(|t| t.get(i)).and_then(Option::as_ref) {
                        Some(theirs) => fusion.vote(theirs.iter().map(|(row, _)| *row)),
                        None => fusion.vote(bm25.iter().map(|(row, _)| *row).filter(|&row| scopes(row) & bit != 0)),
                    }
                    fusion.vote(dense.iter().map(|(row, _)| *row).filter(|&row| scopes(row) & bit != 0));
                }
            }
            for &(row, s) in bm25.iter().chain(their_bm25.iter().flatten().flatten().flatten()) {
                fusion.score(row, Some(s), None);
            }
            for &(row, s) in &dense {
                fusion.score(row, None, Some(s));
            }
            // Rows removed since the BM25 half was ranked take no place.
            fusion.best(top_k, |row| self.ids[row].is_some())
        };
        let rows = picked
            .into_iter()
            .filter_map(|(n, bm25, cos)| {
                let row = self.ids.get(n).cloned().flatten()?;
                let (len, tf) = self.bm25.term_freqs(n, terms);
                let scopes = scopes(n);
                Some(Scored {
                    row,
                    bm25,
                    len,
                    tf,
                    cos,
                    scopes,
                })
            })
            .take(top_k)
            .collect();
        Ranked {
            stats: self.bm25.term_stats(terms),
            rows,
        }
    }
}

/// Reciprocal-rank sums of one search, with each row's BM25 score and cosine. In flat
/// arrays by row when a dense side ranks most of the index (at 10k rows a hash map of
/// every hit and a sort of all of them were most of a dense turn's recall); in a map
/// when the lists are two short BM25 ones (a 100k-row array for ~400 rows was half of
/// such a turn's ranking).
enum Fusion {
    Rows {
        fused: Vec<f32>,
        scores: Vec<(Option<f32>, Option<f32>)>,
    },
    Map(HashMap<usize, (f32, Option<f32>, Option<f32>)>),
}

impl Fusion {
    fn new(rows: usize, short: bool) -> Self {
        if short {
            Fusion::Map(HashMap::new())
        } else {
            Fusion::Rows {
                fused: vec![0.0; rows],
                scores: vec![(None, None); rows],
            }
        }
    }

    /// One ranking's votes (best first): 1 / (K + rank).
    fn vote(&mut self, rows: impl Iterator<Item = usize>) {
        for (r, row) in rows.enumerate() {
            let v = 1.0 / (retrieve::RRF_K + r as f32 + 1.0);
            match self {
                Fusion::Rows { fused, .. } => {
                    if let Some(f) = fused.get_mut(row) {
                        *f += v;
                    }
                }
                Fusion::Map(m) => m.entry(row).or_insert((0.0, None, None)).0 += v,
            }
        }
    }

    /// A voted row's BM25 score or cosine (rows without votes are not kept).
    fn score(&mut self, row: usize, bm25: Option<f32>, cos: Option<f32>) {
        let slot: Option<(&mut Option<f32>, &mut Option<f32>)> = match self {
            Fusion::Rows { scores, .. } => scores.get_mut(row).map(|(b, c)| (b, c)),
            Fusion::Map(m) => m.get_mut(&row).map(|(_, b, c)| (b, c)),
        };
        if let Some((b, c)) = slot {
            if bm25.is_some() {
                *b = bm25;
            }
            if cos.is_some() {
                *c = cos;
            }
        }
    }

    /// The best `top_k` rows `live` accepts, best first, with their scores.
    fn best(self, top_k: usize, live: impl Fn(usize) -> bool) -> Vec<(usize, Option<f32>, Option<f32>)> {
        let mut order: Vec<(usize, f32, Option<f32>, Option<f32>)> = match self {
            Fusion::Rows { fused, scores } => fused
                .iter()
                .enumerate()
                .filter(|&(row, f)| *f > 0.0 && live(row))
                .map(|(row, f)| (row, *f, scores[row].0, scores[row].1))
                .collect(),
            Fusion::Map(m) => m
                .into_iter()
                .filter(|&(row, (f, _, _))| f > 0.0 && live(row))
                .map(|(row, (f, b, c))| (row, f, b, c))
                .collect(),
        };
        let better = |a: &(usize, f32, Option<f32>, Option<f32>), b: &(usize, f32, Option<f32>, Option<f32>)| {
            b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
        };
        if top_k < order.len() {
            order.select_nth_unstable_by(top_k, better);
            order.truncate(top_k);
        }
        order.sort_by(better);
        order.into_iter().map(|(row, _, b, c)| (row, b, c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(row: &'static str, bm25: Option<f32>, cos: Option<f32>) -> Scored<&'static str> {
        Scored {
            row,
            bm25,
            len: 0,
            tf: Vec::new(),
            cos,
            scopes: 0,
        }
    }

    /// The first `k` units of the reciprocal-rank fusion of `lists` (row numbers): what
    /// an index's own fusion must answer.
    fn fused_units(ix: &RecallIndex, lists: &[Vec<usize>], k: usize) -> Vec<Unit> {
        retrieve::rrf(lists, retrieve::RRF_K)
            .into_iter()
            .filter_map(|n| ix.ids[n])
            .take(k)
            .collect()
    }

    /// The whole BM25 and dense rankings of `q` (row numbers, best first).
    fn whole_rankings(ix: &RecallIndex, q: &str, qv: &[f32]) -> (Vec<usize>, Vec<usize>) {
        let terms = retrieve::query_terms(q);
        let bm25 = ix
            .bm25
            .ranked_terms(&terms, usize::MAX)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let dense = ix.dense_ranking(Some(qv), 0.2).into_iter().map(|(n, _)| n).collect();
        (bm25, dense)
    }

    /// The units [`SearchIndex::search_scored`] answers, in its order.
    fn scored_units(ix: &RecallIndex, q: &str, qv: Option<&[f32]>, k: usize) -> Vec<Unit> {
        ix.search_scored(q, qv, 0.2, k)
            .rows
            .into_iter()
            .map(|r| r.row)
            .collect()
    }

    /// Rows without term statistics (scored by their own BM25 score).
    fn ranked(rows: Vec<Scored<&'static str>>) -> Ranked<&'static str> {
        Ranked {
            stats: retrieve::TermStats {
                n: 0,
                total_len: 0,
                df: vec![0],
            },
            rows,
        }
    }

    #[test]
    fn merge_ranks_two_indexes_rows_as_one_list() {
        // BM25 alone: by score across the lists, whichever list a row came from.
        let merged = merge(
            vec![
                ranked(vec![scored("e1", Some(3.0), None), scored("e2", Some(1.0), None)]),
                ranked(vec![scored("p1", Some(2.0), None), scored("p0", Some(0.0), None)]),
            ],
            10,
        );
        assert_eq!(merged, ["e1", "p1", "e2"], "a zero score is no match");
        // With cosines: reciprocal-rank fusion of the two global orders; a row found
        // by its vector alone still ranks.
        let merged = merge(
            vec![
                ranked(vec![scored("e1", Some(3.0), Some(0.3))]),
                ranked(vec![scored("p1", Some(2.0), Some(0.9)), scored("p2", None, Some(0.8))]),
            ],
            2,
        );
        assert_eq!(merged.len(), 2, "cut to top_k");
        assert_eq!(merged[0], "p1", "second by BM25, first by cosine: {merged:?}");
    }

    #[test]
    fn two_indexes_merged_rank_as_one_index_over_both() {
        let texts = [
            "red apple pie",
            "green pear",
            "red car red paint",
            "apple tree in the garden",
            "a red apple",
            "pear and apple salad",
            "the car is green",
        ];
        let mut one = RecallIndex::default();
        let (mut events, mut passages) = (RecallIndex::default(), RecallIndex::default());
        for (i, t) in texts.iter().enumerate() {
            let k = Unit::Event(i as i64);
            one.add(&k, t);
            if i % 3 == 0 { &mut events } else { &mut passages }.add(&k, t);
        }
        for q in ["red apple", "green car", "pear salad garden"] {
            let single = merge(vec![one.search_scored(q, None, 0.2, 10)], 10);
            let split = merge(
                vec![
                    events.search_scored(q, None, 0.2, 10),
                    passages.search_scored(q, None, 0.2, 10),
                ],
                10,
            );
            assert_eq!(split, single, "{q}");
            assert_eq!(one.search(q, None, 0.2, 10), single, "{q}");
        }
        assert_eq!(one.search("red apple", None, 0.2, 10)[0], Unit::Event(4));
    }

    #[test]
    fn a_query_naming_someone_finds_their_own_words_on_its_theme_first() {
        // Forty short remarks of Melanie's (matching her name only), forty short turns
        // of Caroline's on the theme that address Melanie (BM25's and the dense side's
        // best), and three of Melanie's own on the theme, long and a little less close
        // by meaning than Caroline's.
        let mut rows: Vec<(&str, String, Vec<f32>)> = Vec::new();
        for i in 0..40 {
            rows.push(("Melanie", format!("thanks {i}"), vec![0.0, 1.0]));
            rows.push((
                "Caroline",
                format!("Melanie, the kids went hiking, day {i}"),
                vec![1.0, 0.01 * i as f32],
            ));
        }
        let theirs = [
            "we went camping with the kids and roasted marshmallows all night long",
            "I took the kids to a pottery workshop, we all made our own pots there",
            "off to go swimming with the kids after lunch today, talk to you soon",
        ];
        for t in theirs {
            rows.push(("Melanie", t.to_owned(), vec![1.0, 0.45]));
        }
        let mut one = RecallIndex::default();
        let (mut events, mut passages) = (RecallIndex::default(), RecallIndex::default());
        for (i, (who, t, v)) in rows.iter().enumerate() {
            let k = Unit::Event(i as i64);
            for ix in [&mut one, if i % 2 == 0 { &mut events } else { &mut passages }] {
                ix.add_unit(&k, 0, who, t);
                ix.put_vector(k, v);
            }
        }
        let want: Vec<Unit> = (80..83).map(Unit::Event).collect();
        let q = "What does Melanie do with the kids?";
        let qv = [1.0, 0.0];
        for v in [Some(&qv[..]), None] {
            // (Searched 20 deep: a BM25-only search ranks both lists to
            // `lexical_depth(top_k)`, which at 3 would stop above her rows.)
            let mut top = one.search(q, v, 0.2, 20)[..3].to_vec();
            top.sort();
            assert_eq!(top, want, "her words on the theme first (vector: {v:?})");
            // Two indexes merged rank as one (the person's rankings are rebuilt by
            // `merge`).
            let mut split = merge(
                vec![
                    events.search_scored(q, v, 0.2, 20),
                    passages.search_scored(q, v, 0.2, 20),
                ],
                3,
            );
            split.sort();
            assert_eq!(split, want, "vector: {v:?}");
            assert_eq!(one.finish(one.lexical(q), v, 0.2, 20), one.search_scored(q, v, 0.2, 20));
        }
        // Someone named who does not speak here, or no name: ranked as before.
        let before = |q: &str| {
            let (bm25, dense) = whole_rankings(&one, q, &qv);
            fused_units(&one, &[bm25, dense], 5)
        };
        let q = "What does Jon do with Melanie's friend?";
        let marked = people(&retrieve::query_terms(q), &name_mask(q, &retrieve::query_terms(q)));
        assert_eq!(
            marked,
            [["jon"], ["melani"]],
            "both names, as analysed, one person each"
        );
        let q = "What do they do with the kids?";
        assert_eq!(one.search(q, Some(&qv), 0.2, 5), before(q));
        assert!(name_mask(q, &retrieve::query_terms(q)).iter().all(|n| n.is_none()));
        let q = "What does Jon do with the kids?";
        assert_eq!(one.search(q, Some(&qv), 0.2, 5), before(q), "Jon never speaks here");
    }

    #[test]
    fn a_query_naming_two_people_ranks_each_ones_words_apart() {
        // Jon, Gina and Ann talk of business; the query names Jon and Gina.
        let mut ix = RecallIndex::default();
        let who = ["Jon", "Gina", "Ann"];
        for i in 0..60 {
            let id = Unit::Event(i);
            let text = format!("business {} love {i}", if i % 4 == 0 { "started" } else { "plans" });
            ix.add_unit(&id, 0, who[i as usize % 3], &text);
            ix.put_vector(id, &[1.0, (i % 7) as f32 * 0.2]);
        }
        let q = "Did Jon and Gina start a business out of what they love?";
        let qv = [1.0, 0.3];
        let (bm25, dense) = whole_rankings(&ix, q, &qv);
        // The whole rankings, then each person's own rows by each (the order the
        // index sums them in).
        let of = |list: &[usize], k: usize| -> Vec<usize> { list.iter().copied().filter(|n| n % 3 == k).collect() };
        let lists = [of(&bm25, 0), of(&dense, 0), of(&bm25, 1), of(&dense, 1)];
        let lists = [vec![bm25, dense], lists.to_vec()].concat();
        assert_eq!(scored_units(&ix, q, Some(&qv), 10), fused_units(&ix, &lists, 10));
        // Each row knows who of the two said it.
        let found = ix.search_scored(q, Some(&qv), 0.2, 60);
        for r in &found.rows {
            let Unit::Event(i) = r.row else { unreachable!() };
            assert_eq!(r.scopes, [1, 2, 0][i as usize % 3], "{i}");
        }
    }

    #[test]
    fn a_person_named_by_another_name_is_still_their_scope() {
        let mut ix = RecallIndex::default();
        let who = ["Melanie", "Caroline", "Robert"];
        for i in 0..30 {
            ix.add_unit(
                &Unit::Event(i),
                i * 1000,
                who[i as usize % 3],
                &format!("weekend plans {i}"),
            );
        }
        ix.add_unit(&Unit::Event(30), 31_000, "Robert", "Honestly, everyone calls me Bobby.");
        // The scopes the first rows are in, by who said them.
        let scopes_in = |ix: &RecallIndex, q: &str| -> Vec<u32> {
            let found = ix.search_scored(q, None, 0.2, 40);
            (0..3)
                .map(|k| {
                    found
                        .rows
                        .iter()
                        .find(|r| matches!(r.row, Unit::Event(i) if i < 30 && i % 3 == k))
                        .map_or(0, |r| r.scopes)
                })
                .collect()
        };
        let scopes = |q: &str| scopes_in(&ix, q);
        // The start of a name: Mel is Melanie, Caro is Caroline.
        assert_eq!(scopes("What are Mel's weekend plans?"), [1, 0, 0]);
        assert_eq!(scopes("What are Caro and Mel planning this weekend?"), [2, 1, 0]);
        // A name one said they go by.
        assert_eq!(scopes("What did Bobby plan for the weekend?"), [0, 0, 1]);
        // Too short to be a name's start, or no one's.
        assert_eq!(scopes("What are Me's weekend plans?"), [0, 0, 0]);
        assert_eq!(scopes("What are Rob's weekend plans?"), [0, 0, 1]);
        assert_eq!(scopes("What are Carl's weekend plans?"), [0, 0, 0]);
        // Claiming a speaker's own name as one's nickname does not make one them.
        ix.add_unit(&Unit::Event(40), 33_000, "Robert", "lol just call me Caroline");
        assert_eq!(scopes_in(&ix, "What are Caroline's weekend plans?"), [0, 1, 0]);
        // When someone here is called Mel, Mel is no one else.
        ix.add_unit(&Unit::Event(31), 32_000, "Mel", "weekend plans too");
        assert_eq!(scopes_in(&ix, "What are Mel's weekend plans?"), [0, 0, 0]);
    }

    #[test]
    fn she_soon_after_a_name_is_found_by_the_name() {
        let min = 60_000;
        let mut ix = RecallIndex::default();
        ix.add_unit(&Unit::Event(0), 0, "Owner", "Had lunch with Anna today, it was lovely");
        ix.add_unit(&Unit::Event(1), min, "Owner", "She is moving to Berlin next month");
        // Another conversation: "he" does not reach back to Anna.
        ix.add_unit(
            &Unit::Event(2),
            3 * 3_600_000,
            "Owner",
            "He is moving offices next week",
        );
        // A name of someone who speaks here is not whom "she" means.
        ix.add_unit(
            &Unit::Event(3),
            4 * 3_600_000,
            "Sam",
            "Thanks Owner, I will call Ben later",
        );
        ix.add_unit(&Unit::Event(4), 4 * 3_600_000 + min, "Owner", "Say hi to him from me");
        let found = ix.search("When is Anna moving?", None, 0.2, 5);
        assert_eq!(found[..2], [Unit::Event(1), Unit::Event(0)], "{found:?}");
        assert!(!ix.search("Anna", None, 0.2, 5).contains(&Unit::Event(2)));
        assert!(ix.search("Ben", None, 0.2, 5).contains(&Unit::Event(4)));
        assert!(ix.search("Owner", None, 0.2, 5).len() == 5, "speakers are every row's");
        // Three rows on, "her" no longer reaches back (a measured choice: a longer
        // reach lost multi-hop evidence on LoCoMo).
        for (i, t) in ["Ben says hi", "The weather is fine", "We met her at the station"]
            .iter()
            .enumerate()
        {
            ix.add_unit(
                &Unit::Event(5 + i as i64),
                4 * 3_600_000 + (2 + i as i64) * min,
                "Owner",
                t,
            );
        }
        assert!(!ix.search("Ben", None, 0.2, 10).contains(&Unit::Event(7)));
    }

    #[test]
    fn a_time_given_by_another_event_is_dated_by_what_was_said_of_it() {
        use crate::memory::text::dates::days_from_civil;
        let day = |m: i64, d: i64| days_from_civil(2023, m, d) * 86_400_000 + 12 * 3_600_000;
        let mut ix = RecallIndex::default();
        // Painting talk all year, short; a longer painting turn in the weeks before the
        // trip, which is talked of most on 20 June (planned once in May).
        for i in 0..24 {
            let m = 1 + (i % 12);
            if m != 6 {
                ix.add_unit(&Unit::Event(i), day(m, 2), "Mel", &format!("painting again {i}"));
            }
        }
        ix.add_unit(&Unit::Event(50), day(5, 1), "Mel", "planning a trip for summer");
        ix.add_unit(&Unit::Event(51), day(6, 20), "Mel", "the trip was wonderful");
        ix.add_unit(&Unit::Event(52), day(6, 20), "Mel", "photos from the trip soon");
        ix.add_unit(
            &Unit::Event(100),
            day(6, 5),
            "Mel",
            "I finished painting a sunset over the lake with soft orange and purple tones",
        );
        // The first painting turn (the trip's own turns match the question too).
        let top = |q: &str| -> Vec<Unit> {
            let trip = [Unit::Event(50), Unit::Event(51), Unit::Event(52)];
            ix.search(q, None, 0.2, 30)
                .into_iter()
                .filter(|u| !trip.contains(u))
                .collect()
        };
        assert_eq!(top("What did I paint before the trip?")[0], Unit::Event(100));
        // Without the event the short turns come first; an event nothing names is no time.
        assert_ne!(top("What did I paint?")[0], Unit::Event(100));
        assert_ne!(top("What did I paint before the cruise?")[0], Unit::Event(100));
        // After the trip is another month.
        assert_ne!(top("What did I paint after the trip?")[0], Unit::Event(100));
    }

    #[test]
    fn a_query_naming_a_time_finds_what_was_said_then_first() {
        use crate::memory::text::dates::days_from_civil;
        let day = |m: i64, d: i64| days_from_civil(2023, m, d) * 86_400_000 + 12 * 3_600_000;
        // Camping talk all year, short (BM25's best), and one longer turn in June;
        // another told early in July about June (still counts).
        let mut rows: Vec<(i64, i64, String)> = Vec::new();
        for i in 0..40 {
            let m = 1 + (i % 12);
            if m != 6 {
                rows.push((i, day(m, 10), format!("camping again {i}")));
            }
        }
        rows.push((
            100,
            day(6, 17),
            "we went camping with the kids at the lake and roasted marshmallows by the fire".into(),
        ));
        rows.push((
            101,
            day(7, 2),
            "last weekend we were camping in the mountains, the kids loved the hike up there".into(),
        ));
        let mut ix = RecallIndex::default();
        let (mut a, mut b) = (RecallIndex::default(), RecallIndex::default());
        for (id, ts, t) in &rows {
            ix.add_unit(&Unit::Event(*id), *ts, "Mel", t);
            if id % 2 == 0 { &mut a } else { &mut b }.add_unit(&Unit::Event(*id), *ts, "Mel", t);
        }
        let q = "When did we go camping in June?";
        let want = [Unit::Event(100), Unit::Event(101)];
        let mut top = ix.search(q, None, 0.2, 20)[..2].to_vec();
        top.sort();
        assert_eq!(top, want);
        // Two indexes merged rank as one.
        let mut split = merge(
            vec![a.search_scored(q, None, 0.2, 20), b.search_scored(q, None, 0.2, 20)],
            2,
        );
        split.sort();
        assert_eq!(split, want);
        // Without the time: the short turns first.
        let plain = ix.search("When did we go camping?", None, 0.2, 20);
        assert!(!plain[..2].contains(&Unit::Event(100)), "{plain:?}");
        // Whether anything was said then follows the rows that come and go.
        let june = period::period(q, 0).expect("a month");
        assert!(ix.anything_said_in(&june));
        ix.remove(&Unit::Event(100));
        assert!(ix.anything_said_in(&june), "told in July about June");
        ix.remove(&Unit::Event(101));
        assert!(!ix.anything_said_in(&june));
    }

    #[test]
    fn a_search_finished_after_its_vector_ranks_as_one_made_at_once() {
        let texts = [
            "red apple pie",
            "green pear",
            "red car red paint",
            "apple tree",
            "a red apple",
        ];
        let vector = |i: usize| -> Vec<f32> { vec![1.0, i as f32 * 0.3, (5 - i) as f32 * 0.2] };
        let build = || {
            let mut ix = RecallIndex::default();
            for (i, t) in texts.iter().enumerate() {
                ix.add(&Unit::Event(i as i64), t);
                ix.put_vector(Unit::Event(i as i64), &vector(i));
            }
            ix
        };
        let mut ix = build();
        let qv = vector(2);
        for q in ["red apple", "green car", "nothing matches"] {
            for v in [None, Some(qv.as_slice())] {
                for k in [1, 3, 10] {
                    assert_eq!(
                        ix.finish(ix.lexical(q), v, 0.2, k),
                        ix.search_scored(q, v, 0.2, k),
                        "{q} {k}"
                    );
                }
            }
        }
        // The fusion is `retrieve::rrf` of the two whole rankings, cut to top k.
        for q in ["red apple", "green car"] {
            let (bm25, dense) = whole_rankings(&ix, q, &qv);
            let want = fused_units(&ix, &[bm25, dense], 3);
            assert_eq!(scored_units(&ix, q, Some(&qv), 3), want, "{q}");
        }
        // Between the halves a row comes (found by its vector: its text was not ranked)
        // and one goes (left out).
        let lexical = ix.lexical("red apple");
        ix.add(&Unit::Event(9), "red apple red apple");
        ix.put_vector(Unit::Event(9), &qv);
        ix.remove(&Unit::Event(4));
        let late = ix.finish(lexical, Some(&qv), 0.2, 10);
        let rows: Vec<Unit> = late.rows.iter().map(|r| r.row).collect();
        assert!(!rows.contains(&Unit::Event(4)), "{rows:?}");
        let new = late
            .rows
            .iter()
            .find(|r| r.row == Unit::Event(9))
            .expect("found by its vector");
        assert_eq!(new.bm25, None, "its text came after the BM25 half");
        // A half from another index (this one rebuilt since) is ranked again.
        let rebuilt = build();
        let stale = ix.lexical("red apple");
        assert_eq!(
            rebuilt.finish(stale, Some(&qv), 0.2, 10),
            rebuilt.search_scored("red apple", Some(&qv), 0.2, 10)
        );
    }

    #[test]
    fn the_dense_ranking_is_the_best_rows_by_cosine_down_to_its_depth() {
        let mut ix = RecallIndex::default();
        let rows = DENSE_DEPTH + 300;
        for i in 0..rows {
            ix.add(&Unit::Event(i as i64), "text");
            // Cosines with the query [1, 0] fall with i.
            let angle = i as f32 / rows as f32;
            ix.put_vector(Unit::Event(i as i64), &[angle.cos(), angle.sin()]);
        }
        let ranked = ix.dense_ranking(Some(&[1.0, 0.0]), -1.0);
        assert_eq!(ranked.len(), DENSE_DEPTH);
        let ids: Vec<Unit> = ranked.iter().map(|&(n, _)| ix.ids[n].expect("a row")).collect();
        let want: Vec<Unit> = (0..DENSE_DEPTH as i64).map(Unit::Event).collect();
        assert_eq!(ids, want, "the best by cosine, best first");
        assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1));
    }
}
