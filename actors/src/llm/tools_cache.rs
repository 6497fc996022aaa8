//! The adapters' conversion of the tool list, cached per tool list.
//!
//! Every LLM call used to send the whole request — ~30 tool schemas, 16 KB — through the
//! Lua adapter: JSON → Lua tables → JSON cost ~0.4 ms per call, most of a turn's kernel
//! overhead. The tool list rarely changes, so the adapter converts it once per list:
//! each call then runs the adapter on the same request with tiny placeholder tools
//! (so it still sees tools and sets `tool_choice` and the like as usual), and the
//! placeholders' array in its output is swapped for the real converted tools.
//!
//! The array is found by content, not by adapter-specific knowledge: it is the first
//! array whose i-th element mentions the i-th placeholder name. When that cannot be
//! found (an adapter that renames or merges tools), the cache stays off for that list and
//! every call takes the full path, exactly as before.
//!
//! A turn offers a *subset* of the tools when the window is small, chosen by the input
//! (`agent::toolset`), so consecutive calls often carry different lists. Learning each
//! new list anew converts it three times, once with every real schema: measured at 11
//! relearns in 132 turns of `homed bench turn`, each a few milliseconds of Lua. So the
//! converted elements are also kept per tool ([`PerTool`]): a list whose tools were all
//! seen is assembled from them. Trust is learned, as for texts: an adapter's assembly is
//! used only once an assembled list was seen to equal that adapter's own conversion of
//! the same list (an adapter whose conversion of a tool depends on the others — it
//! dedupes, numbers or reorders them — fails that check and keeps learning whole lists).

use serde_json::Value;

use super::types::{ToolDef, ToolFunction, ToolList};

/// Lists shorter than this go through the adapter whole (nothing to gain).
pub const MIN_TOOLS: usize = 4;

/// A step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// What the cache holds for one tool list.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Hash of the tool list's JSON.
    pub key: u64,
    /// The shared list last seen with this key: the same `Arc` again (every call until
    /// a plugin changes the registry) is a hit without hashing the list. Holding it keeps
    /// its address from being reused by another list.
    pub list: ToolList,
    /// The placeholder tools, made once per list: one when the adapter was seen to treat
    /// one like many (checked when learning), else as many as the real tools.
    pub placeholders: ToolList,
    /// Where the adapter puts the converted tools, and the converted tools as JSON
    /// text (`None`: not separable, use the full path). Text, not a `Value`: a call
    /// then neither deep-clones nor re-serialises the largest part of its request
    /// (see [`splice`]).
    pub splice: Option<(Vec<Seg>, std::sync::Arc<str>)>,
}

/// What the slot of the tools holds while the rest of the request is serialised: a
/// string no adapter output contains (control characters), replaced by the tools' text.
const MARKER: &str = "\u{1}homeagent-tools\u{1}";

/// `out` (the adapter's request with placeholder tools) with the tools at `path`
/// replaced by `real` (JSON text of an array of `n` elements). `None` when `out` is
/// not JSON or has no array of `n` elements there: the caller takes the full path.
pub fn splice(out: &str, path: &[Seg], n: usize, real: &str) -> Option<String> {
    let mut v: Value = serde_json::from_str(out).ok()?;
    let slot = get_mut(&mut v, path)?;
    if slot.as_array().map(Vec::len) != Some(n) {
        return None;
    }
    *slot = Value::String(MARKER.to_owned());
    let text = serde_json::to_string(&v).ok()?;
    let quoted = serde_json::to_string(MARKER).ok()?;
    let at = text.find(&quoted)?;
    let mut body = String::with_capacity(text.len() + real.len());
    body.push_str(&text[..at]);
    body.push_str(real);
    body.push_str(&text[at + quoted.len()..]);
    Some(body)
}

/// The placeholder name of tool `i`.
pub fn placeholder_name(i: usize) -> String {
    format!("__homeagent_tool_{i}__")
}

/// `n` minimal tools standing in for the real ones.
pub fn placeholders(n: usize) -> Vec<ToolDef> {
    (0..n)
        .map(|i| ToolDef {
            kind: "function".into(),
            function: ToolFunction {
                name: placeholder_name(i),
                description: String::new(),
                parameters: serde_json::json!({"type": "object", "properties": {}}),
            },
        })
        .collect()
}

/// A stable hash of one tool (its JSON).
pub fn tool_key(tool: &ToolDef) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(tool).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// A stable hash of a tool list, from its tools' [`tool_key`]s.
pub fn list_key(tool_keys: &[u64]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tool_keys.hash(&mut h);
    h.finish()
}

/// Converted tools kept per tool, to assemble lists never converted whole (see the
/// module doc).
#[derive(Debug, Default)]
pub struct PerTool {
    /// Where the converted tools land in the adapter's output (the same for every list).
    path: Option<Vec<Seg>>,
    /// A tool's [`tool_key`] → its converted element, as JSON text.
    texts: std::collections::HashMap<u64, std::sync::Arc<str>>,
    /// Whether the adapter takes one placeholder for many (seen when learning).
    one_placeholder: bool,
    /// Whether an assembled list was seen to equal the adapter's own conversion:
    /// `None` until one could be compared, `Some(false)` for good.
    trusted: Option<bool>,
}

/// Converted tools remembered before [`PerTool`] starts afresh (a registry that keeps
/// changing — plugins reloaded with new schemas — must not grow it without bound).
const MAX_TOOL_TEXTS: usize = 2048;

impl PerTool {
    /// The array (JSON text) for tools `keys` and where it goes, when every tool was
    /// converted before (trusted or not: the caller decides).
    pub fn assemble(&self, keys: &[u64]) -> Option<(Vec<Seg>, std::sync::Arc<str>)> {
        let path = self.path.clone()?;
        let mut text = String::from("[");
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(self.texts.get(k)?);
        }
        text.push(']');
        Some((path, std::sync::Arc::from(text)))
    }

    /// Whether an assembled list may stand in for the adapter's conversion, as settled
    /// so far (`None`: no assembled list compared yet).
    pub fn trust(&self) -> Option<bool> {
        self.trusted
    }

    /// How many converted tools are kept.
    pub fn known(&self) -> usize {
        self.texts.len()
    }

    /// The placeholders an assembled list of `n` tools is converted with.
    pub fn placeholders(&self, n: usize) -> ToolList {
        std::sync::Arc::new(placeholders(if self.one_placeholder { 1 } else { n }))
    }

    /// Takes what a whole list's learning found: `entry` for the tools `keys`, and
    /// `assembled`, what [`Self::assemble`] gave for them before (compared with the
    /// adapter's own conversion to settle trust).
    pub fn record(&mut self, keys: &[u64], entry: &Entry, assembled: Option<(Vec<Seg>, std::sync::Arc<str>)>) {
        let Some((path, real)) = &entry.splice else {
            // Not separable: nothing to assemble from, ever (the path differs by list).
            self.trusted = Some(false);
            return;
        };
        if let Some((p, text)) = assembled
            && self.trusted.is_none()
        {
            let same =
                p == *path && serde_json::from_str::<Value>(&text).ok() == serde_json::from_str::<Value>(real).ok();
            tracing::debug!(trusted = same, "assembled tool list compared with the adapter's own");
            self.trusted = Some(same);
        }
        if self.path.as_ref().is_some_and(|p| p != path) {
            self.trusted = Some(false);
        }
        self.path = Some(path.clone());
        self.one_placeholder = entry.placeholders.len() == 1;
        let Ok(Value::Array(items)) = serde_json::from_str::<Value>(real) else {
            return;
        };
        if items.len() != keys.len() {
            return;
        }
        if self.texts.len() + keys.len() > MAX_TOOL_TEXTS {
            self.texts.clear();
        }
        for (k, item) in keys.iter().zip(items) {
            self.texts.insert(*k, std::sync::Arc::from(item.to_string()));
        }
    }
}

fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s == needle,
        Value::Array(a) => a.iter().any(|x| mentions(x, needle)),
        Value::Object(o) => o.values().any(|x| mentions(x, needle)),
        _ => false,
    }
}

/// The path of the first array (depth first) of exactly `n` elements whose i-th
/// element mentions placeholder i.
pub fn find_placeholders(v: &Value, n: usize) -> Option<Vec<Seg>> {
    fn walk(v: &Value, n: usize, path: &mut Vec<Seg>) -> bool {
        match v {
            Value::Array(a) => {
                if a.len() == n && a.iter().enumerate().all(|(i, x)| mentions(x, &placeholder_name(i))) {
                    return true;
                }
                for (i, x) in a.iter().enumerate() {
                    path.push(Seg::Index(i));
                    if walk(x, n, path) {
                        return true;
                    }
                    path.pop();
                }
                false
            }
            Value::Object(o) => {
                for (k, x) in o {
                    path.push(Seg::Key(k.clone()));
                    if walk(x, n, path) {
                        return true;
                    }
                    path.pop();
                }
                false
            }
            _ => false,
        }
    }
    let mut path = Vec::new();
    walk(v, n, &mut path).then_some(path)
}

/// The value at `path`.
pub fn get<'a>(v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get(k),
        Seg::Index(i) => v.get(*i),
    })
}

/// The value at `path`, mutable.
pub fn get_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get_mut(k),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// What to cache for a tool list, from the adapter's output for the real tools (`full`)
/// and for placeholders (`with_placeholders`), both parsed.
pub fn learn(key: u64, n: usize, full: &Value, with_placeholders: &Value) -> Entry {
    let splice = find_placeholders(with_placeholders, n).and_then(|path| {
        let real = get(full, &path)?;
        // The real output must have a same-length array at the same place.
        (real.as_array().map(Vec::len) == Some(n))
            .then(|| serde_json::to_string(real).ok())
            .flatten()
            .map(|text| (path, std::sync::Arc::from(text)))
    });
    Entry {
        key,
        list: ToolList::default(),
        placeholders: std::sync::Arc::new(placeholders(n)),
        splice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_the_placeholder_array_wherever_the_adapter_puts_it() {
        let openai = json!({"model": "m", "tools": [
            {"type": "function", "function": {"name": "__homeagent_tool_0__"}},
            {"type": "function", "function": {"name": "__homeagent_tool_1__"}}
        ], "tool_choice": "auto"});
        assert_eq!(find_placeholders(&openai, 2), Some(vec![Seg::Key("tools".into())]));
        let gemini = json!({"contents": [], "tools": [{"functionDeclarations": [
            {"name": "__homeagent_tool_0__"}, {"name": "__homeagent_tool_1__"}
        ]}]});
        assert_eq!(
            find_placeholders(&gemini, 2),
            Some(vec![
                Seg::Key("tools".into()),
                Seg::Index(0),
                Seg::Key("functionDeclarations".into())
            ])
        );
        // Renamed or merged tools: not separable.
        assert_eq!(
            find_placeholders(&json!({"tools": [{"name": "x"}, {"name": "y"}]}), 2),
            None
        );
        assert_eq!(find_placeholders(&openai, 3), None);
    }

    #[test]
    fn learning_takes_the_real_array_at_the_same_place_and_splices_back() {
        let full = json!({"tools": [{"n": "real a"}, {"n": "real b"}], "x": 1});
        let ph = json!({"tools": [{"n": "__homeagent_tool_0__"}, {"n": "__homeagent_tool_1__"}], "x": 1});
        let e = learn(7, 2, &full, &ph);
        let (path, real) = e.splice.clone().unwrap();
        let later = json!({"tools": [{"n": "__homeagent_tool_0__"}, {"n": "__homeagent_tool_1__"}], "x": 2});
        let body = splice(&later.to_string(), &path, 2, &real).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"tools": [{"n": "real a"}, {"n": "real b"}], "x": 2})
        );
        assert!(splice(&later.to_string(), &path, 3, &real).is_none(), "wrong length");
        assert!(splice("not json", &path, 2, &real).is_none());
        // A full output without a same-length array there: no splice.
        assert!(learn(7, 2, &json!({"tools": [1]}), &ph).splice.is_none());
        let key = |tools: &[ToolDef]| list_key(&tools.iter().map(tool_key).collect::<Vec<_>>());
        assert_ne!(key(&placeholders(2)), key(&placeholders(3)));
    }
}
