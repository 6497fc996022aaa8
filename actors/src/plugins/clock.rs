//! Subprocess plugins on the kernel's clock (issue 28, "time you can drive").
//!
//! A plugin that declared the `clock` feature in its handshake gets `clock.set` when a
//! virtual clock moves ([`homeagent_plugin_protocol::clock`] describes the exchange).
//! To the clock, the plugins together are one follower ([`crate::clock::Beats::follow`]):
//! asked when an advance starts, at every moment one of them said it is due next, and
//! where the advance ends. Each running follower is told at once, concurrently, and
//! answers once what came due has run (a reminder injected): so the advance's answer
//! comes after every reminder due inside its span is in the kernel.
//!
//! An answer is waited for at most [`ACK_TIMEOUT`] per moment: a plugin that hangs
//! slows an advance, it does not stop it (the moment counts as failed in the advance's
//! answer and the log says which plugin).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use homeagent_plugin_protocol::KernelRequest;
use homeagent_plugin_protocol::clock::{ClockAck, ClockSet, SETTLE_LIMIT};

use super::conn::Conn;
use crate::clock::{Due, DueFn};

/// How long the kernel waits for a plugin's answer to `clock.set`: the plugin's own
/// bound ([`SETTLE_LIMIT`]) and a margin.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(SETTLE_LIMIT.as_secs() + 2);

/// A running plugin that follows the clock: its connection, kept in its
/// `PluginInfo` from the handshake until the process ends.
#[derive(Clone)]
pub struct Follower {
    conn: Arc<Conn>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Follower")
    }
}

/// Why a plugin's answer to `clock.set` is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TellError {
    #[error(
        "plugin `{plugin}` did not answer clock.set within {secs} s; what it had due may come late (see its log in GET /api/v1/plugins)"
    )]
    Timeout { plugin: String, secs: u64 },
    #[error(
        "plugin `{plugin}` did not take clock.set ({error}); it is told the time again at its next start or the next advance"
    )]
    Failed { plugin: String, error: String },
    #[error(
        "plugin `{plugin}` answered clock.set with something else than {{next_ms, due}}: {error}; rebuild it with the current SDK"
    )]
    BadAnswer { plugin: String, error: String },
}

impl Follower {
    pub fn new(conn: Arc<Conn>) -> Self {
        Self { conn }
    }

    /// Tells the plugin the clock reached `now_ms`; its answer once what was due ran.
    pub async fn tell(&self, plugin: &str, now_ms: i64) -> Result<ClockAck, TellError> {
        let call = self.conn.request(KernelRequest::ClockSet(ClockSet { now_ms }));
        let answer = tokio::time::timeout(ACK_TIMEOUT, call)
            .await
            .map_err(|_| TellError::Timeout {
                plugin: plugin.to_owned(),
                secs: ACK_TIMEOUT.as_secs(),
            })?
            .map_err(|error| TellError::Failed {
                plugin: plugin.to_owned(),
                error,
            })?;
        serde_json::from_value(answer).map_err(|e| TellError::BadAnswer {
            plugin: plugin.to_owned(),
            error: e.to_string(),
        })
    }
}

/// The plugins' answers at one moment as one follower's answer to the clock: due next
/// at the earliest time any of them named (none: `i64::MAX`, which never stops an
/// advance), ran when any had something due, failed when any did not answer or did
/// not finish what came due.
pub fn merge(answers: &[Result<ClockAck, TellError>]) -> Due {
    let mut due = Due {
        ran: false,
        failed: false,
        next_ms: i64::MAX,
    };
    for answer in answers {
        match answer {
            Ok(ack) => {
                due.ran |= ack.due > 0;
                due.failed |= ack.unsettled;
                if let Some(next) = ack.next_ms {
                    due.next_ms = due.next_ms.min(next);
                }
            }
            Err(_) => due.failed = true,
        }
    }
    due
}

/// The running subprocess plugins that follow the clock (`following` lists them, by
/// name, at each call: `PluginSet::clock_followers`) as one follower of the clock:
/// each call tells every one the time, concurrently, and answers when all have
/// answered (or timed out). Takes the list as a function so this module does not
/// depend on the plugin host that keeps them.
pub fn follower(following: impl Fn() -> Vec<(String, Follower)> + Send + Sync + 'static) -> DueFn {
    Arc::new(move |now_ms| {
        let following = following();
        Box::pin(async move {
            let answers = join_all(following.iter().map(|(name, f)| f.tell(name, now_ms))).await;
            for (answer, (plugin, _)) in answers.iter().zip(&following) {
                match answer {
                    Err(e) => tracing::warn!("{e}"),
                    Ok(ack) if ack.unsettled => tracing::warn!(
                        %plugin,
                        now_ms,
                        "plugin answered clock.set before what came due had run (it took over {} s)",
                        SETTLE_LIMIT.as_secs()
                    ),
                    Ok(_) => {}
                }
            }
            merge(&answers)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(next_ms: Option<i64>, due: u32) -> Result<ClockAck, TellError> {
        Ok(ClockAck {
            next_ms,
            due,
            unsettled: false,
        })
    }

    #[test]
    fn the_earliest_next_time_and_any_failure_make_the_answer() {
        let none = merge(&[]);
        assert_eq!((none.ran, none.failed, none.next_ms), (false, false, i64::MAX));
        let d = merge(&[ack(Some(30), 0), ack(None, 0), ack(Some(20), 1)]);
        assert_eq!((d.ran, d.failed, d.next_ms), (true, false, 20));
        let timeout = Err(TellError::Timeout {
            plugin: "memo".into(),
            secs: 10,
        });
        let d = merge(&[ack(Some(30), 0), timeout]);
        assert_eq!((d.ran, d.failed, d.next_ms), (false, true, 30));
        let unsettled = Ok(ClockAck {
            next_ms: Some(5),
            due: 1,
            unsettled: true,
        });
        let d = merge(&[unsettled]);
        assert_eq!((d.ran, d.failed, d.next_ms), (true, true, 5));
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = TellError::BadAnswer {
            plugin: "p".into(),
            error: "x".into(),
        };
        assert!(e.to_string().contains("rebuild it with the current SDK"), "{e}");
        let e = TellError::Timeout {
            plugin: "p".into(),
            secs: 10,
        };
        assert!(e.to_string().contains("GET /api/v1/plugins"), "{e}");
    }
}
