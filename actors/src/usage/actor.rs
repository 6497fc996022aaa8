//! `kernel/llm/usage`: the ledger's shell on the blocking arbiter.

use actix::prelude::*;

use super::ledger::{Call, Kind};
use super::store::{GroupBy, UsageError, UsageRow, UsageStore};
use crate::host::{Handles, HostContext, KernelActor};

/// Owns the [`UsageStore`].
pub struct UsageActor {
    store: UsageStore,
}

impl UsageActor {
    pub fn new(store: UsageStore) -> Self {
        Self { store }
    }
}

impl KernelActor for UsageActor {
    const KIND: &'static str = "usage";
}

/// A call that answered (the LLM actor's report; a lost report is logged, never the
/// call's failure).
#[derive(Message)]
#[rtype(result = "()")]
pub struct RecordCall(pub Call);

impl Handles<RecordCall> for UsageActor {
    type Reply = ();
    fn handle(&mut self, RecordCall(call): RecordCall, _: &mut HostContext<Self>) {
        if let Err(e) = self.store.insert(&[call]) {
            tracing::warn!("a model call was not recorded in the usage ledger: {e}");
        }
    }
}

/// What the budget's periods around `now_ms` spent so far ([`UsageStore::spent`]).
#[derive(Message)]
#[rtype(result = "Result<super::budget::Spent, UsageError>")]
pub struct GetSpent {
    pub now_ms: i64,
}

impl Handles<GetSpent> for UsageActor {
    type Reply = Result<super::budget::Spent, UsageError>;
    fn handle(&mut self, m: GetSpent, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.spent(m.now_ms)
    }
}

/// A summary of `[from_ms, to_ms)` (see [`UsageStore::summary`]).
#[derive(Message)]
#[rtype(result = "Result<(Vec<UsageRow>, UsageRow), UsageError>")]
pub struct GetUsage {
    pub from_ms: i64,
    pub to_ms: i64,
    pub by: GroupBy,
    pub kind: Option<Kind>,
}

impl Handles<GetUsage> for UsageActor {
    type Reply = Result<(Vec<UsageRow>, UsageRow), UsageError>;
    fn handle(&mut self, m: GetUsage, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.summary(m.from_ms, m.to_ms, m.by, m.kind)
    }
}
