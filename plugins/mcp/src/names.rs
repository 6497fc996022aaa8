//! How an MCP tool is named for the model: `mcp__<server>__<tool>`.
//!
//! The LLM vendors accept function names of 1–64 characters of `[A-Za-z0-9_-]`
//! (OpenAI, Anthropic, DeepSeek; Gemini also takes `.` and `:` but not everyone does),
//! and the kernel's tool registry enforces the same. So:
//!
//! 1. every character of the server and tool names outside `[A-Za-z0-9_-]` becomes `_`;
//! 2. a name longer than 64 characters is cut to 55 and gets `_` + 8 hex digits of a
//!    hash (FNV-1a, stable across runs) of the *original* `server` + `tool`;
//! 3. if two tools of one server still map to the same name, the later ones (in the
//!    server's order) get the hash suffix too.
//!
//! The bridge keeps the exposed → original mapping, so calls always reach the tool
//! under its real name; the model never needs to reverse the mapping.

use std::collections::BTreeSet;

/// Longest function name the vendors accept.
pub const MAX_NAME: usize = 64;
/// Prefix of every bridged tool.
pub const PREFIX: &str = "mcp__";

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn fnv1a(parts: &[&str]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0xff;
            h = h.wrapping_mul(0x0100_0193);
        }
        for b in p.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

fn with_hash(base: &str, server: &str, tool: &str) -> String {
    let suffix = format!("_{:08x}", fnv1a(&[server, tool]));
    let keep = MAX_NAME - suffix.len();
    let cut: String = base.chars().take(keep).collect();
    format!("{cut}{suffix}")
}

/// The exposed name of one tool (rules 1 and 2).
pub fn exposed_name(server: &str, tool: &str) -> String {
    let base = format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool));
    if base.len() <= MAX_NAME {
        base
    } else {
        with_hash(&base, server, tool)
    }
}

/// Exposed names for all tools of one server, in order, collisions resolved (rule 3).
pub fn map_tools<'t>(server: &str, tools: impl IntoIterator<Item = &'t str>) -> Vec<(String, String)> {
    let mut taken = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for tool in tools {
        if !seen.insert(tool) {
            // The same tool name twice: a server bug; keep the first.
            continue;
        }
        let mut name = exposed_name(server, tool);
        if taken.contains(&name) {
            name = with_hash(
                &format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool)),
                server,
                tool,
            );
        }
        if taken.contains(&name) {
            // A hash collision on top of a name collision: vanishingly rare; skip it.
            continue;
        }
        taken.insert(name.clone());
        out.push((name, tool.to_owned()));
    }
    out
}

/// Whether `name` is a valid server name in `plugin.mcp.servers`.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(n: &str) -> bool {
        !n.is_empty() && n.len() <= MAX_NAME && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(exposed_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(exposed_name("fs", "read-file"), "mcp__fs__read-file");
    }

    #[test]
    fn odd_characters_become_underscores() {
        assert_eq!(exposed_name("fs", "files.read/v2"), "mcp__fs__files_read_v2");
        assert_eq!(exposed_name("wé", "日本"), "mcp__w_____");
        assert!(valid(&exposed_name("a b", "c:d")));
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let tool = "x".repeat(100);
        let a = exposed_name("srv", &tool);
        assert_eq!(a.len(), MAX_NAME);
        assert!(valid(&a));
        assert_eq!(a, exposed_name("srv", &tool), "stable");
        let b = exposed_name("srv", &format!("{tool}y"));
        assert_ne!(a, b, "different tools, different names");
    }

    #[test]
    fn collisions_get_a_suffix_and_every_name_is_unique() {
        let m = map_tools("s", ["a.b", "a_b", "a/b", "a.b"]);
        assert_eq!(m.len(), 3, "an exact duplicate is dropped");
        assert_eq!(m[0], ("mcp__s__a_b".into(), "a.b".into()));
        let names: BTreeSet<_> = m.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names.len(), 3);
        assert!(m.iter().all(|(n, _)| valid(n)));
        assert_eq!(m[1].1, "a_b");
    }

    #[test]
    fn server_names() {
        assert!(valid_server_name("everything"));
        assert!(valid_server_name("my-fs_2"));
        assert!(!valid_server_name(""));
        assert!(!valid_server_name("a b"));
        assert!(!valid_server_name(&"s".repeat(33)));
    }
}
