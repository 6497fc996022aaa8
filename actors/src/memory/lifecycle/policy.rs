//! The lifecycle's policy as a plain core: what a maintenance round may do, given the
//! time and what was spent today. Typed in (`decide(kind, now)`, `handed(now, n)`),
//! typed out ([`Decision`]); no actix, no I/O, unit-tested below. The heartbeat actors
//! (`graph_heartbeat`) only execute the decisions.
//!
//! The rules, and why:
//! * **Archive** looks for documents not read for [`COLD_AGE_MS`], read at most
//!   [`COLD_MAX_ACCESS`] times and not archived before, at most [`ARCHIVE_PER_ROUND`] a
//!   round. Coldness is by *last access* (spec subsystems §1.5 `FindColdDocs`), and every prompt
//!   that shows a document's passage is an access, so what the owner keeps coming back
//!   to stays a document only. Archiving keeps the document: nothing here deletes.
//! * **Merge and review** hand the model tasks, and each task is a model call the owner
//!   pays for: together they hand out at most `core.agent.maintenance_daily_tasks` a day
//!   (UTC days of the kernel clock), at most [`PER_ROUND`] a round. What is proposed at
//!   all is decided by the graph (a pair once until it changes, a relation once), so a
//!   graph without new material costs nothing whatever the budget.

use serde::Serialize;

/// Documents not read for this long are cold (if rarely read).
pub const COLD_AGE_MS: i64 = 72 * 3600 * 1000;
/// Documents read more often than this are not distilled into the graph.
pub const COLD_MAX_ACCESS: i64 = 2;
/// Cold documents distilled per archive round (the rest wait for the next round).
pub const ARCHIVE_PER_ROUND: usize = 100;
/// Merge or review tasks per round at most.
pub const PER_ROUND: usize = 5;

/// Which maintenance a heartbeat does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Maintenance {
    /// Similar entities → `memory_merge` tasks.
    Merge,
    /// Relations with their sentence → `memory_edit` review tasks.
    Review,
    /// Cold documents (idle ≥ 72 h, read ≤ 2 times) → graph facts (documents kept).
    Archive,
}

impl Maintenance {
    /// Its name in the API (`/heartbeats/{name}/run`) and in the clock's reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Merge => "merge",
            Self::Review => "review",
            Self::Archive => "archive",
        }
    }
}

/// What a round is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Distil the documents not read since `idle_before_ms`, read at most `max_access`
    /// times and not archived yet, at most `limit` of them.
    FindCold {
        idle_before_ms: i64,
        max_access: i64,
        limit: usize,
    },
    /// Ask the graph for at most `limit` proposals and hand them to the model.
    Propose { limit: usize },
    /// Nothing this round.
    Skip(Skip),
}

/// Why a round does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Today's model tasks are spent (or the budget is 0).
    BudgetSpent,
}

/// The policy with its one piece of state: what was spent today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    daily_tasks: usize,
    day: i64,
    used: usize,
}

impl Policy {
    /// A policy allowing `daily_tasks` model tasks a day.
    pub fn new(daily_tasks: usize) -> Self {
        Self {
            daily_tasks,
            day: i64::MIN,
            used: 0,
        }
    }

    /// A changed `core.agent.maintenance_daily_tasks`: applies at once (what was spent
    /// today stays spent).
    pub fn set_daily_tasks(&mut self, n: usize) {
        self.daily_tasks = n;
    }

    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(86_400_000);
        if day != self.day {
            self.day = day;
            self.used = 0;
        }
    }

    /// What a round of `kind` starting at `now_ms` is to do.
    pub fn decide(&mut self, kind: Maintenance, now_ms: i64) -> Decision {
        match kind {
            Maintenance::Archive => Decision::FindCold {
                idle_before_ms: now_ms - COLD_AGE_MS,
                max_access: COLD_MAX_ACCESS,
                limit: ARCHIVE_PER_ROUND,
            },
            Maintenance::Merge | Maintenance::Review => {
                self.roll(now_ms);
                match self.daily_tasks.saturating_sub(self.used).min(PER_ROUND) {
                    0 => Decision::Skip(Skip::BudgetSpent),
                    limit => Decision::Propose { limit },
                }
            }
        }
    }

    /// `n` tasks were handed to the model at `now_ms`.
    pub fn handed(&mut self, now_ms: i64, n: usize) {
        self.roll(now_ms);
        self.used += n;
    }

    /// (daily tasks, used today) as of `now_ms`, for the status API.
    pub fn budget(&mut self, now_ms: i64) -> (usize, usize) {
        self.roll(now_ms);
        (self.daily_tasks, self.used)
    }
}

/// The policy shared by the merge, review and archive heartbeats (and the settings
/// follower that changes the budget).
pub type PolicyCell = std::sync::Arc<parking_lot::Mutex<Policy>>;

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn archive_looks_for_documents_idle_three_days_and_rarely_read() {
        let mut p = Policy::new(0);
        assert_eq!(
            p.decide(Maintenance::Archive, 10 * DAY),
            Decision::FindCold {
                idle_before_ms: 10 * DAY - COLD_AGE_MS,
                max_access: 2,
                limit: ARCHIVE_PER_ROUND
            },
            "a zero task budget does not stop archiving: it asks no model"
        );
    }

    #[test]
    fn merge_and_review_share_a_daily_budget_renewed_each_day() {
        let mut p = Policy::new(7);
        assert_eq!(
            p.decide(Maintenance::Merge, 10 * DAY),
            Decision::Propose { limit: PER_ROUND }
        );
        p.handed(10 * DAY + 1, 5);
        assert_eq!(
            p.decide(Maintenance::Review, 10 * DAY + 2),
            Decision::Propose { limit: 2 }
        );
        p.handed(10 * DAY + 3, 2);
        assert_eq!(
            p.decide(Maintenance::Merge, 11 * DAY - 1),
            Decision::Skip(Skip::BudgetSpent),
            "spent for today"
        );
        assert_eq!(
            p.decide(Maintenance::Merge, 11 * DAY),
            Decision::Propose { limit: PER_ROUND },
            "a new day"
        );
        p.handed(11 * DAY, 4);
        p.set_daily_tasks(2);
        assert_eq!(
            p.decide(Maintenance::Review, 11 * DAY + 5),
            Decision::Skip(Skip::BudgetSpent),
            "a lower budget applies at once"
        );
        assert_eq!(p.budget(11 * DAY + 5), (2, 4));
        assert_eq!(
            Policy::new(0).decide(Maintenance::Merge, 0),
            Decision::Skip(Skip::BudgetSpent)
        );
    }
}
