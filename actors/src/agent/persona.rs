//! The persona: who the agent is to its owner — its name, how it addresses them, its
//! tone — kept in `DATA/personal/personal.md`.
//!
//! Why a file and not a setting: it is the owner's text, long-lived and hand-editable
//! (an editor, the WebUI's Persona card, or the model's `persona_set`), and it belongs
//! to the data dir's identity rather than to the daemon's knobs; backups carry it with
//! the rest. `core.agent.personal_prompt` stays what it was — the owner's additional
//! standing instructions — and is layered after the persona (see `prompt::system_prompt`).
//!
//! While no persona exists the main agent's system prompt carries a first-run block
//! ([`Msg::PersonaGate`]): the first conversation — in the WebUI or `waiter` — asks
//! for a name, an address and a tone and ends in a `persona_set` call, which the owner
//! confirms (`persona_set=ask` in the default approval rules) and only the owner's
//! inputs may make (it is in the default owner-only list).
//!
//! Nothing is lost: before a write replaces the file, the previous text is kept as
//! `personal/history/<ms>.md` (the newest [`KEEP_HISTORY`]).
//!
//! The pure parts are [`Draft`] (arguments → the file's text) and [`check`]; the file
//! is read at most once per change (its modification time is compared per turn).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;

use crate::i18n::Msg;

/// The persona file, relative to the data dir.
pub const FILE: &str = "personal/personal.md";
/// The longest persona accepted, in characters: it is in every prompt.
pub const MAX_CHARS: usize = 4000;
/// Earlier versions kept in `personal/history/`.
pub const KEEP_HISTORY: usize = 20;
/// The model's tool.
pub const TOOL: &str = "persona_set";

/// Why a persona was not written; each says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PersonaError {
    #[error("{}", Msg::PersonaEmpty.text())]
    Empty,
    #[error("{}", Msg::PersonaTooLong { chars: *.0, max: MAX_CHARS }.text())]
    TooLong(usize),
    #[error("{}", Msg::PersonaWriteFailed { error: &.0 }.text())]
    Write(String),
    #[error("persona_set: the arguments are not an object of strings ({0}); pass name, address, tone or text")]
    BadArgs(String),
}

/// What `persona_set` (or the WebUI's form) gives: any of a name, an address, a tone,
/// and free text. The file is rendered in the catalog's language.
///
/// It is also the tool's schema (`persona_set`'s parameters are generated from it):
/// each field's doc line is what the model reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Draft {
    /// What you are called
    #[serde(default)]
    pub name: String,
    /// How you address the owner
    #[serde(default)]
    pub address: String,
    /// The tone the owner likes
    #[serde(default)]
    pub tone: String,
    /// Anything else about the persona
    #[serde(default)]
    pub text: String,
}

impl Draft {
    /// The tool's arguments (the runner's `__origin` and other `__` keys are not ours).
    pub fn from_args(args: &Value) -> Result<Self, PersonaError> {
        let mut args = args.clone();
        if let Some(map) = args.as_object_mut() {
            map.retain(|k, _| !k.starts_with("__"));
        }
        serde_json::from_value(args).map_err(|e| PersonaError::BadArgs(e.to_string()))
    }

    /// The file's text: one line per given field, then the free text.
    pub fn render(&self) -> Result<String, PersonaError> {
        let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let (name, address, tone) = (one_line(&self.name), one_line(&self.address), one_line(&self.tone));
        let mut lines = Vec::new();
        if !name.is_empty() {
            lines.push(Msg::PersonaName { name: &name }.text());
        }
        if !address.is_empty() {
            lines.push(Msg::PersonaAddress { address: &address }.text());
        }
        if !tone.is_empty() {
            lines.push(Msg::PersonaTone { tone: &tone }.text());
        }
        let mut out = lines.join("\n");
        let text = self.text.trim();
        if !text.is_empty() {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(text);
        }
        check(&out)?;
        out.push('\n');
        Ok(out)
    }
}

/// A persona text is accepted when it says something and fits [`MAX_CHARS`].
pub fn check(text: &str) -> Result<(), PersonaError> {
    let chars = text.trim().chars().count();
    if chars == 0 {
        return Err(PersonaError::Empty);
    }
    if chars > MAX_CHARS {
        return Err(PersonaError::TooLong(chars));
    }
    Ok(())
}

/// `DATA/personal/personal.md`, read when it changed.
#[derive(Debug)]
pub struct PersonaFile {
    path: PathBuf,
    /// The modification time last read and the text then (`None`: no file).
    cache: Mutex<Option<(SystemTime, Option<Arc<str>>)>>,
}

impl PersonaFile {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(FILE),
            cache: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The persona now, `None` when there is none (no file, or only blanks). A file
    /// over the limit is cut to it (a hand edit must not blow the window).
    pub fn text(&self) -> Option<Arc<str>> {
        let mtime = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
        let mut cache = self.cache.lock();
        let Some(mtime) = mtime else {
            *cache = None;
            return None;
        };
        if let Some((seen, text)) = cache.as_ref()
            && *seen == mtime
        {
            return text.clone();
        }
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) if !t.trim().is_empty() => {
                let t = t.trim();
                let t: String = if t.chars().count() > MAX_CHARS {
                    tracing::warn!(path = %self.path.display(), max = MAX_CHARS, "the persona file is too long; only its beginning is used");
                    t.chars().take(MAX_CHARS).collect()
                } else {
                    t.to_owned()
                };
                Some(Arc::<str>::from(t))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot read the persona file: {e}");
                None
            }
        };
        *cache = Some((mtime, text.clone()));
        text
    }

    /// Replaces the persona with `text` (checked), keeping the previous one in
    /// `personal/history/`. The write is atomic: a crash leaves the old or the new file.
    pub fn set(&self, text: &str) -> Result<(), PersonaError> {
        check(text)?;
        let dir = self.path.parent().expect("the persona file has a directory");
        let io = |e: std::io::Error| PersonaError::Write(e.to_string());
        std::fs::create_dir_all(dir).map_err(io)?;
        if let Ok(old) = std::fs::read_to_string(&self.path)
            && !old.trim().is_empty()
            && old.trim() != text.trim()
        {
            self.keep(&old);
        }
        let tmp = self.path.with_extension("md.tmp");
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            std::io::Write::write_all(&mut f, text.as_bytes())?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &self.path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        *self.cache.lock() = None;
        tracing::info!(path = %self.path.display(), "persona written");
        Ok(())
    }

    /// Keeps `old` as `history/<ms>.md` and prunes to [`KEEP_HISTORY`].
    fn keep(&self, old: &str) {
        let history = self.path.with_file_name("history");
        // Milliseconds of the kernel clock, zero-padded: names sort by age.
        let stamp = format!("{:015}", crate::clock::now_ms().max(0));
        let kept =
            std::fs::create_dir_all(&history).and_then(|()| std::fs::write(history.join(format!("{stamp}.md")), old));
        if let Err(e) = kept {
            tracing::warn!("cannot keep the previous persona in {}: {e}", history.display());
            return;
        }
        let mut names: Vec<_> = std::fs::read_dir(&history)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.sort();
        let excess = names.len().saturating_sub(KEEP_HISTORY);
        for old in names.into_iter().take(excess) {
            let _ = std::fs::remove_file(old);
        }
    }
}

/// The `persona_set` tool's spec.
pub fn spec() -> crate::stages::ToolSpec {
    let mut s = crate::stages::ToolSpec::typed::<Draft>(
        TOOL,
        "Set your persona: your name, how you address the owner, your tone, and any other text about who you are. Replaces the whole persona (pass everything to keep). The owner confirms the call.",
    );
    s.plugin = "builtin.persona".into();
    s.no_memory = true;
    s.serial = true;
    s.keywords = crate::stages::tools::keywords(
        "persona, personality, your name, call you, call me, address me, 人格, 你的名字, 称呼我, 叫你",
    );
    s
}

/// The tool's handler: renders the draft and writes it.
pub fn handler(file: Arc<PersonaFile>) -> Arc<dyn crate::stages::ToolHandler> {
    use crate::stages::{ToolFailure, ToolResult};
    // Decoded by `Draft::from_args`, not `stages::typed`: the runner's `__` keys are
    // dropped first, and the WebUI's form decodes the same way.
    Arc::new(
        move |args: Value| -> futures_util::future::BoxFuture<'static, ToolResult> {
            let file = file.clone();
            Box::pin(async move {
                let text = Draft::from_args(&args)
                    .and_then(|d| d.render())
                    .map_err(ToolFailure::kernel)?;
                tokio::task::spawn_blocking(move || file.set(&text))
                    .await
                    .map_err(|e| ToolFailure::kernel(PersonaError::Write(e.to_string())))?
                    .map_err(ToolFailure::kernel)?;
                Ok(Msg::PersonaSaved.text())
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_draft_renders_the_given_fields_on_one_line_each() {
        let d = Draft::from_args(&json!({"name": " Mira ", "tone": "warm,\n brief", "__origin": {}})).unwrap();
        assert_eq!(d.render().unwrap(), "- Your name: Mira\n- Tone: warm, brief\n");
        let d = Draft {
            address: "Sam".into(),
            text: "Never uses emoji.".into(),
            ..Draft::default()
        };
        assert_eq!(
            d.render().unwrap(),
            "- Address the owner as: Sam\n\nNever uses emoji.\n"
        );
    }

    #[test]
    fn empty_long_and_unknown_drafts_are_refused() {
        assert_eq!(Draft::default().render(), Err(PersonaError::Empty));
        let long = Draft {
            text: "x".repeat(MAX_CHARS + 1),
            ..Draft::default()
        };
        assert_eq!(long.render(), Err(PersonaError::TooLong(MAX_CHARS + 1)));
        assert!(matches!(
            Draft::from_args(&json!({"nmae": "x"})),
            Err(PersonaError::BadArgs(_))
        ));
    }

    #[test]
    fn the_file_is_written_whole_read_when_changed_and_history_kept() {
        let dir = tempfile::tempdir().unwrap();
        let f = PersonaFile::new(dir.path());
        assert_eq!(f.text(), None);
        f.set("- Your name: Mira\n").unwrap();
        assert_eq!(f.text().as_deref(), Some("- Your name: Mira"));
        f.set("- Your name: Ada\n").unwrap();
        assert_eq!(f.text().as_deref(), Some("- Your name: Ada"));
        let kept: Vec<_> = std::fs::read_dir(dir.path().join("personal/history"))
            .unwrap()
            .flatten()
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .collect();
        assert_eq!(kept, ["- Your name: Mira\n"]);
        // A hand edit is seen; a blank file is no persona.
        std::fs::write(f.path(), "  \n").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(f.path())
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(f.text(), None);
        assert_eq!(f.set(" "), Err(PersonaError::Empty));
    }
}
