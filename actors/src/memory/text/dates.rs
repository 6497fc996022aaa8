//! Dates mentioned in conversation text, made absolute.
//!
//! A remembered turn is only useful for "when did …" questions if its dates can be
//! read without the turn's own clock: "上周六我妹妹的婚礼" said on 18 May 2024 means
//! 2024-05-11. This module finds explicit dates (`2024-05-11`, `2024年5月11日`,
//! `5月11日`, `11 May 2024`, `May 11, 2024`, `May 11`) and the common relative ones
//! (昨天/前天/明天/后天, yesterday/tomorrow, 上周六/下周一, last/next Saturday) and
//! resolves them against the time the text was said. Plain functions, UTC days.

use std::sync::OnceLock;

use regex::Regex;

use crate::memory::civil_from_days;

/// A calendar day (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day {
    pub year: i64,
    pub month: i64,
    pub day: i64,
}

impl Day {
    /// The day a Unix-milliseconds instant falls on.
    pub fn of_ms(ts_ms: i64) -> Self {
        Self::from_days(ts_ms.div_euclid(86_400_000))
    }

    /// The day `days` days after 1970-01-01.
    pub fn of_days(days: i64) -> Self {
        Self::from_days(days)
    }

    fn from_days(days: i64) -> Self {
        let (year, month, day) = civil_from_days(days);
        Self { year, month, day }
    }

    /// `YYYY-MM-DD`, as [`Day`]'s `Display` writes it.
    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.trim().splitn(3, '-').map(|p| p.parse::<i64>().ok());
        let (y, m, d) = (it.next()??, it.next()??, it.next()??);
        Self::checked(y, m, d)
    }

    /// Days since 1970-01-01.
    pub fn days(self) -> i64 {
        days_from_civil(self.year, self.month, self.day)
    }

    /// A real calendar day (rejects `2月30日`, month 13, …).
    fn checked(year: i64, month: i64, day: i64) -> Option<Self> {
        let d = Self { year, month, day };
        ((1..=12).contains(&month) && (1..=31).contains(&day) && Self::from_days(d.days()) == d).then_some(d)
    }

    fn plus(self, n: i64) -> Self {
        Self::from_days(self.days() + n)
    }

    /// 0 = Monday … 6 = Sunday.
    fn weekday(self) -> i64 {
        // 1970-01-01 was a Thursday.
        (self.days() + 3).rem_euclid(7)
    }
}

impl std::fmt::Display for Day {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian; the inverse of
/// [`civil_from_days`]).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One date found in a text: the day it means and the words that said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub day: Day,
    /// Byte range of the mention in the text.
    pub start: usize,
    pub end: usize,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// The month (1–12) an English month name or its abbreviation names.
pub fn month_of(name: &str) -> Option<i64> {
    let n = name.to_lowercase();
    MONTHS.iter().position(|m| n.starts_with(m)).map(|i| i as i64 + 1)
}

const MONTH_RE: &str = "(January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)";

fn patterns() -> &'static [(Regex, Kind)] {
    static P: OnceLock<Vec<(Regex, Kind)>> = OnceLock::new();
    P.get_or_init(|| {
        let re = |s: &str| Regex::new(s).expect("date pattern compiles");
        vec![
            (re(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), Kind::Ymd),
            (re(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), Kind::Ymd),
            (re(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), Kind::Md),
            (
                re(&format!(
                    r"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{MONTH_RE}\.?,?\s+(\d{{4}})\b"
                )),
                Kind::DMonY,
            ),
            (
                re(&format!(
                    r"\b{MONTH_RE}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"
                )),
                Kind::MonDY,
            ),
            (
                re(&format!(r"\b{MONTH_RE}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b")),
                Kind::MonD,
            ),
            (re(r"前天|昨天|今天|明天|后天"), Kind::ZhOffset),
            (
                re(r"(?i)\b(?:the day before yesterday|yesterday|today|tonight|tomorrow)\b"),
                Kind::EnOffset,
            ),
            (
                re(r"(上上|上|这|本|下)(?:周|星期|礼拜)([一二三四五六日天])"),
                Kind::ZhWeek,
            ),
            (
                re(r"(?i)\b(last|this|next)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"),
                Kind::EnWeek,
            ),
        ]
    })
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Ymd,
    Md,
    DMonY,
    MonDY,
    MonD,
    ZhOffset,
    EnOffset,
    ZhWeek,
    EnWeek,
}

fn int(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// The dates `text` mentions, resolved against `said_ms` (when it was said), in text
/// order; overlapping matches keep the first (the most specific pattern).
pub fn mentions(text: &str, said_ms: i64) -> Vec<Mention> {
    let today = Day::of_ms(said_ms);
    let mut out: Vec<Mention> = Vec::new();
    for (re, kind) in patterns() {
        for c in re.captures_iter(text) {
            let m = c.get(0).expect("group 0");
            if out.iter().any(|o| m.start() < o.end && o.start < m.end()) {
                continue;
            }
            let g = |i: usize| c.get(i).map_or("", |x| x.as_str());
            let day = match kind {
                Kind::Ymd => int(g(1))
                    .zip(int(g(2)))
                    .zip(int(g(3)))
                    .and_then(|((y, mo), d)| Day::checked(y, mo, d)),
                Kind::Md => int(g(1))
                    .zip(int(g(2)))
                    .and_then(|(mo, d)| Day::checked(today.year, mo, d)),
                Kind::DMonY => month_of(g(2))
                    .zip(int(g(1)))
                    .zip(int(g(3)))
                    .and_then(|((mo, d), y)| Day::checked(y, mo, d)),
                Kind::MonDY => month_of(g(1))
                    .zip(int(g(2)))
                    .zip(int(g(3)))
                    .and_then(|((mo, d), y)| Day::checked(y, mo, d)),
                Kind::MonD => month_of(g(1))
                    .zip(int(g(2)))
                    .and_then(|(mo, d)| Day::checked(today.year, mo, d)),
                Kind::ZhOffset => {
                    let n = match g(0) {
                        "前天" => -2,
                        "昨天" => -1,
                        "今天" => 0,
                        "明天" => 1,
                        _ => 2,
                    };
                    Some(today.plus(n))
                }
                Kind::EnOffset => {
                    let n = match g(0).to_lowercase().as_str() {
                        "the day before yesterday" => -2,
                        "yesterday" => -1,
                        "tomorrow" => 1,
                        _ => 0,
                    };
                    Some(today.plus(n))
                }
                Kind::ZhWeek => {
                    let week = match g(1) {
                        "上上" => -2,
                        "上" => -1,
                        "下" => 1,
                        _ => 0,
                    };
                    let wd = "一二三四五六日"
                        .chars()
                        .position(|ch| g(2).starts_with(ch))
                        .unwrap_or(6) as i64;
                    // Weeks start on Monday: 上周六 is the Saturday of the week before this one.
                    Some(today.plus(-today.weekday() + week * 7 + wd))
                }
                Kind::EnWeek => {
                    let names = [
                        "monday",
                        "tuesday",
                        "wednesday",
                        "thursday",
                        "friday",
                        "saturday",
                        "sunday",
                    ];
                    let wd = names.iter().position(|n| *n == g(2).to_lowercase()).unwrap_or(0) as i64;
                    let delta = wd - today.weekday();
                    // "last Saturday": the most recent one before today; "next": the first after.
                    let n = match g(1).to_lowercase().as_str() {
                        "last" => {
                            if delta < 0 {
                                delta
                            } else {
                                delta - 7
                            }
                        }
                        "next" => {
                            if delta > 0 {
                                delta
                            } else {
                                delta + 7
                            }
                        }
                        _ => delta,
                    };
                    Some(today.plus(n))
                }
            };
            if let Some(day) = day {
                out.push(Mention {
                    day,
                    start: m.start(),
                    end: m.end(),
                });
            }
        }
    }
    out.sort_by_key(|m| m.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 18 May 2024, a Saturday, 14:20 UTC.
    const SAT: i64 = (19_861 * 86_400 + 14 * 3600 + 20 * 60) * 1000;

    fn days(text: &str) -> Vec<String> {
        mentions(text, SAT).into_iter().map(|m| m.day.to_string()).collect()
    }

    #[test]
    fn the_reference_day_is_what_we_think() {
        assert_eq!(Day::of_ms(SAT).to_string(), "2024-05-18");
        assert_eq!(Day::of_ms(SAT).weekday(), 5);
        assert_eq!(days_from_civil(1970, 1, 1), 0);
    }

    #[test]
    fn explicit_dates_in_both_languages() {
        assert_eq!(days("婚礼定在2024年6月1日"), ["2024-06-01"]);
        assert_eq!(days("我们10月3号出发"), ["2024-10-03"]);
        assert_eq!(days("The race was on 8 May 2023."), ["2023-05-08"]);
        assert_eq!(
            days("since March 3rd, 2022 and 2021-12-24"),
            ["2022-03-03", "2021-12-24"]
        );
        assert_eq!(days("see you on June 9"), ["2024-06-09"]);
    }

    #[test]
    fn relative_dates_resolve_against_when_they_were_said() {
        assert_eq!(days("上周六我妹妹的婚礼在成都办的"), ["2024-05-11"]);
        assert_eq!(days("下周一就正式上班了"), ["2024-05-20"]);
        assert_eq!(days("昨天下雨，明天晴"), ["2024-05-17", "2024-05-19"]);
        assert_eq!(days("I went there yesterday"), ["2024-05-17"]);
        assert_eq!(
            days("last Saturday we hiked; next Friday I fly"),
            ["2024-05-11", "2024-05-24"]
        );
    }

    #[test]
    fn impossible_dates_and_plain_numbers_are_not_dates() {
        assert!(days("2月30日").is_empty());
        assert!(days("I ran 42 km in May").is_empty());
        assert!(days("今年四十二个孩子").is_empty());
    }
}
