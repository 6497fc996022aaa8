//! When a reminder is due: the `remind_at` argument read against "now" and a time zone.
//!
//! Accepted forms (Unix milliseconds out):
//! - a delay from now: `90s`, `10m`, `1h30m`, `2d`, `1w`, also `in 2h` or `+2h`;
//! - a clock time: `18:30` (today, or tomorrow once it has passed);
//! - a date and time: `2026-05-08 18:30`, `2026-05-08T18:30:00`, with an optional
//!   offset (`Z`, `+08:00`, `-0500`); without one it is the zone's local time;
//! - a date alone: `2026-05-08` (09:00 local time that day).
//!
//! The zone is a parameter ([`Zone`]): the plugin passes the process's local zone
//! (`TZ`, `/etc/localtime`), tests a fixed offset.

/// A civil time: year, month (1–12), day, hour, minute, second.
pub type Civil = (i64, u32, u32, u32, u32, u32);

/// How civil times map to instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The process's local zone (libc `mktime`/`localtime_r`: `TZ` or `/etc/localtime`).
    Local,
    /// A fixed offset east of UTC, in seconds.
    Fixed(i64),
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Unix seconds of a civil time read as UTC.
fn utc_secs(c: Civil) -> i64 {
    days_from_civil(c.0, c.1, c.2) * 86_400 + i64::from(c.3) * 3600 + i64::from(c.4) * 60 + i64::from(c.5)
}

impl Zone {
    /// Unix seconds of a civil time in this zone (`None` when the zone has no such
    /// time, or libc cannot say).
    pub fn to_unix(self, c: Civil) -> Option<i64> {
        match self {
            Zone::Fixed(off) => Some(utc_secs(c) - off),
            Zone::Local => {
                // SAFETY: `tm` is a plain C struct, zeroed then filled; mktime only
                // reads and normalises it.
                let mut tm: libc::tm = unsafe { std::mem::zeroed() };
                tm.tm_year = i32::try_from(c.0 - 1900).ok()?;
                tm.tm_mon = c.1 as i32 - 1;
                tm.tm_mday = c.2 as i32;
                tm.tm_hour = c.3 as i32;
                tm.tm_min = c.4 as i32;
                tm.tm_sec = c.5 as i32;
                tm.tm_isdst = -1;
                let t = unsafe { libc::mktime(&mut tm) };
                (t != -1).then_some(t)
            }
        }
    }

    /// The civil time of Unix seconds `t` in this zone.
    pub fn civil(self, t: i64) -> Civil {
        let local = match self {
            Zone::Fixed(off) => t + off,
            Zone::Local => {
                let mut tm: libc::tm = unsafe { std::mem::zeroed() };
                let tt: libc::time_t = t;
                // SAFETY: both pointers are to live locals; localtime_r is reentrant.
                if unsafe { libc::localtime_r(&tt, &mut tm) }.is_null() {
                    t
                } else {
                    t + tm.tm_gmtoff
                }
            }
        };
        let (y, m, d) = civil_from_days(local.div_euclid(86_400));
        let s = local.rem_euclid(86_400);
        (y, m, d, (s / 3600) as u32, (s % 3600 / 60) as u32, (s % 60) as u32)
    }

    /// `YYYY-MM-DD HH:MM` of Unix milliseconds in this zone.
    pub fn format(self, ms: i64) -> String {
        let (y, m, d, h, min, _) = self.civil(ms.div_euclid(1000));
        format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}")
    }
}

/// A delay like `1h30m` (units ms, s, m, h, d, w; spaces between parts allowed).
pub fn parse_delay(s: &str) -> Option<i64> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
            .unwrap_or(rest.len());
        let ms = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" | "sec" | "secs" | "second" | "seconds" => 1000.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
            "d" | "day" | "days" => 86_400_000.0,
            "w" | "week" | "weeks" => 604_800_000.0,
            _ => return None,
        };
        total += n * ms;
        rest = rest[unit_len..].trim_start();
    }
    (total.is_finite() && total < 1e15).then_some(total.round() as i64)
}

fn num<T: std::str::FromStr>(s: &str, len: usize) -> Option<T> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `HH:MM` or `HH:MM:SS`.
fn clock(s: &str) -> Option<(u32, u32, u32)> {
    let mut parts = s.split(':');
    let h: u32 = parts.next().and_then(|p| num(p, p.len().clamp(1, 2)))?;
    let m: u32 = parts.next().and_then(|p| num(p, 2))?;
    let sec: u32 = match parts.next() {
        Some(p) => num(p, 2)?,
        None => 0,
    };
    (parts.next().is_none() && h < 24 && m < 60 && sec < 60).then_some((h, m, sec))
}

/// An offset at the end of a time: `Z`, `+08:00`, `-0500`, `+08`. Answers the time
/// without it and the offset in seconds.
fn split_offset(s: &str) -> (&str, Option<i64>) {
    if let Some(t) = s.strip_suffix('Z').or_else(|| s.strip_suffix('z')) {
        return (t, Some(0));
    }
    // The sign must come after the time's colon (not the date's dashes).
    let Some(colon) = s.find(':') else { return (s, None) };
    let Some(pos) = s[colon..].rfind(['+', '-']).map(|p| p + colon) else {
        return (s, None);
    };
    let (time, off) = (&s[..pos], &s[pos + 1..]);
    let sign = if s.as_bytes()[pos] == b'-' { -1 } else { 1 };
    let digits: String = off.chars().filter(|c| *c != ':').collect();
    let (h, m): (i64, i64) = match digits.len() {
        2 => (num(&digits, 2).unwrap_or(99), 0),
        4 => (num(&digits[..2], 2).unwrap_or(99), num(&digits[2..], 2).unwrap_or(99)),
        _ => return (s, None),
    };
    if h > 14 || m > 59 {
        return (s, None);
    }
    (time, Some(sign * (h * 3600 + m * 60)))
}

/// Reads `remind_at` at `now_ms` in `zone`; answers Unix milliseconds. A time in the
/// past is refused (a delay is never in the past).
pub fn parse(s: &str, now_ms: i64, zone: Zone) -> Result<i64, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "`{s}` is not a time; write a delay (10m, 1h30m, 2d), a clock time (18:30) or a date and time (2026-05-08 18:30, optionally with an offset like +08:00)"
        )
    };
    let delay = s.strip_prefix("in ").or_else(|| s.strip_prefix('+')).unwrap_or(s);
    if let Some(ms) = parse_delay(delay) {
        return Ok(now_ms + ms);
    }
    // A clock time alone: the next time it comes.
    if let Some((h, m, sec)) = clock(s) {
        let (y, mo, d, ..) = zone.civil(now_ms.div_euclid(1000));
        let today = zone.to_unix((y, mo, d, h, m, sec)).ok_or_else(bad)? * 1000;
        if today > now_ms {
            return Ok(today);
        }
        let (y, mo, d) = civil_from_days(days_from_civil(y, mo, d) + 1);
        return Ok(zone.to_unix((y, mo, d, h, m, sec)).ok_or_else(bad)? * 1000);
    }
    let (date, time) = match s.split_once(['T', 't', ' ']) {
        Some((d, t)) => (d, Some(t.trim())),
        None => (s, None),
    };
    let mut dp = date.split('-');
    let y: i64 = dp.next().and_then(|p| num(p, 4)).ok_or_else(bad)?;
    let mo: u32 = dp.next().and_then(|p| num(p, 2)).ok_or_else(bad)?;
    let d: u32 = dp.next().and_then(|p| num(p, 2)).ok_or_else(bad)?;
    if dp.next().is_some() || !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) {
        return Err(bad());
    }
    let (hms, offset) = match time {
        Some(t) => {
            let (t, off) = split_offset(t);
            (clock(t).ok_or_else(bad)?, off)
        }
        None => ((9, 0, 0), None),
    };
    let civil = (y, mo, d, hms.0, hms.1, hms.2);
    let secs = match offset {
        Some(off) => Zone::Fixed(off).to_unix(civil),
        None => zone.to_unix(civil),
    }
    .ok_or_else(bad)?;
    let at = secs * 1000;
    if at <= now_ms {
        return Err(format!(
            "{} is in the past (now it is {}); give a later time",
            zone.format(at),
            zone.format(now_ms)
        ));
    }
    Ok(at)
}

/// "in 2h 5m", "in 40s": how far `at` is from `now`, coarsely.
pub fn until(now_ms: i64, at_ms: i64) -> String {
    let s = (at_ms - now_ms).max(0) / 1000;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    let text = if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{s}s")
    };
    format!("in {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CST: Zone = Zone::Fixed(8 * 3600);
    /// 2026-05-08 10:00:00 +08:00.
    const NOW: i64 = 1_778_205_600_000;

    #[test]
    fn the_calendar_round_trips() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for z in [-1000, -1, 0, 59, 60, 11_016, 20_000, 50_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(CST.format(NOW), "2026-05-08 10:00");
        assert_eq!(Zone::Fixed(0).format(NOW), "2026-05-08 02:00");
    }

    #[test]
    fn delays() {
        assert_eq!(parse("10m", NOW, CST), Ok(NOW + 600_000));
        assert_eq!(parse("in 1h30m", NOW, CST), Ok(NOW + 5_400_000));
        assert_eq!(parse("+2d", NOW, CST), Ok(NOW + 2 * 86_400_000));
        assert_eq!(parse("1 hour 5 min", NOW, CST), Ok(NOW + 3_900_000));
        assert_eq!(parse("250ms", NOW, CST), Ok(NOW + 250));
        assert_eq!(parse_delay("1w"), Some(604_800_000));
        assert_eq!(parse_delay("soon"), None);
        assert_eq!(parse_delay(""), None);
    }

    #[test]
    fn clock_times_are_the_next_one() {
        assert_eq!(CST.format(parse("18:30", NOW, CST).unwrap()), "2026-05-08 18:30");
        // 09:15 has passed at 10:00: tomorrow.
        assert_eq!(CST.format(parse("9:15", NOW, CST).unwrap()), "2026-05-09 09:15");
        assert!(parse("25:00", NOW, CST).is_err());
    }

    #[test]
    fn dates_with_and_without_offsets() {
        let at = parse("2026-05-08 18:30", NOW, CST).unwrap();
        assert_eq!(CST.format(at), "2026-05-08 18:30");
        assert_eq!(parse("2026-05-08T18:30:00", NOW, CST), Ok(at));
        assert_eq!(parse("2026-05-08T10:30:00Z", NOW, CST), Ok(at));
        assert_eq!(parse("2026-05-08 05:30-05:00", NOW, CST), Ok(at));
        assert_eq!(parse("2026-05-08T18:30+0800", NOW, CST), Ok(at));
        assert_eq!(CST.format(parse("2026-06-01", NOW, CST).unwrap()), "2026-06-01 09:00");
        let past = parse("2026-05-01 08:00", NOW, CST).unwrap_err();
        assert!(
            past.contains("in the past") && past.contains("2026-05-08 10:00"),
            "{past}"
        );
        for bad in ["2026-02-30 10:00", "2026-13-01", "tomorrow", "2026-5-8", "", "18:7"] {
            assert!(parse(bad, NOW, CST).unwrap_err().contains("not a time"), "{bad}");
        }
    }

    #[test]
    fn the_local_zone_agrees_with_itself() {
        let at = parse("2030-01-02 03:04", NOW, Zone::Local).unwrap();
        assert_eq!(Zone::Local.format(at), "2030-01-02 03:04");
        let s = NOW / 1000;
        assert_eq!(Zone::Local.to_unix(Zone::Local.civil(s)), Some(s));
    }

    #[test]
    fn until_is_coarse() {
        assert_eq!(until(0, 40_000), "in 40s");
        assert_eq!(until(0, 7_500_000), "in 2h 5m");
        assert_eq!(until(0, 90_000_000), "in 1d 1h");
        assert_eq!(until(10, 0), "in 0s");
    }
}
