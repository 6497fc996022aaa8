//! The graph tier (`DATA/memory/graph.db`): entities, relations between them and the
//! sentences they were learnt from. A plain struct over a SQLite connection; the actor
//! and the `memory_*` tools sit on top of it.
//!
//! Semantics follow the reference's later ("Head") behaviour where the spec recommends
//! it: keywords are lower-cased like the names they are matched against, breadth-first
//! expansion walks only the newly found entities (no duplicate relations), recall is
//! capped (50 hits per keyword, 20 entities, 200 relations per hop) and ranked.
//!
//! Differences from the reference, on purpose: times are Unix milliseconds; the
//! relation key's `session_id` is never NULL; old reference databases (relations table
//! without the UNIQUE key) are not migrated — this file is only ever created by us.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Transaction, params, params_from_iter};
use rusqlite_migration::{M, Migrations};

use crate::clock::now_ms;

/// Why a graph operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("graph database error: {0}; check disk space and permissions of DATA/memory")]
    Sql(#[from] rusqlite::Error),
    #[error("graph database migration failed: {0}; the file may be from a newer homed")]
    Migration(#[from] rusqlite_migration::Error),
    #[error("no criteria provided: give subject_contains, relation_type or target_contains")]
    NoCriteria,
    #[error("entity '{0}' not found; list entities with memory_recall or GET /api/v1/memory/graph")]
    NotFound(String),
    #[error("cannot merge '{0}' into itself; name two different entities")]
    SelfMerge(String),
}

/// The subject of every fact the owner states about themself (the rule distiller's,
/// in either language); shown as "user" / "用户" in the session's language.
pub const USER: &str = "用户";

/// One fact to commit: `subject —relation→ object`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct Triple {
    pub subject: String,
    pub subject_type: String,
    pub relation: String,
    pub object: String,
    pub object_type: String,
    /// 0 means "not given" and is stored as 1.0.
    pub confidence: f64,
    /// The sentence the fact was learnt from, kept once in `sentences`.
    #[serde(alias = "sentence_text")]
    pub sentence: String,
}

/// An entity as recalled.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Entity {
    pub id: i64,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub mention_count: i64,
    pub updated_at_ms: i64,
}

/// A relation as recalled, with its endpoints' names.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Relation {
    pub id: i64,
    pub source: String,
    pub target: String,
    pub relation: String,
    pub confidence: f64,
    pub session: String,
    pub turn: i64,
    pub created_at_ms: i64,
    pub sentence: Option<String>,
}

/// What a recall returns.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Recall {
    pub entities: Vec<Entity>,
    pub relations: Vec<Relation>,
}

/// How recalled entities and relations are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecallSort {
    /// Exact name, then prefix, then substring, then reached by expansion.
    #[default]
    Relevance,
    /// Most recently updated first.
    Recent,
}

impl RecallSort {
    /// `recent`, `time` and `newest` mean [`RecallSort::Recent`]; anything else relevance.
    pub fn parse(s: &str) -> Self {
        match s.trim().to_lowercase().as_str() {
            "recent" | "time" | "newest" => Self::Recent,
            _ => Self::Relevance,
        }
    }
}

/// Which relations a purge touches; non-empty fields are AND-ed.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default)]
pub struct PurgeCriteria {
    pub subject_contains: String,
    pub relation_type: String,
    pub target_contains: String,
}

/// The graph's headline numbers.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Introspection {
    pub entity_count: i64,
    /// Active relations only.
    pub relation_count: i64,
    /// Every status (active, deleted, archived).
    pub relations_total: i64,
    /// The ten most mentioned entities.
    pub memory_hotspots: Vec<Hotspot>,
}

/// One of [`Introspection::memory_hotspots`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hotspot {
    pub name: String,
    pub count: i64,
    #[serde(rename = "type")]
    pub kind: String,
}

/// Entities a keyword may match.
const MAX_PER_KEYWORD: usize = 50;
/// Entities a recall returns after expansion.
pub const MAX_RECALL_ENTITIES: usize = 20;
/// Relations fetched per expansion hop.
const MAX_RELATIONS_PER_HOP: usize = 200;
/// Entities of a full recall (no keywords, no seeds).
const MAX_FULL_ENTITIES: usize = 10_000;
/// Relations of a full recall.
const FULL_RECENT_RELATIONS: usize = 30;
/// Keywords too generic to decide which entity is the best match.
const GENERIC_KEYWORDS: &[&str] = &[
    "端口", "服务", "版本", "接口", "任务", "状态", "类型", "时间", "配置", "数量", "名称", "结果", "内容", "问题",
    "记录", "数据", "信息", "文件", "系统", "功能",
];

/// Is `name` acceptable as an entity? 2–50 characters with at least one letter, digit,
/// CJK ideograph, `-` or `_`. Invalid triples are skipped, not errors.
pub fn valid_entity_name(name: &str) -> bool {
    let n = name.chars().count();
    (2..=50).contains(&n)
        && name
            .chars()
            .any(|c| c.is_ascii_alphanumeric() || ('\u{4E00}'..='\u{9FFF}').contains(&c) || c == '-' || c == '_')
}

/// Relation types that name another name of their subject ("Melanie —nickname→ Mel"):
/// their object also becomes an alias of the subject, so a mention of it finds the
/// entity. Compared lower-case, with spaces and underscores alike. A bare "called" is
/// not one: "Ana —called→ her mother" is a phone call, not a name.
const ALIAS_RELATIONS: &[&str] = &[
    "alias",
    "aka",
    "also known as",
    "also called",
    "nickname",
    "nicknamed",
    "goes by",
    "is called",
    "别名",
    "又名",
    "也叫",
    "外号",
    "昵称",
    "小名",
    "绰号",
    "简称",
];

/// Does relation type `r` give its subject another name (`ALIAS_RELATIONS`)?
pub fn is_alias_relation(r: &str) -> bool {
    let r = r.trim().to_lowercase().replace('_', " ");
    ALIAS_RELATIONS.contains(&r.as_str())
}

pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../../../migrations/graph/0001_init.sql")),
        M::up(include_str!("../../../../migrations/graph/0002_no_merge.sql")),
        M::up(include_str!("../../../../migrations/graph/0003_provenance.sql")),
        M::up(include_str!("../../../../migrations/graph/0004_changed_index.sql")),
        M::up(include_str!("../../../../migrations/graph/0005_aliases.sql")),
    ])
}

/// The key of a no-merge marker: the two names sorted, joined with `||`.
pub fn no_merge_key(a: &str, b: &str) -> String {
    let (a, b) = (a.trim(), b.trim());
    if a <= b {
        format!("{a}||{b}")
    } else {
        format!("{b}||{a}")
    }
}

/// `%`/`_`-escaped `LIKE '%s%'` pattern.
fn contains_pattern(s: &str) -> String {
    let mut p = String::from("%");
    for c in s.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

const ENTITY_COLS: &str = "id, name, type, mention_count, updated_at";
/// Most facts one entity's snapshot document lists.
pub const MAX_SNAPSHOT_FACTS: usize = 60;
const RELATION_SELECT: &str = "SELECT r.id, s.name, t.name, r.relation_type, r.confidence, r.session_id, r.turn_id, \
     r.created_at, se.text FROM relations r JOIN entities s ON s.id = r.source_id \
     JOIN entities t ON t.id = r.target_id LEFT JOIN sentences se ON se.id = r.sentence_id AND r.sentence_id != 0";

fn entity_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entity> {
    Ok(Entity {
        id: r.get(0)?,
        name: r.get(1)?,
        kind: r.get(2)?,
        mention_count: r.get(3)?,
        updated_at_ms: r.get(4)?,
    })
}

fn relation_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Relation> {
    Ok(Relation {
        id: r.get(0)?,
        source: r.get(1)?,
        target: r.get(2)?,
        relation: r.get(3)?,
        confidence: r.get(4)?,
        session: r.get(5)?,
        turn: r.get(6)?,
        created_at_ms: r.get(7)?,
        sentence: r.get(8)?,
    })
}

/// The graph store.
pub struct GraphStore {
    conn: Connection,
}

impl GraphStore {
    /// Opens (creating) `path` with WAL and foreign keys on, and applies migrations.
    pub fn open(path: &Path) -> Result<Self, GraphError> {
        Self::init(crate::memory::open_db(path)?)
    }

    /// An in-memory graph (tests, evaluation).
    pub fn open_in_memory() -> Result<Self, GraphError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(mut conn: Connection) -> Result<Self, GraphError> {
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrations().to_latest(&mut conn)?;
        Ok(Self { conn })
    }

    /// Commits `triples` in one transaction; returns (entities written, relations
    /// created). Every endpoint upsert counts as an entity written (a known name gets
    /// its mention count raised); a relation already known in this session only gets
    /// its confidence refreshed and is not counted.
    pub fn commit(&mut self, triples: &[Triple], session: &str, turn: i64) -> Result<(usize, usize), GraphError> {
        self.commit_at(triples, session, turn, now_ms())
    }

    /// [`Self::commit`] at a given time.
    pub fn commit_at(
        &mut self,
        triples: &[Triple],
        session: &str,
        turn: i64,
        now: i64,
    ) -> Result<(usize, usize), GraphError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let (mut entities, mut relations) = (0, 0);
        for t in triples {
            let (s, r, o) = (t.subject.trim(), t.relation.trim(), t.object.trim());
            if s.is_empty() || r.is_empty() || o.is_empty() || !valid_entity_name(s) || !valid_entity_name(o) {
                tracing::debug!(subject = s, relation = r, object = o, "graph: invalid triple skipped");
                continue;
            }
            let sid = upsert_entity(&tx, s, &t.subject_type, now)?;
            let oid = upsert_entity(&tx, o, &t.object_type, now)?;
            entities += 2;
            let sentence_id = match t.sentence.trim() {
                "" => 0,
                text => {
                    tx.execute(
                        "INSERT OR IGNORE INTO sentences (text, created_at) VALUES (?1, ?2)",
                        params![text, now],
                    )?;
                    tx.query_row("SELECT id FROM sentences WHERE text = ?1", [text], |r| r.get(0))?
                }
            };
            let confidence = if t.confidence == 0.0 { 1.0 } else { t.confidence };
            let existing: Option<i64> = tx
                .query_row(
                    "SELECT id FROM relations WHERE source_id = ?1 AND target_id = ?2 AND relation_type = ?3 AND session_id = ?4",
                    params![sid, oid, r, session],
                    |row| row.get(0),
                )
                .optional()?;
            match existing {
                Some(id) => {
                    tx.execute(
                        "UPDATE relations SET confidence = ?1, updated_at = ?2 WHERE id = ?3",
                        params![confidence, now, id],
                    )?;
                }
                None => {
                    tx.execute(
                        "INSERT INTO relations (source_id, target_id, relation_type, confidence, status, session_id, \
                         turn_id, created_at, updated_at, date_bucket, sentence_id) \
                         VALUES (?1, ?2, ?3, ?4, 'active', ?5, ?6, ?7, ?7, date(?7 / 1000, 'unixepoch', 'localtime'), ?8)",
                        params![sid, oid, r, confidence, session, turn, now, sentence_id],
                    )?;
                    relations += 1;
                }
            }
            if is_alias_relation(r) && !o.eq_ignore_ascii_case(s) {
                tx.execute(
                    "INSERT OR IGNORE INTO aliases (alias, entity_id, created_at) VALUES (?1, ?2, ?3)",
                    params![o, sid, now],
                )?;
            }
        }
        tx.commit()?;
        Ok((entities, relations))
    }

    /// Recalls entities matching `keywords` (substring, case-insensitive) or named
    /// exactly in `seeds`, expanded breadth-first over active relations up to `depth`
    /// hops. No keywords and no seeds is a full recall: every entity by mention count
    /// and the 30 newest active relations.
    pub fn recall(
        &self,
        keywords: &[String],
        seeds: &[String],
        depth: usize,
        session: Option<&str>,
        sort: RecallSort,
    ) -> Result<Recall, GraphError> {
        let keywords: Vec<String> = keywords
            .iter()
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
            .collect();
        let seeds: Vec<&str> = seeds.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
        if keywords.is_empty() && seeds.is_empty() {
            return self.full_recall();
        }
        // Matched entities, in first-seen order.
        let mut found: Vec<Entity> = Vec::new();
        let mut seen: HashSet<i64> = HashSet::new();
        let mut by_kw = self.conn.prepare_cached(&format!(
            "SELECT {ENTITY_COLS} FROM entities WHERE LOWER(name) LIKE ?1 ESCAPE '\\' LIMIT ?2"
        ))?;
        for kw in &keywords {
            for e in by_kw.query_map(params![contains_pattern(kw), MAX_PER_KEYWORD], entity_row)? {
                let e = e?;
                if seen.insert(e.id) {
                    found.push(e);
                }
            }
        }
        // An alias finds its entity, whole (case-insensitive), as a keyword or a seed.
        let mut by_alias = self.conn.prepare_cached(&format!(
            "SELECT {ENTITY_COLS} FROM entities WHERE id IN (SELECT entity_id FROM aliases WHERE LOWER(alias) = ?1)"
        ))?;
        for kw in &keywords {
            for e in by_alias.query_map([kw], entity_row)? {
                let e = e?;
                if seen.insert(e.id) {
                    found.push(e);
                }
            }
        }
        let mut by_name = self
            .conn
            .prepare_cached(&format!("SELECT {ENTITY_COLS} FROM entities WHERE name = ?1"))?;
        for s in &seeds {
            let e = match by_name.query_row([s], entity_row).optional()? {
                Some(e) => Some(e),
                None => by_alias.query_row([s.to_lowercase()], entity_row).optional()?,
            };
            if let Some(e) = e
                && seen.insert(e.id)
            {
                found.push(e);
            }
        }
        let matched = found.len();
        let mut relations: Vec<Relation> = Vec::new();
        let mut rel_seen: HashSet<i64> = HashSet::new();
        let mut frontier: Vec<i64> = found.iter().map(|e| e.id).collect();
        for _ in 0..depth {
            if frontier.is_empty() {
                break;
            }
            let marks = vec!["?"; frontier.len()].join(",");
            // The UNION of two indexed lookups: with `source_id IN .. OR target_id IN ..`
            // plus `ORDER BY id` SQLite walked the whole table (44 ms at 100k entities).
            let mut sql = format!(
                "{RELATION_SELECT} WHERE r.id IN (SELECT id FROM relations WHERE source_id IN ({marks}) \
                 UNION SELECT id FROM relations WHERE target_id IN ({marks})) AND r.status = 'active'"
            );
            let mut args: Vec<rusqlite::types::Value> =
                frontier.iter().chain(frontier.iter()).map(|&id| id.into()).collect();
            if let Some(s) = session {
                sql.push_str(" AND r.session_id = ?");
                args.push(s.to_owned().into());
            }
            sql.push_str(&format!(" ORDER BY r.id LIMIT {MAX_RELATIONS_PER_HOP}"));
            let mut stmt = self.conn.prepare(&sql)?;
            let hop: Vec<Relation> = stmt
                .query_map(params_from_iter(args), relation_row)?
                .collect::<Result<_, _>>()?;
            let mut next: Vec<i64> = Vec::new();
            for rel in hop {
                if !rel_seen.insert(rel.id) {
                    continue;
                }
                for name in [&rel.source, &rel.target] {
                    if let Some(e) = by_name.query_row([name], entity_row).optional()?
                        && seen.insert(e.id)
                    {
                        next.push(e.id);
                        found.push(e);
                    }
                }
                relations.push(rel);
            }
            frontier = next;
        }
        rank(&mut found, matched, &keywords, &seeds, sort);
        found.truncate(MAX_RECALL_ENTITIES);
        match sort {
            RecallSort::Relevance => {
                relations.sort_by(|a, b| b.confidence.total_cmp(&a.confidence).then(a.id.cmp(&b.id)))
            }
            RecallSort::Recent => relations.sort_by(|a, b| {
                b.created_at_ms
                    .cmp(&a.created_at_ms)
                    .then(b.turn.cmp(&a.turn))
                    .then(b.id.cmp(&a.id))
            }),
        }
        Ok(Recall {
            entities: found,
            relations,
        })
    }

    /// Names of entities that occur in `text` (longest first, at most 20): the seeds of
    /// a recall phrased as a sentence, where segmentation may glue a name to the next
    /// word ("张三住在哪里" segments as 张三住 / 在 / 哪里). Case-insensitive (ASCII, as
    /// SQLite's `lower`), and a name that starts or ends with a Latin letter or digit
    /// must do so at a word boundary: "biscuit" finds Biscuit, "Also" does not find Al.
    pub fn names_in(&self, text: &str) -> Result<Vec<String>, GraphError> {
        let lower = text.to_ascii_lowercase();
        let mut stmt = self.conn.prepare_cached(
            "SELECT name FROM entities WHERE instr(?1, lower(name)) > 0 ORDER BY length(name) DESC, mention_count DESC LIMIT 60",
        )?;
        let found: Vec<String> = stmt.query_map([&lower], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok(found
            .into_iter()
            .filter(|n| mentioned_as_word(&lower, &n.to_ascii_lowercase()))
            .take(20)
            .collect())
    }

    /// Entities with an id above `id` (those committed since), by id: how the mention
    /// index keeps up.
    /// Aliases inserted after row `id`: `(row, alias, the entity's name)`, by row (the
    /// mention index catches up with them as with the entities).
    pub fn aliases_after(&self, id: i64) -> Result<Vec<(i64, String, String)>, GraphError> {
        let mut st = self.conn.prepare_cached(
            "SELECT a.id, a.alias, e.name FROM aliases a JOIN entities e ON e.id = a.entity_id WHERE a.id > ?1 ORDER BY a.id",
        )?;
        let rows = st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The other names of entity `name` (oldest first).
    pub fn aliases_of(&self, name: &str) -> Result<Vec<String>, GraphError> {
        let mut st = self.conn.prepare_cached(
            "SELECT a.alias FROM aliases a JOIN entities e ON e.id = a.entity_id WHERE e.name = ?1 ORDER BY a.id",
        )?;
        let rows = st.query_map([name.trim()], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn entities_after(&self, id: i64) -> Result<Vec<(i64, String)>, GraphError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, name FROM entities WHERE id > ?1 ORDER BY id")?;
        let rows = st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The `limit` most connected entities (most active relations, then most
    /// mentioned) and the active relations among them: what a person sees first when
    /// opening the graph, before typing a name. Entities without relations fill the
    /// rest of the `limit` by mentions, so a young graph still shows what it has.
    pub fn most_connected(&self, limit: usize) -> Result<Recall, GraphError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT e.id, e.name, e.type, e.mention_count, e.updated_at FROM entities e
             LEFT JOIN (SELECT id, COUNT(*) AS n FROM (
                 SELECT source_id AS id FROM relations WHERE status = 'active'
                 UNION ALL SELECT target_id FROM relations WHERE status = 'active') GROUP BY id) d
               ON d.id = e.id
             ORDER BY COALESCE(d.n, 0) DESC, e.mention_count DESC, e.id LIMIT ?1",
        )?;
        let entities: Vec<Entity> = stmt.query_map([limit as i64], entity_row)?.collect::<Result<_, _>>()?;
        // The ids are the database's own integers: safe to write into the statement.
        let ids = entities.iter().map(|e| e.id.to_string()).collect::<Vec<_>>().join(",");
        let relations = if ids.is_empty() {
            Vec::new()
        } else {
            let mut stmt = self.conn.prepare(&format!(
                "{RELATION_SELECT} WHERE r.status = 'active' AND r.source_id IN ({ids}) AND r.target_id IN ({ids})
                 ORDER BY r.confidence DESC, r.id DESC LIMIT {MAX_RELATIONS_PER_HOP}"
            ))?;
            stmt.query_map([], relation_row)?.collect::<Result<_, _>>()?
        };
        Ok(Recall { entities, relations })
    }

    /// The entities whose facts changed after `since_ms` (the entity, or any relation
    /// of it — a deletion too), oldest change first, at most `limit`; each with its
    /// active facts (at most [`MAX_SNAPSHOT_FACTS`], the most confident first) and the
    /// time of its last change. What the graph → document snapshot writes.
    pub fn changed_since(&self, since_ms: i64, limit: usize) -> Result<Vec<(Entity, Vec<Relation>, i64)>, GraphError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT e.id, e.name, e.type, e.mention_count, e.updated_at, c.changed FROM entities e JOIN (
                 SELECT id, MAX(t) AS changed FROM (
                     SELECT source_id AS id, updated_at AS t FROM relations WHERE updated_at > ?1
                     UNION ALL SELECT target_id, updated_at FROM relations WHERE updated_at > ?1
                     UNION ALL SELECT id, updated_at FROM entities WHERE updated_at > ?1)
                 GROUP BY id) c ON c.id = e.id
             ORDER BY c.changed, e.id LIMIT ?2",
        )?;
        let changed: Vec<(Entity, i64)> = stmt
            .query_map(params![since_ms, limit as i64], |r| Ok((entity_row(r)?, r.get(5)?)))?
            .collect::<Result<_, _>>()?;
        let mut facts = self.conn.prepare_cached(&format!(
            "{RELATION_SELECT} WHERE r.status = 'active' AND (r.source_id = ?1 OR r.target_id = ?1)
             ORDER BY r.confidence DESC, r.id LIMIT {MAX_SNAPSHOT_FACTS}"
        ))?;
        let mut out = Vec::with_capacity(changed.len());
        for (e, at) in changed {
            let rels = facts.query_map([e.id], relation_row)?.collect::<Result<_, _>>()?;
            out.push((e, rels, at));
        }
        Ok(out)
    }

    fn full_recall(&self) -> Result<Recall, GraphError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {ENTITY_COLS} FROM entities ORDER BY mention_count DESC, id LIMIT {MAX_FULL_ENTITIES}"
        ))?;
        let entities = stmt.query_map([], entity_row)?.collect::<Result<_, _>>()?;
        let mut stmt = self.conn.prepare_cached(&format!(
            "{RELATION_SELECT} WHERE r.status = 'active' ORDER BY r.created_at DESC, r.id DESC LIMIT {FULL_RECENT_RELATIONS}"
        ))?;
        let relations = stmt.query_map([], relation_row)?.collect::<Result<_, _>>()?;
        Ok(Recall { entities, relations })
    }

    /// Marks matching relations `deleted` (soft) or deletes them and the entities left
    /// without relations (hard). Returns how many relations were affected.
    /// Records that `a` and `b` must not be proposed for merging for `rounds` merge
    /// rounds (0 lifts a marker).
    pub fn block_merge(&mut self, a: &str, b: &str, rounds: u32) -> Result<(), GraphError> {
        let key = no_merge_key(a, b);
        if rounds == 0 {
            self.conn.execute("DELETE FROM no_merge WHERE pair = ?1", [key])?;
        } else {
            self.conn.execute(
                "INSERT INTO no_merge (pair, rounds) VALUES (?1, ?2)
                 ON CONFLICT (pair) DO UPDATE SET rounds = excluded.rounds",
                rusqlite::params![key, rounds],
            )?;
        }
        Ok(())
    }

    /// The active no-merge markers (pair keys).
    pub fn no_merge_pairs(&self) -> Result<std::collections::HashSet<String>, GraphError> {
        let mut st = self.conn.prepare("SELECT pair FROM no_merge")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One merge round passed over these blocked pairs: their counts go down; a
    /// marker at zero is gone.
    pub fn tick_no_merge(&mut self, pairs: &[String]) -> Result<(), GraphError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for p in pairs {
            tx.execute("DELETE FROM no_merge WHERE pair = ?1 AND rounds <= 1", [p])?;
            tx.execute("UPDATE no_merge SET rounds = rounds - 1 WHERE pair = ?1", [p])?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn purge(&mut self, c: &PurgeCriteria, hard: bool) -> Result<usize, GraphError> {
        let mut conds = Vec::new();
        let mut args: Vec<String> = Vec::new();
        if !c.subject_contains.trim().is_empty() {
            conds.push("LOWER(s.name) LIKE ? ESCAPE '\\'");
            args.push(contains_pattern(c.subject_contains.trim()));
        }
        if !c.relation_type.trim().is_empty() {
            conds.push("r.relation_type = ?");
            args.push(c.relation_type.trim().to_owned());
        }
        if !c.target_contains.trim().is_empty() {
            conds.push("LOWER(t.name) LIKE ? ESCAPE '\\'");
            args.push(contains_pattern(c.target_contains.trim()));
        }
        if conds.is_empty() {
            return Err(GraphError::NoCriteria);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let ids: Vec<i64> = {
            let mut stmt = tx.prepare(&format!(
                "SELECT r.id FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id \
                 WHERE {}{}",
                conds.join(" AND "),
                if hard { "" } else { " AND r.status != 'deleted'" }
            ))?;
            stmt.query_map(params_from_iter(args), |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        for id in &ids {
            if hard {
                tx.execute("DELETE FROM relations WHERE id = ?1", [id])?;
            } else {
                tx.execute(
                    "UPDATE relations SET status = 'deleted', updated_at = ?2 WHERE id = ?1",
                    params![id, now_ms()],
                )?;
            }
        }
        if hard {
            tx.execute(
                "DELETE FROM entities WHERE id NOT IN (SELECT source_id FROM relations UNION SELECT target_id FROM relations)",
                [],
            )?;
        }
        tx.commit()?;
        Ok(ids.len())
    }

    /// Deletes the relations `source —relation→ target` (exact names; any status), then
    /// the entities left without relations: the first half of an edit, which must touch
    /// only the fact it names (`Al likes chess` is not `Alice likes chess`).
    pub fn delete_triple(&mut self, source: &str, relation: &str, target: &str) -> Result<usize, GraphError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n = tx.execute(
            "DELETE FROM relations WHERE relation_type = ?2 \
             AND source_id = (SELECT id FROM entities WHERE name = ?1) \
             AND target_id = (SELECT id FROM entities WHERE name = ?3)",
            params![source.trim(), relation.trim(), target.trim()],
        )?;
        if n > 0 {
            tx.execute(
                "DELETE FROM entities WHERE id NOT IN (SELECT source_id FROM relations UNION SELECT target_id FROM relations)",
                [],
            )?;
        }
        tx.commit()?;
        Ok(n)
    }

    /// Soft-deletes one relation by its id (the memory page's delete: exact, unlike
    /// the substring criteria of [`Self::purge`]); answers whether it was active.
    pub fn soft_delete_relation(&mut self, id: i64) -> Result<bool, GraphError> {
        Ok(self.conn.execute(
            "UPDATE relations SET status = 'deleted', updated_at = ?2 WHERE id = ?1 AND status != 'deleted'",
            params![id, now_ms()],
        )? > 0)
    }

    /// Soft-deletes the active relations `source —relation→ *` (exact names); returns
    /// how many.
    pub fn soft_delete_exact(&mut self, source: &str, relation: &str) -> Result<usize, GraphError> {
        Ok(self.conn.execute(
            "UPDATE relations SET status = 'deleted', updated_at = ?3 WHERE status = 'active' AND relation_type = ?2 \
             AND source_id = (SELECT id FROM entities WHERE name = ?1)",
            params![source.trim(), relation, now_ms()],
        )?)
    }

    /// Archives active relations created more than `days` days before `now_ms`.
    pub fn archive(&mut self, days: u32, now_ms: i64) -> Result<usize, GraphError> {
        let cutoff = now_ms - i64::from(days) * 86_400_000;
        Ok(self.conn.execute(
            "UPDATE relations SET status = 'archived', updated_at = ?2 WHERE status = 'active' AND created_at < ?1",
            params![cutoff, now_ms],
        )?)
    }

    /// Folds `source` into `target`: active relations re-pointed (self-loops dropped),
    /// mention counts summed, `source` deleted. Returns the relations redirected.
    pub fn merge_entities(&mut self, source: &str, target: &str) -> Result<usize, GraphError> {
        if source.trim() == target.trim() {
            return Err(GraphError::SelfMerge(source.to_owned()));
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let src = entity_id(&tx, source)?.ok_or_else(|| GraphError::NotFound(source.to_owned()))?;
        let tgt = entity_id(&tx, target)?.ok_or_else(|| GraphError::NotFound(target.to_owned()))?;
        // A relation the target already has (same key) stays with the source and goes
        // away with it below.
        let mut moved = tx.execute(
            "UPDATE OR IGNORE relations SET source_id = ?2 WHERE source_id = ?1 AND status = 'active'",
            params![src, tgt],
        )?;
        moved += tx.execute(
            "UPDATE OR IGNORE relations SET target_id = ?2 WHERE target_id = ?1 AND status = 'active'",
            params![src, tgt],
        )?;
        tx.execute("DELETE FROM relations WHERE source_id = target_id", [])?;
        tx.execute("DELETE FROM relations WHERE source_id = ?1 OR target_id = ?1", [src])?;
        // The source's name and its aliases become the target's (inserted anew, so the
        // mention index sees them; the source's own rows go with it below).
        tx.execute(
            "INSERT OR IGNORE INTO aliases (alias, entity_id, created_at) \
             SELECT alias, ?2, ?3 FROM aliases WHERE entity_id = ?1 \
             UNION ALL SELECT name, ?2, ?3 FROM entities WHERE id = ?1",
            params![src, tgt, now_ms()],
        )?;
        tx.execute(
            "DELETE FROM aliases WHERE entity_id = ?1 AND LOWER(alias) = (SELECT LOWER(name) FROM entities WHERE id = ?1)",
            [tgt],
        )?;
        tx.execute(
            "UPDATE entities SET mention_count = mention_count + (SELECT mention_count FROM entities WHERE id = ?1), \
             updated_at = ?3 WHERE id = ?2",
            params![src, tgt, now_ms()],
        )?;
        tx.execute("DELETE FROM entities WHERE id = ?1", [src])?;
        tx.commit()?;
        Ok(moved)
    }

    /// Deletes an entity and every relation touching it; returns the relations deleted.
    pub fn delete_entity(&mut self, name: &str) -> Result<usize, GraphError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let id = entity_id(&tx, name)?.ok_or_else(|| GraphError::NotFound(name.to_owned()))?;
        let n = tx.execute("DELETE FROM relations WHERE source_id = ?1 OR target_id = ?1", [id])?;
        tx.execute("DELETE FROM entities WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(n)
    }

    /// Counts and the ten most mentioned entities.
    pub fn introspect(&self) -> Result<Introspection, GraphError> {
        let count = |sql: &str| self.conn.query_row(sql, [], |r| r.get::<_, i64>(0));
        let mut stmt = self.conn.prepare_cached(
            "SELECT name, mention_count, type FROM entities ORDER BY mention_count DESC, id LIMIT 10",
        )?;
        let memory_hotspots = stmt
            .query_map([], |r| {
                Ok(Hotspot {
                    name: r.get(0)?,
                    count: r.get(1)?,
                    kind: r.get(2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(Introspection {
            entity_count: count("SELECT COUNT(*) FROM entities")?,
            relation_count: count("SELECT COUNT(*) FROM relations WHERE status = 'active'")?,
            relations_total: count("SELECT COUNT(*) FROM relations")?,
            memory_hotspots,
        })
    }

    /// Active relations with a source sentence that were never reviewed, lowest
    /// confidence first: what the review heartbeat asks the model to check.
    pub fn review_candidates(&self, limit: usize) -> Result<Vec<Relation>, GraphError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "{RELATION_SELECT} WHERE r.status = 'active' AND r.sentence_id != 0 AND r.reviewed_at = 0 ORDER BY r.confidence, r.id LIMIT ?1"
        ))?;
        Ok(stmt.query_map([limit], relation_row)?.collect::<Result<_, _>>()?)
    }

    /// Marks a relation as reviewed at `at_ms` (its sentence stays: provenance).
    pub fn mark_reviewed(&mut self, relation_id: i64, at_ms: i64) -> Result<(), GraphError> {
        self.conn.execute(
            "UPDATE relations SET reviewed_at = ?2 WHERE id = ?1",
            rusqlite::params![relation_id, at_ms.max(1)],
        )?;
        Ok(())
    }

    /// Deletes sentences no relation points at; returns how many.
    pub fn cleanup_orphaned_sentences(&mut self) -> Result<usize, GraphError> {
        Ok(self.conn.execute(
            "DELETE FROM sentences WHERE id NOT IN (SELECT sentence_id FROM relations WHERE sentence_id != 0)",
            [],
        )?)
    }

    /// The entity pairs merge rounds proposed (keys of [`no_merge_key`]) and when.
    pub fn proposed_pairs(&self) -> Result<HashMap<String, i64>, GraphError> {
        let mut st = self.conn.prepare("SELECT pair, at_ms FROM merge_proposed")?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A merge round proposed these pairs at `at_ms`.
    pub fn record_proposed(&mut self, pairs: &[String], at_ms: i64) -> Result<(), GraphError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for p in pairs {
            tx.execute(
                "INSERT INTO merge_proposed (pair, at_ms) VALUES (?1, ?2)
                 ON CONFLICT (pair) DO UPDATE SET at_ms = excluded.at_ms",
                params![p, at_ms],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes, in one transaction, what one source alone taught the graph: every
    /// relation committed under `session` (e.g. `doc:<id>`) and every relation learnt
    /// from one of `sentences` (its source sentence, exactly), then the entities and
    /// sentences among theirs that no relation refers to any more. Answers the
    /// relations deleted.
    pub fn forget_source(&mut self, session: &str, sentences: &[String]) -> Result<usize, GraphError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut touched: Vec<(i64, i64, i64, i64)> = Vec::new();
        {
            let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
            let mut by_session =
                tx.prepare("SELECT id, source_id, target_id, sentence_id FROM relations WHERE session_id = ?1")?;
            for t in by_session.query_map([session], row)? {
                touched.push(t?);
            }
            let mut by_sentence = tx.prepare(
                "SELECT r.id, r.source_id, r.target_id, r.sentence_id FROM relations r
                 JOIN sentences s ON s.id = r.sentence_id WHERE s.text = ?1",
            )?;
            for text in sentences {
                for t in by_sentence.query_map([text.trim()], row)? {
                    touched.push(t?);
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &(id, ..) in &touched {
            tx.execute("DELETE FROM relations WHERE id = ?1", [id])?;
        }
        for &(_, s, t, sentence) in &touched {
            for e in [s, t] {
                tx.execute(
                    "DELETE FROM entities WHERE id = ?1
                     AND NOT EXISTS (SELECT 1 FROM relations WHERE source_id = ?1 OR target_id = ?1)",
                    [e],
                )?;
            }
            if sentence != 0 {
                tx.execute(
                    "DELETE FROM sentences WHERE id = ?1
                     AND NOT EXISTS (SELECT 1 FROM relations WHERE sentence_id = ?1)",
                    [sentence],
                )?;
            }
        }
        tx.commit()?;
        Ok(touched.len())
    }
}

/// Does `name` occur in `text` (both lower-cased) with word boundaries at its Latin
/// ends? CJK ends need none: Chinese has no spaces between words.
fn mentioned_as_word(text: &str, name: &str) -> bool {
    let latin = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let (first, last) = (name.chars().next(), name.chars().next_back());
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        (!latin(first) || !latin(before)) && (!latin(last) || !latin(after))
    })
}

fn upsert_entity(tx: &Transaction<'_>, name: &str, kind: &str, now: i64) -> rusqlite::Result<i64> {
    let kind = if kind.trim().is_empty() { "Concept" } else { kind.trim() };
    tx.query_row(
        "INSERT INTO entities (name, type, mention_count, created_at, updated_at) VALUES (?1, ?2, 1, ?3, ?3) \
         ON CONFLICT(name) DO UPDATE SET mention_count = mention_count + 1, updated_at = excluded.updated_at \
         RETURNING id",
        params![name, kind, now],
        |r| r.get(0),
    )
}

fn entity_id(tx: &Transaction<'_>, name: &str) -> rusqlite::Result<Option<i64>> {
    tx.query_row("SELECT id FROM entities WHERE name = ?1", [name.trim()], |r| r.get(0))
        .optional()
}

/// Orders recalled entities. The first `matched` were found by keyword or seed; the
/// rest only by expansion (rank 3).
fn rank(found: &mut [Entity], matched: usize, keywords: &[String], seeds: &[&str], sort: RecallSort) {
    match sort {
        RecallSort::Recent => found.sort_by(|a, b| {
            b.updated_at_ms
                .cmp(&a.updated_at_ms)
                .then(b.mention_count.cmp(&a.mention_count))
                .then(a.name.chars().count().cmp(&b.name.chars().count()))
        }),
        RecallSort::Relevance => {
            let ranking: Vec<&str> = keywords
                .iter()
                .map(String::as_str)
                .filter(|k| !GENERIC_KEYWORDS.contains(k))
                .chain(seeds.iter().copied())
                .collect();
            let ranks: HashMap<i64, u8> = found
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let lower = e.name.to_lowercase();
                    let r = if i >= matched {
                        3
                    } else {
                        ranking
                            .iter()
                            .map(|k| {
                                let k = k.to_lowercase();
                                if lower == k {
                                    0
                                } else if lower.starts_with(&k) {
                                    1
                                } else {
                                    2
                                }
                            })
                            .min()
                            .unwrap_or(2)
                    };
                    (e.id, r)
                })
                .collect();
            found.sort_by(|a, b| {
                ranks[&a.id]
                    .cmp(&ranks[&b.id])
                    .then(b.mention_count.cmp(&a.mention_count))
                    .then(a.name.chars().count().cmp(&b.name.chars().count()))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, r: &str, o: &str) -> Triple {
        Triple {
            subject: s.into(),
            relation: r.into(),
            object: o.into(),
            ..Default::default()
        }
    }

    fn kw(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_upsert_counts_as_an_entity_written() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let (e, r) = g
            .commit(&[t("张三", "住在", "北京"), t("张三", "喜欢", "围棋")], "s", 1)
            .unwrap();
        assert_eq!((e, r), (4, 2));
        let i = g.introspect().unwrap();
        assert_eq!(i.entity_count, 3);
        assert_eq!(
            i.memory_hotspots[0],
            Hotspot {
                name: "张三".into(),
                count: 2,
                kind: "Concept".into()
            }
        );
    }

    #[test]
    fn what_changed_since_a_mark_comes_oldest_first_with_its_active_facts() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("Caroline", "lives in", "Boston")], "s", 1).unwrap();
        let all = g.changed_since(0, 10).unwrap();
        let names: Vec<&str> = all.iter().map(|(e, _, _)| e.name.as_str()).collect();
        assert_eq!(names.len(), 2);
        assert!(names.contains(&"Caroline") && names.contains(&"Boston"));
        assert!(all.iter().all(|(_, facts, _)| facts.len() == 1));
        let mark = all.iter().map(|(_, _, at)| *at).max().unwrap();
        assert!(g.changed_since(mark, 10).unwrap().is_empty(), "nothing after the mark");
        assert_eq!(g.changed_since(0, 1).unwrap().len(), 1, "the limit holds");
    }

    #[test]
    fn the_overview_is_the_most_connected_entities_and_the_relations_among_them() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(
            &[
                t("Caroline", "attends", "support group"),
                t("Caroline", "lives in", "Boston"),
                t("Caroline", "friend of", "Melanie"),
                t("Melanie", "paints", "sunsets"),
                t("Melanie", "lives in", "Boston"),
            ],
            "s",
            1,
        )
        .unwrap();
        let o = g.most_connected(3).unwrap();
        let names: Vec<&str> = o.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["Caroline", "Melanie", "Boston"]);
        let mut rels: Vec<(&str, &str)> = o
            .relations
            .iter()
            .map(|r| (r.source.as_str(), r.target.as_str()))
            .collect();
        rels.sort();
        assert_eq!(
            rels,
            [("Caroline", "Boston"), ("Caroline", "Melanie"), ("Melanie", "Boston")]
        );
        assert!(
            GraphStore::open_in_memory()
                .unwrap()
                .most_connected(30)
                .unwrap()
                .entities
                .is_empty()
        );
    }

    #[test]
    fn the_same_triple_is_one_relation_per_session() {
        let mut g = GraphStore::open_in_memory().unwrap();
        assert_eq!(g.commit(&[t("张三", "住在", "北京")], "s1", 1).unwrap().1, 1);
        assert_eq!(g.commit(&[t("张三", "住在", "北京")], "s1", 2).unwrap().1, 0);
        assert_eq!(g.introspect().unwrap().relations_total, 1);
        assert_eq!(g.commit(&[t("张三", "住在", "北京")], "s2", 3).unwrap().1, 1);
        assert_eq!(g.introspect().unwrap().relations_total, 2);
    }

    #[test]
    fn invalid_names_and_empty_fields_are_skipped() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let bad = [
            t("x", "is", "short"),
            t("!!", "is", "symbols"),
            t("ok-name", "", "other"),
            t(&"长".repeat(51), "r", "ab"),
        ];
        assert_eq!(g.commit(&bad, "s", 0).unwrap(), (0, 0));
        assert!(valid_entity_name("2024"), "digits are meaningful");
        assert!(valid_entity_name("北京"));
    }

    #[test]
    fn recall_expands_breadth_first_without_duplicate_relations() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("小明", "认识", "小红"), t("小红", "认识", "小刚")], "s", 0)
            .unwrap();
        let r = g.recall(&kw(&["小明"]), &[], 2, None, RecallSort::Relevance).unwrap();
        let names: HashSet<&str> = r.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, HashSet::from(["小明", "小红", "小刚"]));
        assert_eq!(r.relations.len(), 2);
        assert_eq!(r.entities[0].name, "小明", "the exact match ranks first");
        let r0 = g.recall(&kw(&["小明"]), &[], 0, None, RecallSort::Relevance).unwrap();
        assert_eq!((r0.entities.len(), r0.relations.len()), (1, 0));
        let r1 = g.recall(&[], &kw(&["小红"]), 1, None, RecallSort::Relevance).unwrap();
        assert_eq!((r1.entities.len(), r1.relations.len()), (3, 2));
    }

    #[test]
    fn recall_is_case_insensitive_and_filters_by_session() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("Rust", "is", "language")], "a", 0).unwrap();
        g.commit(&[t("Rust", "made_by", "Mozilla")], "b", 0).unwrap();
        let r = g
            .recall(&kw(&["RUST"]), &[], 1, Some("b"), RecallSort::Relevance)
            .unwrap();
        assert_eq!(r.relations.len(), 1);
        assert_eq!(r.relations[0].target, "Mozilla");
        let full = g.recall(&[], &[], 2, None, RecallSort::Relevance).unwrap();
        assert_eq!((full.entities.len(), full.relations.len()), (3, 2));
        assert_eq!(full.entities[0].name, "Rust");
    }

    #[test]
    fn names_in_finds_english_names_as_words_in_any_case() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(
            &[t("Biscuit", "is_a", "greyhound"), t("Al", "lives_in", "New York")],
            "s",
            0,
        )
        .unwrap();
        assert_eq!(g.names_in("what breed is biscuit?").unwrap(), ["Biscuit"]);
        assert_eq!(g.names_in("Also, I went to new york").unwrap(), ["New York"]);
        assert_eq!(g.names_in("Al and Biscuit").unwrap().len(), 2);
        assert!(g.names_in("biscuits are tasty").unwrap().is_empty());
    }

    #[test]
    fn names_in_finds_entities_mentioned_in_a_sentence() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("张三", "住在", "北京")], "s", 0).unwrap();
        assert_eq!(g.names_in("张三住在哪里？").unwrap(), vec!["张三".to_string()]);
        assert!(g.names_in("李四").unwrap().is_empty());
    }

    #[test]
    fn reviewed_relations_leave_the_review_queue() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let mut a = t("用户", "居住地", "北京");
        a.sentence = "我住在北京".into();
        a.confidence = 0.5;
        let mut b = t("用户", "喜好", "围棋");
        b.sentence = "我喜欢围棋".into();
        g.commit(&[b, a, t("无句", "关系", "对象")], "s", 0).unwrap();
        let q = g.review_candidates(5).unwrap();
        assert_eq!(
            q.iter().map(|r| r.target.as_str()).collect::<Vec<_>>(),
            vec!["北京", "围棋"]
        );
        g.mark_reviewed(q[0].id, 1_000).unwrap();
        assert_eq!(
            g.cleanup_orphaned_sentences().unwrap(),
            0,
            "a reviewed relation keeps its sentence"
        );
        assert_eq!(g.review_candidates(5).unwrap().len(), 1);
        let kept = g.recall(&kw(&["北京"]), &[], 1, None, RecallSort::Relevance).unwrap();
        assert!(
            kept.relations
                .iter()
                .any(|r| r.sentence.as_deref() == Some("我住在北京")),
            "{kept:?}"
        );
    }

    #[test]
    fn forgetting_a_source_takes_only_what_came_from_it_alone() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let mut a = t("Caroline", "lives_in", "Boston");
        a.sentence = "[2023-05-08] Caroline: I live in Boston".into();
        let mut b = t("Caroline", "likes", "pottery");
        b.sentence = "[2023-05-08] Caroline: I like pottery".into();
        g.commit(&[a.clone(), b], "doc:1", 0).unwrap();
        // The same fact from another document: its own relation, kept.
        g.commit(&[a], "doc:2", 0).unwrap();
        assert_eq!(g.forget_source("doc:1", &[]).unwrap(), 2);
        let r = g
            .recall(&kw(&["caroline"]), &[], 1, None, RecallSort::Relevance)
            .unwrap();
        let targets: Vec<&str> = r.relations.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, vec!["Boston"], "{r:?}");
        assert_eq!(
            g.recall(&kw(&["pottery"]), &[], 1, None, RecallSort::Relevance)
                .unwrap()
                .entities
                .len(),
            0,
            "an entity only that source mentioned is gone"
        );
        let sentences: i64 = g
            .conn
            .query_row("SELECT COUNT(*) FROM sentences", [], |r| r.get(0))
            .unwrap();
        assert_eq!(sentences, 1, "only the kept relation's sentence stays");
        // By sentence: what the rule distiller learnt from a turn goes with the turn.
        let mut c = t("用户", "居住地", "上海");
        c.sentence = "我住在上海".into();
        g.commit(&[c], "http", 0).unwrap();
        assert_eq!(
            g.forget_source("doc:none", &["我住在上海".into(), "never said".into()])
                .unwrap(),
            1
        );
        assert!(
            g.recall(&kw(&["上海"]), &[], 1, None, RecallSort::Relevance)
                .unwrap()
                .relations
                .is_empty()
        );
    }

    #[test]
    fn like_wildcards_in_keywords_are_literal() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("abc", "r", "xyz")], "s", 0).unwrap();
        assert!(
            g.recall(&kw(&["%"]), &[], 1, None, RecallSort::Relevance)
                .unwrap()
                .entities
                .is_empty()
        );
        assert!(
            g.recall(&kw(&["a_c"]), &[], 1, None, RecallSort::Relevance)
                .unwrap()
                .entities
                .is_empty()
        );
    }

    #[test]
    fn sentences_are_stored_once_and_returned_with_relations() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let mut a = t("张三", "住在", "北京");
        a.sentence = "我叫张三，我住在北京".into();
        let mut b = t("张三", "是", "工程师");
        b.sentence = a.sentence.clone();
        g.commit(&[a, b], "s", 0).unwrap();
        let r = g.recall(&kw(&["张三"]), &[], 1, None, RecallSort::Relevance).unwrap();
        assert!(
            r.relations
                .iter()
                .all(|r| r.sentence.as_deref() == Some("我叫张三，我住在北京"))
        );
        assert_eq!(
            g.conn
                .query_row("SELECT COUNT(*) FROM sentences", [], |r| r.get::<_, i64>(0))
                .unwrap(),
            1
        );
        g.purge(
            &PurgeCriteria {
                subject_contains: "张三".into(),
                ..Default::default()
            },
            true,
        )
        .unwrap();
        assert_eq!(g.cleanup_orphaned_sentences().unwrap(), 1);
    }

    #[test]
    fn soft_purge_keeps_rows_and_counts_separate() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("张三", "住在", "北京"), t("李四", "住在", "上海")], "s", 0)
            .unwrap();
        let crit = PurgeCriteria {
            subject_contains: "张三".into(),
            ..Default::default()
        };
        assert_eq!(g.purge(&crit, false).unwrap(), 1);
        let i = g.introspect().unwrap();
        assert_eq!((i.relation_count, i.relations_total, i.entity_count), (1, 2, 4));
        assert!(matches!(
            g.purge(&PurgeCriteria::default(), false),
            Err(GraphError::NoCriteria)
        ));
    }

    #[test]
    fn one_relation_is_deleted_by_id_and_only_once() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("Alice", "likes", "chess"), t("Malice", "likes", "chess")], "s", 0)
            .unwrap();
        let r = g
            .recall(&[], &["Alice".to_owned()], 1, None, RecallSort::Relevance)
            .unwrap();
        let id = r.relations.iter().find(|r| r.source == "Alice").unwrap().id;
        assert!(g.soft_delete_relation(id).unwrap());
        assert!(!g.soft_delete_relation(id).unwrap(), "already deleted");
        assert!(!g.soft_delete_relation(9_999).unwrap(), "no such id");
        let i = g.introspect().unwrap();
        assert_eq!((i.relation_count, i.relations_total), (1, 2), "Malice's relation stays");
    }

    #[test]
    fn hard_purge_deletes_rows_and_orphans() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("张三", "住在", "北京"), t("李四", "住在", "上海")], "s", 0)
            .unwrap();
        let crit = PurgeCriteria {
            relation_type: "住在".into(),
            target_contains: "北京".into(),
            ..Default::default()
        };
        assert_eq!(g.purge(&crit, true).unwrap(), 1);
        let i = g.introspect().unwrap();
        assert_eq!((i.relation_count, i.relations_total, i.entity_count), (1, 1, 2));
    }

    #[test]
    fn merge_repoints_relations_and_sums_mentions() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(
            &[
                t("老张", "住在", "北京"),
                t("老张", "认识", "张三"),
                t("张三", "喜欢", "围棋"),
            ],
            "s",
            0,
        )
        .unwrap();
        let moved = g.merge_entities("老张", "张三").unwrap();
        assert_eq!(
            moved, 2,
            "both of 老张's relations; 老张→张三 became a self-loop and is dropped"
        );
        let r = g.recall(&[], &kw(&["张三"]), 1, None, RecallSort::Relevance).unwrap();
        assert!(r.entities.iter().all(|e| e.name != "老张"));
        let rels: HashSet<(String, String)> = r
            .relations
            .iter()
            .map(|r| (r.relation.clone(), r.target.clone()))
            .collect();
        assert_eq!(
            rels,
            HashSet::from([("住在".into(), "北京".into()), ("喜欢".into(), "围棋".into())])
        );
        let zs = r.entities.iter().find(|e| e.name == "张三").unwrap();
        assert_eq!(zs.mention_count, 4);
        assert!(matches!(
            g.merge_entities("张三", "张三"),
            Err(GraphError::SelfMerge(_))
        ));
        assert!(matches!(g.merge_entities("无名", "张三"), Err(GraphError::NotFound(_))));
    }

    /// A merged entity's name, and a name a fact gives, are aliases: a seed or keyword
    /// naming them finds the entity; aliases move on with a later merge and go when the
    /// entity is deleted.
    #[test]
    fn merges_and_nickname_facts_make_aliases() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(
            &[
                t("Melanie", "paints", "sunsets"),
                t("Melanie", "nickname", "Mel"),
                t("Lanie Park", "plays", "violin"),
                t("王伟", "小名", "小王"),
            ],
            "s",
            0,
        )
        .unwrap();
        assert!(is_alias_relation("Also_Known_As") && is_alias_relation(" 又名") && !is_alias_relation("likes"));
        g.merge_entities("Lanie Park", "Melanie").unwrap();
        assert_eq!(g.aliases_of("Melanie").unwrap(), ["Mel", "Lanie Park"]);
        assert_eq!(g.aliases_of("王伟").unwrap(), ["小王"]);
        let names = |r: Recall| r.entities.into_iter().map(|e| e.name).collect::<Vec<_>>();
        let by_seed = g
            .recall(&[], &kw(&["Lanie Park"]), 0, None, RecallSort::Relevance)
            .unwrap();
        assert_eq!(names(by_seed), ["Melanie"]);
        let by_keyword = g.recall(&kw(&["小王"]), &[], 1, None, RecallSort::Relevance).unwrap();
        assert!(names(by_keyword).contains(&"王伟".to_owned()));
        let rows = g.aliases_after(0).unwrap();
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(rows.iter().all(|(_, a, e)| a != e));
        // Merged on: Melanie's aliases are inserted anew for the target, hers go.
        g.commit(&[t("Mel Smith", "lives in", "Leeds")], "s", 0).unwrap();
        g.merge_entities("Melanie", "Mel Smith").unwrap();
        assert_eq!(g.aliases_of("Mel Smith").unwrap(), ["Mel", "Lanie Park", "Melanie"]);
        assert!(
            g.aliases_after(rows.last().unwrap().0)
                .unwrap()
                .iter()
                .all(|(_, _, e)| e == "Mel Smith")
        );
        g.delete_entity("Mel Smith").unwrap();
        let left: Vec<String> = g.aliases_after(0).unwrap().into_iter().map(|(_, a, _)| a).collect();
        assert_eq!(left, ["小王"], "a deleted entity's aliases go with it");
    }

    #[test]
    fn delete_entity_removes_its_relations() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(&[t("张三", "住在", "北京"), t("李四", "认识", "张三")], "s", 0)
            .unwrap();
        assert_eq!(g.delete_entity("张三").unwrap(), 2);
        assert_eq!(g.introspect().unwrap().relations_total, 0);
        assert!(matches!(g.delete_entity("张三"), Err(GraphError::NotFound(_))));
    }

    #[test]
    fn archive_moves_only_old_relations() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let day = 86_400_000;
        g.commit_at(&[t("旧事", "发生在", "去年")], "s", 0, 1_000 * day)
            .unwrap();
        g.commit_at(&[t("新事", "发生在", "今天")], "s", 0, 1_029 * day)
            .unwrap();
        assert_eq!(g.archive(7, 1_030 * day).unwrap(), 1);
        let r = g.recall(&kw(&["事"]), &[], 1, None, RecallSort::Relevance).unwrap();
        assert_eq!(r.relations.len(), 1);
        assert_eq!(r.relations[0].source, "新事");
    }

    #[test]
    fn recent_sort_puts_the_newest_first() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit_at(&[t("项目A", "使用", "Go")], "s", 1, 1_000).unwrap();
        g.commit_at(&[t("项目B", "使用", "Rust")], "s", 2, 2_000).unwrap();
        let r = g
            .recall(&kw(&["项目"]), &[], 1, None, RecallSort::parse("newest"))
            .unwrap();
        assert_eq!(r.entities[0].name, "项目B");
        assert_eq!(r.relations[0].target, "Rust");
    }

    #[test]
    fn deleting_a_triple_touches_only_that_fact() {
        let mut g = GraphStore::open_in_memory().unwrap();
        g.commit(
            &[
                t("Al", "likes", "chess"),
                t("Alice", "likes", "chess"),
                t("Al", "likes", "chess club"),
            ],
            "s",
            0,
        )
        .unwrap();
        assert_eq!(g.delete_triple("Al", "likes", "chess").unwrap(), 1);
        let left: Vec<(String, String)> = g
            .recall(&[], &[], 0, None, RecallSort::Relevance)
            .unwrap()
            .relations
            .into_iter()
            .map(|r| (r.source, r.target))
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.contains(&("Alice".into(), "chess".into())) && left.contains(&("Al".into(), "chess club".into())));
        assert_eq!(g.delete_triple("Nobody", "likes", "chess").unwrap(), 0);
    }
}
