//! `kernel/backups`: scheduled backups, and the WebUI's "Back up now".
//!
//! The shell around [`super::schedule`]: on the wall clock it looks every
//! [`CHECK`] whether a backup is due (the settings are read at each look, so a change
//! applies at once); on a virtual clock it answers [`ClockDue`] like every heartbeat,
//! so a test or eval that moves the daemon through months sees the backups a daemon
//! living through them would take. The archive is written on the blocking pool
//! ([`super::backup`]), one at a time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix::prelude::*;
use homeagent_actors::TAddr;
use homeagent_actors::config::{BackupConfig, ConfigActor, ReadSettings};
use homeagent_actors::host::{Handles, HostContext, KernelActor};
use homeagent_actors::memory::lifecycle::heartbeat::ClockDue;
use parking_lot::Mutex;
use serde::Serialize;

use super::schedule::{self, Decision, Schedule};

/// How often the wall-clock timer looks whether a backup is due.
pub const CHECK: Duration = Duration::from_secs(600);

/// One backup in the directory.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub at_ms: i64,
    pub bytes: u64,
}

/// The last backup attempt, for the WebUI.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub at_ms: i64,
    /// `schedule` or `owner`.
    pub trigger: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the API reads without a round trip.
#[derive(Debug, Default)]
pub struct Status {
    pub running: AtomicBool,
    pub last: Mutex<Option<Outcome>>,
}

/// The actor's address and its status.
#[derive(Clone)]
pub struct BackupHandle {
    pub addr: TAddr<BackupActor>,
    pub status: Arc<Status>,
}

/// Where backups go: `core.backup.dir`, or `DATA/backups` when empty.
pub fn dir_of(data: &Path, cfg: &BackupConfig) -> PathBuf {
    match cfg.dir.trim() {
        "" => data.join("backups"),
        // A relative path stays under DATA/backups (never elsewhere in the data dir,
        // where the next backup would archive the previous ones).
        d => data.join("backups").join(d),
    }
}

/// The backups in `dir`, newest first.
pub fn list(dir: &Path) -> Vec<Listed> {
    let mut out: Vec<Listed> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let at_ms = schedule::taken_at(&name)?;
                    let bytes = e.metadata().ok().filter(|m| m.is_file())?.len();
                    Some(Listed { name, at_ms, bytes })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then_with(|| b.name.cmp(&a.name)));
    out
}

/// Why a backup was not taken.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TakeError {
    #[error("a backup is being written right now; wait for it to finish, then look at the list")]
    Busy,
    #[error("{0}")]
    Failed(String),
}

/// Takes a backup into `dir` now and prunes to `keep`: the blocking part.
fn take_blocking(data: &Path, dir: &Path, keep: u32) -> Result<Listed, String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create the backup directory {}: {e}; set core.backup.dir to a writable place",
            dir.display()
        )
    })?;
    // Never over an existing backup: the next free millisecond.
    let mut at_ms = homeagent_actors::clock::now_ms();
    while dir.join(schedule::file_name(at_ms)).exists() {
        at_ms += 1;
    }
    let name = schedule::file_name(at_ms);
    let path = dir.join(&name);
    let manifest = super::backup(data, &path).map_err(|e| e.to_string())?;
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    tracing::info!(file = %path.display(), files = manifest.files, bytes, "backup written");
    let listed: Vec<(String, i64)> = list(dir).into_iter().map(|l| (l.name, l.at_ms)).collect();
    for old in schedule::prune(&listed, keep) {
        match std::fs::remove_file(dir.join(&old)) {
            Ok(()) => tracing::info!(file = %old, keep, "old backup removed"),
            Err(e) => tracing::warn!(file = %old, "cannot remove an old backup: {e}"),
        }
    }
    Ok(Listed { name, at_ms, bytes })
}

pub struct BackupActor {
    data: PathBuf,
    config: TAddr<ConfigActor>,
    status: Arc<Status>,
}

impl BackupActor {
    pub fn new(data: PathBuf, config: TAddr<ConfigActor>, status: Arc<Status>) -> Self {
        Self { data, config, status }
    }

    /// A round: reads the settings, decides at `now`, takes a backup when told to (or
    /// always, for the owner). Answers whether one was taken and when the next is due.
    fn round(
        &self,
        now: i64,
        trigger: &'static str,
    ) -> impl std::future::Future<Output = (Result<Option<Listed>, TakeError>, Option<i64>)> + 'static {
        let (data, config, status) = (self.data.clone(), self.config.clone(), self.status.clone());
        async move {
            let cfg = match config.send(ReadSettings).await {
                Ok(Ok(s)) => BackupConfig::read(&s),
                _ => {
                    return (
                        Err(TakeError::Failed(
                            "the settings are unreachable; try again in a minute".into(),
                        )),
                        None,
                    );
                }
            };
            let dir = dir_of(&data, &cfg);
            let schedule = Schedule {
                every: cfg.interval,
                keep: cfg.keep,
            };
            if trigger == "schedule" {
                let newest = list(&dir).first().map(|l| l.at_ms);
                match schedule.decide(now, newest) {
                    Decision::Off => return (Ok(None), None),
                    Decision::Wait { next_ms } => return (Ok(None), Some(next_ms)),
                    Decision::Take => {}
                }
            }
            if status.running.swap(true, Ordering::SeqCst) {
                return (Err(TakeError::Busy), None);
            }
            let keep = cfg.keep;
            let result = tokio::task::spawn_blocking(move || take_blocking(&data, &dir, keep))
                .await
                .unwrap_or_else(|e| Err(format!("the backup task failed: {e}")));
            status.running.store(false, Ordering::SeqCst);
            let outcome = Outcome {
                at_ms: now,
                trigger,
                name: result.as_ref().ok().map(|l| l.name.clone()),
                error: result.as_ref().err().cloned(),
            };
            if let Some(e) = &outcome.error {
                tracing::error!(trigger, "backup failed: {e}");
            }
            *status.last.lock() = Some(outcome);
            let next = (cfg.keep > 0).then(|| now.saturating_add(cfg.interval.as_millis() as i64));
            (result.map(Some).map_err(TakeError::Failed), next)
        }
    }
}

/// The wall-clock look.
#[derive(Message)]
#[rtype(result = "()")]
struct Check;

/// "Back up now" (the WebUI, `POST /api/v1/backups`).
#[derive(Message)]
#[rtype(result = "Result<Listed, TakeError>")]
pub struct TakeNow;

impl KernelActor for BackupActor {
    const KIND: &'static str = "backups";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        if !homeagent_actors::clock::is_virtual() {
            ctx.run_later(Duration::from_secs(60), |host, ctx| host.notify(ctx, Check));
            ctx.run_interval(CHECK, |host, ctx| host.notify(ctx, Check));
        }
    }
}

impl Handles<Check> for BackupActor {
    type Reply = ResponseFuture<()>;
    fn handle(&mut self, _: Check, _: &mut HostContext<Self>) -> Self::Reply {
        let round = self.round(homeagent_actors::clock::now_ms(), "schedule");
        Box::pin(async move {
            let _ = round.await;
        })
    }
}

impl Handles<ClockDue> for BackupActor {
    type Reply = ResponseFuture<homeagent_actors::clock::Due>;
    fn handle(&mut self, ClockDue(now): ClockDue, _: &mut HostContext<Self>) -> Self::Reply {
        let round = self.round(now, "schedule");
        Box::pin(async move {
            let (r, next) = round.await;
            homeagent_actors::clock::Due {
                ran: matches!(r, Ok(Some(_))),
                failed: r.is_err(),
                // Off: look again in a day (the setting may change).
                next_ms: next.unwrap_or(now + 86_400_000),
            }
        })
    }
}

impl Handles<TakeNow> for BackupActor {
    type Reply = ResponseFuture<Result<Listed, TakeError>>;
    fn handle(&mut self, _: TakeNow, _: &mut HostContext<Self>) -> Self::Reply {
        let round = self.round(homeagent_actors::clock::now_ms(), "owner");
        Box::pin(async move {
            match round.await.0 {
                Ok(Some(l)) => Ok(l),
                Ok(None) => Err(TakeError::Failed("no backup was taken".into())),
                Err(e) => Err(e),
            }
        })
    }
}
