//! Duration strings as people type them into the settings page.
//!
//! The syntax is Go's `time.ParseDuration` (a sequence of decimal numbers, each with an
//! optional fraction and a mandatory unit: `300ms`, `1.5h`, `2h45m`) extended with `d`
//! (24 hours) and `w` (7 days), because intervals such as "archive every two days" are
//! common in an agent's settings and `48h` is hard to read. Negative durations are
//! rejected: every duration setting is an interval, a timeout or a threshold, and a
//! negative one is always a typo.
//!
//! [`format_duration`] produces the canonical compact spelling (`1h30m`, `250ms`) that the
//! WebUI shows and that [`parse_duration`] reads back to the same value.

use std::time::Duration;

use thiserror::Error;

/// Shown in every error so that the user sees a valid spelling next to the mistake.
const EXAMPLES: &str = "for example `30s`, `250ms`, `1h30m` or `2d`";

/// The largest accepted duration, in nanoseconds. Go's durations are signed 64-bit
/// nanosecond counts; keeping the same ceiling (about 292 years) means a value accepted
/// here can always be handed to code that stores nanoseconds in an `i64`.
const MAX_NANOS: u128 = i64::MAX as u128;

const NANOS_PER_MICRO: u128 = 1_000;
const NANOS_PER_MILLI: u128 = 1_000_000;
const NANOS_PER_SEC: u128 = 1_000_000_000;
const NANOS_PER_MIN: u128 = 60 * NANOS_PER_SEC;
const NANOS_PER_HOUR: u128 = 60 * NANOS_PER_MIN;
const NANOS_PER_DAY: u128 = 24 * NANOS_PER_HOUR;
const NANOS_PER_WEEK: u128 = 7 * NANOS_PER_DAY;

/// Digits of a fraction beyond this many cannot change the result by a whole
/// nanosecond for any unit, and capping them keeps the arithmetic inside `u128`.
const MAX_FRACTION_DIGITS: usize = 20;

/// Why a duration string was refused. Every message names the problem and shows valid
/// spellings, because these messages reach the settings page unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    /// Nothing (or only whitespace) was given.
    #[error("empty duration: write a number followed by a unit, {ex}", ex = EXAMPLES)]
    Empty,
    /// A leading `-`: every duration setting is an interval, timeout or threshold.
    #[error("negative duration `{input}` is not allowed: write a positive value, {ex}", ex = EXAMPLES)]
    Negative {
        /// The text as given.
        input: String,
    },
    /// A number without a unit, such as `30` (only a bare `0` is accepted).
    #[error(
        "duration `{input}` has no unit after `{number}`: add one of ns, us, ms, s, m, h, d or w, {ex}",
        ex = EXAMPLES
    )]
    MissingUnit {
        /// The text as given.
        input: String,
        /// The number that lacks a unit.
        number: String,
    },
    /// A unit that is not one of ns, us/µs, ms, s, m, h, d, w.
    #[error(
        "unknown unit `{unit}` in duration `{input}`: use ns, us (or µs), ms, s, m, h, d (24h) or w (7d), {ex}",
        ex = EXAMPLES
    )]
    UnknownUnit {
        /// The text as given.
        input: String,
        /// The unrecognised unit.
        unit: String,
    },
    /// Something other than a number where a number was expected.
    #[error("`{input}` is not a duration: expected a number at `{near}`, {ex}", ex = EXAMPLES)]
    Malformed {
        /// The text as given.
        input: String,
        /// The remaining text at the point where parsing failed.
        near: String,
    },
    /// Larger than the ~292-year ceiling shared with Go.
    #[error(
        "duration `{input}` is too long: the maximum is 106751d23h47m16.854775807s (about 292 years), {ex}",
        ex = EXAMPLES
    )]
    Overflow {
        /// The text as given.
        input: String,
    },
}

/// Nanoseconds per unit, or `None` for an unknown unit.
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        // U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU, as Go accepts both.
        "us" | "\u{b5}s" | "\u{3bc}s" => NANOS_PER_MICRO,
        "ms" => NANOS_PER_MILLI,
        "s" => NANOS_PER_SEC,
        "m" => NANOS_PER_MIN,
        "h" => NANOS_PER_HOUR,
        "d" => NANOS_PER_DAY,
        "w" => NANOS_PER_WEEK,
        _ => return None,
    })
}

/// Parses a duration such as `300ms`, `1.5h`, `2h45m`, `2d` or `1w`.
///
/// Surrounding whitespace is ignored. A leading `+` is accepted (as in Go); a leading
/// `-` is rejected. A bare `0` is the only number accepted without a unit. Fractions are
/// computed exactly and truncated to whole nanoseconds.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.starts_with('-') {
        return Err(DurationError::Negative {
            input: input.to_owned(),
        });
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Malformed {
            input: input.to_owned(),
            near: String::new(),
        });
    }
    let overflow = || DurationError::Overflow {
        input: input.to_owned(),
    };

    let mut total: u128 = 0;
    while !rest.is_empty() {
        let segment_start = rest;

        // Integer part.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after_int) = rest.split_at(int_len);

        // Optional fraction.
        let (frac_digits, after_number) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(DurationError::Malformed {
                input: input.to_owned(),
                near: segment_start.to_owned(),
            });
        }
        let number = &segment_start[..segment_start.len() - after_number.len()];

        // Unit: everything up to the next number.
        let unit_len = after_number
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit {
                input: input.to_owned(),
                number: number.to_owned(),
            });
        }
        let per_unit = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            input: input.to_owned(),
            unit: unit.to_owned(),
        })?;

        let mut whole: u128 = 0;
        for digit in int_digits.bytes() {
            whole = whole * 10 + u128::from(digit - b'0');
            if whole > MAX_NANOS {
                return Err(overflow());
            }
        }
        // whole <= i64::MAX and per_unit < 2^50, so the product fits in u128.
        let mut nanos = whole * per_unit;

        let mut fraction: u128 = 0;
        let mut scale: u128 = 1;
        for digit in frac_digits.bytes().take(MAX_FRACTION_DIGITS) {
            fraction = fraction * 10 + u128::from(digit - b'0');
            scale *= 10;
        }
        nanos += fraction * per_unit / scale;

        total = total.checked_add(nanos).ok_or_else(overflow)?;
        if total > MAX_NANOS {
            return Err(overflow());
        }
        rest = after_unit;
    }

    // total <= i64::MAX, so it fits in u64.
    u64::try_from(total).map(Duration::from_nanos).map_err(|_| overflow())
}

/// Formats a duration in the canonical compact form: `0s`, `250ms`, `1.5us`, `30s`,
/// `1h30m`, `1d12h`, `2m3.5s`.
///
/// Durations of a second or more are written as days, hours, minutes and (possibly
/// fractional) seconds, omitting zero components; shorter ones use the largest of ms, us
/// and ns that keeps the integer part non-zero. Weeks are not used because `10d` reads
/// more easily than `1w3d`. The output parses back to the same value with
/// [`parse_duration`] for every duration up to the ~292-year ceiling.
pub fn format_duration(d: Duration) -> String {
    let total = d.as_nanos();
    if total == 0 {
        return "0s".to_owned();
    }
    if total < NANOS_PER_MICRO {
        return format!("{total}ns");
    }
    if total < NANOS_PER_MILLI {
        return with_fraction(total, NANOS_PER_MICRO, 3, "us");
    }
    if total < NANOS_PER_SEC {
        return with_fraction(total, NANOS_PER_MILLI, 6, "ms");
    }

    let mut out = String::new();
    let days = total / NANOS_PER_DAY;
    let hours = total % NANOS_PER_DAY / NANOS_PER_HOUR;
    let minutes = total % NANOS_PER_HOUR / NANOS_PER_MIN;
    let sub_minute = total % NANOS_PER_MIN;
    if days > 0 {
        out.push_str(&format!("{days}d"));
    }
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if sub_minute > 0 {
        out.push_str(&with_fraction(sub_minute, NANOS_PER_SEC, 9, "s"));
    }
    out
}

/// `value / unit` written with a decimal fraction of at most `width` digits, trailing
/// zeros removed.
fn with_fraction(value: u128, unit: u128, width: usize, suffix: &str) -> String {
    let whole = value / unit;
    let rem = value % unit;
    if rem == 0 {
        return format!("{whole}{suffix}");
    }
    let digits = format!("{rem:0width$}");
    format!("{whole}.{}{suffix}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(parse_duration("300ms"), Ok(ms(300)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2h45m"), Ok(Duration::from_secs(2 * 3600 + 45 * 60)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("7us"), Ok(Duration::from_micros(7)));
        assert_eq!(parse_duration("7µs"), Ok(Duration::from_micros(7)));
        assert_eq!(parse_duration("7μs"), Ok(Duration::from_micros(7)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("+5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration(".5s"), Ok(ms(500)));
        assert_eq!(parse_duration("1.s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("  30m "), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h1h"), Ok(Duration::from_secs(7200)));
    }

    #[test]
    fn parses_days_and_weeks() {
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1w"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("1.5d"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_duration("1w2d3h"), Ok(Duration::from_secs(9 * 86_400 + 3 * 3600)));
    }

    #[test]
    fn fractions_are_exact() {
        assert_eq!(parse_duration("0.1s"), Ok(ms(100)));
        assert_eq!(parse_duration("1.000000001s"), Ok(Duration::new(1, 1)));
        assert_eq!(
            parse_duration("0.3333333333333333333333333s"),
            Ok(Duration::from_nanos(333_333_333))
        );
    }

    #[test]
    fn rejects_bad_input_with_helpful_errors() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("   "), Err(DurationError::Empty));
        assert!(matches!(parse_duration("-5s"), Err(DurationError::Negative { .. })));
        assert!(matches!(parse_duration("-0"), Err(DurationError::Negative { .. })));
        assert!(matches!(
            parse_duration("30"),
            Err(DurationError::MissingUnit { ref number, .. }) if number == "30"
        ));
        assert!(matches!(parse_duration("1h30"), Err(DurationError::MissingUnit { .. })));
        assert!(matches!(
            parse_duration("5y"),
            Err(DurationError::UnknownUnit { ref unit, .. }) if unit == "y"
        ));
        assert!(matches!(parse_duration("5 s"), Err(DurationError::UnknownUnit { .. })));
        assert!(matches!(parse_duration("5S"), Err(DurationError::UnknownUnit { .. })));
        assert!(matches!(parse_duration("abc"), Err(DurationError::Malformed { .. })));
        assert!(matches!(parse_duration("."), Err(DurationError::Malformed { .. })));
        assert!(matches!(parse_duration("+"), Err(DurationError::Malformed { .. })));
        assert!(matches!(parse_duration("1h.m"), Err(DurationError::Malformed { .. })));

        let msg = parse_duration("5y").unwrap_err().to_string();
        assert!(msg.contains("`y`") && msg.contains("1h30m"), "{msg}");
        let msg = parse_duration("30").unwrap_err().to_string();
        assert!(msg.contains("no unit") && msg.contains("30s"), "{msg}");
    }

    #[test]
    fn rejects_overflow() {
        // The Go ceiling itself is fine...
        assert_eq!(
            parse_duration("2562047h47m16.854775807s"),
            Ok(Duration::from_nanos(i64::MAX as u64))
        );
        // ...one nanosecond more is not.
        assert!(matches!(
            parse_duration("2562047h47m16.854775808s"),
            Err(DurationError::Overflow { .. })
        ));
        assert!(matches!(
            parse_duration("1000000w"),
            Err(DurationError::Overflow { .. })
        ));
        assert!(matches!(
            parse_duration("99999999999999999999999999999999999999999s"),
            Err(DurationError::Overflow { .. })
        ));
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_secs(90 * 60)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(ms(250)), "250ms");
        assert_eq!(format_duration(ms(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(format_duration(Duration::from_nanos(1500)), "1.5us");
        assert_eq!(format_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(format_duration(Duration::from_secs(36 * 3600)), "1d12h");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::new(123, 500_000_000)), "2m3.5s");
        assert_eq!(format_duration(Duration::new(3600, 1)), "1h0.000000001s");
    }

    #[test]
    fn format_round_trips() {
        let samples = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999),
            Duration::from_nanos(1_001),
            Duration::from_micros(999_999),
            ms(100),
            ms(1_001),
            Duration::from_secs(59),
            Duration::from_secs(61),
            Duration::from_secs(90 * 60),
            Duration::from_secs(86_400 * 9 + 1),
            Duration::new(86_400, 123_456_789),
            Duration::from_nanos(i64::MAX as u64),
        ];
        for d in samples {
            let text = format_duration(d);
            assert_eq!(parse_duration(&text), Ok(d), "round trip of {text}");
        }
        for text in ["300ms", "1.5h", "2h45m", "2d", "1w", "90m", "30s"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "round trip of {text}");
        }
        assert_eq!(format_duration(parse_duration("90m").unwrap()), "1h30m");
    }
}
