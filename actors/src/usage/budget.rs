//! Budgets, enforced **before** a call: a call reserves what it may spend (its prompt
//! plus `max_tokens`, and that worst case's price at the source it tries), settles to
//! what it did spend, or releases the reservation when it failed. Reservations count
//! against every limit that applies while calls are in flight, so however many run at
//! once no period's spending passes its limit.
//!
//! The limits form a matrix: a **scope** (every call, the background work, each guest,
//! each source) × a **period** (the UTC day, the UTC calendar month) × a **unit**
//! (tokens, money). Each cell is one setting, named from its coordinates
//! ([`Exhausted::setting`]): `core.llm.budget.[background_|guest_]{daily,monthly}_{tokens,usd}`
//! and `core.llm.sources.<name>.{daily,monthly}_{tokens,usd}`.
//!
//! Two checks, because a call learns its source late. Before any vendor is asked, the
//! call's token limits that do not depend on the source (every call, background, the
//! guest) are reserved ([`Budgets::reserve`]): a spent day refuses the owner's turn
//! without a call reaching a vendor. Then each source in the fallback order is tried
//! under its own token limits and every money limit, priced at that source's model
//! ([`Budgets::reserve_attempt`]): a source whose worst case no longer fits is skipped
//! and the next (cheaper or local) one answers.
//!
//! Plain data: the LLM actor owns one [`Budgets`] and asks it on its own thread (no
//! lock, no await between check and reserve); the tests drive it directly.

use std::collections::{HashMap, HashSet};

use super::ledger::Kind;

const DAY_MS: i64 = 86_400_000;

/// Whom a limit is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Every call together.
    All,
    /// The background work (the heartbeats' model tasks, the residents' rounds).
    Background,
    /// One guest (a chat bridge's person who is not the owner); the limit is the same
    /// for each, the spending each one's own.
    Guest(String),
    /// One LLM source.
    Source(String),
}

impl Scope {
    /// The prefix of this scope's settings.
    fn setting_prefix(&self) -> String {
        match self {
            Scope::All => "core.llm.budget.".into(),
            Scope::Background => "core.llm.budget.background_".into(),
            Scope::Guest(_) => "core.llm.budget.guest_".into(),
            Scope::Source(name) => format!("core.llm.sources.{name}."),
        }
    }
}

/// A limit's period: the UTC day or the UTC calendar month (by the kernel's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    Day,
    Month,
}

/// What a limit counts: tokens (prompt and answer) or money (micro-dollars, priced
/// by `core.llm.prices`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Tokens,
    Micros,
}

/// The four cells of one scope, in the order the status lists them.
const CELLS: [(Period, Unit); 4] = [
    (Period::Day, Unit::Tokens),
    (Period::Month, Unit::Tokens),
    (Period::Day, Unit::Micros),
    (Period::Month, Unit::Micros),
];

fn cell_name(period: Period, unit: Unit) -> &'static str {
    match (period, unit) {
        (Period::Day, Unit::Tokens) => "daily_tokens",
        (Period::Month, Unit::Tokens) => "monthly_tokens",
        (Period::Day, Unit::Micros) => "daily_usd",
        (Period::Month, Unit::Micros) => "monthly_usd",
    }
}

/// One scope's limits (0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    pub daily_tokens: u64,
    pub monthly_tokens: u64,
    pub daily_micros: u64,
    pub monthly_micros: u64,
}

impl Caps {
    pub fn get(&self, period: Period, unit: Unit) -> u64 {
        match (period, unit) {
            (Period::Day, Unit::Tokens) => self.daily_tokens,
            (Period::Month, Unit::Tokens) => self.monthly_tokens,
            (Period::Day, Unit::Micros) => self.daily_micros,
            (Period::Month, Unit::Micros) => self.monthly_micros,
        }
    }

    fn any(&self, unit: Unit) -> bool {
        self.get(Period::Day, unit) > 0 || self.get(Period::Month, unit) > 0
    }

    pub fn is_empty(&self) -> bool {
        *self == Caps::default()
    }
}

/// The owner's limits (`core.llm.budget.*` and each source's own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Every call together.
    pub all: Caps,
    /// The background work.
    pub background: Caps,
    /// Each guest.
    pub guest: Caps,
    /// Each source's own (a source without limits is absent).
    pub sources: HashMap<String, Caps>,
}

impl Limits {
    fn caps(&self, scope: &Scope) -> Caps {
        match scope {
            Scope::All => self.all,
            Scope::Background => self.background,
            Scope::Guest(_) => self.guest,
            Scope::Source(name) => self.sources.get(name).copied().unwrap_or_default(),
        }
    }

    /// Whether a token limit checked before the source is known applies to a call of
    /// `kind` for `principal` (a prompt is counted for the reservation only then:
    /// counting costs the turn time).
    pub fn apply_to(&self, kind: Kind, principal: &str) -> bool {
        call_scopes(kind, principal)
            .iter()
            .any(|s| self.caps(s).any(Unit::Tokens))
    }
}

/// The scopes a call of `kind` for `principal` spends in, whatever its source.
fn call_scopes(kind: Kind, principal: &str) -> Vec<Scope> {
    let mut scopes = vec![Scope::All];
    if kind.is_background() {
        scopes.push(Scope::Background);
    }
    if !principal.is_empty() {
        scopes.push(Scope::Guest(principal.to_owned()));
    }
    scopes
}

/// A call the budget refused: which limit, what is spent, when it resets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhausted {
    pub scope: Scope,
    pub period: Period,
    pub unit: Unit,
    /// Tokens, or micro-dollars.
    pub limit: u64,
    /// Spent and reserved in the limit's period.
    pub spent: u64,
    /// What the refused call would have held (its worst case).
    pub asked: u64,
    pub now_ms: i64,
    /// When the period ends (the next UTC midnight or first of the month, by the
    /// kernel's clock).
    pub resets_at_ms: i64,
}

impl std::error::Error for Exhausted {}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (setting, resets_in_min) = (self.setting(), self.resets_in_min());
        let monthly = self.period == Period::Month;
        let text = match self.unit {
            Unit::Micros => crate::i18n::Msg::MoneyBudgetExhausted {
                setting: &setting,
                limit_usd: self.limit as f64 / 1e6,
                spent_usd: self.spent as f64 / 1e6,
                resets_in_min,
                monthly,
            }
            .text(),
            // Not spent, yet too small for this call: say so, not "spent".
            Unit::Tokens if self.spent < self.limit => crate::i18n::Msg::BudgetTooSmall {
                setting: &setting,
                limit: self.limit,
                spent: self.spent,
                asked: self.asked,
                resets_in_min,
                monthly,
            }
            .text(),
            Unit::Tokens => crate::i18n::Msg::BudgetExhausted {
                setting: &setting,
                limit: self.limit,
                spent: self.spent,
                resets_in_min,
                monthly,
            }
            .text(),
        };
        f.write_str(&text)
    }
}

impl Exhausted {
    /// The setting that holds the limit (what the owner raises).
    pub fn setting(&self) -> String {
        setting_of(&self.scope, self.period, self.unit)
    }

    fn resets_in_min(&self) -> i64 {
        ((self.resets_at_ms - self.now_ms) + 59_999) / 60_000
    }
}

/// The setting of one cell of the matrix.
pub fn setting_of(scope: &Scope, period: Period, unit: Unit) -> String {
    format!("{}{}", scope.setting_prefix(), cell_name(period, unit))
}

/// The UTC month of `ms`: its index (months since 1970-01), its first and the next
/// month's first millisecond.
pub(crate) fn month_of(ms: i64) -> (i64, i64, i64) {
    let date = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        .date();
    let index = i64::from(date.year() - 1970) * 12 + i64::from(u8::from(date.month())) - 1;
    let first = date.replace_day(1).unwrap_or(date);
    let next = match date.month() {
        time::Month::December => time::Date::from_calendar_date(date.year() + 1, time::Month::January, 1),
        m => time::Date::from_calendar_date(date.year(), m.next(), 1),
    };
    let ms_of = |d: time::Date| d.midnight().assume_utc().unix_timestamp() * 1000;
    (index, ms_of(first), next.map_or(i64::MAX, ms_of))
}

/// One scope's spending in the current day and month.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub day_tokens: u64,
    pub month_tokens: u64,
    pub day_micros: u64,
    pub month_micros: u64,
}

impl Totals {
    fn get(&self, period: Period, unit: Unit) -> u64 {
        match (period, unit) {
            (Period::Day, Unit::Tokens) => self.day_tokens,
            (Period::Month, Unit::Tokens) => self.month_tokens,
            (Period::Day, Unit::Micros) => self.day_micros,
            (Period::Month, Unit::Micros) => self.month_micros,
        }
    }

    fn add(&mut self, unit: Unit, amount: u64, today: bool, this_month: bool) {
        let (day, month) = match unit {
            Unit::Tokens => (&mut self.day_tokens, &mut self.month_tokens),
            Unit::Micros => (&mut self.day_micros, &mut self.month_micros),
        };
        if today {
            *day += amount;
        }
        if this_month {
            *month += amount;
        }
    }
}

/// What the ledger says each scope spent so far, for [`Budgets::seed`].
#[derive(Debug, Default, Clone)]
pub struct Spent {
    pub by_scope: HashMap<Scope, Totals>,
}

/// A held reservation (settle or release it exactly once).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a reservation is settled or released"]
pub struct Reservation(u64);

/// A held attempt on one source (settle or release it exactly once).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an attempt's reservation is settled or released"]
pub struct AttemptReservation(u64);

/// What one reservation holds, where, and in which periods.
#[derive(Debug)]
struct Hold {
    /// The scopes its tokens count in (a call's: every call, background, the guest;
    /// an attempt's: its source).
    token_scopes: Vec<Scope>,
    tokens: u64,
    /// The scopes its money counts in (an attempt's: the call's and the source).
    money_scopes: Vec<Scope>,
    micros: u64,
    day: i64,
    month: i64,
}

/// This period's spending and the reservations in flight.
#[derive(Debug, Default)]
pub struct Budgets {
    pub limits: Limits,
    day: i64,
    month: i64,
    spent: HashMap<Scope, Totals>,
    held: HashMap<u64, Hold>,
    next: u64,
    /// Limits the owner was told about (the cell and when it resets): once each.
    noticed: HashSet<(Scope, Period, Unit, i64)>,
}

/// One cell of the matrix as the status shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LimitRow {
    pub setting: String,
    /// `all`, `background`, `guest:<principal>` (`guest` before any guest spent),
    /// `source:<name>`.
    pub scope: String,
    pub period: Period,
    pub unit: Unit,
    /// Tokens, or dollars for money.
    pub limit: f64,
    pub spent: f64,
    /// Held by calls in flight.
    pub held: f64,
    pub resets_at_ms: i64,
}

impl Budgets {
    /// Starts the periods at `now_ms` with what the ledger says was spent so far.
    pub fn seed(&mut self, now_ms: i64, spent: Spent) {
        self.roll(now_ms);
        self.spent = spent.by_scope;
    }

    /// A new UTC day forgets yesterday's spending, a new month last month's. A call in
    /// flight across midnight still settles into the month it was reserved in.
    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(DAY_MS);
        if day == self.day {
            return;
        }
        self.day = day;
        let month = month_of(now_ms).0;
        let new_month = month != self.month;
        self.month = month;
        for t in self.spent.values_mut() {
            t.day_tokens = 0;
            t.day_micros = 0;
            if new_month {
                *t = Totals::default();
            }
        }
        self.spent.retain(|_, t| *t != Totals::default());
    }

    /// What the reservations in flight hold of `unit` in `scope` in this `period`.
    fn held_in(&self, scope: &Scope, period: Period, unit: Unit) -> u64 {
        self.held
            .values()
            .filter(|h| match period {
                Period::Day => h.day == self.day,
                Period::Month => h.month == self.month,
            })
            .map(|h| match unit {
                Unit::Tokens if h.token_scopes.contains(scope) => h.tokens,
                Unit::Micros if h.money_scopes.contains(scope) => h.micros,
                _ => 0,
            })
            .sum()
    }

    fn resets_at(&self, period: Period, now_ms: i64) -> i64 {
        match period {
            Period::Day => (self.day + 1) * DAY_MS,
            Period::Month => month_of(now_ms).2,
        }
    }

    /// Refuses when `amount` more of `unit` in `scope` would pass its day's or its
    /// month's limit (what is spent and what is held both count).
    fn check(&self, scope: &Scope, unit: Unit, amount: u64, now_ms: i64) -> Result<(), Exhausted> {
        let caps = self.limits.caps(scope);
        for period in [Period::Day, Period::Month] {
            let limit = caps.get(period, unit);
            if limit == 0 {
                continue;
            }
            let spent = self.spent.get(scope).map_or(0, |t| t.get(period, unit)) + self.held_in(scope, period, unit);
            if spent + amount > limit {
                return Err(Exhausted {
                    scope: scope.clone(),
                    period,
                    unit,
                    limit,
                    spent,
                    asked: amount,
                    now_ms,
                    resets_at_ms: self.resets_at(period, now_ms),
                });
            }
        }
        Ok(())
    }

    fn hold(&mut self, token_scopes: Vec<Scope>, tokens: u64, money_scopes: Vec<Scope>, micros: u64) -> u64 {
        self.next += 1;
        self.held.insert(
            self.next,
            Hold {
                token_scopes,
                tokens,
                money_scopes,
                micros,
                day: self.day,
                month: self.month,
            },
        );
        self.next
    }

    /// Turns a hold into spending in the periods it was reserved in (that are still
    /// current).
    fn spend(&mut self, id: u64, tokens: u64, micros: u64) {
        let Some(h) = self.held.remove(&id) else {
            return;
        };
        let (today, this_month) = (h.day == self.day, h.month == self.month);
        for s in h.token_scopes {
            self.spent
                .entry(s)
                .or_default()
                .add(Unit::Tokens, tokens, today, this_month);
        }
        for s in h.money_scopes {
            self.spent
                .entry(s)
                .or_default()
                .add(Unit::Micros, micros, today, this_month);
        }
    }

    /// Holds `tokens` for a call of `kind` for `principal` (empty: the owner or the
    /// kernel) under the token limits that do not depend on the source, or says which
    /// limit it would pass.
    pub fn reserve(&mut self, kind: Kind, principal: &str, tokens: u64, now_ms: i64) -> Result<Reservation, Exhausted> {
        self.roll(now_ms);
        let scopes = call_scopes(kind, principal);
        for s in &scopes {
            self.check(s, Unit::Tokens, tokens, now_ms)?;
        }
        Ok(Reservation(self.hold(scopes, tokens, Vec::new(), 0)))
    }

    /// The call is done: it spent `tokens` (what the vendor reported).
    pub fn settle(&mut self, r: Reservation, tokens: u64, now_ms: i64) {
        self.roll(now_ms);
        self.spend(r.0, tokens, 0);
    }

    /// The call failed before spending anything.
    pub fn release(&mut self, r: Reservation) {
        self.held.remove(&r.0);
    }

    /// Whether an attempt on `source` is checked at all: the source's own token limits
    /// or a money limit of any scope the call spends in applies (the prompt is counted
    /// only then).
    pub fn attempt_limited(&self, kind: Kind, principal: &str, source: &str) -> bool {
        let source = Scope::Source(source.to_owned());
        self.limits.caps(&source).any(Unit::Tokens)
            || call_scopes(kind, principal)
                .iter()
                .chain([&source])
                .any(|s| self.limits.caps(s).any(Unit::Micros))
    }

    /// Holds an attempt on `source` of at most `tokens` costing at most `micros` (its
    /// worst case at the source's price; `None`: unpriced, which a money limit cannot
    /// check and lets through). Refused when the source's own tokens or any money limit
    /// of the call's scopes would be passed: the caller moves on to the next source in
    /// the order, so a cheaper one answers while the budget still holds it.
    pub fn reserve_attempt(
        &mut self,
        kind: Kind,
        principal: &str,
        source: &str,
        tokens: u64,
        micros: Option<u64>,
        now_ms: i64,
    ) -> Result<AttemptReservation, Exhausted> {
        self.roll(now_ms);
        let src = Scope::Source(source.to_owned());
        self.check(&src, Unit::Tokens, tokens, now_ms)?;
        let mut money = call_scopes(kind, principal);
        money.push(src.clone());
        if let Some(m) = micros {
            for s in &money {
                self.check(s, Unit::Micros, m, now_ms)?;
            }
        }
        Ok(AttemptReservation(self.hold(
            vec![src],
            tokens,
            money,
            micros.unwrap_or(0),
        )))
    }

    /// The attempt answered: it spent `tokens` costing `micros` (0 when unpriced).
    pub fn settle_attempt(&mut self, r: AttemptReservation, tokens: u64, micros: u64, now_ms: i64) {
        self.roll(now_ms);
        self.spend(r.0, tokens, micros);
    }

    /// The attempt failed: nothing spent.
    pub fn release_attempt(&mut self, r: AttemptReservation) {
        self.held.remove(&r.0);
    }

    /// Whether the owner is yet to hear of this refusal's limit in its period (true
    /// once per cell, scope and period).
    pub fn first_notice(&mut self, e: &Exhausted) -> bool {
        self.noticed.insert((e.scope.clone(), e.period, e.unit, e.resets_at_ms))
    }

    /// `scope`'s spending of `unit` in the `period` around `now_ms` (0 when the budget
    /// has not seen that period yet: nothing was spent in it).
    fn current(&self, scope: &Scope, period: Period, unit: Unit, now_ms: i64) -> u64 {
        let current = match period {
            Period::Day => now_ms.div_euclid(DAY_MS) == self.day,
            Period::Month => month_of(now_ms).0 == self.month,
        };
        if current {
            self.spent.get(scope).map_or(0, |t| t.get(period, unit))
        } else {
            0
        }
    }

    /// Every call's tokens today: spent (settled) and held, for the API.
    pub fn today(&self, now_ms: i64) -> (u64, u64) {
        (
            self.current(&Scope::All, Period::Day, Unit::Tokens, now_ms),
            self.held_in(&Scope::All, Period::Day, Unit::Tokens),
        )
    }

    /// Every call's tokens this month (settled).
    pub fn this_month(&self, now_ms: i64) -> u64 {
        self.current(&Scope::All, Period::Month, Unit::Tokens, now_ms)
    }

    /// Micro-dollars every priced call cost today and this month (settled).
    pub fn money(&self, now_ms: i64) -> (u64, u64) {
        (
            self.current(&Scope::All, Period::Day, Unit::Micros, now_ms),
            self.current(&Scope::All, Period::Month, Unit::Micros, now_ms),
        )
    }

    /// Every limit that is set, with what its period spent and holds: one row per cell,
    /// a guest limit once per guest who spent in the period (once, empty, before any).
    pub fn rows(&self, now_ms: i64) -> Vec<LimitRow> {
        let mut scopes = vec![Scope::All, Scope::Background];
        let mut guests: Vec<&Scope> = self
            .spent
            .keys()
            .chain(self.held.values().flat_map(|h| h.token_scopes.iter()))
            .filter(|s| matches!(s, Scope::Guest(_)))
            .collect();
        guests.sort();
        guests.dedup();
        if guests.is_empty() {
            scopes.push(Scope::Guest(String::new()));
        } else {
            scopes.extend(guests.into_iter().cloned());
        }
        let mut sources: Vec<&String> = self.limits.sources.keys().collect();
        sources.sort();
        scopes.extend(sources.into_iter().map(|n| Scope::Source(n.clone())));
        let mut rows = Vec::new();
        for scope in scopes {
            let caps = self.limits.caps(&scope);
            for (period, unit) in CELLS {
                let limit = caps.get(period, unit);
                if limit == 0 {
                    continue;
                }
                let scale = match unit {
                    Unit::Tokens => 1.0,
                    Unit::Micros => 1e6,
                };
                let label = match &scope {
                    Scope::All => "all".to_owned(),
                    Scope::Background => "background".to_owned(),
                    Scope::Guest(g) if g.is_empty() => "guest".to_owned(),
                    Scope::Guest(g) => format!("guest:{g}"),
                    Scope::Source(n) => format!("source:{n}"),
                };
                rows.push(LimitRow {
                    setting: setting_of(&scope, period, unit),
                    scope: label,
                    period,
                    unit,
                    limit: limit as f64 / scale,
                    spent: self.current(&scope, period, unit, now_ms) as f64 / scale,
                    held: self.held_in(&scope, period, unit) as f64 / scale,
                    resets_at_ms: match period {
                        Period::Day => (now_ms.div_euclid(DAY_MS) + 1) * DAY_MS,
                        Period::Month => month_of(now_ms).2,
                    },
                });
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(limits: Limits) -> Budgets {
        Budgets {
            limits,
            ..Default::default()
        }
    }

    fn tokens(daily: u64, monthly: u64) -> Caps {
        Caps {
            daily_tokens: daily,
            monthly_tokens: monthly,
            ..Default::default()
        }
    }

    fn dollars(daily: u64, monthly: u64) -> Caps {
        Caps {
            daily_micros: daily,
            monthly_micros: monthly,
            ..Default::default()
        }
    }

    /// 2026-12-30T12:00Z, two days before a new month.
    const DEC30: i64 = 1_798_632_000_000;
    /// 2027-01-01T00:00Z.
    const JAN1: i64 = 1_798_761_600_000;

    #[test]
    fn a_thousand_concurrent_reservations_never_overshoot() {
        let mut b = with(Limits {
            all: tokens(100_000, 0),
            ..Default::default()
        });
        let now = 1_000;
        // 1,000 calls reserve 4,096 tokens each before any of them settles.
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..1_000 {
            match b.reserve(Kind::OwnerTurn, "", 4_096, now) {
                Ok(r) => held.push(r),
                Err(e) => {
                    assert_eq!((e.scope, e.period, e.unit), (Scope::All, Period::Day, Unit::Tokens));
                    refused += 1;
                }
            }
        }
        assert_eq!(held.len(), 100_000 / 4_096, "only what fits is held");
        assert_eq!(refused, 1_000 - held.len());
        // Each spends its whole reservation: the day ends at or under the limit.
        for r in held {
            b.settle(r, 4_096, now);
        }
        assert!(b.today(now).0 <= 100_000, "{:?}", b.today(now));
        assert_eq!(b.today(now).1, 0, "nothing held after settling");
    }

    #[test]
    fn a_thousand_concurrent_attempts_never_overshoot_any_cell() {
        // Every money and source cell at once, for a guest's background-free turn.
        let mut b = with(Limits {
            all: dollars(50_000, 60_000),
            guest: Caps {
                daily_tokens: 0,
                monthly_tokens: 0,
                daily_micros: 40_000,
                monthly_micros: 0,
            },
            sources: HashMap::from([("s".to_owned(), tokens(0, 30_000))]),
            ..Default::default()
        });
        let mut held = Vec::new();
        for _ in 0..1_000 {
            if let Ok(r) = b.reserve_attempt(Kind::GuestTurn, "qq:1", "s", 1_000, Some(1_500), 0) {
                held.push(r);
            }
        }
        // The guest's $0.04 a day holds 26 attempts at $0.0015; the source's 30,000
        // tokens would hold 30: the tighter cell wins.
        assert_eq!(held.len(), 26);
        for r in held {
            b.settle_attempt(r, 1_000, 1_500, 0);
        }
        let rows = b.rows(0);
        for r in &rows {
            assert!(r.spent <= r.limit, "{r:?}");
        }
        assert!(
            rows.iter()
                .any(|r| r.scope == "guest:qq:1" && r.setting == "core.llm.budget.guest_daily_usd" && r.spent == 0.039),
            "{rows:?}"
        );
    }

    #[test]
    fn background_work_has_its_own_limit_and_a_day_resets_both() {
        let mut b = with(Limits {
            all: tokens(10_000, 0),
            background: tokens(1_000, 0),
            ..Default::default()
        });
        let now = 5 * DAY_MS + 3_600_000;
        let r = b.reserve(Kind::Heartbeat, "", 800, now).unwrap();
        b.settle(r, 700, now);
        let e = b.reserve(Kind::Heartbeat, "", 400, now).unwrap_err();
        assert_eq!(
            (e.scope.clone(), e.spent, e.resets_at_ms),
            (Scope::Background, 700, 6 * DAY_MS)
        );
        assert!(e.to_string().contains("core.llm.budget.background_daily_tokens"), "{e}");
        assert!(e.to_string().contains("1380"), "{e}");
        // The owner's turn is not background work.
        let r = b.reserve(Kind::OwnerTurn, "", 5_000, now).unwrap();
        b.release(r);
        assert_eq!(b.today(now), (700, 0));
        // Tomorrow starts empty.
        assert!(b.reserve(Kind::Heartbeat, "", 900, 6 * DAY_MS).is_ok());
        // A failed call gives its reservation back.
        let mut c = with(Limits {
            all: tokens(1_000, 0),
            ..Default::default()
        });
        let r = c.reserve(Kind::OwnerTurn, "", 1_000, 0).unwrap();
        assert!(c.reserve(Kind::OwnerTurn, "", 1, 0).is_err());
        c.release(r);
        assert!(c.reserve(Kind::OwnerTurn, "", 1_000, 0).is_ok());
    }

    #[test]
    fn a_month_has_its_own_limit_and_resets_on_the_first() {
        let mut b = with(Limits {
            all: tokens(0, 10_000),
            ..Default::default()
        });
        b.seed(
            DEC30,
            Spent {
                by_scope: HashMap::from([(
                    Scope::All,
                    Totals {
                        month_tokens: 9_000,
                        ..Default::default()
                    },
                )]),
            },
        );
        let e = b.reserve(Kind::OwnerTurn, "", 2_000, DEC30).unwrap_err();
        assert_eq!((e.period, e.resets_at_ms), (Period::Month, JAN1));
        assert!(e.to_string().contains("core.llm.budget.monthly_tokens"), "{e}");
        // The next day is the same month: still refused; the 1st starts afresh.
        assert!(b.reserve(Kind::OwnerTurn, "", 2_000, DEC30 + DAY_MS).is_err());
        let r = b.reserve(Kind::OwnerTurn, "", 2_000, JAN1).unwrap();
        b.settle(r, 1_500, JAN1);
        assert_eq!(b.this_month(JAN1), 1_500);
    }

    #[test]
    fn a_call_in_flight_at_midnight_counts_in_the_month_it_was_reserved_in() {
        let mut b = with(Limits {
            all: tokens(0, 10_000),
            ..Default::default()
        });
        let r = b
            .reserve(Kind::OwnerTurn, "", 3_000, DEC30 + 11 * 3_600_000 + 59 * 60_000)
            .unwrap();
        // Answered after midnight, the same month.
        b.settle(r, 2_500, DEC30 + DAY_MS);
        assert_eq!(b.this_month(DEC30 + DAY_MS), 2_500);
        assert_eq!(b.today(DEC30 + DAY_MS).0, 0, "yesterday's call is not today's");
        // Reserved on the 31st, answered on the 1st: last month's, not this one's.
        let r = b.reserve(Kind::OwnerTurn, "", 3_000, JAN1 - 1).unwrap();
        b.settle(r, 3_000, JAN1);
        assert_eq!(b.this_month(JAN1), 0);
    }

    #[test]
    fn each_guest_has_a_day_and_a_month_of_their_own_and_the_owner_is_not_one() {
        let mut b = with(Limits {
            guest: tokens(1_000, 1_500),
            ..Default::default()
        });
        let r = b.reserve(Kind::GuestTurn, "qq:42", 900, DEC30).unwrap();
        b.settle(r, 900, DEC30);
        let e = b.reserve(Kind::GuestTurn, "qq:42", 200, DEC30).unwrap_err();
        assert_eq!(
            (e.scope.clone(), e.period, e.spent),
            (Scope::Guest("qq:42".into()), Period::Day, 900)
        );
        assert_eq!(e.setting(), "core.llm.budget.guest_daily_tokens");
        // Another guest and the owner are not held by that guest's spending.
        assert!(b.reserve(Kind::GuestTurn, "qq:7", 900, DEC30).is_ok());
        assert!(b.reserve(Kind::OwnerTurn, "", 50_000, DEC30).is_ok());
        // The next day the guest's day is new, its month is not.
        let r = b.reserve(Kind::GuestTurn, "qq:42", 500, DEC30 + DAY_MS).unwrap();
        b.settle(r, 500, DEC30 + DAY_MS);
        let e = b.reserve(Kind::GuestTurn, "qq:42", 200, DEC30 + DAY_MS).unwrap_err();
        assert_eq!((e.period, e.spent), (Period::Month, 1_400));
        assert_eq!(e.setting(), "core.llm.budget.guest_monthly_tokens");
        assert!(b.limits.apply_to(Kind::GuestTurn, "qq:42"));
        assert!(!b.limits.apply_to(Kind::OwnerTurn, ""));
    }

    #[test]
    fn background_and_guests_have_money_of_their_own() {
        let mut b = with(Limits {
            background: dollars(0, 10_000),
            guest: dollars(5_000, 0),
            ..Default::default()
        });
        assert!(b.attempt_limited(Kind::Heartbeat, "", "any"));
        assert!(b.attempt_limited(Kind::GuestTurn, "qq:1", "any"));
        assert!(
            !b.attempt_limited(Kind::OwnerTurn, "", "any"),
            "the owner has no money limit here"
        );
        let r = b
            .reserve_attempt(Kind::Heartbeat, "", "s", 100, Some(9_000), 0)
            .unwrap();
        b.settle_attempt(r, 100, 9_000, 0);
        let e = b
            .reserve_attempt(Kind::Heartbeat, "", "s", 100, Some(2_000), 0)
            .unwrap_err();
        assert_eq!(e.setting(), "core.llm.budget.background_monthly_usd");
        assert!(e.to_string().contains("monthly money budget"), "{e}");
        // The owner's turn on the same source is not background money.
        assert!(
            b.reserve_attempt(Kind::OwnerTurn, "", "s", 100, Some(50_000), 0)
                .is_ok()
        );
        let e = b
            .reserve_attempt(Kind::GuestTurn, "qq:1", "s", 100, Some(6_000), 0)
            .unwrap_err();
        assert_eq!(e.setting(), "core.llm.budget.guest_daily_usd");
    }

    #[test]
    fn attempts_never_overshoot_a_source_or_the_money_and_a_cheaper_one_still_fits() {
        let mut b = with(Limits {
            all: dollars(1_000_000, 0),
            sources: HashMap::from([("dear".to_owned(), tokens(10_000, 0))]),
            ..Default::default()
        });
        let owner = |b: &mut Budgets, src: &str, t, m| b.reserve_attempt(Kind::OwnerTurn, "", src, t, m, 0);
        // 100 concurrent attempts on the dear source: its day holds 10,000 tokens.
        let held: Vec<_> = (0..100)
            .filter_map(|_| owner(&mut b, "dear", 3_000, Some(1_000)).ok())
            .collect();
        assert_eq!(held.len(), 3);
        let e = owner(&mut b, "dear", 3_000, Some(1_000)).unwrap_err();
        assert_eq!(e.setting(), "core.llm.sources.dear.daily_tokens");
        // Money: a worst case over what is left is refused, a cheap one fits.
        let e = owner(&mut b, "other", 100, Some(999_000)).unwrap_err();
        assert_eq!(e.setting(), "core.llm.budget.daily_usd");
        assert!(e.to_string().contains("core.llm.budget.daily_usd"), "{e}");
        let cheap = owner(&mut b, "other", 100, Some(10)).unwrap();
        // Settled at what the vendor reported; released attempts give all back.
        b.settle_attempt(cheap, 80, 8, 0);
        for r in held {
            b.release_attempt(r);
        }
        assert_eq!(b.money(0), (8, 8));
        assert!(owner(&mut b, "dear", 10_000, Some(1_000)).is_ok());
        // Unpriced: a money limit cannot check it and lets it through.
        assert!(owner(&mut b, "local", 1, None).is_ok());
    }

    #[test]
    fn a_source_has_a_month_and_money_of_its_own() {
        let mut b = with(Limits {
            sources: HashMap::from([(
                "dear".to_owned(),
                Caps {
                    monthly_tokens: 5_000,
                    daily_micros: 3_000,
                    ..Default::default()
                },
            )]),
            ..Default::default()
        });
        assert!(b.attempt_limited(Kind::OwnerTurn, "", "dear"));
        assert!(!b.attempt_limited(Kind::OwnerTurn, "", "cheap"));
        let r = b
            .reserve_attempt(Kind::OwnerTurn, "", "dear", 2_000, Some(2_000), DEC30)
            .unwrap();
        b.settle_attempt(r, 2_000, 2_000, DEC30);
        let e = b
            .reserve_attempt(Kind::OwnerTurn, "", "dear", 1_000, Some(2_000), DEC30)
            .unwrap_err();
        assert_eq!(e.setting(), "core.llm.sources.dear.daily_usd");
        // Tomorrow the money is new; the month's tokens are not.
        let r = b
            .reserve_attempt(Kind::OwnerTurn, "", "dear", 2_500, Some(2_000), DEC30 + DAY_MS)
            .unwrap();
        b.settle_attempt(r, 2_500, 2_000, DEC30 + DAY_MS);
        let e = b
            .reserve_attempt(Kind::OwnerTurn, "", "dear", 1_000, Some(1), DEC30 + DAY_MS)
            .unwrap_err();
        assert_eq!(
            (e.setting(), e.spent, e.resets_at_ms),
            ("core.llm.sources.dear.monthly_tokens".to_owned(), 4_500, JAN1)
        );
        assert!(
            b.reserve_attempt(Kind::OwnerTurn, "", "dear", 1_000, Some(1), JAN1)
                .is_ok()
        );
    }

    #[test]
    fn every_cell_of_the_matrix_is_a_setting_the_owner_can_write() {
        let globals: HashSet<&str> = crate::config::core_defs(std::path::Path::new("/d"))
            .into_iter()
            .map(|d| d.key)
            .collect();
        let fields: HashSet<&str> = crate::config::SOURCE_FIELDS.iter().map(|f| f.name).collect();
        for scope in [
            Scope::All,
            Scope::Background,
            Scope::Guest("x".into()),
            Scope::Source("s".into()),
        ] {
            for (period, unit) in CELLS {
                let setting = setting_of(&scope, period, unit);
                let known = match setting.strip_prefix("core.llm.sources.s.") {
                    Some(field) => fields.contains(field),
                    None => globals.contains(setting.as_str()),
                };
                assert!(known, "{setting} is not a setting");
            }
        }
    }

    #[test]
    fn the_owner_is_told_of_a_limit_once_per_period() {
        let mut b = with(Limits {
            all: tokens(10, 0),
            ..Default::default()
        });
        let e1 = b.reserve(Kind::OwnerTurn, "", 20, 0).unwrap_err();
        // Nothing spent yet: the call is too big for the limit, which is not "spent".
        assert!(
            e1.to_string()
                .contains("cannot hold this call's worst case of 20 tokens"),
            "{e1}"
        );
        let e2 = b.reserve(Kind::OwnerTurn, "", 30, 60_000).unwrap_err();
        assert!(b.first_notice(&e1));
        assert!(!b.first_notice(&e2), "the same limit, the same day");
        let tomorrow = b.reserve(Kind::OwnerTurn, "", 20, DAY_MS).unwrap_err();
        assert!(b.first_notice(&tomorrow));
    }
}
