//! Executing an import plan ([`crate::memory::context::import`]) against the memory actors.
//!
//! For each batch of the plan: the context actor stores the turns as events at their
//! own times, in one transaction, skipping digests imported before
//! ([`ImportEvents`]); the text log gets their lines ([`LogTexts`]); and where the plan
//! says the distill heartbeat would have fired, the same distill round the heartbeat
//! runs is run ([`DistillContext`]: an oversized window is pruned into documents).
//! At the end the rule distiller distils the imported turns into the graph
//! ([`DistillRecords`]). Progress is logged and published on the bus as
//! [`bus::Event::MemoryImport`] after every batch.
//!
//! A failure stops the import where it is: what earlier batches committed stays
//! imported, and sending the same body again imports the rest (their digests skip the
//! lines already stored).

use std::time::{Duration, Instant};

use crate::addr::TAddr;
use crate::bus::{self, EventBus};
use crate::config::{AgentConfig, ConfigActor, HeartbeatConfig, ReadSettings};
use crate::memory::context::actor::{ContextActor, DistillContext, ImportEvents};
use crate::memory::context::import::{self, ImportLine};
use crate::memory::lifecycle::distiller::{DistillRecords, RuleDistiller};
use crate::memory::textlog::{LogTexts, TextLogActor};

/// How often a long import logs its progress at `info`.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// The outcome of an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportReport {
    /// Lines that became remembered turns.
    pub imported: usize,
    /// Lines imported before (same time, speaker and text), left alone.
    pub skipped: usize,
    /// Events the import's distill rounds moved from the window into documents.
    pub archived: usize,
    /// Facts the rule distiller committed to the graph from the imported turns.
    pub facts: usize,
}

/// Why an import stopped. `done` lines were committed before it did.
#[derive(Debug, thiserror::Error)]
pub enum ImportRunError {
    #[error(
        "the memory is not available ({reason}); {done} lines were imported before it failed, send the body again to import the rest"
    )]
    Unavailable { reason: String, done: usize },
    #[error(
        "the memory store failed ({reason}); {done} lines were imported before it failed, send the body again to import the rest"
    )]
    Store { reason: String, done: usize },
    #[error("cannot read the settings ({0}); retry, or see GET /api/v1/actors for kernel/config")]
    Settings(String),
}

/// The actors an import writes to.
#[derive(Clone)]
pub struct Importer {
    pub context: TAddr<ContextActor>,
    pub textlog: TAddr<TextLogActor>,
    /// The rule distiller (none: the graph is not distilled).
    pub distiller: Option<TAddr<RuleDistiller>>,
    pub config: TAddr<ConfigActor>,
    pub bus: EventBus,
}

impl Importer {
    /// Imports validated lines (see [`import::decode`]).
    pub async fn run(&self, lines: Vec<ImportLine>) -> Result<ImportReport, ImportRunError> {
        let settings = self
            .config
            .send(ReadSettings)
            .await
            .map_err(|e| ImportRunError::Settings(e.to_string()))?
            .map_err(|e| ImportRunError::Settings(e.to_string()))?;
        let max_context_size = AgentConfig::read(&settings).max_context_size;
        let distill_every = HeartbeatConfig::read(&settings).distill_interval;
        let batches = import::plan(&lines, distill_every);
        let total = lines.len();
        tracing::info!(
            lines = total,
            batches = batches.len(),
            ?distill_every,
            max_context_size,
            "history import started"
        );
        let started = Instant::now();
        let mut last_log = started;
        let mut report = ImportReport::default();
        let mut done = 0;
        let mut records = Vec::new();
        let mut slots: Vec<Option<ImportLine>> = lines.into_iter().map(Some).collect();
        for b in batches {
            let chunk: Vec<ImportLine> = b.lines.iter().filter_map(|&i| slots[i].take()).collect();
            let n = chunk.len();
            let result = self.batch(chunk, b.distill_after, max_context_size).await;
            let (stored, archived) = match result {
                Ok(ok) => ok,
                Err(e) => {
                    let e = e.at(done);
                    self.publish(done, total, &report, Some(e.to_string()));
                    tracing::warn!(done, total, "history import stopped: {e}");
                    return Err(e);
                }
            };
            done += n;
            report.imported += stored.events.len();
            report.skipped += stored.skipped;
            report.archived += archived;
            records.extend(stored.events.iter().map(import::text_event));
            self.publish_progress(done, total, &report);
            if last_log.elapsed() >= LOG_EVERY {
                last_log = Instant::now();
                tracing::info!(
                    done,
                    total,
                    imported = report.imported,
                    skipped = report.skipped,
                    "history import progress"
                );
            }
        }
        if let Some(d) = &self.distiller
            && !records.is_empty()
        {
            match d.send(DistillRecords(records)).await {
                Ok(round) => {
                    report.facts = round.relations;
                    if let Some(e) = round.error {
                        tracing::warn!("the imported turns were stored but not all distilled into the graph: {e}");
                    }
                }
                Err(e) => tracing::warn!("the imported turns were stored but not distilled into the graph: {e}"),
            }
        }
        self.publish(done, total, &report, None);
        tracing::info!(
            imported = report.imported,
            skipped = report.skipped,
            archived = report.archived,
            facts = report.facts,
            ms = started.elapsed().as_millis() as u64,
            "history import finished"
        );
        Ok(report)
    }

    /// One batch: store, log, and distill when a heartbeat tick follows it.
    async fn batch(
        &self,
        chunk: Vec<ImportLine>,
        distill_after: bool,
        max_context_size: usize,
    ) -> Result<(crate::memory::store::ImportedBatch, usize), BatchError> {
        let stored = self
            .context
            .send(ImportEvents(chunk))
            .await
            .map_err(|e| BatchError::Unavailable(e.to_string()))?
            .map_err(|e| BatchError::Store(e.to_string()))?;
        if !stored.events.is_empty() {
            let lines = stored.events.iter().map(import::text_event).collect();
            self.textlog
                .send(LogTexts(lines))
                .await
                .map_err(|e| BatchError::Unavailable(e.to_string()))?
                .map_err(|e| BatchError::Store(e.to_string()))?;
        }
        let archived = if distill_after {
            self.context
                .send(DistillContext { max_context_size })
                .await
                .map_err(|e| BatchError::Unavailable(e.to_string()))?
                .map_err(|e| BatchError::Store(e.to_string()))?
        } else {
            0
        };
        Ok((stored, archived))
    }

    fn publish_progress(&self, done: usize, total: usize, r: &ImportReport) {
        self.bus.publish(bus::Event::MemoryImport {
            done,
            total,
            imported: r.imported,
            skipped: r.skipped,
            archived: r.archived,
            finished: false,
            error: None,
        });
    }

    fn publish(&self, done: usize, total: usize, r: &ImportReport, error: Option<String>) {
        self.bus.publish(bus::Event::MemoryImport {
            done,
            total,
            imported: r.imported,
            skipped: r.skipped,
            archived: r.archived,
            finished: true,
            error,
        });
    }
}

/// A batch's failure, before it knows how far the import got.
enum BatchError {
    Unavailable(String),
    Store(String),
}

impl BatchError {
    fn at(self, done: usize) -> ImportRunError {
        match self {
            Self::Unavailable(reason) => ImportRunError::Unavailable { reason, done },
            Self::Store(reason) => ImportRunError::Store { reason, done },
        }
    }
}
