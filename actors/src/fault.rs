//! Fault injection for the supervision tests: a debug build panics at a named site
//! when the daemon runs with `HOMEAGENT_FAULT=<site>:<needle>` and the site's key
//! contains the needle. It makes "a crash restarts only its own subtree" testable on a
//! real daemon with a real panic inside a real actor, instead of an operator restart
//! standing in for one. Release builds compile every point to nothing, so no setting or
//! input can crash a deployed daemon on purpose.

/// The sites that exist (`HOMEAGENT_FAULT` names one).
pub mod site {
    /// A scheduler receives an input (key: the input's text).
    pub const SCHEDULER_SUBMIT: &str = "scheduler.submit";
    /// The documents actor ranks passages for a turn's recall (key: the query).
    pub const DOCUMENTS_RECALL: &str = "documents.recall";
    /// The documents actor commits an archive (key: the first archived event's words).
    pub const DOCUMENTS_ARCHIVE: &str = "documents.archive";
}

/// Panics when the configured fault matches `site` and `key` (debug builds only).
#[inline]
pub fn point(site: &str, key: &str) {
    #[cfg(debug_assertions)]
    {
        static SPEC: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();
        let spec = SPEC.get_or_init(|| {
            let v = std::env::var("HOMEAGENT_FAULT").ok()?;
            let (s, needle) = v.split_once(':')?;
            tracing::warn!(site = s, needle, "fault injection armed (HOMEAGENT_FAULT; debug build)");
            Some((s.to_owned(), needle.to_owned()))
        });
        if let Some((s, needle)) = spec
            && s == site
            && !needle.is_empty()
            && key.contains(needle.as_str())
        {
            panic!("injected fault at {site} (HOMEAGENT_FAULT)");
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = (site, key);
}
