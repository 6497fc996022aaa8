//! Facility names: the contract between kernel modules and plugins.
//!
//! A *facility* is something a kernel module makes ready during boot and
//! others may depend on. Kernel modules list facilities in `requires()` /
//! `provides()`, and a plugin manifest lists them in `requires_facilities`.
//! Both sides use the same strings. Rust code must use these constants and
//! never a string literal, so a misspelled name is a compile error and not a
//! boot failure. Manifests are plain JSON, so check their names with
//! [`is_known`].

/// The name of a facility. Always one of the constants below in kernel code.
pub type Facility = &'static str;

/// The loaded, validated configuration snapshot.
pub const CONFIG: Facility = "config";
/// The in-process event bus (publish/subscribe between actors).
pub const EVENT_BUS: Facility = "event-bus";
/// The actor registry: tracked mailboxes that can be looked up by name.
pub const REGISTRY: Facility = "registry";
/// The supervisor that restarts failed actors under a backoff policy.
pub const SUPERVISOR: Facility = "supervisor";
/// The kernel I/O surface that modules and plugins call into (kernel API).
pub const KERNEL_IO: Facility = "kernel-io";
/// The embedded Lua runtime for scripts and stages.
pub const LUA: Facility = "lua";
/// The LLM provider clients, configured and ready to take requests.
pub const LLM: Facility = "llm";
/// The conversational memory store (sessions, history).
pub const MEMORY: Facility = "memory";
/// The document memory: stored documents and their chunks.
pub const DOCMEM: Facility = "docmem";
/// The knowledge store (facts and their relations), migrated and open.
pub const KNOWLEDGE: Facility = "knowledge";
/// Text memory: search and recall over stored text.
pub const TEXT_MEMORY: Facility = "text-memory";
/// The ONNX runtime for local models (embeddings, parsing).
pub const ONNX: Facility = "onnx";
/// The stage host that runs pipeline stages.
pub const STAGEHOST: Facility = "stagehost";
/// The agent loop, ready to accept tasks and mount tools.
pub const AGENT: Facility = "agent";
/// The plugin host: spawns plugins and routes their protocol messages.
pub const PLUGIN_HOST: Facility = "plugin-host";
/// The HTTP server (API and static UI).
pub const HTTP: Facility = "http";

/// Every facility name defined here, in declaration order.
pub const ALL: &[Facility] = &[
    CONFIG,
    EVENT_BUS,
    REGISTRY,
    SUPERVISOR,
    KERNEL_IO,
    LUA,
    LLM,
    MEMORY,
    DOCMEM,
    KNOWLEDGE,
    TEXT_MEMORY,
    ONNX,
    STAGEHOST,
    AGENT,
    PLUGIN_HOST,
    HTTP,
];

/// Whether `name` is one of the facility names defined here (exact,
/// case-sensitive). Use it to check names that come from outside Rust code,
/// such as a plugin manifest's `requires_facilities`.
pub fn is_known(name: &str) -> bool {
    ALL.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_names_are_unique_and_known() {
        let mut seen = std::collections::BTreeSet::new();
        for name in ALL {
            assert!(seen.insert(*name), "duplicate facility name {name}");
            assert!(is_known(name));
        }
        assert_eq!(seen.len(), 16);
    }

    #[test]
    fn unknown_names_are_rejected() {
        assert!(!is_known("evnet-bus"));
        assert!(!is_known("Config"));
        assert!(!is_known(""));
    }
}
