//! The HomeAgent kernel: supervised, tracked actix actors and their plain-Rust cores.
//!
//! # Layout
//!
//! The modules stand in layers, listed here bottom up: each imports only those above it
//! in this list (`tests/layers.rs` holds it).
//!
//! The runtime every actor stands on:
//!
//! * [`clock`]: the kernel's one clock (wall, or virtual and driven by evals and tests);
//! * [`fault`]: fault injection at named sites for the supervision tests (debug builds);
//! * [`trace`]: the spans a turn makes (`turn`, `recall`, `llm_call`, `tool_call`);
//! * [`panic`](mod@panic): the panic hook that gives vanished actors an exit reason;
//! * [`pattern`]: name patterns with `*` (tool lists, the price table);
//! * [`control`]: the operator interface to supervisors (restart/stop, refusals), a leaf
//!   the registry and the supervisor both use;
//! * [`scheduler`]: task classes, interrupt levels, preemption at safe points (a core);
//! * [`modgraph`]: kernel assembly as a dependency graph of modules and facilities;
//! * [`registry`]: live counters of every actor, snapshotted for the dashboard;
//! * [`host`]: [`KernelActor`] (a plain struct with message handlers) and [`Host`], the
//!   actix actor that runs it, counts its mailbox and turns panics into exits;
//! * [`addr`]: [`TAddr`], the restart-proof, counted address every sender uses;
//! * [`bus`]: the kernel event bus (broadcast, never blocks);
//! * [`supervisor`]: supervision trees (policies, strategies, intensity, backoff).
//!
//! What the runtime runs:
//!
//! * [`config`]: the settings registry (SQLite) and its actor;
//! * [`usage`]: the usage ledger — every model call's tokens and cost;
//! * [`llm`]: vendor types, the Lua adapters, streams, source choice and fallback, token
//!   counts;
//! * [`firewall`]: tool policy, secrets, approvals and the sandbox of tools that touch
//!   the machine;
//! * [`stages`]: the StageHost (the seven stages plugins hook into) and the tool
//!   registry;
//! * [`memory`]: the three tiers (context → documents → graph), the knowledge base,
//!   media, the text log, embeddings and search indexes, and the lifecycle;
//! * [`agent`]: intake, scheduling and the task lifecycle — the turn as a core
//!   (`agent::turn`), residents and helpers, the kernel's own agent tools;
//! * [`plugins`]: subprocess, Lua and SKILL.md plugins: discovery, connections,
//!   confinement, packages and the per-plugin supervisors;
//! * [`schema`]: the kernel's databases and the schema version this build expects.
//!
//! Beside them, [`i18n`]: the message catalog (every text for a person or the model).
//!
//! The invariants, each with the test that holds it, are in `docs/ARCHITECTURE.md`.

pub mod addr;
pub mod agent;
pub mod bus;
pub mod clock;
pub mod config;
pub mod control;
pub mod fault;
pub mod firewall;
pub mod host;
/// The message catalog (`homeagent-i18n`): every text for a person or the model.
pub use homeagent_i18n as i18n;
pub mod llm;
pub mod memory;
pub mod modgraph;
pub mod panic;
pub mod pattern;
pub mod plugins;
pub mod registry;
pub mod scheduler;
pub mod schema;
pub mod stages;
pub mod supervisor;
pub mod trace;
pub mod usage;

pub use addr::{SendError, TAddr};
pub use bus::{EventBus, KernelEvent};
pub use host::{Exit, Handles, Host, HostContext, KernelActor, Shutdown};
pub use registry::{ActorSnapshot, ActorState, Registry};
pub use supervisor::{RestartPolicy, Strategy, SupervisorConfig, SupervisorRef};
