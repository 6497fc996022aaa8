//! Panic capture: turns a panic anywhere on an actor thread into an exit reason.
//!
//! `catch_unwind` around a handler gives us the payload directly, but a panic can also
//! happen where we have no frame to catch it (inside a future an actor spawned). Tokio
//! catches those and drops the task, which drops the actor; the actor's host then
//! reports the exit with the message this hook remembered for the thread.

use std::cell::RefCell;
use std::sync::Once;
use std::time::{Duration, Instant};

thread_local! {
    static LAST_PANIC: RefCell<Option<(Instant, String)>> = const { RefCell::new(None) };
}

/// Installs the process-wide hook once. The previous hook still runs, so panics keep
/// appearing on stderr with their location.
pub fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = payload_message(info.payload());
            let text = match info.location() {
                Some(l) => format!("{msg} (at {}:{})", l.file(), l.line()),
                None => msg,
            };
            // Printing comes first and the record's time after it: with RUST_BACKTRACE
            // set, symbolising the backtrace can take longer than the window in which
            // `take_recent_panic` still blames this panic (seen: ~230 ms of 250).
            previous(info);
            LAST_PANIC.with(|p| *p.borrow_mut() = Some((Instant::now(), text)));
        }));
    });
}

/// The message of the last panic seen on this thread, taken (a second call gives `None`).
pub fn take_last_panic() -> Option<String> {
    LAST_PANIC.with(|p| p.borrow_mut().take()).map(|(_, m)| m)
}

/// Like [`take_last_panic`], but only a panic from the last `within`: used where a
/// stale record from an unrelated, already-handled panic must not be blamed.
pub fn take_recent_panic(within: Duration) -> Option<String> {
    LAST_PANIC
        .with(|p| p.borrow_mut().take())
        .filter(|(at, _)| at.elapsed() <= within)
        .map(|(_, m)| m)
}

/// Best-effort text of a panic payload (`&str` and `String` payloads cover `panic!`).
pub fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}
