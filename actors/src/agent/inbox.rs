//! The durable inbox (`DATA/inbox.db`): an input acknowledged with 202 is committed here
//! before the 202 is sent, and deleted when its task has ended. Whatever is left at
//! boot (the daemon died: `kill -9`, a crash, a power cut) runs again.
//!
//! * [`InboxStore`]: the SQLite table (plain struct, tested against real SQLite);
//! * [`InboxActor`]: the shell on the blocking arbiter. It **group-commits**: every
//!   `Accept`, `Started` and `Ended` that is in its mailbox when it wakes goes into one
//!   transaction (one fsync), and each `Accept` is answered only after that commit.
//!   A burst of N inputs costs a handful of fsyncs instead of N.
//!
//! The database runs WAL with `synchronous=FULL`, unlike `memory.db` (NORMAL): a 202
//! is a promise to the sender, who will not send again, so it must survive an OS crash
//! or power loss too, not only `kill -9`. Group commit keeps that affordable.

use std::path::Path;

use actix::prelude::*;
use rusqlite::{Connection, OptionalExtension as _, params};
use rusqlite_migration::{M, Migrations};
use tokio::sync::oneshot;

use super::input::InputRecord;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::scheduler::Level;

/// After this many starts without an end (each one a daemon death under the task), an
/// input is given up instead of replayed again: it is probably what kills the daemon.
pub const MAX_STARTS: u32 = 3;

/// The row id of a stored input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct InboxId(pub i64);

impl std::fmt::Display for InboxId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why the inbox failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboxError {
    #[error("inbox database error: {0}; check disk space and permissions of DATA/inbox.db")]
    Sql(String),
    #[error("inbox database migration failed: {0}; the file may be from a newer homed")]
    Migration(String),
    #[error("the inbox is not running (it may be restarting); retry in a moment")]
    Closed,
}

impl From<rusqlite::Error> for InboxError {
    fn from(e: rusqlite::Error) -> Self {
        InboxError::Sql(e.to_string())
    }
}

/// A stored input as read back at boot.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredInput {
    pub id: InboxId,
    pub record: InputRecord,
    pub accepted_at_ms: i64,
    /// Starts so far (before this replay).
    pub starts: u32,
}

/// An input on the dead-letter list, as the owner sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeadInput {
    pub id: InboxId,
    pub request_id: String,
    pub source: String,
    pub text: String,
    pub accepted_at_ms: i64,
    /// Times its task started.
    pub starts: u32,
    pub dead_at_ms: i64,
    /// Why it failed (what to do next included).
    pub error: String,
}

/// What [`InboxStore::take_pending`] found.
#[derive(Debug, Default)]
pub struct Replay {
    /// To run again, oldest first.
    pub pending: Vec<StoredInput>,
    /// Given up now (started [`MAX_STARTS`] times and never ended).
    pub given_up: Vec<StoredInput>,
}

pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../../migrations/inbox/0001_init.sql")),
        M::up(include_str!("../../../migrations/inbox/0002_principal.sql")),
        M::up(include_str!("../../../migrations/inbox/0003_dead_letter.sql")),
    ])
}

fn now_ms() -> i64 {
    crate::clock::now_ms()
}

/// The inbox table.
pub struct InboxStore {
    conn: Connection,
    /// The highest row id when the store was opened: rows up to it belong to earlier
    /// runs. Only those are replayed; the later ones are this run's, already on their
    /// way to the scheduler (replaying them too would run them twice).
    before_open: i64,
    /// The replay happened (it happens once per opening).
    replayed: bool,
    /// Transactions committed by [`InboxStore::write`] (group commit makes this far
    /// smaller than the number of inputs).
    commits: u64,
}

impl InboxStore {
    /// Opens (creating and migrating) the inbox at `path`.
    pub fn open(path: &Path) -> Result<Self, InboxError> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::migrated(conn)
    }

    pub fn open_in_memory() -> Result<Self, InboxError> {
        Self::migrated(Connection::open_in_memory()?)
    }

    fn migrated(mut conn: Connection) -> Result<Self, InboxError> {
        migrations()
            .to_latest(&mut conn)
            .map_err(|e| InboxError::Migration(e.to_string()))?;
        let before_open = conn.query_row("SELECT coalesce(max(id), 0) FROM inbox", [], |r| r.get(0))?;
        Ok(Self {
            conn,
            before_open,
            replayed: false,
            commits: 0,
        })
    }

    /// One transaction: stores `accepts` (returning their ids, in order), counts a start
    /// for `started`, deletes `ended`, moves `dead` to the dead-letter list with why.
    /// Nothing of it is applied if anything fails.
    pub fn write(
        &mut self,
        accepts: &[&InputRecord],
        started: &[InboxId],
        ended: &[InboxId],
        dead: &[(InboxId, String)],
    ) -> Result<Vec<InboxId>, InboxError> {
        let tx = self.conn.transaction()?;
        let mut ids = Vec::with_capacity(accepts.len());
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO inbox (request_id, source, channel, text, level, no_memory, payload, accepted_at_ms, principal)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            let now = now_ms();
            for r in accepts {
                insert.execute(params![
                    r.request_id,
                    r.source,
                    r.channel,
                    r.text,
                    r.level.map(|l| l as u8),
                    r.no_memory,
                    r.payload.to_value().to_string(),
                    now,
                    serde_json::to_string(&r.principal).expect("a principal serialises"),
                ])?;
                ids.push(InboxId(tx.last_insert_rowid()));
            }
            let mut start = tx.prepare_cached("UPDATE inbox SET starts = starts + 1 WHERE id = ?1")?;
            for id in started {
                start.execute([id.0])?;
            }
            let mut end = tx.prepare_cached("DELETE FROM inbox WHERE id = ?1")?;
            for id in ended {
                end.execute([id.0])?;
            }
            let mut bury = tx.prepare_cached("UPDATE inbox SET given_up_at_ms = ?2, last_error = ?3 WHERE id = ?1")?;
            let now = now_ms();
            for (id, why) in dead {
                bury.execute(params![id.0, now, why])?;
            }
        }
        tx.commit()?;
        self.commits += 1;
        Ok(ids)
    }

    /// The inputs earlier runs left, oldest first (once per opening: later calls find
    /// nothing). Those that already started [`MAX_STARTS`] times are marked given up
    /// (kept, not replayed) and returned apart.
    pub fn take_pending(&mut self) -> Result<Replay, InboxError> {
        if std::mem::replace(&mut self.replayed, true) {
            return Ok(Replay::default());
        }
        let tx = self.conn.transaction()?;
        let mut replay = Replay::default();
        {
            let mut q = tx.prepare(
                "SELECT id, request_id, source, channel, text, level, no_memory, payload, accepted_at_ms, starts, principal
                 FROM inbox WHERE given_up_at_ms IS NULL AND id <= ?1 ORDER BY id",
            )?;
            let rows = q.query_map([self.before_open], |r| {
                let payload: String = r.get(7)?;
                let level: Option<u8> = r.get(5)?;
                Ok(StoredInput {
                    id: InboxId(r.get(0)?),
                    record: InputRecord {
                        request_id: r.get(1)?,
                        source: r.get(2)?,
                        channel: r.get(3)?,
                        text: r.get(4)?,
                        level: level.and_then(Level::from_u8),
                        no_memory: r.get(6)?,
                        payload: super::input::Payload::parse(&payload),
                        principal: stored_principal(r.get::<_, Option<String>>(10)?.as_deref()),
                    },
                    accepted_at_ms: r.get(8)?,
                    starts: r.get(9)?,
                })
            })?;
            for row in rows {
                let row = row?;
                if row.starts >= MAX_STARTS {
                    replay.given_up.push(row);
                } else {
                    replay.pending.push(row);
                }
            }
            let mut give_up = tx.prepare("UPDATE inbox SET given_up_at_ms = ?2, last_error = ?3 WHERE id = ?1")?;
            let now = now_ms();
            for g in &replay.given_up {
                let why = format!(
                    "it started {} times and the daemon died each time; retry it only once the cause is fixed",
                    g.starts
                );
                give_up.execute(params![g.id.0, now, why])?;
            }
        }
        tx.commit()?;
        Ok(replay)
    }

    /// The dead-letter list, newest first (at most `limit`).
    pub fn dead(&self, limit: usize) -> Result<Vec<DeadInput>, InboxError> {
        let mut q = self.conn.prepare_cached(
            "SELECT id, request_id, source, text, accepted_at_ms, starts, given_up_at_ms, coalesce(last_error, '')
             FROM inbox WHERE given_up_at_ms IS NOT NULL ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = q.query_map([limit as i64], |r| {
            Ok(DeadInput {
                id: InboxId(r.get(0)?),
                request_id: r.get(1)?,
                source: r.get(2)?,
                text: r.get(3)?,
                accepted_at_ms: r.get(4)?,
                starts: r.get(5)?,
                dead_at_ms: r.get(6)?,
                error: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Takes dead input `id` off the list: its record (to run again) — or `None` when
    /// no such dead input exists. With `discard`, the record is dropped for good.
    pub fn revive(&mut self, id: InboxId) -> Result<Option<InputRecord>, InboxError> {
        let tx = self.conn.transaction()?;
        let record = tx
            .query_row(
                "SELECT request_id, source, channel, text, level, no_memory, payload, principal
                 FROM inbox WHERE id = ?1 AND given_up_at_ms IS NOT NULL",
                [id.0],
                |r| {
                    let payload: String = r.get(6)?;
                    let level: Option<u8> = r.get(4)?;
                    Ok(InputRecord {
                        request_id: r.get(0)?,
                        source: r.get(1)?,
                        channel: r.get(2)?,
                        text: r.get(3)?,
                        level: level.and_then(Level::from_u8),
                        no_memory: r.get(5)?,
                        payload: super::input::Payload::parse(&payload),
                        principal: stored_principal(r.get::<_, Option<String>>(7)?.as_deref()),
                    })
                },
            )
            .optional()?;
        if record.is_some() {
            tx.execute("DELETE FROM inbox WHERE id = ?1", [id.0])?;
        }
        tx.commit()?;
        Ok(record)
    }

    /// Inputs waiting to run (not given up).
    pub fn pending_count(&self) -> Result<u64, InboxError> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM inbox WHERE given_up_at_ms IS NULL", [], |r| {
                r.get(0)
            })?)
    }
}

/// What the actor has gathered for its next transaction.
#[derive(Default)]
struct Batch {
    accepts: Vec<(InputRecord, oneshot::Sender<Result<InboxId, InboxError>>)>,
    started: Vec<InboxId>,
    ended: Vec<InboxId>,
    dead: Vec<(InboxId, String)>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.accepts.is_empty() && self.started.is_empty() && self.ended.is_empty() && self.dead.is_empty()
    }
}

/// `kernel/agent/inbox`: owns the [`InboxStore`], on the blocking arbiter.
pub struct InboxActor {
    store: InboxStore,
    batch: Batch,
    /// A flush is scheduled (it runs once the mailbox is drained).
    armed: bool,
}

impl InboxActor {
    pub fn new(store: InboxStore) -> Self {
        Self {
            store,
            batch: Batch::default(),
            armed: false,
        }
    }

    /// Schedules a flush after the messages already in the mailbox: actix drains the
    /// whole mailbox before it polls spawned futures, so everything that arrived while
    /// the previous commit was running joins this one.
    fn arm(&mut self, ctx: &mut HostContext<Self>) {
        if !self.armed {
            self.armed = true;
            ctx.spawn(actix::fut::ready(()).map(|(), host: &mut Host<Self>, _| host.inner().flush()));
        }
    }

    /// Commits the gathered batch and answers its accepts.
    fn flush(&mut self) {
        self.armed = false;
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let records: Vec<&InputRecord> = batch.accepts.iter().map(|(r, _)| r).collect();
        match self.store.write(&records, &batch.started, &batch.ended, &batch.dead) {
            Ok(ids) => {
                tracing::debug!(
                    accepted = ids.len(),
                    started = batch.started.len(),
                    ended = batch.ended.len(),
                    "inbox commit"
                );
                for ((_, tx), id) in batch.accepts.into_iter().zip(ids) {
                    let _ = tx.send(Ok(id));
                }
            }
            Err(e) => {
                tracing::error!(
                    accepts = batch.accepts.len(),
                    "inbox commit failed, inputs refused: {e}"
                );
                for (_, tx) in batch.accepts {
                    let _ = tx.send(Err(e.clone()));
                }
                // The bookkeeping of running inputs is retried alone: losing it would
                // run finished inputs again after a restart.
                if !(batch.started.is_empty() && batch.ended.is_empty() && batch.dead.is_empty())
                    && let Err(e) = self.store.write(&[], &batch.started, &batch.ended, &batch.dead)
                {
                    tracing::error!("inbox bookkeeping lost ({e}); finished inputs may run again after a restart");
                }
            }
        }
    }
}

impl KernelActor for InboxActor {
    const KIND: &'static str = "inbox";

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        self.flush();
    }
}

/// Stores an input; answers with its id once committed.
#[derive(Message)]
#[rtype(result = "Result<InboxId, InboxError>")]
pub struct Accept(pub InputRecord);

/// A stored principal; rows from before principals existed (or unreadable ones) come
/// back as guests: a replay must never widen what an input may do.
fn stored_principal(text: Option<&str>) -> crate::firewall::Principal {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| crate::firewall::Principal::plugin_guest("unknown"))
}

/// A stored input's task started.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Started(pub InboxId);

/// A stored input is finished for good (answered, failed, cancelled, dropped): delete it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Ended(pub InboxId);

/// A stored input's task failed for good: keep it on the dead-letter list with why.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Dead(pub InboxId, pub String);

/// The dead-letter list, newest first.
#[derive(Message)]
#[rtype(result = "Result<Vec<DeadInput>, InboxError>")]
pub struct ListDead(pub usize);

/// Takes a dead input off the list: its record, to run again or to drop.
#[derive(Message)]
#[rtype(result = "Result<Option<InputRecord>, InboxError>")]
pub struct Revive(pub InboxId);

/// At boot: the inputs left by the previous run (see [`InboxStore::take_pending`]).
#[derive(Message)]
#[rtype(result = "Result<Vec<StoredInput>, InboxError>")]
pub struct TakePending;

/// Counters of the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct InboxStats {
    /// Inputs waiting to run (not given up).
    pub pending: u64,
    /// Write transactions since the actor started.
    pub commits: u64,
}

/// The inbox's counters (after committing what is gathered).
#[derive(Message)]
#[rtype(result = "Result<InboxStats, InboxError>")]
pub struct GetStats;

impl Handles<Accept> for InboxActor {
    type Reply = ResponseFuture<Result<InboxId, InboxError>>;
    fn handle(&mut self, Accept(record): Accept, ctx: &mut HostContext<Self>) -> Self::Reply {
        let (tx, rx) = oneshot::channel();
        self.batch.accepts.push((record, tx));
        self.arm(ctx);
        Box::pin(async move { rx.await.unwrap_or(Err(InboxError::Closed)) })
    }
}

impl Handles<Started> for InboxActor {
    type Reply = ();
    fn handle(&mut self, Started(id): Started, ctx: &mut HostContext<Self>) {
        self.batch.started.push(id);
        self.arm(ctx);
    }
}

impl Handles<Ended> for InboxActor {
    type Reply = ();
    fn handle(&mut self, Ended(id): Ended, ctx: &mut HostContext<Self>) {
        self.batch.ended.push(id);
        self.arm(ctx);
    }
}

impl Handles<Dead> for InboxActor {
    type Reply = ();
    fn handle(&mut self, Dead(id, why): Dead, ctx: &mut HostContext<Self>) {
        self.batch.dead.push((id, why));
        self.arm(ctx);
    }
}

impl Handles<ListDead> for InboxActor {
    type Reply = Result<Vec<DeadInput>, InboxError>;
    fn handle(&mut self, ListDead(n): ListDead, _: &mut HostContext<Self>) -> Self::Reply {
        self.flush();
        self.store.dead(n)
    }
}

impl Handles<Revive> for InboxActor {
    type Reply = Result<Option<InputRecord>, InboxError>;
    fn handle(&mut self, Revive(id): Revive, _: &mut HostContext<Self>) -> Self::Reply {
        self.flush();
        self.store.revive(id)
    }
}

impl Handles<TakePending> for InboxActor {
    type Reply = Result<Vec<StoredInput>, InboxError>;
    fn handle(&mut self, _: TakePending, _: &mut HostContext<Self>) -> Self::Reply {
        self.flush();
        let replay = self.store.take_pending()?;
        for g in &replay.given_up {
            tracing::error!(
                input = %g.id, source = %g.record.source, starts = g.starts,
                "an input started {} times and the daemon died each time; it is given up (kept in DATA/inbox.db): {:?}",
                g.starts, g.record.text.chars().take(200).collect::<String>()
            );
        }
        Ok(replay.pending)
    }
}

impl Handles<GetStats> for InboxActor {
    type Reply = Result<InboxStats, InboxError>;
    fn handle(&mut self, _: GetStats, _: &mut HostContext<Self>) -> Self::Reply {
        self.flush();
        Ok(InboxStats {
            pending: self.store.pending_count()?,
            commits: self.store.commits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(text: &str) -> InputRecord {
        let mut i = crate::agent::Input::text("http", text);
        i.payload.other.insert("k".into(), serde_json::json!([1, 2]));
        i.payload.again = Some("req_1".into());
        i.record()
    }

    #[test]
    fn accepted_inputs_survive_a_reopen_until_they_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.db");
        let (a, b, mut c) = (record("a"), record("b"), record("c"));
        c.level = Some(Level::L3);
        let ids = {
            let mut s = InboxStore::open(&path).unwrap();
            let ids = s.write(&[&a, &b, &c], &[], &[], &[]).unwrap();
            assert_eq!(ids.len(), 3);
            assert!(ids[0] < ids[1] && ids[1] < ids[2], "ids in arrival order");
            s.write(&[], &[ids[0]], &[ids[1]], &[]).unwrap();
            ids
        };
        // "kill -9": the connection is simply gone; a new one sees the commits.
        let mut s = InboxStore::open(&path).unwrap();
        // Accepted by the new run before its replay: not part of it.
        s.write(&[&record("new")], &[], &[], &[]).unwrap();
        let replay = s.take_pending().unwrap();
        assert!(replay.given_up.is_empty());
        let got: Vec<_> = replay
            .pending
            .iter()
            .map(|p| (p.id, p.record.clone(), p.starts))
            .collect();
        assert_eq!(got, [(ids[0], a, 1), (ids[2], c, 0)]);
        assert_eq!(s.pending_count().unwrap(), 3);
        assert!(s.take_pending().unwrap().pending.is_empty(), "once per opening");
    }

    #[test]
    fn a_replay_keeps_the_principal_and_never_widens_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.db");
        let mut guest = record("from a chat");
        guest.principal = crate::firewall::Principal::plugin_guest("bridge");
        {
            let mut s = InboxStore::open(&path).unwrap();
            s.write(&[&guest, &record("owner")], &[], &[], &[]).unwrap();
            // A row written before principals existed.
            s.conn
                .execute(
                    "INSERT INTO inbox (request_id, source, channel, text, accepted_at_ms) VALUES ('old', 'x', 'x', 'legacy', 0)",
                    [],
                )
                .unwrap();
        }
        let replay = InboxStore::open(&path).unwrap().take_pending().unwrap();
        let got: Vec<_> = replay.pending.iter().map(|p| p.record.principal.clone()).collect();
        assert_eq!(got[0], guest.principal);
        assert!(got[1].is_owner());
        assert!(!got[2].is_owner(), "a legacy row replays as a guest");
    }

    #[test]
    fn a_failed_input_waits_on_the_dead_letter_list_until_retried_or_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.db");
        let (a, b) = (record("vendor down"), record("other"));
        {
            let mut s = InboxStore::open(&path).unwrap();
            let ids = s.write(&[&a, &b], &[], &[], &[]).unwrap();
            s.write(&[], &[], &[], &[(ids[0], "all LLM sources failed: 503".into())])
                .unwrap();
            s.write(&[], &[], &[], &[(ids[1], "also failed".into())]).unwrap();
        }
        let mut s = InboxStore::open(&path).unwrap();
        assert!(
            s.take_pending().unwrap().pending.is_empty(),
            "dead inputs are not replayed"
        );
        let dead = s.dead(10).unwrap();
        assert_eq!(dead.len(), 2);
        assert_eq!(
            (dead[1].text.as_str(), dead[1].error.as_str()),
            ("vendor down", "all LLM sources failed: 503")
        );
        let revived = s.revive(dead[1].id).unwrap().expect("on the list");
        assert_eq!(revived.text, "vendor down");
        assert_eq!(s.revive(dead[1].id).unwrap(), None, "taken off once");
        assert_eq!(s.dead(10).unwrap().len(), 1);
        assert_eq!(s.pending_count().unwrap(), 0);
    }

    #[test]
    fn an_input_that_keeps_killing_the_daemon_is_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.db");
        let r = record("poison");
        let ids = InboxStore::open(&path)
            .unwrap()
            .write(&[&r, &record("fine")], &[], &[], &[])
            .unwrap();
        for _ in 0..MAX_STARTS {
            // A boot: replay, the poison starts, the daemon dies.
            let mut s = InboxStore::open(&path).unwrap();
            assert_eq!(s.take_pending().unwrap().pending.len(), 2);
            s.write(&[], &[ids[0]], &[], &[]).unwrap();
        }
        let replay = InboxStore::open(&path).unwrap().take_pending().unwrap();
        assert_eq!(replay.given_up.len(), 1);
        assert_eq!(replay.given_up[0].record, r);
        assert_eq!(replay.pending.len(), 1);
        let again = InboxStore::open(&path).unwrap().take_pending().unwrap();
        assert!(again.given_up.is_empty(), "given up once, then left alone");
        assert_eq!(again.pending.len(), 1);
    }

    #[test]
    fn a_failed_batch_stores_nothing() {
        let mut s = InboxStore::open_in_memory().unwrap();
        s.conn
            .execute_batch("CREATE TRIGGER no_b BEFORE INSERT ON inbox WHEN NEW.text = 'b' BEGIN SELECT RAISE(ABORT, 'disk full'); END;")
            .unwrap();
        let err = s.write(&[&record("a"), &record("b")], &[], &[], &[]).unwrap_err();
        assert!(err.to_string().contains("check disk space"), "{err}");
        assert_eq!(s.pending_count().unwrap(), 0, "all or nothing");
    }

    #[actix_rt::test]
    async fn the_actor_group_commits_a_burst_and_answers_each_accept_with_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inbox.db");
        let store = InboxStore::open(&path).unwrap();
        let registry = std::sync::Arc::new(crate::Registry::new(std::time::Duration::from_secs(5)));
        let (addr, _exit) =
            crate::TAddr::spawn_unsupervised(&registry, "test", "inbox", InboxActor::new(store)).unwrap();
        let sends: Vec<_> = (0..200).map(|i| addr.send(Accept(record(&format!("m{i}"))))).collect();
        let ids: Vec<InboxId> = futures_util::future::join_all(sends)
            .await
            .into_iter()
            .map(|r| r.unwrap().unwrap())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 200, "one id each");
        let stats = addr.send(GetStats).await.unwrap().unwrap();
        assert!(
            stats.commits < 20,
            "200 accepts sent together share transactions ({} commits)",
            stats.commits
        );
        addr.do_send(Ended(ids[0])).unwrap();
        addr.do_send(Started(ids[1])).unwrap();
        assert_eq!(addr.send(GetStats).await.unwrap().unwrap().pending, 199);
        assert!(
            addr.send(TakePending).await.unwrap().unwrap().is_empty(),
            "this run's inputs are not replayed into it"
        );
        let mut reopened = InboxStore::open(&path).unwrap();
        let pending = reopened.take_pending().unwrap().pending;
        assert_eq!(pending.len(), 199);
        assert_eq!(pending[0].id, ids[1]);
        assert_eq!(pending[0].starts, 1);
        assert_eq!(pending[0].record.text, "m1");
    }
}
