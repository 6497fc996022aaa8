//! `homed`, the HomeAgent daemon shell around the kernel crate (`homeagent-actors`).
//!
//! # Layout
//!
//! * [`address`]: `DATA/http-address` and the address a client reaches the daemon on;
//! * [`cli`]: command-line arguments of `homed` (clap);
//! * [`cli_socket`]: the built-in CLI channel on the Unix socket (`waiter`'s peer);
//! * [`daemon`]: start-up (data dir, lock file, logging), the run loop and the
//!   graceful shutdown on SIGINT/SIGTERM;
//! * [`kernel`]: kernel assembly: the [`kernel::KernelState`] and the modules of the
//!   boot graph that start the supervision tree;
//! * [`http`]: the HTTP API under `/api/v1`, its OpenAPI document, the SSE stream and
//!   the embedded WebUI dashboard;
//! * [`bench`]: `homed bench ...` measurements (tracked vs raw mailboxes);
//! * [`eval`]: `homed eval locomo` — memory retrieval quality on LoCoMo conversations;
//! * [`eval_live`] (+ [`eval_metrics`], [`scripted_vendor`]): `homed eval locomo --live` —
//!   what of an imported conversation reaches the model's prompt on a real daemon;
//! * [`eval_lifecycle`]: `--live --lifecycle` — the same after the conversation was lived
//!   through simulated months on a virtual clock, every heartbeat included;
//! * [`integrity`]: the start's database checks (quick_check, the manifest of what
//!   each database held);
//! * [`import`]: `homed memory import FILE` (NDJSON or LoCoMo) to the running daemon.
//!
//! The shell knows the kernel only through its public messages and handles: HTTP
//! handlers never touch kernel state directly, they send typed messages to actors.

pub mod address;
pub mod auth;
pub mod backup;
pub mod bench;
pub mod bench_confine;
pub mod bench_mcp;
pub mod bench_media;
pub mod bench_residents;
pub mod bench_tokens;
pub mod bench_tools;
pub mod cli;
pub mod cli_socket;
pub mod daemon;
pub mod eval;
pub mod eval_daemon;
pub mod eval_lifecycle;
pub mod eval_live;
pub mod eval_metrics;
pub mod http;
pub mod import;
pub mod install;
pub mod integrity;
pub mod kernel;
pub mod lockfile;
pub mod logring;
pub mod metrics;
pub mod scripted_vendor;
pub mod selftest;
pub mod service;
pub mod telemetry;
pub mod turn_stream;
pub mod upgrade;
