//! The ledger's table (`DATA/usage.db`) and its summaries.

use std::path::Path;

use rusqlite::{Connection, params};
use rusqlite_migration::{M, Migrations};
use serde::Serialize;

use super::ledger::{Call, Kind};

/// Why the ledger failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("usage database error: {0}; check disk space and permissions of DATA/usage.db")]
    Sql(String),
    #[error("usage database migration failed: {0}; the file may be from a newer homed")]
    Migration(String),
}

impl From<rusqlite::Error> for UsageError {
    fn from(e: rusqlite::Error) -> Self {
        UsageError::Sql(e.to_string())
    }
}

/// How a summary groups the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The UTC day (`YYYY-MM-DD`).
    #[default]
    Day,
    Source,
    Model,
    Kind,
    Principal,
}

impl GroupBy {
    /// The SQL expression of the group's key (fixed strings only: no input reaches SQL).
    fn key_sql(self) -> &'static str {
        match self {
            GroupBy::Day => "strftime('%Y-%m-%d', ts_ms / 1000, 'unixepoch')",
            GroupBy::Source => "source",
            GroupBy::Model => "model",
            GroupBy::Kind => "kind",
            GroupBy::Principal => "principal",
        }
    }
}

/// One group of a summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    /// The day, source, model, kind or principal (`""`: the owner).
    pub key: String,
    pub calls: u64,
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    /// Calls whose tokens the daemon counted because the vendor reported none.
    pub estimated_calls: u64,
    /// Dollars, for the calls with a price.
    pub cost_usd: f64,
    /// Calls without a price (their cost is not in `cost_usd`).
    pub unpriced_calls: u64,
}

pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![M::up(include_str!("../../../migrations/usage/0001_init.sql"))])
}

/// The ledger's table.
pub struct UsageStore {
    conn: Connection,
}

impl UsageStore {
    pub fn open(path: &Path) -> Result<Self, UsageError> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::migrated(conn)
    }

    pub fn open_in_memory() -> Result<Self, UsageError> {
        Self::migrated(Connection::open_in_memory()?)
    }

    fn migrated(mut conn: Connection) -> Result<Self, UsageError> {
        migrations()
            .to_latest(&mut conn)
            .map_err(|e| UsageError::Migration(e.to_string()))?;
        Ok(Self { conn })
    }

    /// Appends calls in one transaction.
    pub fn insert(&mut self, calls: &[Call]) -> Result<(), UsageError> {
        let tx = self.conn.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO calls (ts_ms, source, model, kind, principal, input, output, cached, estimated, cost_micros)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for c in calls {
                st.execute(params![
                    c.ts_ms,
                    c.source,
                    c.model,
                    c.kind.as_str(),
                    c.principal,
                    c.input as i64,
                    c.output as i64,
                    c.cached as i64,
                    c.estimated,
                    c.cost_micros,
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// What each scope of the budget spent so far in the periods around `now_ms` (the
    /// UTC day and month; tokens in and out, and dollars of the priced calls): every
    /// call, background work, each guest, each source. Read at start, so a restart does
    /// not hand a period's budget out again.
    pub fn spent(&self, now_ms: i64) -> Result<super::budget::Spent, UsageError> {
        use super::budget::{Scope, Totals};
        const DAY_MS: i64 = 86_400_000;
        let day = now_ms.div_euclid(DAY_MS) * DAY_MS;
        let (_, month, next_month) = super::budget::month_of(now_ms);
        let mut by_scope: std::collections::HashMap<Scope, Totals> = Default::default();
        let micros = |r: &UsageRow| (r.cost_usd * 1e6).round().max(0.0) as u64;
        for (from, today) in [(day, true), (month, false)] {
            let to = if today { day + DAY_MS } else { next_month };
            let mut add = |scope: Scope, r: &UsageRow| {
                let t = by_scope.entry(scope).or_default();
                let (tokens, m) = (r.input + r.output, micros(r));
                if today {
                    t.day_tokens += tokens;
                    t.day_micros += m;
                } else {
                    t.month_tokens += tokens;
                    t.month_micros += m;
                }
            };
            let (kinds, all) = self.summary(from, to, GroupBy::Kind, None)?;
            add(Scope::All, &all);
            for r in kinds
                .iter()
                .filter(|r| Kind::named(&r.key).is_some_and(Kind::is_background))
            {
                add(Scope::Background, r);
            }
            for r in self.summary(from, to, GroupBy::Principal, None)?.0 {
                if !r.key.is_empty() {
                    add(Scope::Guest(r.key.clone()), &r);
                }
            }
            for r in self.summary(from, to, GroupBy::Source, None)?.0 {
                add(Scope::Source(r.key.clone()), &r);
            }
        }
        Ok(super::budget::Spent { by_scope })
    }

    /// The calls in `[from_ms, to_ms)` grouped by `by`, ordered by key, and their total
    /// (key `""`). `kind` keeps only calls of that kind.
    pub fn summary(
        &self,
        from_ms: i64,
        to_ms: i64,
        by: GroupBy,
        kind: Option<Kind>,
    ) -> Result<(Vec<UsageRow>, UsageRow), UsageError> {
        let sql = format!(
            "SELECT {key}, count(*), sum(input), sum(output), sum(cached), sum(estimated),
                    coalesce(sum(cost_micros), 0), sum(cost_micros IS NULL)
             FROM calls WHERE ts_ms >= ?1 AND ts_ms < ?2 AND (?3 IS NULL OR kind = ?3)
             GROUP BY 1 ORDER BY 1",
            key = by.key_sql()
        );
        let mut st = self.conn.prepare(&sql)?;
        let kind = kind.map(Kind::as_str);
        let rows = st
            .query_map(params![from_ms, to_ms, kind], |r| {
                Ok(UsageRow {
                    key: r.get(0)?,
                    calls: r.get::<_, i64>(1)? as u64,
                    input: r.get::<_, i64>(2)? as u64,
                    output: r.get::<_, i64>(3)? as u64,
                    cached: r.get::<_, i64>(4)? as u64,
                    estimated_calls: r.get::<_, i64>(5)? as u64,
                    cost_usd: r.get::<_, i64>(6)? as f64 / 1e6,
                    unpriced_calls: r.get::<_, i64>(7)? as u64,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut total = UsageRow {
            key: String::new(),
            calls: 0,
            input: 0,
            output: 0,
            cached: 0,
            estimated_calls: 0,
            cost_usd: 0.0,
            unpriced_calls: 0,
        };
        for r in &rows {
            total.calls += r.calls;
            total.input += r.input;
            total.output += r.output;
            total.cached += r.cached;
            total.estimated_calls += r.estimated_calls;
            total.cost_usd += r.cost_usd;
            total.unpriced_calls += r.unpriced_calls;
        }
        Ok((rows, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(ts_ms: i64, source: &str, kind: Kind, input: u64, cost: Option<i64>) -> Call {
        Call {
            ts_ms,
            source: source.into(),
            model: "m".into(),
            kind,
            principal: String::new(),
            input,
            output: 10,
            cached: 0,
            estimated: cost.is_none(),
            cost_micros: cost,
        }
    }

    #[test]
    fn calls_are_summed_by_day_source_and_kind() {
        const DAY: i64 = 86_400_000;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.db");
        {
            let mut s = UsageStore::open(&path).unwrap();
            s.insert(&[
                call(0, "a", Kind::OwnerTurn, 100, Some(1_500_000)),
                call(1_000, "b", Kind::Heartbeat, 50, None),
                call(DAY + 5, "a", Kind::OwnerTurn, 200, Some(500_000)),
            ])
            .unwrap();
        }
        let s = UsageStore::open(&path).unwrap();
        let (days, total) = s.summary(0, 2 * DAY, GroupBy::Day, None).unwrap();
        assert_eq!(
            days.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
            ["1970-01-01", "1970-01-02"]
        );
        assert_eq!((days[0].calls, days[0].input, days[0].unpriced_calls), (2, 150, 1));
        assert_eq!((total.calls, total.input, total.output), (3, 350, 30));
        assert!((total.cost_usd - 2.0).abs() < 1e-9, "{total:?}");
        let (sources, _) = s.summary(0, 2 * DAY, GroupBy::Source, None).unwrap();
        assert_eq!((sources[0].key.as_str(), sources[0].calls), ("a", 2));
        let (beats, t) = s.summary(0, 2 * DAY, GroupBy::Kind, Some(Kind::Heartbeat)).unwrap();
        assert_eq!(
            (beats.len(), beats[0].key.as_str(), t.estimated_calls),
            (1, "heartbeat", 1)
        );
        let (none, t) = s.summary(2 * DAY, 3 * DAY, GroupBy::Day, None).unwrap();
        assert!(none.is_empty() && t.calls == 0);
    }

    #[test]
    fn a_restart_reads_each_scopes_day_and_month_from_the_ledger() {
        use crate::usage::budget::{Scope, Totals};
        const DAY: i64 = 86_400_000;
        // 2026-12-30T12:00Z; the 2nd of the month and the month before are read apart.
        let now = 1_798_632_000_000;
        let mut s = UsageStore::open_in_memory().unwrap();
        let mut guest = call(now - 1_000, "a", Kind::GuestTurn, 90, Some(3_000));
        guest.principal = "qq:1".into();
        s.insert(&[
            call(now - 100, "a", Kind::OwnerTurn, 100, Some(1_000)),
            call(now - 200, "b", Kind::Heartbeat, 40, None),
            guest,
            call(now - 28 * DAY, "a", Kind::OwnerTurn, 1_000, Some(10_000)),
            call(now - 40 * DAY, "a", Kind::OwnerTurn, 99_999, Some(99_999)),
        ])
        .unwrap();
        let spent = s.spent(now).unwrap().by_scope;
        let t = |scope: Scope| spent.get(&scope).copied().unwrap_or_default();
        assert_eq!(
            t(Scope::All),
            Totals {
                day_tokens: 110 + 50 + 100,
                month_tokens: 110 + 50 + 100 + 1_010,
                day_micros: 4_000,
                month_micros: 14_000,
            }
        );
        assert_eq!(
            (t(Scope::Background).day_tokens, t(Scope::Background).day_micros),
            (50, 0)
        );
        assert_eq!(t(Scope::Guest("qq:1".into())).month_micros, 3_000);
        assert_eq!(t(Scope::Source("a".into())).month_tokens, 110 + 100 + 1_010);
        assert_eq!(t(Scope::Source("b".into())).day_tokens, 50);
    }
}
