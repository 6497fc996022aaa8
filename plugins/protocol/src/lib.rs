//! The HomeAgent plugin wire protocol, shared by the kernel and plugin authors.
//!
//! Subprocess plugins talk to the kernel over their stdin/stdout: one JSON object per
//! line, at most [`MAX_FRAME_BYTES`] per line, stderr is free-form log text. Both
//! sides may send requests; a request with `id` 0 is a notification (no reply).
//!
//! # Layout
//!
//! * [`frame`]: the frame types and the line codec (size cap, error mapping);
//! * [`handshake`]: the first exchange (protocol version check);
//! * [`clock`]: the kernel's clock as plugins see it (`clock.set`, [`clock::Clock`]);
//! * [`capability`]: what a plugin may ask of the kernel;
//! * [`facility`]: kernel facility names (the names plugins declare they require);
//! * [`manifest`]: `plugin.json` and the entry probe;
//! * [`methods`]: method names and parameter types;
//! * [`request`]: the calls as typed enums ([`PluginRequest`], [`KernelRequest`]),
//!   decoded once where a frame arrives;
//! * [`sandbox`]: the tool sandbox (roots, network, the daemon's own addresses) the
//!   kernel checks and the plugin re-checks;
//! * [`sdk`]: a small thread-based SDK for plugins written in Rust;
//! * [`toolkit`]: argument, output-cap and binary-detection helpers for tool plugins.

pub mod capability;
pub mod clock;
pub mod facility;
pub mod frame;
pub mod handshake;
pub mod manifest;
pub mod methods;
pub mod request;
pub mod sandbox;
pub mod sdk;
pub mod toolkit;

/// The protocol version this crate speaks. A peer answering another version is refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame (one JSON line, without the newline) either side accepts.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

pub use capability::{Capability, Denied};
pub use frame::{Frame, FrameError, Request, Response, RpcError, decode, encode};
pub use handshake::{HandshakeParams, HandshakeReply};
pub use manifest::{CompatError, EntryKind, Manifest};
pub use request::{DecodeError, KernelRequest, PluginRequest};
