//! The HomeAgent kernel: supervised, tracked actix actors and their plain-Rust cores.
//!
//! # Layout
//!
//! * [`host`]: [`KernelActor`] (a plain struct with message handlers) and [`Host`], the
//!   actix actor that runs it, counts its mailbox and turns panics into exits;
//! * [`addr`]: [`TAddr`], the restart-proof, counted address every sender uses;
//! * [`registry`]: live counters of every actor, snapshotted for the dashboard;
//! * [`supervisor`]: supervision trees (policies, strategies, intensity, backoff);
//! * [`control`]: the operator interface to supervisors (restart/stop, refusals), a leaf
//!   the registry and the supervisor both use;
//! * [`bus`]: the kernel event bus (broadcast, never blocks);
//! * [`clock`]: the kernel's one clock (wall, or virtual and driven by evals and tests);
//! * [`modgraph`]: kernel assembly as a dependency graph of modules and facilities;
//! * [`config`]: the settings registry (SQLite) and its actor;
//! * [`schema`]: the kernel's databases and the schema version this build expects;
//! * [`firewall`]: tool policy and the sandbox of tools that touch the machine;
//! * [`panic`]: the panic hook that gives vanished actors an exit reason.
//!
//! Invariants: the kernel does no network or terminal IO (channels are plugins); no
//! kernel code reads the registry's counters to make a decision; every kernel actor
//! has a supervisor.

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
