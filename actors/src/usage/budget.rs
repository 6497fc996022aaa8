//! Daily token budgets, enforced **before** a call: a call reserves what it may spend
//! (its prompt plus `max_tokens`), settles to what it did spend, or releases the
//! reservation when it failed. Reservations count against the limit while calls are in
//! flight, so however many run at once the day's spending never passes it.
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
    /// Tokens a day of background work (the heartbeats' model tasks).
    pub background_daily_tokens: u64,
}

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Daily,
    Background,
}

/// A call the budget refused: which limit, what is spent, when it resets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", crate::i18n::Msg::BudgetExhausted { setting: self.setting(), limit: self.limit, spent: self.spent, resets_in_min: self.resets_in_min() }.text())]
pub struct Exhausted {
    pub which: Which,
    pub limit: u64,
    /// Spent and reserved today.
    pub spent: u64,
    pub now_ms: i64,
    /// The next UTC midnight (by the kernel's clock).
    pub resets_at_ms: i64,
}

impl Exhausted {
    pub fn setting(&self) -> &'static str {
        match self.which {
            Which::Daily => "core.llm.budget.daily_tokens",
            Which::Background => "core.llm.budget.background_daily_tokens",
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
    background: bool,
    tokens: u64,
}

/// Today's spending and the reservations in flight.
#[derive(Debug, Default)]
pub struct Budgets {
    pub limits: Limits,
    day: i64,
    spent: u64,
    spent_background: u64,
    held: HashMap<u64, (bool, u64)>,
    next: u64,
}

fn is_background(kind: Kind) -> bool {
    kind == Kind::Heartbeat
}

impl Budgets {
    /// Starts the day at `now_ms` with what the ledger says was spent so far today.
    pub fn seed(&mut self, now_ms: i64, spent: u64, spent_background: u64) {
        self.roll(now_ms);
        self.spent = spent;
        self.spent_background = spent_background;
    }

    /// A new UTC day forgets yesterday (reservations of yesterday settle into nothing).
    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(DAY_MS);
        if day != self.day {
            self.day = day;
            self.spent = 0;
            self.spent_background = 0;
            self.held.clear();
        }
    }

    fn held(&self, background_only: bool) -> u64 {
        self.held
            .values()
            .filter(|(bg, _)| !background_only || *bg)
            .map(|(_, t)| t)
            .sum()
    }

    /// Holds `tokens` for a call of `kind`, or says which limit it would pass.
    pub fn reserve(&mut self, kind: Kind, tokens: u64, now_ms: i64) -> Result<Reservation, Exhausted> {
        self.roll(now_ms);
        let background = is_background(kind);
        let resets_at_ms = (self.day + 1) * DAY_MS;
        let check = |which, limit: u64, spent: u64| {
            if limit > 0 && spent + tokens > limit {
                Err(Exhausted {
                    which,
                    limit,
                    spent,
                    now_ms,
                    resets_at_ms,
                })
            } else {
                Ok(())
            }
        };
        check(Which::Daily, self.limits.daily_tokens, self.spent + self.held(false))?;
        if background {
            check(
                Which::Background,
                self.limits.background_daily_tokens,
                self.spent_background + self.held(true),
            )?;
        }
        self.next += 1;
        self.held.insert(self.next, (background, tokens));
        Ok(Reservation {
            id: self.next,
            day: self.day,
            background,
            tokens,
        })
    }

    /// The call is done: it spent `tokens` (what the vendor reported).
    pub fn settle(&mut self, r: Reservation, tokens: u64, now_ms: i64) {
        self.roll(now_ms);
        if self.held.remove(&r.id).is_some() && r.day == self.day {
            self.spent += tokens;
            if r.background {
                self.spent_background += tokens;
            }
        }
    }

    /// The call failed before spending anything.
    pub fn release(&mut self, r: Reservation) {
        self.held.remove(&r.id);
    }

    /// Spent today (settled) and held, for the API.
    pub fn today(&self) -> (u64, u64) {
        (self.spent, self.held(false))
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
                background_daily_tokens: 0,
            },
            ..Default::default()
        };
        let now = 1_000;
        // 1,000 calls reserve 4,096 tokens each before any of them settles.
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..1_000 {
            match b.reserve(Kind::OwnerTurn, 4_096, now) {
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
            },
            ..Default::default()
        };
        let now = 5 * DAY_MS + 3_600_000;
        let r = b.reserve(Kind::Heartbeat, 800, now).unwrap();
        b.settle(r, 700, now);
        let e = b.reserve(Kind::Heartbeat, 400, now).unwrap_err();
        assert_eq!((e.which, e.spent, e.resets_at_ms), (Which::Background, 700, 6 * DAY_MS));
        assert!(e.to_string().contains("core.llm.budget.background_daily_tokens"), "{e}");
        assert!(
            e.to_string().contains("1380 min") || e.to_string().contains("1380"),
            "{e}"
        );
        // The owner's turn is not background work.
        let r = b.reserve(Kind::OwnerTurn, 5_000, now).unwrap();
        b.release(r);
        assert_eq!(b.today(), (700, 0));
        // Tomorrow starts empty.
        assert!(b.reserve(Kind::Heartbeat, 900, 6 * DAY_MS).is_ok());
        // A failed call gives its reservation back.
        let mut c = Budgets {
            limits: Limits {
                daily_tokens: 1_000,
                background_daily_tokens: 0,
            },
            ..Default::default()
        };
        let r = c.reserve(Kind::OwnerTurn, 1_000, 0).unwrap();
        assert!(c.reserve(Kind::OwnerTurn, 1, 0).is_err());
        c.release(r);
        assert!(c.reserve(Kind::OwnerTurn, 1_000, 0).is_ok());
    }
}
