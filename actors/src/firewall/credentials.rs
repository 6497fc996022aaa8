//! The credential gate: secrets leave the kernel only as `@{alias}`.
//!
//! The model must never see a secret's value: a prompt injection in a web page could
//! otherwise talk it into sending the value anywhere. So everything going out to the
//! model (inputs, tool results, stage context) has every known secret replaced by
//! `@{alias}`, and an alias in a tool call's arguments is replaced by the value only in
//! the copy handed to the tool, at the moment it executes.
//!
//! Two kinds of secrets exist:
//! * the owner's **secrets store** (`core.security.secrets`, alias → value): masked and
//!   *fillable* — the point of the store is that tools can use them;
//! * the kernel's own **secret settings** (LLM and embedder API keys): masked under
//!   `@{setting:<key>}` but never filled, because no tool needs the vendor's key and a
//!   tool call that asks for it is an exfiltration attempt;
//! * the kernel's **own credentials** that are no setting (the owner token), declared
//!   once at start with [`declare_kernel_secret`]: masked as `@{<name>}`, never filled.
//!
//! Matching uses Aho-Corasick (leftmost-longest), so masking costs one pass over the
//! text whatever the number of secrets, and a secret that contains another is masked
//! whole.

use std::borrow::Cow;
use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde_json::Value;

use super::destinations::NotAllowed;
use crate::config::{MIN_SECRET_LEN, valid_alias};

/// Credentials the kernel holds outside the settings (name → value), masked by every
/// gate built after they are declared.
static KERNEL_SECRETS: parking_lot::RwLock<Vec<(String, String)>> = parking_lot::RwLock::new(Vec::new());

/// Declares a credential of the kernel's own (the owner token as `owner-token`): every
/// gate masks it on every surface (model, vendor, logs, memory, events) and none fills it.
pub fn declare_kernel_secret(name: &str, value: &str) {
    let mut all = KERNEL_SECRETS.write();
    all.retain(|(n, _)| n != name);
    all.push((name.to_owned(), value.to_owned()));
}

/// The forms of `value` a command can print without the value itself appearing:
/// reversed, hex (both cases), and base64 (standard and URL-safe, at each of the three
/// alignments a value can have inside a longer encoded text; only the characters that
/// do not depend on the neighbours are kept). Short values get none (their encodings
/// would be too short to mask without shredding unrelated text).
fn encodings(value: &str) -> Vec<String> {
    use base64::Engine as _;
    let bytes = value.as_bytes();
    if bytes.len() < 12 {
        return Vec::new();
    }
    let mut out = vec![value.chars().rev().collect::<String>()];
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    out.push(hex.to_ascii_uppercase());
    out.push(hex);
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for lead in 0..3usize {
            let mut padded = vec![0u8; lead];
            padded.extend_from_slice(bytes);
            let enc = engine.encode(&padded);
            // Characters touched by the lead bytes, and the last group (which depends
            // on what follows the value), are not stable.
            let skip = if lead == 0 { 0 } else { 4 };
            let stable_bytes = (padded.len() / 3) * 3;
            let end = stable_bytes / 3 * 4;
            if end > skip + 8 {
                out.push(enc[skip..end].to_owned());
            }
        }
    }
    out.sort();
    out.dedup();
    out.retain(|f| f != value);
    out
}

/// One known secret.
#[derive(Clone)]
struct Entry {
    alias: String,
    value: String,
    /// May be filled into a tool's arguments.
    fillable: bool,
    /// An encoding of another entry's value (reversed, hex, base64): masked, not counted.
    derived: bool,
}

/// The gate, built once per settings change (the automaton is immutable).
#[derive(Clone, Default)]
pub struct CredentialGate {
    entries: Vec<Entry>,
    /// Over the values, in `entries` order.
    values: Option<AhoCorasick>,
}

impl std::fmt::Debug for CredentialGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Aliases only: the gate is logged when configured.
        f.debug_list().entries(self.entries.iter().map(|e| &e.alias)).finish()
    }
}

impl CredentialGate {
    /// A gate over the owner's store (`alias → value`) and the kernel's secret settings
    /// (`key → value`). Empty and too-short values are skipped with a warning.
    pub fn new(store: &BTreeMap<String, String>, settings: &BTreeMap<String, String>) -> Self {
        let mut entries = Vec::new();
        let mut add = |alias: String, value: &str, fillable: bool| {
            if value.trim().is_empty() {
                return;
            }
            if value.len() < MIN_SECRET_LEN {
                tracing::warn!(%alias, "secret shorter than {MIN_SECRET_LEN} bytes: not masked");
                return;
            }
            entries.push(Entry {
                alias,
                value: value.to_owned(),
                fillable,
                derived: false,
            });
        };
        for (alias, value) in store {
            add(alias.clone(), value, true);
        }
        for (key, value) in settings {
            add(format!("setting:{key}"), value, false);
        }
        for (name, value) in KERNEL_SECRETS.read().iter() {
            add(name.clone(), value, false);
        }
        // What a command can turn a secret into and print (`rev`, `base64`, `xxd -p`):
        // masked under the same name, never filled.
        let derived: Vec<Entry> = entries
            .iter()
            .flat_map(|e| {
                encodings(&e.value).into_iter().map(|value| Entry {
                    alias: e.alias.clone(),
                    value,
                    fillable: false,
                    derived: true,
                })
            })
            .collect();
        entries.extend(derived);
        // One value under two names (the same key in the store and a setting) is masked
        // under the first; the automaton needs each pattern once to say which.
        let mut seen = std::collections::HashSet::new();
        entries.retain(|e| seen.insert(e.value.clone()));
        let values = (!entries.is_empty()).then(|| {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .build(entries.iter().map(|e| e.value.as_str()))
                .expect("literal patterns always build")
        });
        Self { entries, values }
    }

    /// How many secrets it masks (their encodings not counted).
    pub fn len(&self) -> usize {
        self.entries.iter().filter(|e| !e.derived).count()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The aliases of the store (what the model may write as `@{alias}`).
    pub fn fillable_aliases(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.fillable)
            .map(|e| e.alias.as_str())
            .collect()
    }

    /// `text` with every secret replaced by its `@{alias}` (borrowed when none occurs).
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(ac) = &self.values else {
            return Cow::Borrowed(text);
        };
        if !ac.is_match(text) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in ac.find_iter(text) {
            out.push_str(&text[last..m.start()]);
            out.push_str("@{");
            out.push_str(&self.entries[m.pattern().as_usize()].alias);
            out.push('}');
            last = m.end();
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// Masks every string inside a JSON value in place; answers whether anything changed.
    pub fn mask_value(&self, v: &mut Value) -> bool {
        match v {
            Value::String(s) => match self.mask(s) {
                Cow::Owned(m) => {
                    *s = m;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(a) => a.iter_mut().fold(false, |acc, x| self.mask_value(x) | acc),
            Value::Object(o) => o.values_mut().fold(false, |acc, x| self.mask_value(x) | acc),
            _ => false,
        }
    }

    /// A tool's arguments with every `@{alias}` of the store replaced by its value (in
    /// every string, keys untouched). `Err` names an alias that is not fillable: the
    /// call is refused rather than run with a literal `@{…}`, and the message says what
    /// the owner can do.
    pub fn fill(&self, args: &Value) -> Result<Value, FillError> {
        self.fill_checked(args, &|_, _| Ok(()))
    }

    /// [`Self::fill`], asking `allow(alias, the string it sits in)` before each value
    /// goes in (the secret's destinations); a refusal refuses the whole call.
    pub fn fill_checked(
        &self,
        args: &Value,
        allow: &dyn Fn(&str, &str) -> Result<(), NotAllowed>,
    ) -> Result<Value, FillError> {
        let mut out = args.clone();
        self.fill_in(&mut out, allow)?;
        Ok(out)
    }

    fn fill_in(&self, v: &mut Value, allow: &dyn Fn(&str, &str) -> Result<(), NotAllowed>) -> Result<(), FillError> {
        match v {
            Value::String(s) if s.contains("@{") => {
                *s = self.fill_str(s, allow)?;
                Ok(())
            }
            Value::Array(a) => a.iter_mut().try_for_each(|x| self.fill_in(x, allow)),
            Value::Object(o) => o.values_mut().try_for_each(|x| self.fill_in(x, allow)),
            _ => Ok(()),
        }
    }

    fn fill_str(&self, s: &str, allow: &dyn Fn(&str, &str) -> Result<(), NotAllowed>) -> Result<String, FillError> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(start) = rest.find("@{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                return Ok(out);
            };
            let alias = &after[..end];
            match self.entries.iter().find(|e| e.alias == alias) {
                Some(e) if e.fillable => {
                    allow(alias, s).map_err(FillError::NotAllowed)?;
                    out.push_str(&e.value)
                }
                Some(_) => return Err(FillError::NotFillable(alias.to_owned())),
                // Not an alias we know: leave the text alone unless it looks like one.
                None if valid_alias(alias) => return Err(FillError::Unknown(alias.to_owned())),
                None => out.push_str(&rest[start..start + 2 + end + 1]),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// Why a tool call's aliases could not be filled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FillError {
    /// The secret's destinations do not include this call (the reason says which).
    #[error(transparent)]
    NotAllowed(#[from] NotAllowed),
    #[error(
        "`@{{{0}}}` is a kernel credential; it is never handed to tools. Use a secret the owner stored for this purpose (core.security.secrets)"
    )]
    NotFillable(String),
    #[error(
        "`@{{{0}}}` is not a stored secret; ask the owner to add it to core.security.secrets, or write the text without `@{{…}}`"
    )]
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_command_turns_a_secret_into_is_masked_too() {
        use base64::Engine as _;
        const SECRET: &str = "ghp_SECRETCANARY0123456789";
        let g = CredentialGate::new(
            &BTreeMap::from([("github".to_owned(), SECRET.to_owned())]),
            &BTreeMap::new(),
        );
        assert_eq!(g.len(), 1);
        let rev: String = SECRET.chars().rev().collect();
        let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{SECRET}\n"));
        let inner = base64::engine::general_purpose::STANDARD.encode(format!("token={SECRET}&x=1"));
        for shown in [rev, hex.clone(), hex.to_uppercase(), b64, inner] {
            let masked = g.mask(&shown);
            assert!(masked.contains("@{github}"), "{shown} → {masked}");
        }
    }
    use serde_json::json;

    fn gate() -> CredentialGate {
        let store = BTreeMap::from([
            ("github".to_owned(), "ghp_secretvalue123".to_owned()),
            ("short".to_owned(), "abc".to_owned()),
        ]);
        let settings = BTreeMap::from([("core.llm.api_key".to_owned(), "sk-canary-0000".to_owned())]);
        CredentialGate::new(&store, &settings)
    }

    #[test]
    fn values_become_aliases_and_short_ones_are_skipped() {
        let g = gate();
        assert_eq!(g.len(), 2);
        assert_eq!(
            g.mask("token ghp_secretvalue123 and key sk-canary-0000; abc stays"),
            "token @{github} and key @{setting:core.llm.api_key}; abc stays"
        );
        assert!(matches!(g.mask("nothing here"), Cow::Borrowed(_)));
        let mut v = json!({"a": ["x sk-canary-0000"], "b": 1});
        assert!(g.mask_value(&mut v));
        assert_eq!(v, json!({"a": ["x @{setting:core.llm.api_key}"], "b": 1}));
    }

    #[test]
    fn the_longest_secret_wins() {
        let store = BTreeMap::from([
            ("a".to_owned(), "secret-one".to_owned()),
            ("b".to_owned(), "secret-one-two".to_owned()),
        ]);
        let g = CredentialGate::new(&store, &BTreeMap::new());
        assert_eq!(g.mask("=secret-one-two="), "=@{b}=");
    }

    #[test]
    fn only_store_aliases_are_filled() {
        let g = gate();
        let args = json!({"cmd": "curl -H 'Authorization: @{github}' x", "n": 2, "list": ["@{github}"]});
        assert_eq!(
            g.fill(&args).unwrap(),
            json!({"cmd": "curl -H 'Authorization: ghp_secretvalue123' x", "n": 2, "list": ["ghp_secretvalue123"]})
        );
        assert_eq!(
            g.fill(&json!({"k": "@{setting:core.llm.api_key}"})),
            Err(FillError::NotFillable("setting:core.llm.api_key".into()))
        );
        assert_eq!(g.fill(&json!({"k": "@{nope}"})), Err(FillError::Unknown("nope".into())));
        // Text that merely contains the characters is left alone.
        assert_eq!(g.fill(&json!("a @{ b } c @{")).unwrap(), json!("a @{ b } c @{"));
        assert_eq!(g.fillable_aliases(), vec!["github"]);
    }
}
