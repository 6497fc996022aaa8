//! Which tools a request offers when not all of them fit (kernel spec §7.4's per-plugin
//! catalogue and `get_plugin_tools`).
//!
//! Why: every schema rides along with every request. With the bundled plugins that is
//! ~60 tools, ~6k tokens — at an 8k window (the conservative default for an unknown
//! model) the fixed prompt and the schemas would take the whole target and recalled
//! memory would get nothing, which breaks the daemon's central promise. So when the
//! schemas would take more than their share of the prompt budget, a request offers a
//! subset and the system prompt lists the rest as a catalogue (owner, names, what the
//! first one does); the model asks `get_plugin_tools` for an owner's schemas, and from
//! the next step of the same turn that owner's tools are offered. A deferred tool stays
//! callable by name: the tool runner runs whatever the registry holds.
//!
//! The policy is a plain function of the tools' sizes, the input's terms and the owners
//! expanded so far; the same input gives the same subset on every step of a turn, so a
//! tool never disappears mid-turn.
//!
//! Shares (of `available` = target − fixed, see [`super::budget`]): everything is offered
//! while the schemas take at most two thirds (memory keeps its full third then). Past
//! that, the first offer is held to a half and expansions may grow it to two thirds: the
//! sixth in between is the room one owner's schemas get inside the same turn, so the
//! budget computed at the turn's start stays true after an expansion.

use std::collections::BTreeSet;

/// What the policy knows of one tool (computed once per registry change).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolMeta {
    pub name: String,
    /// The plugin (or kernel part) that owns it: `get_plugin_tools`' argument.
    pub owner: String,
    /// Tokens of its schema as sent.
    pub tokens: usize,
    /// Analysed terms of its name, its keywords (never sent, see
    /// `ToolSpec::keywords`) and its description, weighted in that order.
    pub name_terms: Vec<String>,
    pub key_terms: Vec<String>,
    pub desc_terms: Vec<String>,
}

/// The catalogue's own tool, through which the model lists every plugin's tools (the
/// plugin manager registers it; the agent offers it always and treats its caller as
/// the plugins' owner). Named here, where the agent reads it, so the agent does not
/// import the plugin host.
pub const PLUGIN_TOOLS: &str = "get_plugin_tools";

/// Tools offered whatever the input, when a subset is offered: the catalogue's own
/// tool, the channel list, the skill bodies and the two read paths into memory.
pub const ALWAYS: &[&str] = &[PLUGIN_TOOLS, "skill_info", "memory_recall", "knowledge_search"];

/// Whether `name` is offered whatever the input: one of [`ALWAYS`], or — when the
/// input's channel is asynchronous, so it is answered through its send tool `send` —
/// that tool or its `_help`.
pub fn always_offered(name: &str, send: Option<&str>) -> bool {
    ALWAYS.contains(&name) || send.is_some_and(|s| name.strip_prefix(s).is_some_and(|r| r.is_empty() || r == "_help"))
}

/// The owner a call reached for, whose tools the next steps offer: the plugin named
/// in a `get_plugin_tools` call, or the owner of any other tool called (offered or
/// called by name from the catalogue). `None` for a catalogue call without a plugin,
/// an unknown tool and a tool without an owner.
pub fn reached_owner(
    name: &str,
    args: &serde_json::Value,
    owner_of: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let owner = if name == PLUGIN_TOOLS {
        args.get("plugin").and_then(|p| p.as_str()).map(str::to_owned)
    } else {
        owner_of(name)
    };
    owner.filter(|o| !o.is_empty())
}

/// The owners of the tools the owner's last [`Recent::TURNS`] turns reached for (called,
/// or asked `get_plugin_tools` about): their tools join the next turns' offers as an
/// expansion does, so "and the next one" after a terminal or file turn still has the
/// tools at hand. A turn that used none counts too: three turns on other things and the
/// owner is no longer offered for that alone.
#[derive(Debug, Default)]
pub struct Recent {
    turns: std::collections::VecDeque<BTreeSet<String>>,
}

impl Recent {
    pub const TURNS: usize = 3;

    /// A turn ended having reached for these owners.
    pub fn push(&mut self, owners: BTreeSet<String>) {
        if self.turns.len() == Self::TURNS {
            self.turns.pop_front();
        }
        self.turns.push_back(owners);
    }

    /// The owners of the last turns, to start the next turn's expansions with.
    pub fn owners(&self) -> BTreeSet<String> {
        self.turns.iter().flatten().cloned().collect()
    }
}

/// The room a request's tools get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Everything is offered up to this many tokens.
    pub full: usize,
    /// A subset's first offer (catalogue included) stays within this.
    pub first: usize,
    /// Expanded owners may grow the offer up to this.
    pub expanded: usize,
}

impl Room {
    /// The room out of `available` tokens (target − fixed), held to `cap` tokens
    /// (`core.agent.tool_tokens`; 0: no cap) for the first offer and twice that with
    /// expansions (one owner's schemas on top of a full first offer).
    pub fn of(available: usize, cap: usize) -> Self {
        let held = |share: usize, to: usize| if cap == 0 { share } else { share.min(to) };
        Self {
            full: held(available * 2 / 3, cap),
            first: held(available / 2, cap),
            expanded: held(available * 2 / 3, cap.saturating_mul(2)),
        }
    }
}

/// The policy's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Every tool.
    All,
    /// These tools (indices into the metas, in registry order), their tokens with the
    /// catalogue's, and the catalogue of the rest for the system prompt.
    Subset {
        offered: Vec<usize>,
        tokens: usize,
        catalogue: String,
    },
}

/// Chooses the tools of one request.
///
/// * `all_tokens`: the tokens of the whole list as sent;
/// * `scores`: each tool's relevance to the input ([`relevance`]): the choice depends
///   on the input through these alone, so two inputs of equal scores get one choice;
/// * `always`: names offered whatever the input (see [`ALWAYS`], plus the send tools of
///   the input's channel when it is asynchronous);
/// * `expanded`: owners the model asked about (or called a tool of) in this turn.
pub fn choose(
    metas: &[ToolMeta],
    all_tokens: usize,
    room: Room,
    scores: &[usize],
    always: &dyn Fn(&str) -> bool,
    expanded: &BTreeSet<String>,
) -> Choice {
    if all_tokens <= room.full {
        return Choice::All;
    }
    let mut chosen = vec![false; metas.len()];
    let mut used = 0usize;
    for (i, m) in metas.iter().enumerate() {
        if always(&m.name) {
            chosen[i] = true;
            used += m.tokens;
        }
    }
    // By relevance to the input, then in registry order: the relevant ones that fit the
    // first offer (a tool the input does not touch is one call away, not sent).
    let mut order: Vec<(usize, usize)> = metas
        .iter()
        .enumerate()
        .filter(|(i, _)| !chosen[*i])
        .map(|(i, _)| (i, scores.get(i).copied().unwrap_or(0)))
        .filter(|&(_, s)| s > 0)
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut added = Vec::new();
    for &(i, _) in &order {
        if used + metas[i].tokens <= room.first {
            chosen[i] = true;
            used += metas[i].tokens;
            added.push(i);
        }
    }
    // The catalogue of what is left comes out of the same room: give back the least
    // relevant picks until both fit (a deferred tool costs a name, its schema far more).
    // Counted by line, each line remembered (`count_memo`): a pop changes one owner's
    // line, and the same lines come back turn after turn, so the loop encodes almost
    // nothing. The per-line sum is an estimate for the loop only; the final count is of
    // the catalogue as sent (and the loop resumes in the unlikely case it is larger).
    let mut cat = catalogue_estimate(metas, &chosen);
    loop {
        while used + cat > room.first
            && let Some(i) = added.pop()
        {
            chosen[i] = false;
            used -= metas[i].tokens;
            cat = catalogue_estimate(metas, &chosen);
        }
        let exact = crate::llm::tokens::count_memo(&catalogue(metas, &chosen));
        if exact <= cat || used + exact <= room.first || added.is_empty() {
            cat = cat.max(exact);
            break;
        }
        cat = exact;
    }
    // Owners asked about in this turn: whole, while the expansion room lasts (a tool
    // left out stays callable by name; `get_plugin_tools` gave the model its schema).
    // The catalogue only shrinks as tools join, so its current size is an upper bound.
    for (i, m) in metas.iter().enumerate() {
        if !chosen[i] && expanded.contains(&m.owner) && used + m.tokens + cat <= room.expanded {
            chosen[i] = true;
            used += m.tokens;
        }
    }
    let catalogue = catalogue(metas, &chosen);
    let offered: Vec<usize> = (0..metas.len()).filter(|&i| chosen[i]).collect();
    if offered.len() == metas.len() {
        return Choice::All;
    }
    Choice::Subset {
        offered,
        tokens: used + crate::llm::tokens::count_memo(&catalogue),
        catalogue,
    }
}

/// Each tool's relevance to the input's analysed terms
/// ([`crate::memory::index::retrieve::analyze`]), in the order of `metas`; 0 = unrelated.
///
/// A shared term counts by where the tool has it (name 3, keyword 2, description 1)
/// times its rarity among the tools (`ln(1 + N / tools having it)`): "timer" points at
/// the timer's tools, "get" or "file" — in a dozen tools' texts — hardly at any. A
/// tool scoring under a quarter of the best is dropped: it shares only a stray word.
pub fn relevance(metas: &[ToolMeta], query: &[String]) -> Vec<usize> {
    // A number says nothing of the tool it needs ("5 miles" is not web_search's "default
    // 5 results").
    let mut terms: Vec<&str> = query
        .iter()
        .map(String::as_str)
        .filter(|t| !t.chars().all(|c| c.is_ascii_digit()))
        .collect();
    terms.sort_unstable();
    terms.dedup();
    let n = metas.len() as f64;
    let idf: Vec<f64> = terms
        .iter()
        .map(|t| {
            let df = metas.iter().filter(|m| weight(m, t) > 0).count();
            if df == 0 { 0.0 } else { (1.0 + n / df as f64).ln() }
        })
        .collect();
    let scores: Vec<usize> = metas
        .iter()
        .map(|m| {
            let s: f64 = terms.iter().zip(&idf).map(|(t, w)| f64::from(weight(m, t)) * w).sum();
            (s * 100.0).round() as usize
        })
        .collect();
    let best = scores.iter().copied().max().unwrap_or(0);
    scores.into_iter().map(|s| if s * 4 < best { 0 } else { s }).collect()
}

/// Where a tool has the term: its name 3, a keyword 2, its description 1, else 0.
fn weight(m: &ToolMeta, t: &str) -> u8 {
    if m.name_terms.iter().any(|n| n == t) {
        3
    } else if m.key_terms.iter().any(|k| k == t) {
        2
    } else if m.desc_terms.iter().any(|d| d == t) {
        1
    } else {
        0
    }
}

/// The owner of the channels' send tools. The catalogue leaves them out: the system
/// prompt's output section names every channel and its `output_send__<channel>_help`.
pub const CHANNELS: &str = "channels";

/// The deferred tools by owner, in registry order.
fn deferred<'a>(metas: &'a [ToolMeta], chosen: &[bool]) -> Vec<(&'a str, Vec<&'a ToolMeta>)> {
    let mut owners: Vec<(&str, Vec<&ToolMeta>)> = Vec::new();
    for (m, _) in metas.iter().zip(chosen).filter(|(m, c)| !**c && m.owner != CHANNELS) {
        match owners.iter_mut().find(|(o, _)| *o == m.owner) {
            Some((_, list)) => list.push(m),
            None => owners.push((&m.owner, vec![m])),
        }
    }
    owners
}

const CATALOGUE_HEAD: &str = "\n\n# More tools\nAlso available, by owner; get_plugin_tools {\"plugin\": \"<owner>\"} \
     shows their parameters and offers them from your next step.\n";

/// One owner's line of the catalogue: its tools' names, which say what they do (a
/// description per owner cost ~15 tokens each and read as noise beside the names).
fn catalogue_line(owner: &str, list: &[&ToolMeta]) -> String {
    let names: Vec<&str> = list.iter().map(|m| m.name.as_str()).collect();
    format!("- {owner}: {}\n", names.join(", "))
}

/// The catalogue of deferred tools, grouped by owner in registry order.
fn catalogue(metas: &[ToolMeta], chosen: &[bool]) -> String {
    let owners = deferred(metas, chosen);
    if owners.is_empty() {
        return String::new();
    }
    let mut s = String::from(CATALOGUE_HEAD);
    for (owner, list) in owners {
        s.push_str(&catalogue_line(owner, &list));
    }
    s
}

/// The catalogue's tokens as the sum of its parts, each remembered. The o200k
/// pre-tokenizer does not join pieces across a `\n` followed by `-`, so this is the
/// exact count in practice; [`choose`] checks the final text all the same.
fn catalogue_estimate(metas: &[ToolMeta], chosen: &[bool]) -> usize {
    let owners = deferred(metas, chosen);
    if owners.is_empty() {
        return 0;
    }
    let count = crate::llm::tokens::count_memo;
    count(CATALOGUE_HEAD) + owners.iter().map(|(o, l)| count(&catalogue_line(o, l))).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, owner: &str, tokens: usize, desc: &str) -> ToolMeta {
        let analyze = crate::memory::index::retrieve::analyze;
        ToolMeta {
            name: name.into(),
            owner: owner.into(),
            tokens,
            name_terms: analyze(name),
            key_terms: Vec::new(),
            desc_terms: analyze(desc),
        }
    }

    fn tools() -> Vec<ToolMeta> {
        vec![
            meta("get_plugin_tools", "builtin.pluginmgr", 90, "List tools by owner."),
            meta("memory_recall", "builtin.agent", 130, "Recall facts about an entity."),
            meta("files_read", "files", 150, "Read a text file inside the roots."),
            meta("files_write", "files", 140, "Write a text file inside the roots."),
            meta(
                "terminal_create",
                "terminal",
                220,
                "Open a terminal session (a shell in a PTY).",
            ),
            meta("terminal_send", "terminal", 150, "Type text into a terminal session."),
            meta("web_fetch", "web", 160, "Fetch a web page as readable text."),
            meta("timer_set", "timer", 120, "Set a reminder at a time."),
        ]
    }

    fn always(n: &str) -> bool {
        ALWAYS.contains(&n)
    }

    fn names(metas: &[ToolMeta], c: &Choice) -> Vec<String> {
        match c {
            Choice::All => metas.iter().map(|m| m.name.clone()).collect(),
            Choice::Subset { offered, .. } => offered.iter().map(|&i| metas[i].name.clone()).collect(),
        }
    }

    #[test]
    fn a_call_reaches_the_owner_it_names_or_the_owner_of_its_tool() {
        let owner_of = |name: &str| match name {
            "web_fetch" => Some("web".to_owned()),
            "orphan" => Some(String::new()),
            _ => None,
        };
        let reached = |name: &str, args: serde_json::Value| reached_owner(name, &args, owner_of);
        assert_eq!(
            reached(PLUGIN_TOOLS, serde_json::json!({"plugin": "files"})),
            Some("files".into())
        );
        assert_eq!(
            reached(PLUGIN_TOOLS, serde_json::json!({})),
            None,
            "the whole catalogue"
        );
        assert_eq!(reached(PLUGIN_TOOLS, serde_json::json!({"plugin": ""})), None);
        assert_eq!(reached("web_fetch", serde_json::json!({})), Some("web".into()));
        assert_eq!(reached("no_such_tool", serde_json::json!({})), None);
        assert_eq!(reached("orphan", serde_json::json!({})), None, "no owner to expand");
    }

    #[test]
    fn everything_is_offered_while_it_fits_two_thirds() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        let room = Room::of(total * 3 / 2, 0);
        assert_eq!(room.full, total);
        let c = choose(&t, total, room, &relevance(&t, &[]), &always, &BTreeSet::new());
        assert_eq!(c, Choice::All);
    }

    #[test]
    fn a_small_window_offers_the_relevant_tools_and_lists_the_rest() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        let room = Room::of(1400, 0);
        let query = crate::memory::index::retrieve::analyze("please read the file notes.txt");
        let c = choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new());
        let offered = names(&t, &c);
        assert!(offered.contains(&"files_read".to_owned()), "{offered:?}");
        assert!(offered.contains(&"get_plugin_tools".to_owned()) && offered.contains(&"memory_recall".to_owned()));
        let Choice::Subset {
            tokens,
            catalogue,
            offered: idx,
        } = &c
        else {
            panic!("{c:?}")
        };
        assert!(*tokens <= room.first, "{tokens} > {}", room.first);
        let sum: usize = idx.iter().map(|&i| t[i].tokens).sum();
        assert_eq!(*tokens, sum + crate::llm::tokens::count(catalogue));
        // Whatever was left out is in the catalogue, by owner.
        for m in t.iter().filter(|m| !offered.contains(&m.name)) {
            assert!(
                catalogue.contains(&m.name) && catalogue.contains(&format!("- {}:", m.owner)),
                "{catalogue}"
            );
        }
        assert!(!catalogue.contains("files_read"), "{catalogue}");
        // The loop's per-line count is the count of the text as sent.
        let mask: Vec<bool> = (0..t.len()).map(|i| idx.contains(&i)).collect();
        assert_eq!(catalogue_estimate(&t, &mask), crate::llm::tokens::count(catalogue));
        // The same input gives the same subset (a tool never vanishes mid-turn).
        assert_eq!(
            c,
            choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new())
        );
    }

    #[test]
    fn an_owner_asked_about_joins_the_offer_within_the_expansion_room() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        let room = Room {
            full: 1000,
            first: 700,
            expanded: 1100,
        };
        let query = crate::memory::index::retrieve::analyze("what time is it");
        let first = choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new());
        assert!(!names(&t, &first).contains(&"terminal_create".to_owned()), "{first:?}");
        let expanded: BTreeSet<String> = ["terminal".to_owned()].into();
        let next = choose(&t, total, room, &relevance(&t, &query), &always, &expanded);
        let offered = names(&t, &next);
        assert!(offered.contains(&"terminal_create".to_owned()) && offered.contains(&"terminal_send".to_owned()));
        for n in names(&t, &first) {
            assert!(offered.contains(&n), "{n} stays offered after the expansion");
        }
        let Choice::Subset { tokens, .. } = next else { panic!() };
        assert!(tokens <= room.expanded);
    }

    #[test]
    fn the_last_turns_owners_stay_and_fade_after_three_turns() {
        let mut r = Recent::default();
        r.push(["terminal".to_owned()].into());
        assert_eq!(r.owners(), ["terminal".to_owned()].into());
        r.push(["files".to_owned()].into());
        r.push(BTreeSet::new());
        assert_eq!(r.owners(), ["files".to_owned(), "terminal".to_owned()].into());
        r.push(BTreeSet::new());
        assert_eq!(
            r.owners(),
            ["files".to_owned()].into(),
            "three turns later the terminal is no longer sticky"
        );
    }

    #[test]
    fn a_cap_holds_the_offer_at_any_window_and_unrelated_tools_stay_out() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        // A window where everything would fit its share, held to a cap.
        let room = Room::of(100_000, 500);
        assert_eq!((room.full, room.first, room.expanded), (500, 500, 1000));
        let query = crate::memory::index::retrieve::analyze("remind me at noon");
        let c = choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new());
        let offered = names(&t, &c);
        assert!(offered.contains(&"timer_set".to_owned()), "{offered:?}");
        for n in ["files_read", "files_write", "terminal_create", "web_fetch"] {
            assert!(
                !offered.contains(&n.to_owned()),
                "{n} shares no word with the input: {offered:?}"
            );
        }
        let Choice::Subset { tokens, .. } = c else { panic!() };
        assert!(tokens <= 500);
        // No cap: the window's share decides, and everything fits.
        assert_eq!(
            choose(
                &t,
                total,
                Room::of(100_000, 0),
                &relevance(&t, &query),
                &always,
                &BTreeSet::new()
            ),
            Choice::All
        );
    }

    #[test]
    fn a_rare_word_outweighs_a_common_one() {
        let t = tools();
        // Both in a description: "text" in three tools', "reminder" in one.
        let s = relevance(&t, &crate::memory::index::retrieve::analyze("a text reminder"));
        let timer = t.iter().position(|m| m.name == "timer_set").unwrap();
        let read = t.iter().position(|m| m.name == "files_read").unwrap();
        assert!(s[timer] > s[read], "{s:?}");
        // Numbers match nothing.
        let t = vec![meta("web_search", "web", 80, "Search the web: 5 results by default.")];
        assert_eq!(
            relevance(&t, &crate::memory::index::retrieve::analyze("5 miles")),
            vec![0]
        );
    }

    #[test]
    fn an_asynchronous_channels_send_tool_is_always_offered_and_no_other() {
        assert!(always_offered("skill_info", None));
        assert!(!always_offered("send_onebot", None));
        assert!(always_offered("send_onebot", Some("send_onebot")));
        assert!(always_offered("send_onebot_help", Some("send_onebot")));
        assert!(!always_offered("send_onebot2", Some("send_onebot")));
        assert!(!always_offered("send_onebot_image", Some("send_onebot")));
        assert!(!always_offered("files_read", Some("send_onebot")));
    }
}
