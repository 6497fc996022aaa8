//! Name patterns: an exact name, or a glob whose `*` matches any run of characters
//! (`mcp__*`, `files_*`, `*_delete`, `claude-*-4*`). The owner writes them in settings
//! (the firewall's tool lists and approval rules) and in the price table (model names).
//!
//! A leaf of its own because the firewall and the usage ledger both match them, and
//! the ledger stands two layers below the firewall (the LLM provider records usage; the
//! firewall reads the provider's addresses), so neither may import the other's.

/// Whether `name` matches `pattern` (`*` = any run of characters, possibly empty).
pub fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("files_read", "files_read") && !glob("files_read", "files_reads"));
        assert!(glob("mcp__*", "mcp__fs__read") && !glob("mcp__*", "mcp_x"));
        assert!(glob("*_delete", "knowledge_delete") && !glob("*_delete", "delete_x"));
        assert!(glob("a*b*c", "aXXbYYc") && !glob("a*b*c", "aXXcYYb"));
        assert!(glob("*", "") && glob("a*a", "aa") && !glob("a*a", "a"));
    }
}
