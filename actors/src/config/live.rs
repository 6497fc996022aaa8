//! The settings read on every input, kept process-wide so the intake needs no round
//! trip to the settings actor: the text cap (`core.input_processing.text.max_bytes`).
//!
//! Why a process-wide value and not a field of the intake actors: every way in — the
//! HTTP routes, the OpenAI-compatible API, plugins' `io.inject*`, the Lua SDK, the CLI
//! socket, history imports — must refuse the same oversized text *before* it is stored,
//! and most of them hold no settings. The settings actor sets it when it opens and
//! before it answers a write that changed it, like the catalog's language, so the very
//! next input sees a new limit.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The text cap's default (the one place it is written; the key table uses it).
pub const DEFAULT_MAX_TEXT_BYTES: usize = 256 << 10;

static MAX_TEXT_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_TEXT_BYTES);

/// Largest text of one input, in bytes, as committed now.
pub fn max_text_bytes() -> usize {
    MAX_TEXT_BYTES.load(Ordering::Relaxed)
}

/// Set by the settings actor (`kernel/config`) from the stored value.
pub(super) fn set_max_text_bytes(bytes: usize) {
    MAX_TEXT_BYTES.store(bytes, Ordering::Relaxed);
}
