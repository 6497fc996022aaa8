//! The residents' control plane as a plain state machine (spec §6.2): which residents
//! exist, who owns them, their state and round table, the limits, the residual-task
//! policy and the offload's choice of a resident. The shell ([`super::Residents`])
//! starts and stops actors; nothing here knows about actix.

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
