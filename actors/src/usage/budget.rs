//! Token budgets, enforced **before** a call: a call reserves what it may spend (its
//! prompt plus `max_tokens`), settles to what it did spend, or releases the reservation
//! when it failed. Reservations count against every limit that applies while calls are
//! in flight, so however many run at once no period's spending passes its limit.
//!
//! The limits: a UTC day of all calls, a UTC month of all calls, a day of background
//! work (the heartbeats' tasks), and a day of each guest (a chat bridge's person: one
//! guest cannot spend the owner's day).
//!
//! Plain data: the LLM actor owns one [`Budgets`] and asks it on its own thread (no
//! lock, no await between check and reserve); the tests drive it directly.

use std::collections::HashMap;

use super::ledger::Kind;

const DAY_MS: i64 = 86_400_000;

/// The owner's limits (`core.llm.budget.*`; 0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Tokens a day, every call together.
    pub daily_tokens: u64,
    /// Tokens a UTC calendar month, every call together.
    pub monthly_tokens: u64,
    /// Tokens a day of background work (the heartbeats' model tasks).
    pub background_daily_tokens: u64,
    /// Tokens a day of each guest's turns.
    pub guest_daily_tokens: u64,
    /// Micro-dollars a day and a month, every call together (priced per attempt, see
    /// [`Budgets::reserve_attempt`]).
    pub daily_micros: u64,
    pub monthly_micros: u64,
}

impl Limits {
    /// Whether any limit applies to a call of `kind` for `principal` (a prompt is
    /// counted for the reservation only then: counting costs the turn time).
    pub fn apply_to(&self, kind: Kind, principal: &str) -> bool {
        self.daily_tokens > 0
            || self.monthly_tokens > 0
            || (kind == Kind::Heartbeat && self.background_daily_tokens > 0)
            || (!principal.is_empty() && self.guest_daily_tokens > 0)
    }
}

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Which {
    Daily,
    Monthly,
    Background,
    Guest,
    /// One source's own day (`core.llm.sources.<name>.daily_tokens`).
    Source,
    /// Money: a day's or a month's dollars (limit and spent in micro-dollars).
    DailyUsd,
    MonthlyUsd,
}

/// A call the budget refused: which limit, what is spent, when it resets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhausted {
    pub which: Which,
    /// The source whose own limit it is ([`Which::Source`]; else empty).
    pub source: String,
    pub limit: u64,
    /// Spent and reserved in the limit's period.
    pub spent: u64,
    pub now_ms: i64,
    /// When the period ends (the next UTC midnight or first of the month, by the
    /// kernel's clock).
    pub resets_at_ms: i64,
}

impl std::error::Error for Exhausted {}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (setting, resets_in_min) = (self.setting(), self.resets_in_min());
        let monthly = matches!(self.which, Which::Monthly | Which::MonthlyUsd);
        let text = if matches!(self.which, Which::DailyUsd | Which::MonthlyUsd) {
            crate::i18n::Msg::MoneyBudgetExhausted {
                setting: &setting,
                limit_usd: self.limit as f64 / 1e6,
                spent_usd: self.spent as f64 / 1e6,
                resets_in_min,
                monthly,
            }
            .text()
        } else {
            crate::i18n::Msg::BudgetExhausted {
                setting: &setting,
                limit: self.limit,
                spent: self.spent,
                resets_in_min,
                monthly,
            }
            .text()
        };
        f.write_str(&text)
    }
}

impl Exhausted {
    pub fn setting(&self) -> String {
        match self.which {
            Which::Daily => "core.llm.budget.daily_tokens".into(),
            Which::Monthly => "core.llm.budget.monthly_tokens".into(),
            Which::Background => "core.llm.budget.background_daily_tokens".into(),
            Which::Guest => "core.llm.budget.guest_daily_tokens".into(),
            Which::Source => format!("core.llm.sources.{}.daily_tokens", self.source),
            Which::DailyUsd => "core.llm.budget.daily_usd".into(),
            Which::MonthlyUsd => "core.llm.budget.monthly_usd".into(),
        }
    }

    fn resets_in_min(&self) -> i64 {
        ((self.resets_at_ms - self.now_ms) + 59_999) / 60_000
    }
}

/// A held reservation (settle or release it exactly once).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a reservation is settled or released"]
pub struct Reservation {
    id: u64,
    day: i64,
    month: i64,
}

/// What one reservation holds, and for whom.
#[derive(Debug)]
struct Held {
    background: bool,
    guest: Option<String>,
    tokens: u64,
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

/// Today's and this month's spending and the reservations in flight.
#[derive(Debug, Default)]
pub struct Budgets {
    pub limits: Limits,
    day: i64,
    month: i64,
    spent: u64,
    spent_month: u64,
    spent_background: u64,
    /// Each guest's spending today.
    spent_guest: HashMap<String, u64>,
    held: HashMap<u64, Held>,
    next: u64,
    /// Each source's own daily limit (`core.llm.sources.<name>.daily_tokens`; absent or
    /// 0 = none).
    pub source_limits: HashMap<String, u64>,
    /// Each source's tokens today.
    spent_source: HashMap<String, u64>,
    /// Micro-dollars today and this month.
    micros_day: u64,
    micros_month: u64,
    /// Attempts in flight on a chosen source: their tokens and worst-case cost.
    attempts: HashMap<u64, AttemptHeld>,
    /// Limits the owner was told about (which, source, when it resets): once each.
    noticed: std::collections::HashSet<(Which, String, i64)>,
}

#[derive(Debug)]
struct AttemptHeld {
    source: String,
    tokens: u64,
    micros: u64,
}

/// A held attempt on one source (settle or release it exactly once).
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an attempt's reservation is settled or released"]
pub struct AttemptReservation {
    id: u64,
    day: i64,
    month: i64,
}

fn is_background(kind: Kind) -> bool {
    kind == Kind::Heartbeat
}

/// What the ledger says was spent so far, for [`Budgets::seed`].
#[derive(Debug, Default, Clone)]
pub struct Spent {
    pub today: u64,
    pub month: u64,
    pub background_today: u64,
    /// Each guest principal's tokens today.
    pub guests_today: HashMap<String, u64>,
    /// Each source's tokens today.
    pub sources_today: HashMap<String, u64>,
    /// Micro-dollars today and this month (priced calls only).
    pub micros_today: u64,
    pub micros_month: u64,
}

impl Budgets {
    /// Starts the period at `now_ms` with what the ledger says was spent so far.
    pub fn seed(&mut self, now_ms: i64, spent: Spent) {
        self.roll(now_ms);
        self.spent = spent.today;
        self.spent_month = spent.month;
        self.spent_background = spent.background_today;
        self.spent_guest = spent.guests_today;
        self.spent_source = spent.sources_today;
        self.micros_day = spent.micros_today;
        self.micros_month = spent.micros_month;
    }

    /// A new UTC day forgets yesterday, a new month last month (the reservations of a
    /// past period settle into nothing).
    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(DAY_MS);
        if day != self.day {
            self.day = day;
            self.spent = 0;
            self.spent_background = 0;
            self.spent_guest.clear();
            self.spent_source.clear();
            self.micros_day = 0;
            self.held.clear();
            self.attempts.clear();
            let month = month_of(now_ms).0;
            if month != self.month {
                self.month = month;
                self.spent_month = 0;
                self.micros_month = 0;
            }
        }
    }

    fn held(&self, only: impl Fn(&Held) -> bool) -> u64 {
        self.held.values().filter(|h| only(h)).map(|h| h.tokens).sum()
    }

    /// Holds `tokens` for a call of `kind` for `principal` (empty: the owner or the
    /// kernel), or says which limit it would pass.
    pub fn reserve(&mut self, kind: Kind, principal: &str, tokens: u64, now_ms: i64) -> Result<Reservation, Exhausted> {
        self.roll(now_ms);
        let background = is_background(kind);
        let guest = (!principal.is_empty()).then(|| principal.to_owned());
        let day_end = (self.day + 1) * DAY_MS;
        let check = |which, limit: u64, spent: u64, resets_at_ms: i64| {
            if limit > 0 && spent + tokens > limit {
                Err(Exhausted {
                    which,
                    source: String::new(),
                    limit,
                    spent,
                    now_ms,
                    resets_at_ms,
                })
            } else {
                Ok(())
            }
        };
        let all_held = self.held(|_| true);
        check(Which::Daily, self.limits.daily_tokens, self.spent + all_held, day_end)?;
        if self.limits.monthly_tokens > 0 {
            check(
                Which::Monthly,
                self.limits.monthly_tokens,
                self.spent_month + all_held,
                month_of(now_ms).2,
            )?;
        }
        if background {
            check(
                Which::Background,
                self.limits.background_daily_tokens,
                self.spent_background + self.held(|h| h.background),
                day_end,
            )?;
        }
        if let Some(g) = &guest {
            check(
                Which::Guest,
                self.limits.guest_daily_tokens,
                self.spent_guest.get(g).copied().unwrap_or(0) + self.held(|h| h.guest.as_ref() == Some(g)),
                day_end,
            )?;
        }
        self.next += 1;
        self.held.insert(
            self.next,
            Held {
                background,
                guest,
                tokens,
            },
        );
        Ok(Reservation {
            id: self.next,
            day: self.day,
            month: self.month,
        })
    }

    /// The call is done: it spent `tokens` (what the vendor reported).
    pub fn settle(&mut self, r: Reservation, tokens: u64, now_ms: i64) {
        self.roll(now_ms);
        let Some(h) = self.held.remove(&r.id) else {
            return;
        };
        if r.month == self.month {
            self.spent_month += tokens;
        }
        if r.day == self.day {
            self.spent += tokens;
            if h.background {
                self.spent_background += tokens;
            }
            if let Some(g) = h.guest {
                *self.spent_guest.entry(g).or_default() += tokens;
            }
        }
    }

    /// The call failed before spending anything.
    pub fn release(&mut self, r: Reservation) {
        self.held.remove(&r.id);
    }

    /// Spent today (settled) and held, for the API.
    pub fn today(&self) -> (u64, u64) {
        (self.spent, self.held(|_| true))
    }

    /// Spent this month (settled).
    pub fn this_month(&self) -> u64 {
        self.spent_month
    }

    /// Micro-dollars spent today and this month (settled, priced calls).
    pub fn money(&self) -> (u64, u64) {
        (self.micros_day, self.micros_month)
    }

    /// Whether an attempt on `source` is checked at all: its own limit or a money limit
    /// applies (the prompt is counted only then).
    pub fn attempt_limited(&self, source: &str) -> bool {
        self.limits.daily_micros > 0
            || self.limits.monthly_micros > 0
            || self.source_limits.get(source).is_some_and(|l| *l > 0)
    }

    /// Holds an attempt on `source` of at most `tokens` costing at most `micros` (its
    /// worst case at the source's price; `None`: unpriced, which a money limit cannot
    /// check and lets through). Refused when the source's own day or a money limit
    /// would be passed: the caller moves on to the next source in the order, so a
    /// cheaper one answers while the budget still holds it.
    pub fn reserve_attempt(
        &mut self,
        source: &str,
        tokens: u64,
        micros: Option<u64>,
        now_ms: i64,
    ) -> Result<AttemptReservation, Exhausted> {
        self.roll(now_ms);
        let day_end = (self.day + 1) * DAY_MS;
        let refuse = |which, limit, spent, resets_at_ms| Exhausted {
            which,
            source: if which == Which::Source {
                source.to_owned()
            } else {
                String::new()
            },
            limit,
            spent,
            now_ms,
            resets_at_ms,
        };
        let source_limit = self.source_limits.get(source).copied().unwrap_or(0);
        if source_limit > 0 {
            let spent = self.spent_source.get(source).copied().unwrap_or(0)
                + self
                    .attempts
                    .values()
                    .filter(|a| a.source == source)
                    .map(|a| a.tokens)
                    .sum::<u64>();
            if spent + tokens > source_limit {
                return Err(refuse(Which::Source, source_limit, spent, day_end));
            }
        }
        let micros = micros.unwrap_or(0);
        let held_micros: u64 = self.attempts.values().map(|a| a.micros).sum();
        let l = self.limits;
        if l.daily_micros > 0 && self.micros_day + held_micros + micros > l.daily_micros {
            return Err(refuse(
                Which::DailyUsd,
                l.daily_micros,
                self.micros_day + held_micros,
                day_end,
            ));
        }
        if l.monthly_micros > 0 && self.micros_month + held_micros + micros > l.monthly_micros {
            return Err(refuse(
                Which::MonthlyUsd,
                l.monthly_micros,
                self.micros_month + held_micros,
                month_of(now_ms).2,
            ));
        }
        self.next += 1;
        self.attempts.insert(
            self.next,
            AttemptHeld {
                source: source.to_owned(),
                tokens,
                micros,
            },
        );
        Ok(AttemptReservation {
            id: self.next,
            day: self.day,
            month: self.month,
        })
    }

    /// The attempt answered: it spent `tokens` costing `micros` (0 when unpriced).
    pub fn settle_attempt(&mut self, r: AttemptReservation, tokens: u64, micros: u64, now_ms: i64) {
        self.roll(now_ms);
        let Some(a) = self.attempts.remove(&r.id) else {
            return;
        };
        if r.month == self.month {
            self.micros_month += micros;
        }
        if r.day == self.day {
            self.micros_day += micros;
            *self.spent_source.entry(a.source).or_default() += tokens;
        }
    }

    /// The attempt failed: nothing spent.
    pub fn release_attempt(&mut self, r: AttemptReservation) {
        self.attempts.remove(&r.id);
    }

    /// Whether the owner is yet to hear of this refusal's limit in its period (true
    /// once per limit, source and period).
    pub fn first_notice(&mut self, e: &Exhausted) -> bool {
        self.noticed.insert((e.which, e.source.clone(), e.resets_at_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_concurrent_reservations_never_overshoot() {
        let mut b = Budgets {
            limits: Limits {
                daily_tokens: 100_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let now = 1_000;
        // 1,000 calls reserve 4,096 tokens each before any of them settles.
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..1_000 {
            match b.reserve(Kind::OwnerTurn, "", 4_096, now) {
                Ok(r) => held.push(r),
                Err(e) => {
                    assert_eq!(e.which, Which::Daily);
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
        assert!(b.today().0 <= 100_000, "{:?}", b.today());
        assert_eq!(b.today().1, 0, "nothing held after settling");
    }

    #[test]
    fn background_work_has_its_own_limit_and_a_day_resets_both() {
        let mut b = Budgets {
            limits: Limits {
                daily_tokens: 10_000,
                background_daily_tokens: 1_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let now = 5 * DAY_MS + 3_600_000;
        let r = b.reserve(Kind::Heartbeat, "", 800, now).unwrap();
        b.settle(r, 700, now);
        let e = b.reserve(Kind::Heartbeat, "", 400, now).unwrap_err();
        assert_eq!((e.which, e.spent, e.resets_at_ms), (Which::Background, 700, 6 * DAY_MS));
        assert!(e.to_string().contains("core.llm.budget.background_daily_tokens"), "{e}");
        assert!(
            e.to_string().contains("1380 min") || e.to_string().contains("1380"),
            "{e}"
        );
        // The owner's turn is not background work.
        let r = b.reserve(Kind::OwnerTurn, "", 5_000, now).unwrap();
        b.release(r);
        assert_eq!(b.today(), (700, 0));
        // Tomorrow starts empty.
        assert!(b.reserve(Kind::Heartbeat, "", 900, 6 * DAY_MS).is_ok());
        // A failed call gives its reservation back.
        let mut c = Budgets {
            limits: Limits {
                daily_tokens: 1_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let r = c.reserve(Kind::OwnerTurn, "", 1_000, 0).unwrap();
        assert!(c.reserve(Kind::OwnerTurn, "", 1, 0).is_err());
        c.release(r);
        assert!(c.reserve(Kind::OwnerTurn, "", 1_000, 0).is_ok());
    }

    #[test]
    fn a_month_has_its_own_limit_and_resets_on_the_first() {
        let mut b = Budgets {
            limits: Limits {
                monthly_tokens: 10_000,
                ..Default::default()
            },
            ..Default::default()
        };
        // 2026-12-30T12:00Z: two days a month apart from the same month's limit.
        let dec30 = 1_798_632_000_000;
        b.seed(
            dec30,
            Spent {
                month: 9_000,
                ..Default::default()
            },
        );
        let e = b.reserve(Kind::OwnerTurn, "", 2_000, dec30).unwrap_err();
        assert_eq!(e.which, Which::Monthly);
        // 2027-01-01T00:00Z.
        assert_eq!(e.resets_at_ms, 1_798_761_600_000);
        assert!(e.to_string().contains("core.llm.budget.monthly_tokens"), "{e}");
        // The next day is the same month: still refused; the 1st starts afresh.
        assert!(b.reserve(Kind::OwnerTurn, "", 2_000, dec30 + DAY_MS).is_err());
        let r = b.reserve(Kind::OwnerTurn, "", 2_000, 1_798_761_600_000).unwrap();
        b.settle(r, 1_500, 1_798_761_600_000);
        assert_eq!(b.this_month(), 1_500);
    }

    #[test]
    fn each_guest_has_a_day_of_their_own_and_the_owner_is_not_one() {
        let mut b = Budgets {
            limits: Limits {
                guest_daily_tokens: 1_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let r = b.reserve(Kind::GuestTurn, "qq:42", 900, 0).unwrap();
        b.settle(r, 900, 0);
        let e = b.reserve(Kind::GuestTurn, "qq:42", 200, 0).unwrap_err();
        assert_eq!((e.which, e.spent), (Which::Guest, 900));
        // Another guest and the owner are not held by that guest's spending.
        assert!(b.reserve(Kind::GuestTurn, "qq:7", 900, 0).is_ok());
        assert!(b.reserve(Kind::OwnerTurn, "", 50_000, 0).is_ok());
        assert!(
            Limits {
                guest_daily_tokens: 1,
                ..Default::default()
            }
            .apply_to(Kind::GuestTurn, "qq:42")
        );
        assert!(
            !Limits {
                guest_daily_tokens: 1,
                ..Default::default()
            }
            .apply_to(Kind::OwnerTurn, "")
        );
    }

    #[test]
    fn attempts_never_overshoot_a_source_or_the_money_and_a_cheaper_one_still_fits() {
        let mut b = Budgets {
            limits: Limits {
                daily_micros: 1_000_000,
                ..Default::default()
            },
            ..Default::default()
        };
        b.source_limits.insert("dear".into(), 10_000);
        // 100 concurrent attempts on the dear source: its day holds 10,000 tokens.
        let held: Vec<_> = (0..100)
            .filter_map(|_| b.reserve_attempt("dear", 3_000, Some(1_000), 0).ok())
            .collect();
        assert_eq!(held.len(), 3);
        let e = b.reserve_attempt("dear", 3_000, Some(1_000), 0).unwrap_err();
        assert_eq!(
            (e.which, e.setting()),
            (Which::Source, "core.llm.sources.dear.daily_tokens".to_owned())
        );
        // Money: a worst case over what is left is refused, a cheap one fits.
        let e = b.reserve_attempt("other", 100, Some(999_000), 0).unwrap_err();
        assert_eq!(e.which, Which::DailyUsd);
        assert!(e.to_string().contains("core.llm.budget.daily_usd"), "{e}");
        let cheap = b.reserve_attempt("other", 100, Some(10), 0).unwrap();
        // Settled at what the vendor reported; released attempts give all back.
        b.settle_attempt(cheap, 80, 8, 0);
        for r in held {
            b.release_attempt(r);
        }
        assert_eq!(b.money(), (8, 8));
        assert!(b.reserve_attempt("dear", 10_000, Some(1_000), 0).is_ok());
        // Unpriced: a money limit cannot check it and lets it through.
        assert!(b.reserve_attempt("local", 1, None, 0).is_ok());
    }

    #[test]
    fn the_owner_is_told_of_a_limit_once_per_period() {
        let mut b = Budgets {
            limits: Limits {
                daily_tokens: 10,
                ..Default::default()
            },
            ..Default::default()
        };
        let e1 = b.reserve(Kind::OwnerTurn, "", 20, 0).unwrap_err();
        let e2 = b.reserve(Kind::OwnerTurn, "", 30, 60_000).unwrap_err();
        assert!(b.first_notice(&e1));
        assert!(!b.first_notice(&e2), "the same limit, the same day");
        let tomorrow = b.reserve(Kind::OwnerTurn, "", 20, DAY_MS).unwrap_err();
        assert!(b.first_notice(&tomorrow));
    }
}
