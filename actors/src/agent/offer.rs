//! A turn's tool offer, remembered: the model's tool list built once per registry
//! snapshot and channel set, and the last subset [`super::toolset::choose`] made.
//!
//! Why a memo: every turn asks for the offer at least twice (its budget counts the
//! schemas before recall; each request then sends them) and the same input usually
//! picks the same tools the next turn too. Building the list serialises and counts
//! every schema, scoring the input analyses it against every tool, and a list shared
//! as the same `Arc` is a hit in the vendor adapter's tools cache without hashing the
//! schemas again. The choice itself is `toolset`'s; this is a plain struct the task
//! shell ([`super::task::offer`]) locks once per offer, tested without actix.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::toolset::{Choice, Room, ToolMeta, choose, relevance};
use crate::llm::types::{ToolDef, ToolList};

/// The tools one request offers: all of them, or (at a small window) the subset of
/// [`choose`] with the catalogue of the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offered {
    pub list: ToolList,
    /// The schemas' tokens, the catalogue's included.
    pub tokens: usize,
    /// Appended to the system prompt when a subset is offered ([`Self::splice`]).
    pub catalogue: String,
}

impl Offered {
    /// `system` (the request's system prompt) with the catalogue of the tools not
    /// offered appended: the model reads what else exists and asks for it by owner.
    pub fn splice(&self, system: &str) -> String {
        format!("{system}{}", self.catalogue)
    }
}

/// What one offer is asked for.
pub struct Ask<'a> {
    /// Tokens the prompt has beside its fixed part (target − fixed, `agent::budget`).
    pub available: usize,
    /// The tools' room out of `available` ([`Room::of`]).
    pub room: Room,
    /// The input the tools are chosen for.
    pub query: &'a str,
    /// The input's channel (its send tool may be among `always`).
    pub channel: &'a str,
    /// Names offered whatever the input.
    pub always: &'a dyn Fn(&str) -> bool,
    /// Owners the model asked about (or called a tool of) in this turn.
    pub expanded: &'a BTreeSet<String>,
}

/// What a subset is chosen from, besides the tools themselves: the input counts only
/// through the tools' relevance to it, so inputs that match the same tools equally (most
/// of them match none) share one choice.
#[derive(Debug, PartialEq, Eq)]
struct Key {
    available: usize,
    scores: Vec<usize>,
    channel: String,
    expanded: BTreeSet<String>,
}

/// The model's tool list as last built — from which registry snapshot and channel set
/// — its token count, what the subset policy knows of each tool, and its last choices.
#[derive(Debug)]
pub struct OfferCache {
    registry: ToolList,
    channels: String,
    list: ToolList,
    tokens: usize,
    metas: Vec<ToolMeta>,
    /// The last offer and what it was chosen for.
    last_offer: Option<(Key, Offered)>,
    /// The last subset's tools (indices into `metas`) and their list: the next input
    /// usually picks the same ones, and the same `Arc` is what the adapter caches by.
    last_subset: Option<(Vec<usize>, ToolList)>,
    /// The last input's relevance scores (a turn's budget and each of its requests ask
    /// for the same input).
    last_scores: Option<(String, Vec<usize>)>,
}

impl OfferCache {
    /// The list of the registry snapshot `registry` (less the names in `hidden`) and
    /// then `channel_tools`, for the channel set keyed `channels`; `owner_of` gives a
    /// registered tool's owner and its keywords (a channel's send tools are the
    /// channels' own, [`super::toolset::CHANNELS`]).
    pub fn build(
        registry: &ToolList,
        hidden: &[&str],
        channels: String,
        channel_tools: Vec<ToolDef>,
        owner_of: impl Fn(&str) -> Option<(String, String)>,
    ) -> Self {
        let mut list = registry.as_ref().clone();
        if !hidden.is_empty() {
            list.retain(|d| !hidden.contains(&d.function.name.as_str()));
        }
        list.extend(channel_tools);
        let tokens = tokens_of(&list);
        let analyze = crate::memory::index::retrieve::analyze;
        let metas = list
            .iter()
            .map(|d| {
                let f = &d.function;
                let (owner, keywords) =
                    owner_of(&f.name).unwrap_or_else(|| (super::toolset::CHANNELS.to_owned(), String::new()));
                ToolMeta {
                    name: f.name.clone(),
                    owner,
                    tokens: tokens_of(d),
                    name_terms: analyze(&f.name),
                    key_terms: analyze(&keywords),
                    desc_terms: analyze(&f.description),
                }
            })
            .collect();
        Self {
            registry: registry.clone(),
            channels,
            list: Arc::new(list),
            tokens,
            metas,
            last_offer: None,
            last_subset: None,
            last_scores: None,
        }
    }

    /// Whether this is the list of that registry snapshot and channel set (a snapshot
    /// is replaced, never changed in place, when a tool comes or goes).
    pub fn is_of(&self, registry: &ToolList, channels: &str) -> bool {
        Arc::ptr_eq(&self.registry, registry) && self.channels == channels
    }

    /// The whole list and its tokens.
    pub fn list(&self) -> (ToolList, usize) {
        (self.list.clone(), self.tokens)
    }

    /// The tools a request offers: everything while it fits `ask.room.full`, else
    /// [`choose`]'s subset, the same `Arc` as last time when the choice is the same.
    pub fn offer(&mut self, ask: &Ask<'_>) -> Offered {
        if self.tokens <= ask.room.full {
            return self.whole();
        }
        let scores = match &self.last_scores {
            Some((q, s)) if q == ask.query => s.clone(),
            _ => {
                let s = relevance(&self.metas, &crate::memory::index::retrieve::analyze(ask.query));
                self.last_scores = Some((ask.query.to_owned(), s.clone()));
                s
            }
        };
        let key = Key {
            available: ask.available,
            scores,
            channel: ask.channel.to_owned(),
            expanded: ask.expanded.clone(),
        };
        if let Some((k, o)) = &self.last_offer
            && *k == key
        {
            return o.clone();
        }
        let offered = match choose(
            &self.metas,
            self.tokens,
            ask.room,
            &key.scores,
            ask.always,
            ask.expanded,
        ) {
            Choice::All => self.whole(),
            Choice::Subset {
                offered,
                tokens,
                catalogue,
            } => {
                tracing::debug!(
                    offered = offered.len(),
                    of = self.metas.len(),
                    tokens,
                    available = ask.available,
                    "a subset of the tools offered: the whole list would crowd out memory"
                );
                let list = match &self.last_subset {
                    Some((idx, l)) if *idx == offered => l.clone(),
                    _ => {
                        let l: ToolList = Arc::new(offered.iter().map(|&i| self.list[i].clone()).collect());
                        self.last_subset = Some((offered, l.clone()));
                        l
                    }
                };
                Offered {
                    list,
                    tokens,
                    catalogue,
                }
            }
        };
        self.last_offer = Some((key, offered.clone()));
        offered
    }

    fn whole(&self) -> Offered {
        Offered {
            list: self.list.clone(),
            tokens: self.tokens,
            catalogue: String::new(),
        }
    }
}

/// Tokens of `v` as a request carries it (the list, one schema).
fn tokens_of(v: &impl serde::Serialize) -> usize {
    serde_json::to_string(v).map_or(0, |s| crate::llm::tokens::count(&s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolFunction;

    fn def(name: &str, desc: &str) -> ToolDef {
        ToolDef {
            kind: "function".into(),
            function: ToolFunction {
                name: name.into(),
                description: desc.into(),
                parameters: serde_json::json!({"type": "object", "properties": {"text": {"type": "string", "description": desc}}}),
            },
        }
    }

    fn registry() -> ToolList {
        Arc::new(vec![
            def("get_plugin_tools", "List the tools of an owner."),
            def("memory_recall", "Recall facts about an entity."),
            def("files_read", "Read a text file inside the roots."),
            def("files_write", "Write a text file inside the roots."),
            def("terminal_create", "Open a terminal session (a shell in a PTY)."),
            def("web_fetch", "Fetch a web page as readable text."),
            def("timer_set", "Set a reminder at a time."),
            def("notify_parent", "Tell the parent agent something."),
        ])
    }

    fn owner_of(name: &str) -> Option<(String, String)> {
        let owner = name.split('_').next().unwrap_or(name);
        Some((owner.to_owned(), String::new()))
    }

    fn cache(registry: &ToolList) -> OfferCache {
        OfferCache::build(
            registry,
            &["notify_parent"],
            "web\u{1}".into(),
            vec![def("output_send__web", "Send a message to the web channel.")],
            |n| (!n.starts_with("output_send__")).then(|| owner_of(n)).flatten(),
        )
    }

    fn names(o: &Offered) -> Vec<&str> {
        o.list.iter().map(|d| d.function.name.as_str()).collect()
    }

    fn ask<'a>(
        query: &'a str,
        full: usize,
        always: &'a dyn Fn(&str) -> bool,
        expanded: &'a BTreeSet<String>,
    ) -> Ask<'a> {
        Ask {
            available: 3 * full / 2,
            room: Room {
                full,
                first: full * 2 / 3,
                expanded: full,
            },
            query,
            channel: "web",
            always,
            expanded,
        }
    }

    #[test]
    fn the_list_is_the_registry_less_the_hidden_then_the_channels_and_is_kept_per_snapshot() {
        let reg = registry();
        let c = cache(&reg);
        let (list, tokens) = c.list();
        assert_eq!(
            list.len(),
            8,
            "seven registered (one hidden) and the channel's send tool"
        );
        assert!(!list.iter().any(|d| d.function.name == "notify_parent"));
        assert_eq!(list.last().map(|d| d.function.name.as_str()), Some("output_send__web"));
        assert_eq!(
            tokens,
            crate::llm::tokens::count(&serde_json::to_string(&*list).unwrap())
        );
        assert_eq!(
            c.metas.last().map(|m| m.owner.as_str()),
            Some(super::super::toolset::CHANNELS)
        );
        assert!(c.is_of(&reg, "web\u{1}"));
        assert!(!c.is_of(&registry(), "web\u{1}"), "another snapshot, even an equal one");
        assert!(!c.is_of(&reg, "web\u{1}mail\u{1}"), "another channel set");
    }

    #[test]
    fn everything_is_offered_while_it_fits_as_the_very_same_list() {
        let reg = registry();
        let mut c = cache(&reg);
        let (list, tokens) = c.list();
        let none = BTreeSet::new();
        let o = c.offer(&ask("read my notes file", tokens, &|_| false, &none));
        assert!(Arc::ptr_eq(&o.list, &list), "the shared list, not a copy");
        assert_eq!((o.tokens, o.catalogue.as_str()), (tokens, ""));
        assert_eq!(o.splice("You are helpful."), "You are helpful.");
    }

    #[test]
    fn a_subset_is_chosen_once_per_choice_and_its_catalogue_names_the_rest() {
        let reg = registry();
        let mut c = cache(&reg);
        let (_, tokens) = c.list();
        let none = BTreeSet::new();
        let always = |n: &str| n == "get_plugin_tools" || n == "output_send__web";
        let full = tokens - 1;
        let first = c.offer(&ask("read the notes file", full, &always, &none));
        let offered = names(&first);
        assert!(offered.contains(&"files_read"), "the relevant tool: {offered:?}");
        assert!(offered.contains(&"get_plugin_tools") && offered.contains(&"output_send__web"));
        assert!(!offered.contains(&"timer_set"), "{offered:?}");
        assert!(first.tokens < tokens);
        assert!(
            first.catalogue.contains("timer"),
            "the rest is listed: {}",
            first.catalogue
        );
        assert!(
            first.splice("Be brief.").starts_with("Be brief.") && first.splice("Be brief.").ends_with(&first.catalogue)
        );
        // The same input again, and another with the same relevance: the same list.
        let again = c.offer(&ask("read the notes file", full, &always, &none));
        assert!(Arc::ptr_eq(&again.list, &first.list));
        let same_tools = c.offer(&ask("please read a file", full, &always, &none));
        assert_eq!(names(&same_tools), offered);
        // An owner asked about joins; the list changes with the choice.
        let expanded: BTreeSet<String> = ["timer".to_owned()].into();
        let wider = c.offer(&ask("read the notes file", full, &always, &expanded));
        assert!(names(&wider).contains(&"timer_set"), "{:?}", names(&wider));
        assert!(!Arc::ptr_eq(&wider.list, &first.list));
    }
}
