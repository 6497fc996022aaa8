//! `kernel/memory/graph`: the actor around [`GraphStore`] and the `memory_*` tools the
//! LLM calls. The actor only translates messages; replies are the reference's strings
//! so that prompts written for it keep working.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::addr::TAddr;
use crate::host::{Handles, HostContext, KernelActor};
use crate::i18n::Msg;
use crate::memory::graph::{GraphError, GraphStore, Introspection, PurgeCriteria, Recall, RecallSort, Triple};
use crate::memory::text::keywords::Keywords;
use crate::stages::{ToolHandler, ToolSpec};

/// The session graph facts are committed under (the reference used the agent id).
pub const AGENT_SESSION: &str = "agent";

/// Names `memory_recall` already returned, left out of later index blocks.
const RECALLED_CAPACITY: usize = 1024;
/// Entities a turn's input may seed the recall of facts with.
const MENTIONED: usize = 20;

/// The actor (runs on the blocking arbiter: every call is SQLite work).
pub struct GraphActor {
    store: GraphStore,
    /// FIFO of names the model already fetched with `memory_recall` (the index block
    /// does not repeat them).
    recalled: std::collections::VecDeque<String>,
    /// Which entities a turn's input mentions, by the words of their names (kept up
    /// with the entities committed since it last looked).
    mentions: super::mentions::Mentions,
}

impl GraphActor {
    pub fn new(store: GraphStore) -> Self {
        Self {
            store,
            recalled: Default::default(),
            mentions: Default::default(),
        }
    }

    /// The entities `input` mentions (see [`super::mentions`]), the index first brought
    /// up to date with what was committed since.
    fn mentioned(&mut self, input: &str) -> Vec<String> {
        match self.store.entities_after(self.mentions.last_id) {
            Ok(new) => {
                for (id, name) in new {
                    self.mentions.add(id, &name);
                }
            }
            Err(e) => tracing::warn!("graph: the mention index could not catch up: {e}"),
        }
        match self.store.aliases_after(self.mentions.last_alias) {
            Ok(new) => {
                for (row, alias, entity) in new {
                    self.mentions.add_alias(row, &alias, &entity);
                }
            }
            Err(e) => tracing::warn!("graph: the mention index could not catch up with aliases: {e}"),
        }
        self.mentions.find(input, MENTIONED)
    }

    fn mark_recalled(&mut self, names: impl IntoIterator<Item = String>) {
        for n in names {
            if !self.recalled.contains(&n) {
                if self.recalled.len() == RECALLED_CAPACITY {
                    self.recalled.pop_front();
                }
                self.recalled.push_back(n);
            }
        }
    }

    /// The `【记忆索引】` block for one input: entities the input names, with their
    /// neighbours (depth 2), minus those already recalled. Empty when there is nothing
    /// to point at. Only exact mentions are looked up — no jieba (its dictionary costs
    /// ~1 s and tens of MB to load, paid only when `memory_recall` is used) and no
    /// keyword substring scans (≈ 5 ms each at 100k entities) on every turn.
    pub fn index_block(&mut self, input: &str) -> String {
        if input.trim().is_empty() {
            return String::new();
        }
        let seeds = self.store.names_in(input).unwrap_or_default();
        if seeds.is_empty() {
            return String::new();
        }
        self.index_of(&seeds)
    }

    /// The index block of the entities reached from `seeds`.
    fn index_of(&mut self, seeds: &[String]) -> String {
        let Ok(r) = self.store.recall(&[], seeds, 2, None, RecallSort::Relevance) else {
            return String::new();
        };
        let entities: Vec<_> = r
            .entities
            .into_iter()
            .filter(|e| !self.recalled.contains(&e.name))
            .collect();
        format_index(&entities)
    }

    fn keywords(&mut self, text: &str) -> Vec<String> {
        // The process-wide extractor: built on first use (jieba's dictionary takes a
        // moment to load), shared with the document summaries.
        Keywords::shared().extract(text, 5)
    }

    /// Keywords and seeds of a recall query: its comma-separated parts as keywords;
    /// or, for a phrase, its jieba keywords plus the known entity names it contains
    /// as seeds (names are rarely in jieba's dictionary).
    fn query_terms(&mut self, query: &str) -> (Vec<String>, Vec<String>) {
        let parts: Vec<String> = query
            .split([',', '，'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if parts.len() > 1 {
            return (parts, Vec::new());
        }
        let seeds = self.store.names_in(query).unwrap_or_else(|e| {
            tracing::warn!("graph: name lookup failed: {e}");
            Vec::new()
        });
        let mut kws = self.keywords(query);
        if kws.is_empty() && seeds.is_empty() {
            kws.push(query.trim().to_owned());
        }
        (kws, seeds)
    }
}

impl KernelActor for GraphActor {
    const KIND: &'static str = "graph";
}

/// Why a graph tool call did nothing. Its text (the catalog's) is what the model
/// reads: the tools answer a refusal as their text, not as a failure.
#[derive(Debug, thiserror::Error)]
pub enum GraphRefusal {
    #[error("{}", Msg::BlockNamesInvalid.text())]
    BlockNamesInvalid,
    #[error("{}", Msg::BlockRoundsInvalid.text())]
    BlockRoundsInvalid,
    #[error("{}", Msg::CommitFailed { error: &.0.to_string() }.text())]
    CommitFailed(GraphError),
    #[error("{}", Msg::CommitNeedsTriples.text())]
    CommitNeedsTriples,
    #[error("{}", Msg::CommitNoValidTriples.text())]
    CommitNoValidTriples,
    #[error("{}", Msg::EditDeleteFailed { error: &.0.to_string() }.text())]
    EditDeleteFailed(GraphError),
    #[error("{}", Msg::EditNewRequired.text())]
    EditNewRequired,
    #[error("{}", Msg::EditOldRequired.text())]
    EditOldRequired,
    #[error("{}", Msg::EditWriteFailed { error: &.0.to_string() }.text())]
    EditWriteFailed(GraphError),
    #[error("{}", Msg::EntityDeleteFailed { error: &.0.to_string() }.text())]
    EntityDeleteFailed(GraphError),
    #[error("{}", Msg::GraphStatsFailed { error: &.0.to_string() }.text())]
    GraphStatsFailed(GraphError),
    #[error("{}", Msg::MergeFailed { error: &.0.to_string() }.text())]
    MergeFailed(GraphError),
    #[error("{}", Msg::MergeNamesRequired.text())]
    MergeNamesRequired,
    #[error("{}", Msg::NameRequired.text())]
    NameRequired,
    #[error("{}", Msg::PersonNameRequired.text())]
    PersonNameRequired,
    #[error("{}", Msg::PersonNetworkFailed { error: &.0.to_string() }.text())]
    PersonNetworkFailed(GraphError),
    #[error("{}", Msg::PersonQueryFailed { error: &.0.to_string() }.text())]
    PersonQueryFailed(GraphError),
    #[error("{}", Msg::PurgeFailed { error: &.0.to_string() }.text())]
    PurgeFailed(GraphError),
    #[error("{}", Msg::QueryRequired.text())]
    QueryRequired,
    #[error("{}", Msg::RecallFailed { error: &.0.to_string() }.text())]
    RecallFailed(GraphError),
    #[error("{}", Msg::RecordFailed { error: &.0.to_string() }.text())]
    RecordFailed(GraphError),
    #[error("{}", Msg::RelateArgsRequired.text())]
    RelateArgsRequired,
    #[error("{}", Msg::TraitArgsRequired.text())]
    TraitArgsRequired,
}

/// One graph tool call; answers the tool's reply text (`Err`: nothing was done).
#[derive(Message, Clone)]
#[rtype(result = "Result<String, GraphRefusal>")]
pub enum GraphCall {
    Recall {
        query: String,
        depth: usize,
        sort: RecallSort,
    },
    Commit {
        triples: Option<Vec<Triple>>,
    },
    Introspect,
    Merge {
        source: String,
        target: String,
    },
    DeleteEntity {
        name: String,
    },
    Purge {
        criteria: PurgeCriteria,
        mode: String,
    },
    Edit {
        old: [String; 3],
        new: [Option<String>; 3],
    },
    BlockMerge {
        a: String,
        b: String,
        rounds: Option<i64>,
    },
    PersonQuery {
        name: String,
    },
    PersonSetTrait {
        name: String,
        trait_: String,
        value: String,
    },
    PersonRelate {
        a: String,
        relation: String,
        b: String,
    },
    PersonNetwork {
        name: String,
        depth: usize,
    },
}

/// Recall for the API: `q` empty is a full recall, or with `top` the most connected
/// entities and the relations among them.
#[derive(Message)]
#[rtype(result = "Result<Recall, GraphError>")]
pub struct GraphQuery {
    pub q: String,
    pub depth: usize,
    pub sort: RecallSort,
    pub top: Option<usize>,
}

/// Commit triples (the rule distiller, the archive heartbeat).
#[derive(Message)]
#[rtype(result = "Result<(usize, usize), GraphError>")]
pub struct CommitTriples {
    pub triples: Vec<Triple>,
    pub session: String,
}

/// The merge heartbeat's proposals: one consolidation task text per candidate pair.
#[derive(Message)]
#[rtype(result = "Result<Vec<String>, GraphError>")]
pub struct ProposeMerges {
    /// Entity name → embedding (one space), for the cosine side of the similarity;
    /// empty without an embedder.
    pub vectors: std::collections::HashMap<String, Vec<f32>>,
    /// At most this many (the day's budget left, at most a round's worth).
    pub limit: usize,
}

/// The names of the most mentioned entities (at most `0`), to embed for a merge round.
#[derive(Message)]
#[rtype(result = "Result<Vec<String>, GraphError>")]
pub struct MergeNames(pub usize);

impl Handles<MergeNames> for GraphActor {
    type Reply = Result<Vec<String>, GraphError>;
    fn handle(&mut self, MergeNames(n): MergeNames, _: &mut HostContext<Self>) -> Self::Reply {
        let all = self.store.recall(&[], &[], 0, None, RecallSort::Relevance)?;
        let mut es = all.entities;
        es.sort_by(|a, b| b.mention_count.cmp(&a.mention_count).then(a.name.cmp(&b.name)));
        Ok(es.into_iter().take(n).map(|e| e.name).collect())
    }
}

/// Forgets what one source alone taught the graph (a document the owner deleted): the
/// relations committed under `session` (the archive heartbeat commits a document's facts
/// under `doc:<id>`) and those learnt from one of `sentences` (its turns as the rule
/// distiller stored them), with the entities and sentences left without any relation.
/// Answers the relations deleted.
#[derive(Message)]
#[rtype(result = "Result<usize, GraphError>")]
pub struct ForgetSource {
    pub session: String,
    pub sentences: Vec<String>,
}

impl Handles<ForgetSource> for GraphActor {
    type Reply = Result<usize, GraphError>;
    fn handle(&mut self, m: ForgetSource, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.forget_source(&m.session, &m.sentences)
    }
}

/// The entities whose facts changed after `since_ms`, with their active facts and the
/// time of their last change (the graph → document snapshot; `GraphStore::changed_since`).
#[derive(Message)]
#[rtype(result = "Result<Vec<(super::store::Entity, Vec<super::store::Relation>, i64)>, GraphError>")]
pub struct ChangedSince {
    pub since_ms: i64,
    pub limit: usize,
}

impl Handles<ChangedSince> for GraphActor {
    type Reply = Result<Vec<(super::store::Entity, Vec<super::store::Relation>, i64)>, GraphError>;
    fn handle(&mut self, m: ChangedSince, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.changed_since(m.since_ms, m.limit)
    }
}

/// The review heartbeat's tasks: one per relation to re-check; the relations are
/// marked reviewed (so each is reviewed once; their sentences stay: provenance).
#[derive(Message)]
#[rtype(result = "Result<Vec<String>, GraphError>")]
pub struct ProposeReviews {
    /// At most this many (the day's budget left, at most a round's worth).
    pub limit: usize,
}

impl Handles<ProposeMerges> for GraphActor {
    type Reply = Result<Vec<String>, GraphError>;
    fn handle(&mut self, m: ProposeMerges, _: &mut HostContext<Self>) -> Self::Reply {
        use crate::memory::lifecycle::maintenance::{merge_candidates_except, merge_task};
        let all = self.store.recall(&[], &[], 0, None, RecallSort::Relevance)?;
        let blocked = self.store.no_merge_pairs()?;
        // A pair proposed before comes again only once one of its entities changed: a
        // graph without new material proposes nothing (and costs no model call).
        let proposed = self.store.proposed_pairs()?;
        let (chosen, skipped) = merge_candidates_except(&all.entities, m.limit, &blocked, &m.vectors, Some(&proposed));
        let keys: Vec<String> = chosen
            .iter()
            .map(|(a, b, _)| crate::memory::graph::no_merge_key(&a.name, &b.name))
            .collect();
        self.store.record_proposed(&keys, crate::clock::now_ms())?;
        if !skipped.is_empty() {
            tracing::info!(pairs = ?skipped, "merge candidates skipped: blocked by memory_block_merge");
            self.store.tick_no_merge(&skipped)?;
        }
        Ok(chosen.iter().map(|(a, b, sim)| merge_task(a, b, *sim)).collect())
    }
}

impl Handles<ProposeReviews> for GraphActor {
    type Reply = Result<Vec<String>, GraphError>;
    fn handle(&mut self, m: ProposeReviews, _: &mut HostContext<Self>) -> Self::Reply {
        use crate::memory::lifecycle::maintenance::review_task;
        let rels = self.store.review_candidates(m.limit)?;
        let now = crate::clock::now_ms();
        for r in &rels {
            self.store.mark_reviewed(r.id, now)?;
        }
        Ok(rels.iter().map(review_task).collect())
    }
}

/// The graph's counts (memory status).
#[derive(Message)]
#[rtype(result = "Result<Introspection, GraphError>")]
pub struct GraphStats;

impl Handles<GraphQuery> for GraphActor {
    type Reply = Result<Recall, GraphError>;
    fn handle(&mut self, m: GraphQuery, _: &mut HostContext<Self>) -> Self::Reply {
        if let (true, Some(top)) = (m.q.trim().is_empty(), m.top) {
            return self.store.most_connected(top);
        }
        let (kws, seeds) = if m.q.trim().is_empty() {
            Default::default()
        } else {
            self.query_terms(&m.q)
        };
        self.store.recall(&kws, &seeds, m.depth, None, m.sort)
    }
}

impl Handles<CommitTriples> for GraphActor {
    type Reply = Result<(usize, usize), GraphError>;
    fn handle(&mut self, m: CommitTriples, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.commit(&m.triples, &m.session, 0)
    }
}

/// Commit facts each learnt at its own time (the archive heartbeat: a fact is dated
/// by the turn it was said in, not by the round that found it). Answers (entities,
/// relations) written.
#[derive(Message)]
#[rtype(result = "Result<(usize, usize), GraphError>")]
pub struct CommitDated {
    /// (Unix ms, the facts said then).
    pub groups: Vec<(i64, Vec<Triple>)>,
    pub session: String,
}

impl Handles<CommitDated> for GraphActor {
    type Reply = Result<(usize, usize), GraphError>;
    fn handle(&mut self, m: CommitDated, _: &mut HostContext<Self>) -> Self::Reply {
        let (mut entities, mut relations) = (0, 0);
        for (at, triples) in &m.groups {
            let (e, r) = self.store.commit_at(triples, &m.session, 0, *at)?;
            entities += e;
            relations += r;
        }
        Ok((entities, relations))
    }
}

/// Every active fact as a triple (a resident's temporary graph, promoted to the main
/// graph on `reclaim`).
#[derive(Message)]
#[rtype(result = "Result<Vec<Triple>, GraphError>")]
pub struct ExportTriples;

impl Handles<ExportTriples> for GraphActor {
    type Reply = Result<Vec<Triple>, GraphError>;
    fn handle(&mut self, _: ExportTriples, _: &mut HostContext<Self>) -> Self::Reply {
        let all = self.store.recall(&[], &[], 0, None, RecallSort::Relevance)?;
        let kind = |name: &str| {
            all.entities
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.kind.clone())
                .unwrap_or_default()
        };
        Ok(all
            .relations
            .iter()
            .map(|r| Triple {
                subject: r.source.clone(),
                subject_type: kind(&r.source),
                relation: r.relation.clone(),
                object: r.target.clone(),
                object_type: kind(&r.target),
                confidence: r.confidence,
                sentence: r.sentence.clone().unwrap_or_default(),
            })
            .collect())
    }
}

/// Graphs that take a sub-agent's memory tools instead of the main graph, by the agent
/// id the tool runner passes (`__origin.agent`): a resident (spec §6.2) reads the main
/// graph and its own temporary one, and writes only its own, which `reclaim` promotes.
/// Kept here, not in the agent, so the memory tools need nothing of the agent layer.
#[derive(Clone, Default)]
pub struct GraphOverlays(Arc<parking_lot::RwLock<std::collections::HashMap<String, TAddr<GraphActor>>>>);

impl GraphOverlays {
    pub fn insert(&self, agent: &str, graph: TAddr<GraphActor>) {
        self.0.write().insert(agent.to_owned(), graph);
    }

    pub fn remove(&self, agent: &str) {
        self.0.write().remove(agent);
    }

    fn get(&self, agent: &str) -> Option<TAddr<GraphActor>> {
        if agent.is_empty() {
            return None;
        }
        self.0.read().get(agent).cloned()
    }
}

/// Soft-deletes one relation by id (`DELETE /api/v1/memory/graph/relations/{id}`);
/// answers whether an active relation had that id.
#[derive(Message)]
#[rtype(result = "Result<bool, GraphError>")]
pub struct DeleteRelation(pub i64);

impl Handles<DeleteRelation> for GraphActor {
    type Reply = Result<bool, GraphError>;
    fn handle(&mut self, DeleteRelation(id): DeleteRelation, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.soft_delete_relation(id)
    }
}

impl Handles<GraphStats> for GraphActor {
    type Reply = Result<Introspection, GraphError>;
    fn handle(&mut self, _: GraphStats, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.introspect()
    }
}

impl Handles<GraphCall> for GraphActor {
    /// `Ok`: the call did what it was asked (its text is for the model); `Err`: it
    /// did nothing (bad arguments or a store failure), with the reason.
    type Reply = Result<String, GraphRefusal>;
    fn handle(&mut self, call: GraphCall, _: &mut HostContext<Self>) -> Self::Reply {
        match call {
            GraphCall::Recall { query, depth, sort } => {
                if query.trim().is_empty() {
                    return Err(GraphRefusal::QueryRequired);
                }
                let (kws, seeds) = self.query_terms(&query);
                match self.store.recall(&kws, &seeds, depth, None, sort) {
                    Ok(r) if r.entities.is_empty() => Ok(Msg::RecallNothing.text()),
                    Ok(r) => {
                        self.mark_recalled(r.entities.iter().map(|e| e.name.clone()));
                        Ok(format_recall(&r))
                    }
                    Err(e) => Err(GraphRefusal::RecallFailed(e)),
                }
            }
            GraphCall::Commit { triples: None } => Err(GraphRefusal::CommitNeedsTriples),
            GraphCall::Commit { triples: Some(ts) } => match self.store.commit(&ts, AGENT_SESSION, 0) {
                Ok((0, 0)) => Err(GraphRefusal::CommitNoValidTriples),
                Ok((e, r)) => Ok(Msg::Committed {
                    entities: e as u64,
                    relations: r as u64,
                }
                .text()),
                Err(e) => Err(GraphRefusal::CommitFailed(e)),
            },
            GraphCall::Introspect => match self.store.introspect() {
                Ok(i) => Ok(Msg::GraphStats {
                    json: &serde_json::to_string(&i).unwrap_or_default(),
                }
                .text()),
                Err(e) => Err(GraphRefusal::GraphStatsFailed(e)),
            },
            GraphCall::Merge { source, target } => {
                if source.trim().is_empty() || target.trim().is_empty() {
                    return Err(GraphRefusal::MergeNamesRequired);
                }
                match self.store.merge_entities(&source, &target) {
                    Ok(n) => Ok(Msg::Merged {
                        source: &source,
                        target: &target,
                        moved: n,
                    }
                    .text()),
                    Err(e) => Err(GraphRefusal::MergeFailed(e)),
                }
            }
            GraphCall::DeleteEntity { name } => {
                if name.trim().is_empty() {
                    return Err(GraphRefusal::NameRequired);
                }
                match self.store.delete_entity(&name) {
                    Ok(_) => Ok(Msg::EntityDeleted { name: name.trim() }.text()),
                    Err(e) => Err(GraphRefusal::EntityDeleteFailed(e)),
                }
            }
            GraphCall::Purge { criteria, mode } => {
                let mode = if mode.trim().is_empty() {
                    "soft".to_owned()
                } else {
                    mode
                };
                match self.store.purge(&criteria, mode == "hard") {
                    Ok(n) => Ok(Msg::Purged { mode: &mode, count: n }.text()),
                    Err(e) => Err(GraphRefusal::PurgeFailed(e)),
                }
            }
            GraphCall::BlockMerge { a, b, rounds } => {
                let (a, b) = (a.trim(), b.trim());
                let Some(rounds) = rounds.filter(|r| (0..=10_000).contains(r)) else {
                    return Err(GraphRefusal::BlockRoundsInvalid);
                };
                if a.is_empty() || b.is_empty() || a == b {
                    return Err(GraphRefusal::BlockNamesInvalid);
                }
                match self.store.block_merge(a, b, rounds as u32) {
                    Ok(()) if rounds == 0 => Ok(Msg::Unblocked { a, b }.text()),
                    Ok(()) => Ok(Msg::Blocked { a, b, rounds }.text()),
                    Err(e) => Err(GraphRefusal::RecordFailed(e)),
                }
            }
            GraphCall::PersonQuery { name } => {
                if name.trim().is_empty() {
                    return Err(GraphRefusal::PersonNameRequired);
                }
                crate::memory::graph::social::profile(&self.store, name.trim()).map_err(GraphRefusal::PersonQueryFailed)
            }
            GraphCall::PersonSetTrait { name, trait_, value } => {
                let (n, t, v) = (name.trim(), trait_.trim(), value.trim());
                if n.is_empty() || t.is_empty() || v.is_empty() {
                    return Err(GraphRefusal::TraitArgsRequired);
                }
                match crate::memory::graph::social::set_trait(&mut self.store, n, t, v) {
                    Ok(_) => Ok(Msg::TraitRecorded {
                        name: n,
                        trait_: t,
                        value: v,
                    }
                    .text()),
                    Err(e) => Err(GraphRefusal::RecordFailed(e)),
                }
            }
            GraphCall::PersonRelate { a, relation, b } => {
                let (a, r, b) = (a.trim(), relation.trim(), b.trim());
                if a.is_empty() || r.is_empty() || b.is_empty() {
                    return Err(GraphRefusal::RelateArgsRequired);
                }
                match crate::memory::graph::social::relate(&mut self.store, a, r, b) {
                    Ok(_) => Ok(Msg::Related { a, relation: r, b }.text()),
                    Err(e) => Err(GraphRefusal::RecordFailed(e)),
                }
            }
            GraphCall::PersonNetwork { name, depth } => {
                if name.trim().is_empty() {
                    return Err(GraphRefusal::PersonNameRequired);
                }
                crate::memory::graph::social::network(&self.store, name.trim(), depth)
                    .map_err(GraphRefusal::PersonNetworkFailed)
            }
            GraphCall::Edit { old, new } => {
                if old.iter().any(|s| s.trim().is_empty()) {
                    return Err(GraphRefusal::EditOldRequired);
                }
                if new.iter().all(|n| n.as_deref().is_none_or(|s| s.trim().is_empty())) {
                    return Err(GraphRefusal::EditNewRequired);
                }
                let pick = |i: usize| match &new[i] {
                    Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
                    _ => old[i].trim().to_owned(),
                };
                // Carry the old relation's confidence and sentence over to the new one.
                let prior = self
                    .store
                    .recall(&[], &[old[0].clone()], 1, None, RecallSort::Relevance)
                    .ok()
                    .and_then(|r| {
                        r.relations.into_iter().find(|r| {
                            r.source == old[0].trim() && r.relation == old[1].trim() && r.target == old[2].trim()
                        })
                    });
                // Exactly the named fact (not every fact whose names contain these).
                let removed = match self.store.delete_triple(&old[0], &old[1], &old[2]) {
                    Ok(n) => n,
                    Err(e) => return Err(GraphRefusal::EditDeleteFailed(e)),
                };
                let triple = Triple {
                    subject: pick(0),
                    relation: pick(1),
                    object: pick(2),
                    confidence: prior.as_ref().map_or(0.0, |r| r.confidence),
                    sentence: prior.and_then(|r| r.sentence).unwrap_or_default(),
                    ..Default::default()
                };
                match self.store.commit(&[triple], AGENT_SESSION, 0) {
                    Ok((e, r)) => Ok(Msg::Edited {
                        removed,
                        entities: e as u64,
                        relations: r as u64,
                    }
                    .text()),
                    Err(e) => Err(GraphRefusal::EditWriteFailed(e)),
                }
            }
        }
    }
}

/// An entity's name as prompts and tool replies show it: the user's entity (stored as
/// [`crate::memory::graph::USER`]) in the session's language, every other name as stored.
fn shown(name: &str) -> std::borrow::Cow<'_, str> {
    if name == crate::memory::graph::USER {
        Msg::UserEntity.text().into()
    } else {
        name.into()
    }
}

/// The index block for the prompt: `【记忆索引】 关联 N 个记忆实体，高频：A、B、C 索引: X, Y(Type), … | …`.
pub fn format_index(entities: &[crate::memory::graph::Entity]) -> String {
    if entities.is_empty() {
        return String::new();
    }
    let mut top: Vec<_> = entities.iter().collect();
    top.sort_by(|a, b| b.mention_count.cmp(&a.mention_count).then(a.name.cmp(&b.name)));
    let hot: Vec<String> = top.iter().take(3).map(|e| shown(&e.name).into_owned()).collect();
    let names: Vec<String> = entities
        .iter()
        .take(5)
        .map(|e| {
            if e.kind == "Concept" {
                shown(&e.name).into_owned()
            } else {
                format!("{}({})", shown(&e.name), e.kind)
            }
        })
        .collect();
    Msg::MemoryIndex {
        count: entities.len(),
        hot: &hot,
        names: &names,
        more: entities.len() > 5,
    }
    .text()
}

/// The index block for one input (the task asks before each turn's first LLM call).
#[derive(Message)]
#[rtype(result = "String")]
pub struct MemoryIndex(pub String);

impl Handles<MemoryIndex> for GraphActor {
    type Reply = String;
    fn handle(&mut self, MemoryIndex(input): MemoryIndex, _: &mut HostContext<Self>) -> String {
        self.index_block(&input)
    }
}

/// Per-turn recall's graph tier: the relations around the entities the input names
/// (exact mentions, as the index block finds them), best first, as recall items — the
/// sentence a relation came from when the graph kept it, otherwise the triple — and
/// the `【记忆索引】` line (one message: one lookup of the names per turn).
#[derive(Message)]
#[rtype(result = "GraphRecall")]
pub struct RecallFacts {
    pub input: String,
    pub limit: usize,
}

/// The answer of [`RecallFacts`].
#[derive(Debug, Default)]
pub struct GraphRecall {
    pub facts: Vec<crate::memory::recall::Item>,
    /// Empty when the input names no entity.
    pub index: String,
}

impl Handles<RecallFacts> for GraphActor {
    type Reply = actix::MessageResult<crate::host::Envelope<RecallFacts>>;
    fn handle(&mut self, m: RecallFacts, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.facts(&m.input, m.limit))
    }
}

impl GraphActor {
    fn facts(&mut self, input: &str, limit: usize) -> GraphRecall {
        if input.trim().is_empty() {
            return GraphRecall::default();
        }
        let seeds = self.mentioned(input);
        if seeds.is_empty() {
            return GraphRecall::default();
        }
        let index = self.index_of(&seeds);
        let Ok(r) = self.store.recall(&[], &seeds, 1, None, RecallSort::Relevance) else {
            return GraphRecall {
                facts: Vec::new(),
                index,
            };
        };
        // A fact competes with the passages for the prompt (reciprocal-rank fusion), so
        // it must be about what the input asks, not only about someone it names: it is
        // kept when its words share one with the input beyond the mentioned names, and
        // ranked by how many they share. The same fact learnt from two sources (the
        // import's distillation and the archive of the document holding the same turn)
        // is one fact in the prompt.
        use crate::memory::index::retrieve::analyze;
        let named: std::collections::HashSet<String> = seeds.iter().flat_map(|s| analyze(s)).collect();
        let asked: std::collections::HashSet<String> =
            analyze(input).into_iter().filter(|t| !named.contains(t)).collect();
        let mut seen = std::collections::HashSet::new();
        let mut scored: Vec<(usize, &super::Relation)> = r
            .relations
            .iter()
            .filter(|rel| seen.insert((rel.source.as_str(), rel.relation.as_str(), rel.target.as_str())))
            .filter_map(|rel| {
                let text = format!(
                    "{} {} {} {}",
                    rel.sentence.as_deref().unwrap_or(""),
                    rel.source,
                    rel.relation.replace('_', " "),
                    rel.target
                );
                let words: std::collections::HashSet<String> = analyze(&text).into_iter().collect();
                let shared = words.intersection(&asked).count();
                (shared > 0).then_some((shared, rel))
            })
            .collect();
        scored.sort_by_key(|s| std::cmp::Reverse(s.0));
        let facts = scored
            .into_iter()
            .map(|(_, rel)| rel)
            .take(limit)
            .map(fact_item)
            .collect();
        GraphRecall { facts, index }
    }
}

/// A recalled fact as recall shows it: the sentence it came from, by whom and when it
/// was said, with the relation behind it. The sentence's day is the fact's date when it
/// carries one (an archived document's fact); else the fact's learning (the rule
/// distiller commits a turn's facts at the turn's time). The speaker is taken off the
/// sentence (`Caroline: …`), so the item is the same memory as the turn it came from
/// and the two are shown once.
fn fact_item(rel: &super::Relation) -> crate::memory::recall::Item {
    use crate::memory::recall::{Item, Origin};
    let relation = format!("{} →{}→ {}", shown(&rel.source), rel.relation, shown(&rel.target));
    let Some(stored) = rel.sentence.as_deref().map(str::trim).filter(|s| !s.is_empty()) else {
        return Item::counted(
            Origin::Fact {
                relation: String::new(),
            },
            Some(rel.created_at_ms),
            "",
            &relation,
        );
    };
    let sentence = strip_date(stored);
    let ts = sentence_day(stored).unwrap_or(rel.created_at_ms);
    let (speaker, said) = crate::memory::text::rules::speaker(sentence).unwrap_or(("", sentence));
    Item::counted(Origin::Fact { relation }, Some(ts), speaker, said.trim())
}

/// The day of a sentence stored as `[YYYY-MM-DD] …` (noon UTC, so every zone's reader
/// sees the same date), or None.
fn sentence_day(text: &str) -> Option<i64> {
    if strip_date(text).len() == text.len() {
        return None;
    }
    let (y, m, d) = (
        text.get(1..5)?.parse().ok()?,
        text.get(6..8)?.parse().ok()?,
        text.get(9..11)?.parse().ok()?,
    );
    Some(crate::memory::text::dates::days_from_civil(y, m, d) * 86_400_000 + 43_200_000)
}

/// `text` without a leading `[YYYY-MM-DD] ` (the date an archived fact's sentence is
/// stored with).
fn strip_date(text: &str) -> &str {
    let b = text.as_bytes();
    let dated = b.len() > 13
        && b[0] == b'['
        && b[11] == b']'
        && b[12] == b' '
        && b[1..11].iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if dated { &text[13..] } else { text }
}

/// The `memory_recall` reply.
pub fn format_recall(r: &Recall) -> String {
    let mut out = Msg::RecallEntities {
        count: r.entities.len(),
    }
    .text();
    for e in &r.entities {
        out.push_str(
            &Msg::RecallEntity {
                name: &shown(&e.name),
                mentions: e.mention_count as u64,
                kind: &e.kind,
            }
            .text(),
        );
    }
    if !r.relations.is_empty() {
        out.push_str(
            &Msg::RecallRelations {
                count: r.relations.len(),
            }
            .text(),
        );
        for rel in r.relations.iter().take(10) {
            out.push_str(&format!(
                "- {} →({})→ {}\n",
                shown(&rel.source),
                rel.relation,
                shown(&rel.target)
            ));
        }
        if r.relations.len() > 10 {
            out.push_str(&Msg::RecallTruncated.text());
        }
    }
    out.trim_end().to_owned()
}

/// What the text memory must do after a graph call.
enum TextFollowUp {
    Purge(String),
    Replace { old: String, new: String },
}

fn text_follow_up(call: &GraphCall) -> Option<TextFollowUp> {
    match call {
        GraphCall::Purge { criteria, .. } => {
            let needle = criteria.subject_contains.trim();
            (!needle.is_empty()).then(|| TextFollowUp::Purge(needle.to_owned()))
        }
        GraphCall::Edit { old, new } => match &new[0] {
            Some(n) if !n.trim().is_empty() && n.trim() != old[0].trim() => Some(TextFollowUp::Replace {
                old: old[0].trim().to_owned(),
                new: n.trim().to_owned(),
            }),
            _ => None,
        },
        _ => None,
    }
}

/// Words a person may use for each memory tool (`ToolSpec::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "memory_commit" => "remember, keep in mind, don't forget, note that, fact, birthday, likes, 记住, 记下, 别忘了",
        "memory_recall" => "remember, recall, what do you know, 记得, 回忆",
        "memory_delete_entity" => "forget, erase, remove, delete, 忘记, 忘掉, 删除",
        "memory_edit" => "correct, wrong, mistake, actually, update, fix, 更正, 纠正, 记错",
        "memory_purge" => "forget, erase, wipe, clear, 清除, 抹掉",
        "memory_merge" => "same person, duplicate, same thing, merge, 合并, 同一个",
        "memory_block_merge" => "different people, not the same, 不是同一个",
        "memory_introspect" => "statistics, stats, how much do you remember, memory size, 统计",
        "person_query" => "who is, person, profile, 是谁, 人物",
        "person_network" => "people, friends, family, relationships, circle, 朋友, 家人, 关系网",
        "person_relate" => "relationship, related, married, sister, brother, friend of, 关系, 是他的",
        "person_set_trait" => "trait, personality, likes, allergic, job, 性格, 特点",
        _ => "",
    }
}

/// The `memory_*` tools over the actor.
pub fn graph_tools(
    graph: TAddr<GraphActor>,
    textlog: Option<TAddr<crate::memory::textlog::TextLogActor>>,
    overlays: GraphOverlays,
) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
    let shared = Shared {
        graph,
        textlog,
        overlays,
    };
    vec![
        graph_tool(
            &shared,
            "memory_block_merge",
            "Stop proposing that two entities be merged for the next `rounds` consolidation rounds (they are different things).",
            false,
            |a: BlockMergeArgs| GraphCall::BlockMerge {
                a: a.entity_a,
                b: a.entity_b,
                rounds: Some(a.rounds),
            },
        ),
        graph_tool(
            &shared,
            "person_query",
            "A person's profile: recorded traits and social ties.",
            true,
            |a: NameArgs| GraphCall::PersonQuery { name: a.name },
        ),
        graph_tool(
            &shared,
            "person_set_trait",
            "Record a person's trait (replaces an earlier value of the same trait).",
            false,
            |a: TraitArgs| GraphCall::PersonSetTrait {
                name: a.name,
                trait_: a.trait_,
                value: a.value,
            },
        ),
        graph_tool(
            &shared,
            "person_relate",
            "Record a tie between two people (person_a —relation→ person_b).",
            false,
            |a: RelateArgs| GraphCall::PersonRelate {
                a: a.person_a,
                relation: a.relation,
                b: a.person_b,
            },
        ),
        graph_tool(
            &shared,
            "person_network",
            "The people around a person within some ties, with their traits and ties.",
            true,
            |a: NetworkArgs| GraphCall::PersonNetwork {
                name: a.name,
                depth: a.depth.unwrap_or(2).clamp(1, 4) as usize,
            },
        ),
        graph_tool(
            &shared,
            "memory_recall",
            "Recall long-term memory: entities matching the query and their relations. Separate several keywords with commas.",
            true,
            |a: RecallArgs| GraphCall::Recall {
                query: a.query_intent,
                depth: a.depth.unwrap_or(2).min(5) as usize,
                sort: RecallSort::parse(&a.sort),
            },
        ),
        graph_tool(
            &shared,
            "memory_commit",
            "Write facts to long-term memory as subject-relation-object triples.",
            false,
            |a: CommitArgs| GraphCall::Commit {
                triples: Some(a.triples.into_iter().map(Triple::from).collect()),
            },
        ),
        graph_tool(
            &shared,
            "memory_introspect",
            "Statistics of long-term memory: entity and relation counts and the most mentioned entities.",
            true,
            |_: crate::stages::tools::NoArgs| GraphCall::Introspect,
        ),
        graph_tool(
            &shared,
            "memory_merge",
            "Merge two entities that are the same thing; the source is deleted and its relations move to the target.",
            false,
            |a: MergeArgs| GraphCall::Merge {
                source: a.source,
                target: a.target,
            },
        ),
        graph_tool(
            &shared,
            "memory_delete_entity",
            "Delete an entity and all its relations from long-term memory.",
            false,
            |a: NameArgs| GraphCall::DeleteEntity { name: a.name },
        ),
        graph_tool(
            &shared,
            "memory_purge",
            "Delete relations matching all given criteria (substring of subject/target, exact relation). mode soft (default) keeps them recoverable, hard deletes.",
            false,
            |a: PurgeArgs| GraphCall::Purge {
                criteria: PurgeCriteria {
                    subject_contains: a.subject_contains,
                    relation_type: a.relation_type,
                    target_contains: a.target_contains,
                },
                mode: a.mode,
            },
        ),
        graph_tool(
            &shared,
            "memory_edit",
            "Correct a remembered fact: give the old triple and the fields to change.",
            false,
            |a: EditArgs| GraphCall::Edit {
                old: [a.old_subject, a.old_relation, a.old_object],
                new: [a.new_subject, a.new_relation, a.new_object],
            },
        ),
    ]
}

/// What every graph tool's handler holds.
struct Shared {
    graph: TAddr<GraphActor>,
    textlog: Option<TAddr<crate::memory::textlog::TextLogActor>>,
    overlays: GraphOverlays,
}

/// One graph tool: its arguments `A` decoded once (the schema generated from `A`),
/// made into the actor's call by `make`; asked of the caller's graph.
fn graph_tool<A>(
    shared: &Shared,
    name: &str,
    description: &str,
    parallel: bool,
    make: fn(A) -> GraphCall,
) -> (ToolSpec, Arc<dyn ToolHandler>)
where
    A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
{
    let mut spec = ToolSpec::typed::<A>(name, description).with_keywords(keywords_of(name));
    spec.plugin = crate::stages::tools::owners::MEMORY.into();
    spec.parallel_safe = parallel;
    // Which agent calls decides which graph: a resident's own (see GraphOverlays).
    spec.origin = true;
    let graph = shared.graph.clone();
    let textlog = shared.textlog.clone();
    let overlays = shared.overlays.clone();
    // The parallel-safe tools are exactly the read-only ones.
    let read_only = parallel;
    let handler: Arc<dyn ToolHandler> = Arc::new(move |args: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
        // Read before the arguments are decoded (and the origin dropped).
        let own = overlays.get(crate::stages::origin_agent(&args));
        let call = match crate::stages::tools::decode_args::<A>(args) {
            Ok(a) => make(a),
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        let (graph, textlog) = (graph.clone(), textlog.clone());
        if let Some(own) = own {
            let own_call = call.clone();
            return Box::pin(async move {
                let ask = |g: TAddr<GraphActor>, c: GraphCall| async move {
                    match g.send(c).await {
                        Ok(Ok(t)) => Ok(t),
                        Ok(Err(refused)) => Ok(refused.to_string()),
                        Err(_) => Err(crate::stages::ToolFailure::kernel(GraphToolError::Unavailable)),
                    }
                };
                if !read_only {
                    // Writes stay in the resident's temporary graph.
                    return ask(own, own_call).await;
                }
                let (main, mine) = futures_util::join!(ask(graph, call), ask(own, own_call));
                Ok(format!("{}\n\n{}\n{}", main?, Msg::GraphOwnPart.text(), mine?))
            });
        }
        let text_side = text_follow_up(&call);
        Box::pin(async move {
            // Refusals go back to the model as the tool's text, as before.
            let reply = match graph
                .send(call)
                .await
                .map_err(|_| crate::stages::ToolFailure::kernel(GraphToolError::Unavailable))?
            {
                Ok(done) => done,
                Err(nothing_done) => return Ok(nothing_done.to_string()),
            };
            // The text memory follows the graph (spec subsystems §1.3), only when the
            // graph side succeeded.
            let (Some(log), Some(follow)) = (textlog, text_side) else {
                return Ok(reply);
            };
            let (n, purged) = match follow {
                TextFollowUp::Purge(needle) => (log.send(crate::memory::textlog::PurgeText(needle)).await, true),
                TextFollowUp::Replace { old, new } => {
                    (log.send(crate::memory::textlog::ReplaceText { old, new }).await, false)
                }
            };
            Ok(match n {
                Ok(Ok(n)) if n > 0 => Msg::TextLogFollowed {
                    reply: &reply,
                    purged,
                    count: n,
                }
                .text(),
                Ok(Err(e)) => {
                    tracing::warn!("text memory not updated: {e}");
                    Msg::TextLogNotUpdated {
                        reply: &reply,
                        error: &e.to_string(),
                    }
                    .text()
                }
                _ => reply,
            })
        })
    });
    (spec, handler)
}

/// `memory_block_merge`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct BlockMergeArgs {
    entity_a: String,
    entity_b: String,
    /// merge rounds to skip the pair (0 lifts the marker)
    rounds: i64,
}

/// The arguments of a tool about one person or entity.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NameArgs {
    name: String,
}

/// `person_set_trait`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct TraitArgs {
    name: String,
    #[serde(rename = "trait")]
    trait_: String,
    value: String,
}

/// `person_relate`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct RelateArgs {
    person_a: String,
    relation: String,
    person_b: String,
}

/// `person_network`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NetworkArgs {
    name: String,
    /// default 2
    #[serde(default)]
    depth: Option<u64>,
}

/// `memory_recall`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct RecallArgs {
    /// what to recall: a name, a topic, or comma-separated keywords
    query_intent: String,
    /// relation hops to follow (default 2)
    #[serde(default)]
    depth: Option<u64>,
    // Read leniently (`time`, `newest` mean `recent`; anything else relevance).
    #[serde(default)]
    #[schemars(extend("enum" = ["relevance", "recent"]))]
    sort: String,
}

// One fact of `memory_commit` (a `//` comment: a doc comment would be the items'
// description the model reads).
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct TripleArgs {
    subject: String,
    relation: String,
    object: String,
    /// the sentence the fact comes from
    #[serde(default, alias = "sentence")]
    sentence_text: String,
    // Read as the store always read them; not offered in the schema.
    #[serde(default)]
    #[schemars(skip)]
    subject_type: String,
    #[serde(default)]
    #[schemars(skip)]
    object_type: String,
    #[serde(default)]
    #[schemars(skip)]
    confidence: f64,
}

impl From<TripleArgs> for Triple {
    fn from(t: TripleArgs) -> Self {
        Triple {
            subject: t.subject,
            subject_type: t.subject_type,
            relation: t.relation,
            object: t.object,
            object_type: t.object_type,
            confidence: t.confidence,
            sentence: t.sentence_text,
        }
    }
}

/// `memory_commit`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CommitArgs {
    triples: Vec<TripleArgs>,
}

/// `memory_merge`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct MergeArgs {
    source: String,
    target: String,
}

/// `memory_purge`'s arguments (non-empty criteria are AND-ed).
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PurgeArgs {
    #[serde(default)]
    subject_contains: String,
    #[serde(default)]
    relation_type: String,
    #[serde(default)]
    target_contains: String,
    #[serde(default)]
    #[schemars(extend("enum" = ["soft", "hard"]))]
    mode: String,
}

/// `memory_edit`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EditArgs {
    old_subject: String,
    old_relation: String,
    old_object: String,
    #[serde(default)]
    new_subject: Option<String>,
    #[serde(default)]
    new_relation: Option<String>,
    #[serde(default)]
    new_object: Option<String>,
}

/// Why a graph tool did nothing. (What it refused — a missing query, no valid
/// triple — is the tool's text: [`GraphCall`] answers it as its `Err`.)
#[derive(Debug, thiserror::Error)]
pub enum GraphToolError {
    #[error("{}", Msg::GraphUnavailable.text())]
    Unavailable,
}

/// Structured social reads for plugins (`social.*` of the plugin protocol).
#[derive(Message)]
#[rtype(result = "Result<serde_json::Value, GraphError>")]
pub enum SocialQuery {
    Person {
        name: String,
    },
    Trait {
        name: String,
        trait_: String,
    },
    Network {
        name: String,
        depth: usize,
    },
    Persons,
    /// Writes (the `person_set_trait` / `person_relate` semantics): `{"relations"}` written.
    SetTrait {
        name: String,
        trait_: String,
        value: String,
    },
    Relate {
        a: String,
        relation: String,
        b: String,
    },
}

impl Handles<SocialQuery> for GraphActor {
    type Reply = Result<serde_json::Value, GraphError>;
    fn handle(&mut self, q: SocialQuery, _: &mut HostContext<Self>) -> Self::Reply {
        use super::social;
        match q {
            SocialQuery::Person { name } => social::person(&self.store, name.trim()),
            SocialQuery::Trait { name, trait_ } => social::get_trait(&self.store, name.trim(), trait_.trim()),
            SocialQuery::Network { name, depth } => social::network_json(&self.store, name.trim(), depth),
            SocialQuery::Persons => social::persons(&self.store).map(|p| serde_json::json!({ "persons": p })),
            SocialQuery::SetTrait { name, trait_, value } => {
                social::set_trait(&mut self.store, name.trim(), trait_.trim(), value.trim())
                    .map(|n| serde_json::json!({ "relations": n }))
            }
            SocialQuery::Relate { a, relation, b } => {
                social::relate(&mut self.store, a.trim(), relation.trim(), b.trim())
                    .map(|n| serde_json::json!({ "relations": n }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::graph::{Entity, Relation};

    #[test]
    fn the_graph_tools_schemas_are_generated_as_they_were_written() {
        use crate::stages::tools::schema_of;
        use serde_json::json;
        assert_eq!(
            schema_of::<RecallArgs>(),
            json!({"type": "object", "properties": {
                "query_intent": {"type": "string", "description": "what to recall: a name, a topic, or comma-separated keywords"},
                "depth": {"type": "integer", "minimum": 0, "description": "relation hops to follow (default 2)"},
                "sort": {"type": "string", "enum": ["relevance", "recent"]}},
                "required": ["query_intent"]})
        );
        assert_eq!(
            schema_of::<CommitArgs>(),
            json!({"type": "object", "properties": {"triples": {"type": "array", "items": {"type": "object", "properties": {
                "subject": {"type": "string"}, "relation": {"type": "string"}, "object": {"type": "string"},
                "sentence_text": {"type": "string", "description": "the sentence the fact comes from"}},
                "required": ["subject", "relation", "object"]}}},
                "required": ["triples"]})
        );
        assert_eq!(
            schema_of::<TraitArgs>(),
            json!({"type": "object", "properties": {"name": {"type": "string"}, "trait": {"type": "string"}, "value": {"type": "string"}}, "required": ["name", "trait", "value"]})
        );
        // The store reads what it always read; a misfit names the field.
        let a: CommitArgs = crate::stages::tools::decode_args(json!({"triples": [
            {"subject": "Ann", "relation": "likes", "object": "tea", "sentence": "Ann likes tea", "confidence": 0.5}
        ]}))
        .unwrap();
        let t = Triple::from(a.triples.into_iter().next().unwrap());
        assert_eq!((t.sentence.as_str(), t.confidence), ("Ann likes tea", 0.5));
        let e = crate::stages::tools::decode_args::<CommitArgs>(json!({"triples": [{"subject": 1}]}))
            .err()
            .unwrap();
        assert!(e.to_string().contains("triples[0].subject"), "{e}");
    }

    #[test]
    fn the_index_names_what_the_input_touches_until_recalled() {
        let mut g = GraphStore::open_in_memory().unwrap();
        let t = |s: &str, r: &str, o: &str| Triple {
            subject: s.into(),
            relation: r.into(),
            object: o.into(),
            ..Default::default()
        };
        g.commit(&[t("张三", "住在", "北京"), t("张三", "喜欢", "围棋")], "s", 0)
            .unwrap();
        let mut a = GraphActor::new(g);
        let block = a.index_block("张三最近怎么样");
        assert!(
            block.starts_with("[Memory index] 3 related memory entities, most mentioned: 张三, "),
            "{block}"
        );
        assert!(block.ends_with(" | use memory_recall for details"), "{block}");
        assert_eq!(a.index_block("今天天气"), "");
        a.mark_recalled(["张三".to_string(), "北京".to_string(), "围棋".to_string()]);
        assert_eq!(a.index_block("张三最近怎么样"), "", "everything was recalled already");
    }

    #[test]
    fn a_recalled_fact_is_its_sentence_under_the_day_it_was_said() {
        use crate::memory::recall::Origin;
        let rel = |sentence: Option<&str>| Relation {
            id: 1,
            source: "Caroline".into(),
            target: "painting".into(),
            relation: "loves".into(),
            confidence: 1.0,
            session: "doc:d1".into(),
            turn: 0,
            created_at_ms: 1_700_000_000_000,
            sentence: sentence.map(str::to_owned),
        };
        let archived = fact_item(&rel(Some("[2023-05-08] Caroline: I love painting.")));
        assert_eq!(
            (archived.speaker.as_str(), archived.text.as_str()),
            ("Caroline", "I love painting.")
        );
        assert_eq!(
            archived.origin,
            Origin::Fact {
                relation: "Caroline →loves→ painting".into()
            }
        );
        assert_eq!(
            crate::memory::index::docindex::show_date(archived.ts_ms.unwrap()),
            "8 May 2023"
        );
        let undated = fact_item(&rel(Some("I love painting.")));
        assert_eq!((undated.speaker.as_str(), undated.ts_ms), ("", Some(1_700_000_000_000)));
        let bare = fact_item(&rel(None));
        assert_eq!(bare.text, "Caroline →loves→ painting");
        assert_eq!(
            bare.origin,
            Origin::Fact {
                relation: String::new()
            }
        );
    }

    #[test]
    fn recall_reply_truncates_relations_after_ten() {
        let e = Entity {
            id: 1,
            name: "张三".into(),
            kind: "Person".into(),
            mention_count: 3,
            updated_at_ms: 0,
        };
        let rel = |i: i64| Relation {
            id: i,
            source: "张三".into(),
            target: format!("地点{i}"),
            relation: "去过".into(),
            confidence: 1.0,
            session: String::new(),
            turn: 0,
            created_at_ms: 0,
            sentence: None,
        };
        let r = Recall {
            entities: vec![e],
            relations: (0..12).map(rel).collect(),
        };
        let out = format_recall(&r);
        assert!(
            out.starts_with(
                "Found 1 related entities:\n- 张三 (mentioned 3 times, type: Person)\nFound 12 relations:\n- 张三 →(去过)→ 地点0"
            )
        );
        assert!(out.ends_with("...more relations were cut off"));
        assert_eq!(out.lines().filter(|l| l.contains("→(")).count(), 10);
    }

    #[test]
    fn a_stored_date_prefix_is_left_to_the_item() {
        assert_eq!(
            strip_date("[2023-05-08] Caroline: I live in Boston"),
            "Caroline: I live in Boston"
        );
        assert_eq!(strip_date("[note] not a date here"), "[note] not a date here");
        assert_eq!(strip_date("我住在北京"), "我住在北京");
    }
}
