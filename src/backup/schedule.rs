//! When a scheduled backup is due and which backups go: the policy as plain code.
//!
//! Backups are files `homeagent-<UTC stamp>.zip` in the backup directory; the newest
//! one's stamp is when the last backup was taken, so a restart neither takes one at
//! once nor forgets one (no state besides the files). Every backup in the directory
//! counts towards `keep`, those taken from the WebUI too: the owner sees one list.

use std::time::Duration;

/// A backup's file name starts with this…
pub const PREFIX: &str = "homeagent-";
/// …and ends with this.
pub const SUFFIX: &str = ".zip";

/// The file name of a backup taken at `at_ms` (kernel clock), to the millisecond
/// (`homeagent-20261205T131512.572Z.zip`): two backups a moment apart — a restore's
/// way back right after the backup it restores — must never share a name.
pub fn file_name(at_ms: i64) -> String {
    let at = at_ms.max(0) as u64;
    let stamp = crate::upgrade::chrono_like(at);
    let (day_time, z) = stamp.split_at(stamp.len() - 1);
    format!("{PREFIX}{day_time}.{:03}{z}{SUFFIX}", at % 1000)
}

/// When the backup `name` was taken (Unix ms), `None` for a file that is not one.
pub fn taken_at(name: &str) -> Option<i64> {
    let stamp = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    // 20261205T131512.572Z
    let b = stamp.as_bytes();
    if b.len() != 20 || b[8] != b'T' || b[15] != b'.' || b[19] != b'Z' {
        return None;
    }
    let ms: i64 = stamp.get(16..19)?.parse().ok()?;
    let num = |r: std::ops::Range<usize>| stamp.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, s) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let days = homeagent_actors::memory::text::dates::days_from_civil(y, mo, d);
    Some(((days * 86_400) + h * 3600 + mi * 60 + s) * 1000 + ms)
}

/// The schedule's settings (`core.backup.interval`, `core.backup.keep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub every: Duration,
    /// 0: no scheduled backups.
    pub keep: u32,
}

/// What the schedule says at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Scheduled backups are off (`keep` = 0).
    Off,
    /// Take one now.
    Take,
    /// Nothing to do before `next_ms`.
    Wait { next_ms: i64 },
}

impl Schedule {
    /// At `now_ms`, the newest backup having been taken at `newest_ms`.
    pub fn decide(&self, now_ms: i64, newest_ms: Option<i64>) -> Decision {
        if self.keep == 0 {
            return Decision::Off;
        }
        let every = self.every.as_millis().min(i64::MAX as u128) as i64;
        match newest_ms {
            Some(t) if now_ms < t.saturating_add(every) => Decision::Wait {
                next_ms: t.saturating_add(every),
            },
            _ => Decision::Take,
        }
    }
}

/// The backups to delete so that the newest `keep` remain (`keep` 0 deletes none:
/// with the schedule off, the owner's backups are theirs to remove).
pub fn prune(backups: &[(String, i64)], keep: u32) -> Vec<String> {
    if keep == 0 {
        return Vec::new();
    }
    let mut by_age: Vec<&(String, i64)> = backups.iter().collect();
    by_age.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    by_age.into_iter().skip(keep as usize).map(|(n, _)| n.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn names_carry_their_time_both_ways() {
        let at = 1_796_476_512_572;
        let name = file_name(at);
        assert_eq!(name, "homeagent-20261205T131512.572Z.zip");
        assert_eq!(taken_at(&name), Some(at));
        assert_eq!(taken_at(&file_name(0)), Some(0));
        assert_ne!(file_name(at), file_name(at + 1), "a moment apart, two names");
        for bad in [
            "homeagent-x.zip",
            "other-20261205T131512.572Z.zip",
            "homeagent-20261305T131512.572Z.zip",
            "homeagent-20261205T131512.572Z.zip.partial",
            "homeagent-20261205T131512.5x2Z.zip",
            "homeagent-20261205T131512Z.zip",
        ] {
            assert_eq!(taken_at(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_backup_is_due_one_interval_after_the_newest() {
        let s = Schedule {
            every: Duration::from_secs(86_400),
            keep: 7,
        };
        assert_eq!(s.decide(10 * DAY, None), Decision::Take);
        assert_eq!(
            s.decide(10 * DAY, Some(9 * DAY + 1)),
            Decision::Wait { next_ms: 10 * DAY + 1 }
        );
        assert_eq!(s.decide(10 * DAY, Some(9 * DAY)), Decision::Take);
        // A clock set back (or a backup from the future) waits for its interval.
        assert_eq!(s.decide(DAY, Some(5 * DAY)), Decision::Wait { next_ms: 6 * DAY });
        assert_eq!(Schedule { keep: 0, ..s }.decide(10 * DAY, None), Decision::Off);
    }

    #[test]
    fn pruning_keeps_the_newest() {
        let list: Vec<(String, i64)> = (0..10).map(|i| (format!("b{i}"), i * DAY)).collect();
        let mut gone = prune(&list, 7);
        gone.sort();
        assert_eq!(gone, ["b0", "b1", "b2"]);
        assert!(prune(&list, 0).is_empty());
        assert!(prune(&list, 20).is_empty());
    }
}
