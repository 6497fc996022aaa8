//! The types a setting's JSON value decodes to ([`SettingValue`]), secrets that never
//! show in `Debug`, the embedder kind, and the secrets store's shape (its aliases and
//! shortest value, which the firewall's credential gate relies on). Their own module because the key constants
//! (`keys`) name them and the typed settings (`settings`) read through those keys.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::duration::parse_duration;

/// A type a setting's JSON value decodes to.
pub trait SettingValue: Sized + Default {
    /// What the value must look like, for error messages ("a duration string").
    const EXPECTED: &'static str;
    /// The typed value; `None` when the JSON has another shape.
    fn decode(value: &Value) -> Option<Self>;
}

/// Settings whose shape their reader parses itself (`core.security.secret_destinations`).
impl SettingValue for Value {
    const EXPECTED: &'static str = "any JSON value";
    fn decode(value: &Value) -> Option<Self> {
        Some(value.clone())
    }
}

impl SettingValue for String {
    const EXPECTED: &'static str = "a string";
    fn decode(value: &Value) -> Option<Self> {
        value.as_str().map(str::to_owned)
    }
}

impl SettingValue for PathBuf {
    const EXPECTED: &'static str = "a path string";
    fn decode(value: &Value) -> Option<Self> {
        value.as_str().map(PathBuf::from)
    }
}

impl SettingValue for bool {
    const EXPECTED: &'static str = "true or false";
    fn decode(value: &Value) -> Option<Self> {
        value.as_bool()
    }
}

impl SettingValue for u32 {
    const EXPECTED: &'static str = "a non-negative integer below 2^32";
    fn decode(value: &Value) -> Option<Self> {
        value.as_u64().and_then(|n| u32::try_from(n).ok())
    }
}

impl SettingValue for u64 {
    const EXPECTED: &'static str = "a non-negative integer";
    fn decode(value: &Value) -> Option<Self> {
        value.as_u64()
    }
}

impl SettingValue for usize {
    const EXPECTED: &'static str = "a non-negative integer";
    fn decode(value: &Value) -> Option<Self> {
        value.as_u64().and_then(|n| usize::try_from(n).ok())
    }
}

impl SettingValue for i64 {
    const EXPECTED: &'static str = "an integer";
    fn decode(value: &Value) -> Option<Self> {
        value.as_i64()
    }
}

impl SettingValue for f64 {
    const EXPECTED: &'static str = "a number";
    fn decode(value: &Value) -> Option<Self> {
        value.as_f64()
    }
}

impl SettingValue for Duration {
    const EXPECTED: &'static str = "a duration string such as \"30s\"";
    fn decode(value: &Value) -> Option<Self> {
        value.as_str().and_then(|s| parse_duration(s).ok())
    }
}

/// A secret setting's value (an API key): `Debug` never shows it, so a typed group can
/// be logged whole.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is unset (empty after trimming).
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_empty() {
            "Secret(unset)"
        } else {
            "Secret(****)"
        })
    }
}

impl SettingValue for Secret {
    const EXPECTED: &'static str = "a string";
    fn decode(value: &Value) -> Option<Self> {
        value.as_str().map(|s| Secret(s.to_owned()))
    }
}

/// The owner's secrets store (`core.security.secrets`): name → value. `Debug` shows
/// the names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretMap(pub BTreeMap<String, String>);

impl std::fmt::Debug for SecretMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl SettingValue for SecretMap {
    const EXPECTED: &'static str = "an object of names to strings";
    fn decode(value: &Value) -> Option<Self> {
        let map = value.as_object()?;
        Some(SecretMap(
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect(),
        ))
    }
}

/// The configured embedder kind (`core.memory.embedder`; the words are
/// `EMBEDDERS` of the key table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    /// ONNX when its files are found, else TF-IDF.
    #[default]
    Auto,
    Onnx,
    Remote,
    /// No dense vectors: TF-IDF / BM25 only.
    Tfidf,
}

impl EmbedderKind {
    /// Lenient parse (unknown words are `Auto`): the store only ever holds the listed
    /// words, but older databases may say `none`.
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "onnx" => Self::Onnx,
            "remote" => Self::Remote,
            "tfidf" | "none" => Self::Tfidf,
            _ => Self::Auto,
        }
    }
}

impl SettingValue for EmbedderKind {
    const EXPECTED: &'static str = "one of \"auto\", \"onnx\", \"remote\", \"tfidf\"";
    fn decode(value: &Value) -> Option<Self> {
        value.as_str().map(Self::parse)
    }
}

/// Secrets shorter than this are not masked: a two-letter "secret" would shred every
/// text it appears in. The settings page refuses them for the secrets store; a short API key
/// is logged as a warning.
pub const MIN_SECRET_LEN: usize = 6;

/// Whether `alias` is a valid store alias: a letter, then letters, digits, `_`, `-`,
/// `.`; at most 64 characters. (`@{…}` must be unambiguous in any text.)
pub fn valid_alias(alias: &str) -> bool {
    let mut chars = alias.chars();
    alias.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_plain_names() {
        assert!(valid_alias("github_token"));
        assert!(valid_alias("a.b-c"));
        assert!(!valid_alias("1abc"));
        assert!(!valid_alias("a b"));
        assert!(!valid_alias(""));
        assert!(!valid_alias(&"x".repeat(65)));
    }
}
