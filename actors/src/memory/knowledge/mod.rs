//! The knowledge base: named notes the agent (or the user) writes on purpose, kept as
//! plain files `DATA/knowledge/<category>/<name>/content.md` so they can be edited,
//! backed up or versioned with ordinary tools.

use std::path::{Component, Path, PathBuf};

use actix::prelude::*;

use super::index::tfidf::{Tfidf, cosine};
use crate::host::{Handles, HostContext, KernelActor};
use crate::i18n::Msg;

/// Why a knowledge operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("invalid name `{0}`: use words separated by `/` for categories, without `..` or a leading `/`")]
    Name(String),
    #[error("no knowledge item `{0}`; knowledge_list shows them")]
    Missing(String),
    #[error("knowledge store I/O failed: {0}; check DATA/knowledge")]
    Io(#[from] std::io::Error),
    /// A search without a query, or an item without content.
    #[error("`{0}` is empty")]
    Empty(&'static str),
}

/// The category of the items the owner made public: a guest's turn recalls these (and
/// only these) of the knowledge base. A category rather than a flag, so the mark is
/// where the owner can see and change it with ordinary tools (`mv`).
pub const PUBLIC_CATEGORY: &str = "public";

/// Whether item `name` (sanitized) is public.
pub fn is_public(name: &str) -> bool {
    name.strip_prefix(PUBLIC_CATEGORY)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The knowledge base over a directory.
pub struct KnowledgeBase {
    root: PathBuf,
}

/// Lower-cases and trims, turns spaces and backslashes into `_`, and refuses paths
/// that would leave the knowledge directory.
pub fn sanitize(name: &str) -> Result<String, KnowledgeError> {
    let n = name.trim().to_lowercase().replace([' ', '\\'], "_");
    let path = Path::new(&n);
    let ok = !n.is_empty()
        && path.components().all(|c| matches!(c, Component::Normal(_)))
        && !n.split('/').any(|p| p.is_empty() || p.starts_with('.'));
    if ok {
        Ok(n)
    } else {
        Err(KnowledgeError::Name(name.to_owned()))
    }
}

impl KnowledgeBase {
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_owned() }
    }

    /// Creates or overwrites an item; returns its sanitized name.
    pub fn create(&self, name: &str, content: &str) -> Result<String, KnowledgeError> {
        let name = sanitize(name)?;
        let dir = self.root.join(&name);
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(".content.md.tmp");
        std::fs::write(&tmp, content)?;
        std::fs::rename(&tmp, dir.join("content.md"))?;
        Ok(name)
    }

    /// Removes an item.
    pub fn delete(&self, name: &str) -> Result<(), KnowledgeError> {
        let name = sanitize(name)?;
        let dir = self.root.join(&name);
        if !dir.join("content.md").is_file() {
            return Err(KnowledgeError::Missing(name));
        }
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }

    /// Every item as `(name, content)`, sorted by name; hidden directories skipped.
    pub fn items(&self) -> Vec<(String, String)> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
            let Ok(rd) = std::fs::read_dir(dir) else { return };
            for e in rd.filter_map(Result::ok) {
                let p = e.path();
                let hidden = e.file_name().to_string_lossy().starts_with('.');
                if !p.is_dir() || hidden {
                    continue;
                }
                if let Ok(c) = std::fs::read_to_string(p.join("content.md")) {
                    let name = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned();
                    out.push((name, c));
                }
                walk(root, &p, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out);
        out.sort();
        out
    }

    /// The `top_k` items most similar to `query` (lexical TF-IDF), best first, as
    /// `(name, content, score)`.
    pub fn search_items(&self, query: &str, top_k: usize) -> Vec<(String, String, f32)> {
        let items = self.items();
        let texts: Vec<String> = items.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let model = Tfidf::train(texts.iter().map(String::as_str));
        let q = model.vectorize(query);
        let mut scored: Vec<(String, String, f32)> = items
            .into_iter()
            .zip(&texts)
            .map(|((n, c), t)| (n, c, cosine(&q, &model.vectorize(t))))
            .filter(|(_, _, s)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        scored.truncate(if top_k == 0 { 5 } else { top_k });
        scored
    }

    /// The `top_k` items most similar to `query` (lexical TF-IDF), formatted for the model.
    pub fn search(&self, query: &str, top_k: usize) -> String {
        if query.trim().is_empty() {
            return Msg::QueryRequired.text();
        }
        let items = self.items();
        let texts: Vec<String> = items.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let model = Tfidf::train(texts.iter().map(String::as_str));
        let q = model.vectorize(query);
        let mut scored: Vec<(f32, &(String, String))> = items
            .iter()
            .zip(&texts)
            .map(|(i, t)| (cosine(&q, &model.vectorize(t)), i))
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.0.cmp(&b.1.0)));
        scored.truncate(if top_k == 0 { 5 } else { top_k });
        if scored.is_empty() {
            return Msg::KnowledgeNothing.text();
        }
        scored
            .iter()
            .map(|(_, (n, c))| format!("[{n}]\n{}", super::truncate_chars(c, 200, "…")))
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    /// An indented tree of categories (`name/`) and items (with their size).
    pub fn list(&self) -> String {
        let items = self.items();
        if items.is_empty() {
            return Msg::KnowledgeEmpty.text();
        }
        let mut rows: std::collections::BTreeMap<String, Option<usize>> = std::collections::BTreeMap::new();
        for (n, c) in &items {
            let parts: Vec<&str> = n.split('/').collect();
            for i in 1..parts.len() {
                rows.entry(parts[..i].join("/")).or_insert(None);
            }
            rows.insert(n.clone(), Some(c.len()));
        }
        rows.iter()
            .map(|(n, size)| {
                let depth = n.matches('/').count();
                let leaf = n.rsplit('/').next().unwrap_or(n);
                match size {
                    Some(b) => Msg::KnowledgeLeaf {
                        indent: &"  ".repeat(depth),
                        leaf,
                        bytes: *b,
                    }
                    .text(),
                    None => format!("{}- {leaf}/", "  ".repeat(depth)),
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `kernel/memory/knowledge` (on the blocking arbiter: it reads files).
pub struct KnowledgeActor {
    kb: KnowledgeBase,
}

impl KnowledgeActor {
    pub fn new(kb: KnowledgeBase) -> Self {
        Self { kb }
    }
}

impl KernelActor for KnowledgeActor {
    const KIND: &'static str = "knowledge";
}

/// One knowledge tool call; answers the tool's reply text.
#[derive(Message)]
#[rtype(result = "String")]
pub enum KnowledgeCall {
    Search { query: String, top_k: usize },
    List,
    Create { name: String, content: String },
    Delete { name: String },
}

impl Handles<KnowledgeCall> for KnowledgeActor {
    type Reply = String;
    fn handle(&mut self, call: KnowledgeCall, _: &mut HostContext<Self>) -> String {
        match call {
            KnowledgeCall::Search { query, top_k } => self.kb.search(&query, top_k),
            KnowledgeCall::List => self.kb.list(),
            KnowledgeCall::Create { name, content } => {
                if name.trim().is_empty() || content.trim().is_empty() {
                    return Msg::KnowledgeArgsRequired.text();
                }
                match self.kb.create(&name, &content) {
                    Ok(n) => Msg::KnowledgeCreated {
                        name: &n,
                        chars: content.len(),
                    }
                    .text(),
                    Err(e) => Msg::KnowledgeCreateFailed { error: &e.to_string() }.text(),
                }
            }
            KnowledgeCall::Delete { name } => {
                if name.trim().is_empty() {
                    return Msg::NameRequired.text();
                }
                match self.kb.delete(&name) {
                    Ok(()) => Msg::KnowledgeDeleted { name: name.trim() }.text(),
                    Err(e) => Msg::KnowledgeDeleteFailed { error: &e.to_string() }.text(),
                }
            }
        }
    }
}

/// Per-turn recall's knowledge tier: the items BM25 ranks for the input (the
/// retriever of `memory::index::retrieve`; only items sharing a term), best first.
#[derive(Message)]
#[rtype(result = "Vec<super::recall::Item>")]
pub struct RecallKnowledge {
    pub input: String,
    pub limit: usize,
    /// A guest's turn: only the [`PUBLIC_CATEGORY`] items.
    pub public_only: bool,
}

impl Handles<RecallKnowledge> for KnowledgeActor {
    type Reply = actix::MessageResult<crate::host::Envelope<RecallKnowledge>>;
    fn handle(&mut self, m: RecallKnowledge, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.kb.recall(&m.input, m.limit, m.public_only))
    }
}

impl KnowledgeBase {
    /// The items BM25 ranks for `input` (name and content), at most `limit`; with
    /// `public_only`, among the public ones only.
    pub fn recall(&self, input: &str, limit: usize, public_only: bool) -> Vec<super::recall::Item> {
        if input.trim().is_empty() || limit == 0 {
            return Vec::new();
        }
        let mut items = self.items();
        if public_only {
            items.retain(|(name, _)| is_public(name));
        }
        if items.is_empty() {
            return Vec::new();
        }
        let texts: Vec<String> = items.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let bm25 = super::index::retrieve::Bm25::build(texts.iter().map(String::as_str));
        bm25.rank(input)
            .into_iter()
            .take(limit)
            .map(|i| {
                let (name, content) = &items[i];
                super::recall::Item::counted(
                    super::recall::Origin::Knowledge { name: name.clone() },
                    None,
                    "knowledge",
                    content.trim(),
                )
            })
            .collect()
    }
}

/// Structured access for plugins (`knowledge.*` of the plugin protocol): JSON, not
/// the tools' reply texts.
#[derive(Message)]
#[rtype(result = "Result<serde_json::Value, KnowledgeError>")]
pub enum KnowledgeQuery {
    /// `{results: [{name, category, content, score}]}`.
    Search { query: String, top_k: usize },
    /// `{items: [{name, category, bytes}]}`.
    List,
    /// `{name}` (sanitized).
    Add { name: String, content: String },
}

fn category(name: &str) -> &str {
    name.rsplit_once('/').map_or("", |(c, _)| c)
}

impl Handles<KnowledgeQuery> for KnowledgeActor {
    type Reply = Result<serde_json::Value, KnowledgeError>;
    fn handle(&mut self, q: KnowledgeQuery, _: &mut HostContext<Self>) -> Self::Reply {
        use serde_json::json;
        match q {
            KnowledgeQuery::Search { query, top_k } => {
                if query.trim().is_empty() {
                    return Err(KnowledgeError::Empty("query"));
                }
                let results: Vec<_> = self
                    .kb
                    .search_items(&query, top_k)
                    .into_iter()
                    .map(|(n, c, s)| json!({"name": n, "category": category(&n), "content": c, "score": s}))
                    .collect();
                Ok(json!({ "results": results }))
            }
            KnowledgeQuery::List => {
                let items: Vec<_> = self
                    .kb
                    .items()
                    .into_iter()
                    .map(|(n, c)| json!({"name": n, "category": category(&n), "bytes": c.len()}))
                    .collect();
                Ok(json!({ "items": items }))
            }
            KnowledgeQuery::Add { name, content } => {
                if content.trim().is_empty() {
                    return Err(KnowledgeError::Empty("content"));
                }
                self.kb.create(&name, &content).map(|n| json!({ "name": n }))
            }
        }
    }
}

/// Words a person may use for each knowledge tool (`ToolSpec::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "knowledge_create" => {
            "note, save a note, write down, notes, knowledge base, how to, procedure, 笔记, 知识库, 记录, 保存"
        }
        "knowledge_search" => "notes, look up my notes, knowledge base, 笔记, 知识库, 查找",
        "knowledge_list" => "notes, all notes, knowledge base, everything, 笔记, 知识库, 列出",
        "knowledge_delete" => "delete note, remove note, 删除笔记",
        _ => "",
    }
}

/// `knowledge_search`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    query: String,
    /// default 5
    #[serde(default)]
    top_k: Option<usize>,
}

/// `knowledge_create`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CreateArgs {
    name: String,
    content: String,
}

/// `knowledge_delete`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct DeleteArgs {
    name: String,
}

/// Why a knowledge tool did nothing. (Its refusals — a bad name, an empty item — are
/// the tool's text, as they always were.)
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeToolError {
    #[error("{}", Msg::KnowledgeUnavailable.text())]
    Unavailable,
}

/// One knowledge tool: its arguments `A` decoded (and its schema generated) by
/// [`crate::stages::typed`], made into the actor's call by `make`.
fn knowledge_tool<A>(
    kb: &crate::addr::TAddr<KnowledgeActor>,
    name: &str,
    description: &str,
    parallel: bool,
    make: fn(A) -> KnowledgeCall,
) -> (crate::stages::ToolSpec, std::sync::Arc<dyn crate::stages::ToolHandler>)
where
    A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
{
    let mut spec = crate::stages::ToolSpec::typed::<A>(name, description).with_keywords(keywords_of(name));
    spec.plugin = crate::stages::tools::owners::KNOWLEDGE.into();
    spec.parallel_safe = parallel;
    let kb = kb.clone();
    let handler = crate::stages::typed(move |a: A| {
        let (kb, call) = (kb.clone(), make(a));
        async move { kb.send(call).await.map_err(|_| KnowledgeToolError::Unavailable) }
    });
    (spec, handler)
}

/// The knowledge tools over the actor.
pub fn knowledge_tools(
    kb: crate::addr::TAddr<KnowledgeActor>,
) -> Vec<(crate::stages::ToolSpec, std::sync::Arc<dyn crate::stages::ToolHandler>)> {
    use crate::stages::tools::NoArgs;
    vec![
        knowledge_tool(
            &kb,
            "knowledge_search",
            "Search the knowledge base (notes written on purpose) for a query.",
            true,
            |a: SearchArgs| KnowledgeCall::Search {
                query: a.query,
                top_k: a.top_k.unwrap_or(5),
            },
        ),
        knowledge_tool(
            &kb,
            "knowledge_list",
            "List the knowledge base as a tree.",
            true,
            |_: NoArgs| KnowledgeCall::List,
        ),
        knowledge_tool(
            &kb,
            "knowledge_create",
            "Create or overwrite a knowledge item (`category/name` allowed).",
            false,
            |a: CreateArgs| KnowledgeCall::Create {
                name: a.name,
                content: a.content,
            },
        ),
        knowledge_tool(
            &kb,
            "knowledge_delete",
            "Delete a knowledge item.",
            false,
            |a: DeleteArgs| KnowledgeCall::Delete { name: a.name },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_escapes_refused() {
        assert_eq!(sanitize(" Tech/Rust Notes ").unwrap(), "tech/rust_notes");
        assert_eq!(sanitize("a\\b").unwrap(), "a_b");
        for bad in ["../etc", "/abs", "a//b", ".hidden", ""] {
            assert!(sanitize(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_guest_recalls_only_public_items() {
        let dir = tempfile::tempdir().unwrap();
        let kb = KnowledgeBase::new(dir.path());
        kb.create("bank", "the bank PIN is 4921").unwrap();
        kb.create("public/hours", "the shop opens at nine; ask about the bank holiday")
            .unwrap();
        kb.create("publicity", "bank campaign notes").unwrap();
        assert!(is_public("public/hours") && !is_public("publicity") && !is_public("public"));
        let names = |items: Vec<crate::memory::recall::Item>| -> Vec<String> {
            items
                .into_iter()
                .map(|i| match i.origin {
                    crate::memory::recall::Origin::Knowledge { name } => name,
                    o => panic!("{o:?}"),
                })
                .collect()
        };
        let all = names(kb.recall("bank", 10, false));
        assert!(
            all.contains(&"bank".to_owned()) && all.contains(&"publicity".to_owned()),
            "{all:?}"
        );
        assert_eq!(names(kb.recall("bank", 10, true)), vec!["public/hours".to_owned()]);
    }

    #[test]
    fn create_search_list_delete() {
        let dir = tempfile::tempdir().unwrap();
        let kb = KnowledgeBase::new(dir.path());
        kb.create("recipes/tea", "泡绿茶：80度水，三分钟。").unwrap();
        kb.create("recipes/coffee", "Pour-over coffee: 92°C water, 15 g per 250 ml.")
            .unwrap();
        kb.create("travel", "Passport renewal takes six weeks.").unwrap();
        assert!(kb.search("绿茶 水温", 5).starts_with("[recipes/tea]\n泡绿茶"));
        assert_eq!(kb.search("", 5), Msg::QueryRequired.text());
        assert_eq!(kb.search("zzzz", 5), Msg::KnowledgeNothing.text());
        let list = kb.list();
        assert!(list.starts_with("- recipes/\n  - coffee ("), "{list}");
        assert!(list.contains("\n- travel ("), "{list}");
        kb.delete("recipes/tea").unwrap();
        assert!(matches!(kb.delete("recipes/tea"), Err(KnowledgeError::Missing(_))));
        assert_eq!(kb.items().len(), 2);
    }
}
