//! Tool policy: allow and deny lists of tool-name patterns. Deny wins; an empty allow
//! list allows every tool that is not denied.
//!
//! Patterns are exact names or globs with `*` (any run of characters): `mcp__*`,
//! `files_*`, `*_delete`. They come from the settings `core.security.tool_allow` and
//! `core.security.tool_deny` (comma-separated).

use crate::pattern::glob;

/// The lists, parsed once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    allow: Vec<String>,
    deny: Vec<String>,
}

pub(crate) fn split(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

impl ToolPolicy {
    /// From the two comma-separated lists.
    pub fn new(allow: &str, deny: &str) -> Self {
        Self {
            allow: split(allow),
            deny: split(deny),
        }
    }

    /// The allow patterns (empty: everything not denied).
    pub fn allow(&self) -> &[String] {
        &self.allow
    }

    /// The deny patterns.
    pub fn deny(&self) -> &[String] {
        &self.deny
    }

    /// `Ok` when `tool` may run; `Err` says which rule refused it and what to change.
    pub fn check(&self, tool: &str) -> Result<(), PolicyRefusal> {
        if let Some(p) = self.deny.iter().find(|p| glob(p, tool)) {
            return Err(PolicyRefusal::Denied {
                tool: tool.to_owned(),
                pattern: p.clone(),
            });
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| glob(p, tool)) {
            return Err(PolicyRefusal::NotAllowed { tool: tool.to_owned() });
        }
        Ok(())
    }
}

/// Which of the owner's rules refused a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyRefusal {
    #[error("tool `{tool}` is denied by the owner's policy (core.security.tool_deny: `{pattern}`)")]
    Denied { tool: String, pattern: String },
    #[error("tool `{tool}` is not in the owner's allow list (core.security.tool_allow); add it there to use it")]
    NotAllowed { tool: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_and_an_empty_allow_list_allows_the_rest() {
        let open = ToolPolicy::new("", "cmd_*, files_write");
        assert!(open.check("files_read").is_ok());
        let e = open.check("cmd_run").unwrap_err().to_string();
        assert!(e.contains("cmd_*") && e.contains("core.security.tool_deny"), "{e}");
        assert!(open.check("files_write").is_err());
        let closed = ToolPolicy::new("files_*, timer_set", "files_write");
        assert!(closed.check("files_read").is_ok() && closed.check("timer_set").is_ok());
        assert!(closed.check("files_write").is_err(), "deny wins over allow");
        assert!(closed.check("cmd_run").unwrap_err().to_string().contains("allow list"));
        assert_eq!(ToolPolicy::new(" , ", ""), ToolPolicy::default());
    }
}
