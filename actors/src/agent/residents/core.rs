//! The residents' control plane as a plain state machine (spec §6.2): which residents
//! exist, who owns them, their state and round table, the limits, the residual-task
//! policy and the offload's choice of a resident, the tool's calls decoded once
//! ([`Command`]) and every input a resident's life makes ([`inputs`]). The shell ([`super::Residents`])
//! starts and stops actors; nothing here knows about actix.

use std::collections::BTreeMap;

use crate::stages::Caller;

/// Characters of an input kept in a round record / a dropped residual's log line.
pub const INPUT_RUNES: usize = 80;
/// Characters of an output kept in a round record.
pub const OUTPUT_RUNES: usize = 120;
/// Characters of an `inputch_note` kept.
pub const NOTE_RUNES: usize = 200;
/// Round records kept per resident (newest last).
pub const MAX_ROUNDS: usize = 50;
/// The longest resident id (it names a directory under `DATA/residents/`).
pub const MAX_ID_LEN: usize = 48;

/// The share of the window at which a resident's context counts as full (spec §6.2).
pub const FULL_SHARE: f64 = 0.9;

/// Whether a context holding `tokens` (inputs and responses; tool outputs are not
/// counted, as in the spec) is full for a `window`-token model.
pub fn context_is_full(tokens: usize, window: usize) -> bool {
    window > 0 && tokens as f64 >= FULL_SHARE * window as f64
}

/// Who made a resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// The parent's model, through `resident_agents create`: its rounds are reported
    /// back to the parent.
    Parent,
    /// The triage offload: it answers on the original channels, nobody is told.
    Offload,
}

/// A resident's state, as `inspect` and `GET /api/v1/residents` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Running,
    /// Its context reached 0.9 × the window: the parent should compress, reclaim or destroy.
    ContextFull,
}

/// Why a control-plane call was refused; each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResidentError {
    #[error(
        "resident id `{0}` is invalid: use 1-{MAX_ID_LEN} characters of [a-z0-9_-] (it names the resident's directory)"
    )]
    BadId(String),
    #[error("a resident `{0}` already exists; pick another id or `send` to it")]
    Duplicate(String),
    #[error("{0} residents exist already (core.agent.max_residents); destroy or reclaim one first")]
    TooMany(usize),
    #[error("no resident `{0}`; `list` shows the existing ones")]
    Unknown(String),
    #[error("`{0}` is required for this action")]
    Missing(&'static str),
    #[error("unknown action `{0}`: use list, create, send, inspect, compress, reclaim or destroy")]
    BadAction(String),
}

/// One resident's book entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resident {
    pub id: String,
    pub owner: Owner,
    pub task: String,
    pub state: State,
    /// One record per completed round (spec's input-channel table), newest last.
    pub rounds: Vec<RoundRecord>,
    /// `inputch_note`'s text for the round in progress (it becomes that round's record).
    #[serde(skip)]
    pub note: Option<String>,
}

/// One line of a resident's input-channel table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RoundRecord {
    /// The resident wrote it itself (`inputch_note`) rather than the automatic text.
    pub proactive: bool,
    pub text: String,
}

/// What the offload does with its backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Reuse this offload-owned resident (the lowest id).
    Reuse(String),
    /// Create one with this id.
    Create(String),
    /// The offload-owned count (or the total) is at its limit: hand nothing over.
    Full,
}

/// What becomes of a resident's work that had not run yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residual {
    /// Back to the parent's queue (the default).
    Keep,
    /// Logged item by item, its waiting callers answered "dropped".
    Drop,
}

impl Residual {
    /// `drop`/`discard` drop; anything else (absent included) keeps (spec §6.2).
    pub fn parse(arg: Option<&str>) -> Self {
        match arg.map(str::trim) {
            Some("drop" | "discard") => Self::Drop,
            _ => Self::Keep,
        }
    }
}

/// The actions of the `resident_agents` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    List,
    Create,
    Send,
    Inspect,
    Compress,
    Reclaim,
    Destroy,
}

impl Action {
    pub fn parse(s: &str) -> Result<Self, ResidentError> {
        Ok(match s.trim() {
            "list" => Self::List,
            "create" => Self::Create,
            "send" => Self::Send,
            "inspect" => Self::Inspect,
            "compress" => Self::Compress,
            "reclaim" => Self::Reclaim,
            "destroy" => Self::Destroy,
            other => return Err(ResidentError::BadAction(other.to_owned())),
        })
    }
}

/// Whether `id` may name a resident (and so a directory): no separators, no dots.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The first `n` characters of `s`, on one line.
pub fn head(s: &str, n: usize) -> String {
    s.chars().take(n).map(|c| if c == '\n' { ' ' } else { c }).collect()
}

/// The book of one agent's residents.
#[derive(Debug, Default)]
pub struct ResidentBook {
    residents: BTreeMap<String, Resident>,
}

impl ResidentBook {
    pub fn len(&self) -> usize {
        self.residents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.residents.is_empty()
    }

    pub fn get(&self, id: &str) -> Result<&Resident, ResidentError> {
        self.residents
            .get(id)
            .ok_or_else(|| ResidentError::Unknown(id.to_owned()))
    }

    pub fn all(&self) -> impl Iterator<Item = &Resident> {
        self.residents.values()
    }

    /// Books a new resident (`max` = `core.agent.max_residents`).
    pub fn create(&mut self, id: &str, task: &str, owner: Owner, max: usize) -> Result<(), ResidentError> {
        if !valid_id(id) {
            return Err(ResidentError::BadId(id.to_owned()));
        }
        if task.trim().is_empty() {
            return Err(ResidentError::Missing("task"));
        }
        if self.residents.contains_key(id) {
            return Err(ResidentError::Duplicate(id.to_owned()));
        }
        if self.residents.len() >= max {
            return Err(ResidentError::TooMany(self.residents.len()));
        }
        self.residents.insert(
            id.to_owned(),
            Resident {
                id: id.to_owned(),
                owner,
                task: task.trim().to_owned(),
                state: State::Running,
                rounds: Vec::new(),
                note: None,
            },
        );
        Ok(())
    }

    /// Takes a resident out of the book (destroy, reclaim, a failed start).
    pub fn remove(&mut self, id: &str) -> Result<Resident, ResidentError> {
        self.residents
            .remove(id)
            .ok_or_else(|| ResidentError::Unknown(id.to_owned()))
    }

    /// `inputch_note`: the resident's own record for the round in progress (a later
    /// note in the same round replaces an earlier one).
    pub fn note(&mut self, id: &str, text: &str) -> Result<(), ResidentError> {
        let r = self
            .residents
            .get_mut(id)
            .ok_or_else(|| ResidentError::Unknown(id.to_owned()))?;
        if text.trim().is_empty() {
            return Err(ResidentError::Missing("text"));
        }
        r.note = Some(head(text.trim(), NOTE_RUNES));
        Ok(())
    }

    /// A round ended: its record — the resident's own note when it wrote one
    /// (`proactive`), else the automatic text.
    pub fn round(&mut self, id: &str, auto: String) {
        if let Some(r) = self.residents.get_mut(id) {
            let record = match r.note.take() {
                Some(text) => RoundRecord { proactive: true, text },
                None => RoundRecord {
                    proactive: false,
                    text: auto,
                },
            };
            r.rounds.push(record);
            if r.rounds.len() > MAX_ROUNDS {
                r.rounds.remove(0);
            }
        }
    }

    /// The resident's context reached its bound: answers whether this is news (signal once).
    pub fn context_full(&mut self, id: &str) -> bool {
        match self.residents.get_mut(id) {
            Some(r) if r.state != State::ContextFull => {
                r.state = State::ContextFull;
                true
            }
            _ => false,
        }
    }

    /// `compress`: the round table cleared, the state `running` again.
    pub fn compress(&mut self, id: &str) -> Result<(), ResidentError> {
        let r = self
            .residents
            .get_mut(id)
            .ok_or_else(|| ResidentError::Unknown(id.to_owned()))?;
        r.rounds.clear();
        r.note = None;
        r.state = State::Running;
        Ok(())
    }

    /// Where the offload hands its backlog: the lowest-id offload-owned resident, or a
    /// new `offload-<unix seconds>` while fewer than `max_offload` exist (and the total
    /// is under `max_total`).
    pub fn offload_target(&self, now_unix: u64, max_offload: usize, max_total: usize) -> Target {
        let mine: Vec<&String> = self
            .residents
            .values()
            .filter(|r| r.owner == Owner::Offload)
            .map(|r| &r.id)
            .collect();
        if let Some(id) = mine.first() {
            return Target::Reuse((*id).clone());
        }
        if mine.len() >= max_offload || self.residents.len() >= max_total {
            return Target::Full;
        }
        let mut id = format!("offload-{now_unix}");
        let mut n = 1;
        while self.residents.contains_key(&id) {
            n += 1;
            id = format!("offload-{now_unix}-{n}");
        }
        Target::Create(id)
    }
}

/// Whether `dir` is resident `id`'s own directory under `root` (`DATA/residents`): the
/// only directory a destroy may delete.
pub fn is_own_dir(dir: &std::path::Path, root: &std::path::Path, id: &str) -> bool {
    valid_id(id) && dir.file_name().is_some_and(|n| n == id) && dir.parent() == Some(root)
}

/// `resident_agents`' arguments, as the model writes them (the schema is generated from
/// this struct).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct ControlArgs {
    #[schemars(extend("enum" = ["list", "create", "send", "inspect", "compress", "reclaim", "destroy"]))]
    pub action: String,
    /// the resident's id: lowercase letters, digits, - and _
    #[serde(default)]
    pub id: String,
    /// create: its standing task
    #[serde(default)]
    pub task: String,
    /// send: the instruction
    #[serde(default)]
    pub text: String,
    /// reclaim/destroy: what becomes of its waiting work
    #[serde(default)]
    #[schemars(extend("enum" = ["keep", "drop"]))]
    pub residual: Option<String>,
    /// create: input channels whose messages it handles instead of you (until it is destroyed)
    #[serde(default)]
    pub input_channels: Option<Vec<String>>,
    #[serde(rename = "__origin", default)]
    #[schemars(skip)]
    pub caller: Caller,
}

/// The arguments of a resident's own `{text}` tools (`notify_parent`, `inputch_note`).
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct TextArgs {
    pub text: String,
    #[serde(rename = "__origin", default)]
    #[schemars(skip)]
    pub caller: Caller,
}

/// One `resident_agents` call, decoded once: each action with exactly what it needs,
/// trimmed, the required parts present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    List,
    Create {
        id: String,
        task: String,
        channels: Vec<String>,
    },
    /// `text`, or the `task` a model put the instruction in.
    Send {
        id: String,
        text: String,
    },
    Inspect {
        id: String,
    },
    Compress {
        id: String,
    },
    /// `destroy`, or `reclaim` (its temporary graph promoted first).
    Remove {
        id: String,
        residual: Residual,
        reclaim: bool,
    },
}

impl Command {
    pub fn decode(args: &ControlArgs) -> Result<Self, ResidentError> {
        let action = Action::parse(&args.action)?;
        let id = || match args.id.trim() {
            "" => Err(ResidentError::Missing("id")),
            id => Ok(id.to_owned()),
        };
        Ok(match action {
            Action::List => Self::List,
            Action::Create => Self::Create {
                id: id()?,
                task: args.task.trim().to_owned(),
                channels: args
                    .input_channels
                    .iter()
                    .flatten()
                    .map(|c| c.trim().to_owned())
                    .collect(),
            },
            Action::Send => Self::Send {
                id: id()?,
                text: match args.text.trim() {
                    "" => args.task.trim(),
                    t => t,
                }
                .to_owned(),
            },
            Action::Inspect => Self::Inspect { id: id()? },
            Action::Compress => Self::Compress { id: id()? },
            Action::Reclaim | Action::Destroy => Self::Remove {
                id: id()?,
                residual: Residual::parse(args.residual.as_deref()),
                reclaim: action == Action::Reclaim,
            },
        })
    }
}

/// The inputs a resident's life makes, for the resident or for its parent. Plain
/// values: the shell only queues them.
pub mod inputs {
    // By its crate path: an inline module's `super` reads as the parent folder to the
    // import-loop check, which resolves paths file by file.
    use crate::agent::door::Admitted;
    use crate::agent::input::{Input, Reply, ReplyTo};
    use crate::agent::residents::core::{INPUT_RUNES, OUTPUT_RUNES, ResidentError, Residual, head};
    use crate::firewall::Principal;
    use crate::i18n::Msg;
    use crate::scheduler::Level;

    /// A parent-made resident's task is also its first input: from `parent/<parent>`,
    /// on `child/<id>`, as the caller who made it.
    pub fn first(id: &str, parent: &str, task: &str, principal: Principal) -> Input {
        let mut first = Input::text(&format!("parent/{parent}"), task);
        first.channel = format!("child/{id}");
        first.principal = principal;
        first
    }

    /// `send`: an L4 interrupt into the resident (the parent is its only L4 source), on
    /// its first assigned input channel, else `sub/<id>` (spec §6.2).
    pub fn sent(
        id: &str,
        parent: &str,
        text: &str,
        first_channel: Option<String>,
        principal: Principal,
    ) -> Result<Input, ResidentError> {
        if text.trim().is_empty() {
            return Err(ResidentError::Missing("text"));
        }
        let mut input = Input::text(&format!("parent/{parent}"), text);
        input.channel = first_channel.unwrap_or_else(|| format!("sub/{id}"));
        input.level = Some(Level::L4);
        input.principal = principal;
        Ok(input)
    }

    /// What a reported round that ended comes to: the automatic line of the round
    /// table and the L3 report to the parent on `child/<id>` — or nothing, when the
    /// resident is gone or the work was not run (its residual was decided already).
    pub fn round_end(id: &str, live: bool, input: &str, reply: &Reply) -> Option<(String, Input)> {
        if !live || reply.skipped.is_some() {
            return None;
        }
        let output = match &reply.error {
            Some(e) => e.clone(),
            None => reply.content.clone(),
        };
        let (i, o) = (head(input, INPUT_RUNES), head(&output, OUTPUT_RUNES));
        let record = Msg::ResidentRound { input: &i, output: &o }.text();
        let text = Msg::ResidentReport {
            id,
            input: &i,
            output: &output,
        }
        .text();
        let mut report = Input::text(&format!("child/{id}"), &text);
        report.channel = format!("child/{id}");
        report.level = Some(Level::L3);
        Some((record, report))
    }

    /// The contextfull notice: an L4 kernel interrupt from `child/<id>` telling the
    /// parent to inspect the resident, then compress, reclaim or destroy it.
    pub fn context_full(id: &str, tokens: usize, window: usize) -> Input {
        let text = Msg::ResidentContextFull { id, tokens, window }.text();
        Input::kernel_interrupt(&format!("child/{id}"), &text)
    }

    /// `notify_parent`'s text, trimmed; checked before anything else about the call.
    pub fn notice_text(text: &str) -> Result<&str, ResidentError> {
        match text.trim() {
            "" => Err(ResidentError::Missing("text")),
            text => Ok(text),
        }
    }

    /// `notify_parent`: an L3 interrupt to the parent on `child/<id>`, with a text
    /// [`notice_text`] passed.
    pub fn notice(id: &str, text: &str) -> Input {
        let mut note = Input::text(&format!("child/{id}"), &Msg::ResidentNotice { id, text }.text());
        note.channel = format!("child/{id}");
        note.level = Some(Level::L3);
        note
    }

    /// Residual work kept: back to the parent's queue as an ordinary input (an
    /// interrupt of the resident's own levels means nothing to the parent), and the
    /// parent's own instruction answers nobody (the parent runs it itself now).
    pub fn kept(mut input: Admitted) -> Admitted {
        input.level = None;
        if input.source.starts_with("parent/") {
            input.reply = ReplyTo::none();
        }
        input
    }

    /// The destroy answer's part on residual work.
    pub fn residual_text(policy: Residual, count: usize) -> String {
        match (policy, count) {
            (_, 0) => Msg::ResidualNone.text(),
            (Residual::Keep, count) => Msg::ResidualKept { count }.text(),
            (Residual::Drop, count) => Msg::ResidualDropped { count }.text(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::door::Admitted;
    use crate::agent::input::{Input, Reply, ReplyTo};
    use crate::firewall::Principal;
    use crate::i18n::Msg;
    use crate::scheduler::Level;

    #[test]
    fn ids_are_directory_safe() {
        for ok in ["helper", "a-1", "offload-1700000000", "x_y"] {
            assert!(valid_id(ok), "{ok}");
        }
        for bad in ["", "..", "a/b", "../etc", "A", "a b", "a.b", &"x".repeat(49)] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn create_rejects_duplicates_bad_ids_and_too_many() {
        let mut b = ResidentBook::default();
        b.create("one", "watch the logs", Owner::Parent, 2).unwrap();
        assert_eq!(
            b.create("one", "t", Owner::Parent, 2),
            Err(ResidentError::Duplicate("one".into()))
        );
        assert_eq!(
            b.create("../x", "t", Owner::Parent, 2),
            Err(ResidentError::BadId("../x".into()))
        );
        assert_eq!(
            b.create("two", " ", Owner::Parent, 2),
            Err(ResidentError::Missing("task"))
        );
        b.create("two", "t", Owner::Parent, 2).unwrap();
        assert_eq!(b.create("three", "t", Owner::Parent, 2), Err(ResidentError::TooMany(2)));
        assert_eq!(b.remove("one").unwrap().task, "watch the logs");
        assert_eq!(b.remove("one"), Err(ResidentError::Unknown("one".into())));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn context_full_signals_once_and_compress_resets_it() {
        let mut b = ResidentBook::default();
        b.create("r", "t", Owner::Parent, 8).unwrap();
        b.round("r", "a".into());
        assert!(b.context_full("r"));
        assert!(!b.context_full("r"), "once");
        b.compress("r").unwrap();
        let r = b.get("r").unwrap();
        assert_eq!((r.state, r.rounds.len()), (State::Running, 0));
        assert!(b.context_full("r"), "again after a compress");
    }

    #[test]
    fn a_note_becomes_the_next_round_record_once() {
        let mut b = ResidentBook::default();
        b.create("r", "t", Owner::Parent, 8).unwrap();
        assert_eq!(b.note("r", "  "), Err(ResidentError::Missing("text")));
        assert_eq!(b.note("x", "n"), Err(ResidentError::Unknown("x".into())));
        b.note("r", "first").unwrap();
        b.note("r", "found the bug in parser.rs").unwrap();
        b.round("r", "auto 1".into());
        b.round("r", "auto 2".into());
        let rounds = &b.get("r").unwrap().rounds;
        assert_eq!(
            rounds,
            &[
                RoundRecord {
                    proactive: true,
                    text: "found the bug in parser.rs".into()
                },
                RoundRecord {
                    proactive: false,
                    text: "auto 2".into()
                }
            ]
        );
    }

    #[test]
    fn a_context_is_full_at_nine_tenths_of_the_window() {
        assert!(!context_is_full(29_490, 32_768));
        assert!(context_is_full(29_492, 32_768));
        assert!(!context_is_full(10, 0), "no window known: never full");
    }

    #[test]
    fn residual_defaults_to_keep() {
        assert_eq!(Residual::parse(None), Residual::Keep);
        assert_eq!(Residual::parse(Some("keep")), Residual::Keep);
        assert_eq!(Residual::parse(Some("whatever")), Residual::Keep);
        assert_eq!(Residual::parse(Some("drop")), Residual::Drop);
        assert_eq!(Residual::parse(Some("discard")), Residual::Drop);
    }

    #[test]
    fn the_offload_reuses_its_lowest_resident_or_creates_one_within_limits() {
        let mut b = ResidentBook::default();
        assert_eq!(b.offload_target(100, 2, 8), Target::Create("offload-100".into()));
        b.create("offload-100", "triage", Owner::Offload, 8).unwrap();
        b.create("offload-050", "triage", Owner::Offload, 8).unwrap();
        b.create("mine", "t", Owner::Parent, 8).unwrap();
        assert_eq!(b.offload_target(200, 2, 8), Target::Reuse("offload-050".into()));
        let mut c = ResidentBook::default();
        c.create("a", "t", Owner::Parent, 1).unwrap();
        assert_eq!(c.offload_target(1, 2, 1), Target::Full, "the total limit holds too");
        assert_eq!(ResidentBook::default().offload_target(1, 0, 8), Target::Full);
    }

    #[test]
    fn heads_are_cut_by_characters_on_one_line() {
        assert_eq!(head("你好世界\nok", 3), "你好世");
        assert_eq!(head("a\nb", 80), "a b");
    }

    fn args(action: &str) -> ControlArgs {
        ControlArgs {
            action: action.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_call_is_decoded_once_with_what_its_action_needs() {
        assert_eq!(Command::decode(&args(" list ")), Ok(Command::List));
        assert_eq!(
            Command::decode(&args("explode")),
            Err(ResidentError::BadAction("explode".into()))
        );
        for action in ["create", "send", "inspect", "compress", "reclaim", "destroy"] {
            let mut a = args(action);
            a.id = "  ".into();
            assert_eq!(Command::decode(&a), Err(ResidentError::Missing("id")), "{action}");
        }
        let mut create = args("create");
        create.id = " watcher ".into();
        create.task = " watch the build \n".into();
        create.input_channels = Some(vec![" onebot:group:1 ".into()]);
        assert_eq!(
            Command::decode(&create),
            Ok(Command::Create {
                id: "watcher".into(),
                task: "watch the build".into(),
                channels: vec!["onebot:group:1".into()],
            })
        );
        // `send` takes `text`, or the `task` a model put its instruction in.
        let mut send = args("send");
        send.id = "w".into();
        send.task = "stop now".into();
        assert_eq!(
            Command::decode(&send),
            Ok(Command::Send {
                id: "w".into(),
                text: "stop now".into()
            })
        );
        send.text = "check again".into();
        assert!(matches!(Command::decode(&send), Ok(Command::Send { text, .. }) if text == "check again"));
        let mut reclaim = args("reclaim");
        reclaim.id = "w".into();
        reclaim.residual = Some("drop".into());
        assert_eq!(
            Command::decode(&reclaim),
            Ok(Command::Remove {
                id: "w".into(),
                residual: Residual::Drop,
                reclaim: true
            })
        );
        let mut destroy = args("destroy");
        destroy.id = "w".into();
        assert_eq!(
            Command::decode(&destroy),
            Ok(Command::Remove {
                id: "w".into(),
                residual: Residual::Keep,
                reclaim: false
            })
        );
    }

    #[test]
    fn the_parent_reaches_a_resident_on_its_channel_at_l4() {
        let guest = Principal::plugin_guest("onebot");
        let first = inputs::first("w", "agent", "watch", guest.clone());
        assert_eq!(
            (first.source.as_str(), first.channel.as_str()),
            ("parent/agent", "child/w")
        );
        assert_eq!((first.level, &first.principal), (None, &guest));
        let sent = inputs::sent("w", "agent", "now", None, Principal::owner()).unwrap();
        assert_eq!((sent.channel.as_str(), sent.level), ("sub/w", Some(Level::L4)));
        let routed = inputs::sent("w", "agent", "now", Some("onebot:group:1".into()), Principal::owner()).unwrap();
        assert_eq!(routed.channel, "onebot:group:1");
        assert_eq!(
            inputs::sent("w", "agent", " \n", None, Principal::owner()).unwrap_err(),
            ResidentError::Missing("text")
        );
    }

    #[test]
    fn a_round_is_recorded_and_reported_at_l3_unless_it_did_not_run() {
        let reply = Reply {
            content: "the build is green".into(),
            ..Default::default()
        };
        let long = "x".repeat(INPUT_RUNES + 10);
        let (record, report) = inputs::round_end("w", true, &long, &reply).unwrap();
        assert_eq!(
            record,
            Msg::ResidentRound {
                input: &"x".repeat(INPUT_RUNES),
                output: "the build is green"
            }
            .text()
        );
        assert_eq!(
            (report.source.as_str(), report.channel.as_str()),
            ("child/w", "child/w")
        );
        assert_eq!(report.level, Some(Level::L3));
        assert!(report.text.contains("the build is green"), "{}", report.text);
        // A failed round reports its error.
        let failed = Reply {
            error: Some("the vendor is down".into()),
            ..Default::default()
        };
        assert!(
            inputs::round_end("w", true, "q", &failed)
                .unwrap()
                .1
                .text
                .contains("the vendor is down")
        );
        // Destroyed meanwhile, or the work was not run: the parent decided already.
        assert!(inputs::round_end("w", false, "q", &reply).is_none());
        let skipped = Reply {
            skipped: Some(crate::agent::input::Refusal::ResidualDropped),
            ..Default::default()
        };
        assert!(inputs::round_end("w", true, "q", &skipped).is_none());
    }

    #[test]
    fn the_parent_is_told_of_a_full_context_by_a_kernel_interrupt_and_of_a_notice_at_l3() {
        let n = inputs::context_full("w", 900, 1000);
        assert!(n.kernel && n.payload.kernel);
        assert_eq!(
            (n.channel.as_str(), n.level, n.source.as_str()),
            ("kernel", Some(Level::L4), "child/w")
        );
        let note = inputs::notice("w", inputs::notice_text("  half done ").unwrap());
        assert_eq!((note.channel.as_str(), note.level), ("child/w", Some(Level::L3)));
        assert!(note.text.contains("half done"));
        assert_eq!(inputs::notice_text(" ").unwrap_err(), ResidentError::Missing("text"));
    }

    #[test]
    fn kept_work_waits_in_the_parents_queue_and_the_parents_own_answers_nobody() {
        let (reply, _rx) = ReplyTo::channel("r1");
        let mut from_parent = Input::text("parent/agent", "do it");
        from_parent.level = Some(Level::L4);
        from_parent.reply = reply;
        let kept = inputs::kept(Admitted::own(from_parent).unwrap());
        assert_eq!(kept.level, None);
        assert!(!kept.reply.is_waiting(), "the parent runs its own instruction itself");
        let (reply, _rx) = ReplyTo::channel("r2");
        let mut caller = Input::text("onebot:group:1", "hi");
        caller.reply = reply;
        let kept = inputs::kept(Admitted::own(caller).unwrap());
        assert!(kept.reply.is_waiting(), "a caller's reply path stays intact");
        assert_eq!(inputs::residual_text(Residual::Drop, 0), Msg::ResidualNone.text());
        assert_eq!(
            inputs::residual_text(Residual::Keep, 2),
            Msg::ResidualKept { count: 2 }.text()
        );
        assert_eq!(
            inputs::residual_text(Residual::Drop, 3),
            Msg::ResidualDropped { count: 3 }.text()
        );
    }

    #[test]
    fn a_destroy_deletes_only_the_residents_own_directory() {
        let root = std::path::Path::new("/data/residents");
        assert!(is_own_dir(&root.join("w"), root, "w"));
        assert!(!is_own_dir(&root.join("x"), root, "w"));
        assert!(!is_own_dir(std::path::Path::new("/data/w"), root, "w"));
        assert!(!is_own_dir(&root.join("a/w"), root, "w"));
        assert!(!is_own_dir(root, root, "residents"));
        assert!(!is_own_dir(&root.join(".."), root, ".."));
    }
}
