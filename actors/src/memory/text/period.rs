//! The stretch of time a question asks about ("in May 2023", "last week", "去年",
//! "on October 13, 2023"), so recall can rank what was said then among itself
//! (`docindex::merge`): a question that names a time is answered by what was said
//! around it.
//!
//! Days come from [`dates::mentions`] (the same reading the memory gives its own
//! texts); months, years and the relative stretches ("last month", "3 years ago",
//! "上个月", "两年前") are read here. A month without a year ("in June") means that
//! month of any year: the question does not say which, and recall only ranks by it.
//! Plain functions over UTC days; "now" is the caller's (the kernel clock's).

use std::sync::OnceLock;

use regex::Regex;

use super::dates::{self, Day, days_from_civil, month_of};

/// How long after a stretch a turn still counts as said about it: people tell of a
/// weekend days later ("last weekend we went camping"), rarely weeks later.
pub const TOLD_AFTER_DAYS: i64 = 7;

/// One stretch of days a question names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Days since 1970-01-01, from `from` up to (not including) `to`.
    Days { from: i64, to: i64 },
    /// A month (1–12) of whichever year.
    Month(i64),
}

/// How far "before the trip" and "after the trip" reach from the event: the month
/// leading up to it, the month after it.
pub const EVENT_REACH_DAYS: i64 = 30;

/// Which side of an event a question asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// "before the trip", "until the move", "婚礼之前": the [`EVENT_REACH_DAYS`] up to it.
    Before,
    /// "after the wedding", "搬家以后": the [`EVENT_REACH_DAYS`] from it.
    After,
    /// "since the move": from it until now.
    Since,
}

/// A time given by another event ("before the trip"): only the memory knows when
/// that was, so the index that holds it resolves it ([`Anchor::span`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub side: Side,
    /// The words naming the event ("trip", "charity race", "旅行").
    pub words: String,
}

impl Anchor {
    /// The stretch this asks about, given `day`, the day the memory talks of the event
    /// most, and `today`.
    pub fn span(&self, day: i64, today: i64) -> Span {
        match self.side {
            Side::Before => Span::Days {
                from: day - EVENT_REACH_DAYS,
                to: day + 1,
            },
            Side::After => Span::Days {
                from: day,
                to: day + EVENT_REACH_DAYS,
            },
            Side::Since => Span::Days {
                from: day,
                to: today.max(day) + 1,
            },
        }
    }
}

/// What a question says about when: every stretch it names (any of them counts), and
/// the events it gives times by, not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Period {
    pub spans: Vec<Span>,
    pub events: Vec<Anchor>,
}

impl Period {
    /// Whether something said at `ts_ms` was said in (or up to [`TOLD_AFTER_DAYS`]
    /// after) one of the stretches.
    pub fn contains(&self, ts_ms: i64) -> bool {
        let day = ts_ms.div_euclid(86_400_000);
        self.spans.iter().any(|s| match *s {
            Span::Days { from, to } => day >= from && day < to + TOLD_AFTER_DAYS,
            Span::Month(m) => Day::of_days(day).month == m || Day::of_days(day - TOLD_AFTER_DAYS).month == m,
        })
    }
}

const MONTH_RE: &str = "(January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)";

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// "May 2023", "2023年5月".
    MonthYear,
    YearMonthZh,
    /// "in May", "during June" (no year: any year); "last May", "this June".
    Month,
    MonthZh,
    /// "in 2022", "2022年".
    Year,
    /// "last week", "this month", "next year".
    Relative,
    /// 上周, 这个月, 去年 …
    RelativeZh,
    /// "3 years ago", "a week ago", "两年前".
    Ago,
    AgoZh,
    /// "before the trip", "since her wedding", "搬家以后".
    Event,
    EventZh,
}

fn patterns() -> &'static [(Regex, Kind)] {
    static P: OnceLock<Vec<(Regex, Kind)>> = OnceLock::new();
    P.get_or_init(|| {
        let re = |s: &str| Regex::new(s).expect("period pattern compiles");
        vec![
            (re(&format!(r"\b{MONTH_RE}\.?,?\s+((?:19|20)\d\d)\b")), Kind::MonthYear),
            (re(r"((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月"), Kind::YearMonthZh),
            (
                re(&format!(
                    r"(?i)\b(in|during|of|since|by|early|late|mid|last|this|next)\s+{MONTH_RE}\b"
                )),
                Kind::Month,
            ),
            (re(r"(\d{1,2}|[一二三四五六七八九十]{1,2})\s*月份?"), Kind::MonthZh),
            (
                re(r"(?i)\b(?:in|during|of|since|by|year)\s+((?:19|20)\d\d)\b"),
                Kind::Year,
            ),
            (re(r"((?:19|20)\d\d)\s*年"), Kind::Year),
            (
                re(r"(?i)\b(last|this|next)\s+(week|weekend|month|year)\b"),
                Kind::Relative,
            ),
            (
                re(r"(上上|上|这|本|下)(?:个)?(周末|周|星期|礼拜|月)|(前年|去年|今年|明年)"),
                Kind::RelativeZh,
            ),
            (
                re(r"(?i)\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(day|week|month|year)s?\s+ago\b"),
                Kind::Ago,
            ),
            (
                re(r"(\d+|[一二两三四五六七八九十]{1,2})\s*(?:个)?\s*(天|周|星期|月|年)前"),
                Kind::AgoZh,
            ),
            // Last: a time read above is not an event ("before last May").
            (
                re(r"(?i)\b(before|after|since|until|till|prior to)\s+(?:the|my|our|her|his|their|your|that)\s+([a-z][a-z'-]+(?:\s+[a-z][a-z'-]+)?)"),
                Kind::Event,
            ),
            (re(r"(\p{Han}{2})(之前|之后|以后)"), Kind::EventZh),
        ]
    })
}

/// The largest count read ("… 9999 years ago"): a hostile "9223372036854775807 days
/// ago" must not overflow the day arithmetic.
const MAX_COUNT: i64 = 100_000;

/// A small count in words or digits (None above [`MAX_COUNT`]).
fn count(s: &str) -> Option<i64> {
    if let Ok(n) = s.parse::<i64>() {
        return (n <= MAX_COUNT).then_some(n);
    }
    const EN: [&str; 11] = [
        "", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let lower = s.to_lowercase();
    if lower == "a" || lower == "an" {
        return Some(1);
    }
    if let Some(i) = EN.iter().position(|w| !w.is_empty() && *w == lower) {
        return Some(i as i64);
    }
    // 一 … 十, 十一 … 十九, 两.
    let digit = |c: char| "一二三四五六七八九".chars().position(|d| d == c).map(|i| i as i64 + 1);
    let cs: Vec<char> = s.chars().collect();
    match cs.as_slice() {
        ['两'] => Some(2),
        ['十'] => Some(10),
        [c] => digit(*c),
        ['十', c] => digit(*c).map(|d| 10 + d),
        [c, '十'] => digit(*c).map(|d| d * 10),
        _ => None,
    }
}

fn month_days(year: i64, month: i64) -> Span {
    let from = days_from_civil(year, month, 1);
    let to = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month + 1, 1)
    };
    Span::Days { from, to }
}

fn year_days(year: i64) -> Span {
    Span::Days {
        from: days_from_civil(year, 1, 1),
        to: days_from_civil(year + 1, 1, 1),
    }
}

/// Monday of the week `today` is in, `weeks` weeks on (negative: before).
fn week_days(today: Day, weeks: i64) -> Span {
    let monday = today.days() - (today.days() + 3).rem_euclid(7) + weeks * 7;
    Span::Days {
        from: monday,
        to: monday + 7,
    }
}

/// Saturday and Sunday of the week `weeks` weeks on from `today`'s.
fn weekend_days(today: Day, weeks: i64) -> Span {
    let monday = today.days() - (today.days() + 3).rem_euclid(7) + weeks * 7;
    Span::Days {
        from: monday + 5,
        to: monday + 7,
    }
}

/// The month `months` months on from `today`'s (negative: before).
fn month_from(today: Day, months: i64) -> Span {
    let m = today.year * 12 + (today.month - 1) + months;
    month_days(m.div_euclid(12), m.rem_euclid(12) + 1)
}

/// The stretches of time `text` asks about, read against `now_ms` (None: it names no
/// time). Overlapping readings keep the first, the most specific (a day before its
/// month, "May 2023" before "in May").
pub fn period(text: &str, now_ms: i64) -> Option<Period> {
    let today = Day::of_ms(now_ms);
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    let mut events: Vec<Anchor> = Vec::new();
    for m in dates::mentions(text, now_ms) {
        taken.push((m.start, m.end));
        spans.push(Span::Days {
            from: m.day.days(),
            to: m.day.days() + 1,
        });
    }
    for (re, kind) in patterns() {
        for c in re.captures_iter(text) {
            let whole = c.get(0).expect("group 0");
            if taken.iter().any(|&(s, e)| whole.start() < e && s < whole.end()) {
                continue;
            }
            let g = |i: usize| c.get(i).map_or("", |x| x.as_str());
            if let Some(e) = event(kind, g(1), g(2)) {
                taken.push((whole.start(), whole.end()));
                events.push(e);
                continue;
            }
            let span = match kind {
                Kind::Event | Kind::EventZh => None,
                Kind::MonthYear => month_of(g(1)).zip(g(2).parse().ok()).map(|(m, y)| month_days(y, m)),
                Kind::YearMonthZh => g(1)
                    .parse()
                    .ok()
                    .zip(g(2).parse().ok())
                    .filter(|(_, m)| (1..=12).contains(m))
                    .map(|(y, m)| month_days(y, m)),
                Kind::Month => month_of(g(2)).map(|m| match g(1).to_lowercase().as_str() {
                    "this" => month_days(today.year, m),
                    // The most recent one before this month, the first one after it.
                    "last" => month_days(if m < today.month { today.year } else { today.year - 1 }, m),
                    "next" => month_days(if m > today.month { today.year } else { today.year + 1 }, m),
                    _ => Span::Month(m),
                }),
                Kind::MonthZh => count(g(1)).filter(|m| (1..=12).contains(m)).map(Span::Month),
                Kind::Year => g(1).parse().ok().map(year_days),
                Kind::Relative => {
                    let n = match g(1).to_lowercase().as_str() {
                        "last" => -1,
                        "next" => 1,
                        _ => 0,
                    };
                    match g(2).to_lowercase().as_str() {
                        "week" => Some(week_days(today, n)),
                        "weekend" => Some(weekend_days(today, n)),
                        "month" => Some(month_from(today, n)),
                        _ => Some(year_days(today.year + n)),
                    }
                }
                Kind::RelativeZh => {
                    if !g(3).is_empty() {
                        let n = match g(3) {
                            "前年" => -2,
                            "去年" => -1,
                            "今年" => 0,
                            _ => 1,
                        };
                        Some(year_days(today.year + n))
                    } else {
                        let n = match g(1) {
                            "上上" => -2,
                            "上" => -1,
                            "下" => 1,
                            _ => 0,
                        };
                        match g(2) {
                            "月" => Some(month_from(today, n)),
                            "周末" => Some(weekend_days(today, n)),
                            _ => Some(week_days(today, n)),
                        }
                    }
                }
                Kind::Ago | Kind::AgoZh => count(g(1)).map(|n| {
                    let unit = match g(2).to_lowercase().as_str() {
                        "day" | "天" => "day",
                        "week" | "周" | "星期" => "week",
                        "month" | "月" => "month",
                        _ => "year",
                    };
                    match unit {
                        "day" => Span::Days {
                            from: today.days() - n,
                            to: today.days() - n + 1,
                        },
                        "week" => week_days(today, -n),
                        "month" => month_from(today, -n),
                        _ => year_days(today.year - n),
                    }
                }),
            };
            if let Some(span) = span {
                taken.push((whole.start(), whole.end()));
                spans.push(span);
            }
        }
    }
    (!spans.is_empty() || !events.is_empty()).then_some(Period { spans, events })
}

/// Words after "before the" that end the event's name ("before the trip to Paris" is
/// the trip) or are no event at all.
const NOT_EVENT_WORDS: &[&str] = &[
    "to",
    "in",
    "on",
    "at",
    "with",
    "for",
    "of",
    "and",
    "or",
    "we",
    "i",
    "you",
    "she",
    "he",
    "they",
    "it",
    "was",
    "is",
    "were",
    "did",
    "day",
    "week",
    "weekend",
    "month",
    "year",
    "end",
    "start",
    "beginning",
];

/// Han characters that make two characters before 之前/以后 a time, not an event
/// (两年之前, 三天以后).
const NOT_EVENT_ZH: &str = "年月天周日时点分秒号一二两三四五六七八九十几";

/// The event a match of an event pattern names (None for other kinds, and for words
/// that name no event).
fn event(kind: &Kind, first: &str, second: &str) -> Option<Anchor> {
    match kind {
        Kind::Event => {
            let side = match first.to_lowercase().as_str() {
                "after" => Side::After,
                "since" => Side::Since,
                _ => Side::Before,
            };
            let words: Vec<&str> = second
                .split_whitespace()
                .take_while(|w| !NOT_EVENT_WORDS.contains(&w.to_lowercase().as_str()))
                .collect();
            (!words.is_empty()).then(|| Anchor {
                side,
                words: words.join(" "),
            })
        }
        Kind::EventZh => {
            let side = if second == "之前" { Side::Before } else { Side::After };
            (!first.chars().any(|c| NOT_EVENT_ZH.contains(c))).then(|| Anchor {
                side,
                words: first.to_owned(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 18 May 2024, a Saturday, 14:20 UTC.
    const NOW: i64 = (19_861 * 86_400 + 14 * 3600 + 20 * 60) * 1000;

    fn at(y: i64, m: i64, d: i64) -> i64 {
        days_from_civil(y, m, d) * 86_400_000 + 12 * 3_600_000
    }

    /// The first and last day each span covers (months of any year as `*-MM`).
    fn read(text: &str) -> Vec<String> {
        period(text, NOW)
            .map(|p| p.spans)
            .unwrap_or_default()
            .into_iter()
            .map(|s| match s {
                Span::Days { from, to } => format!("{}..{}", Day::of_days(from), Day::of_days(to - 1)),
                Span::Month(m) => format!("*-{m:02}"),
            })
            .collect()
    }

    #[test]
    fn days_months_and_years_named_outright() {
        assert_eq!(
            read("What painting did Melanie show on October 13, 2023?"),
            ["2023-10-13..2023-10-13"]
        );
        assert_eq!(
            read("What did Gina find for her store on 1 February, 2023?"),
            ["2023-02-01..2023-02-01"]
        );
        assert_eq!(
            read("What setback did she face in October 2023?"),
            ["2023-10-01..2023-10-31"]
        );
        assert_eq!(
            read("How many times has she gone to the beach in 2023?"),
            ["2023-01-01..2023-12-31"]
        );
        assert_eq!(read("When did Melanie go camping in June?"), ["*-06"]);
        assert_eq!(read("我2023年5月去了哪里？"), ["2023-05-01..2023-05-31"]);
        assert_eq!(read("三月份我们聊了什么"), ["*-03"]);
        assert_eq!(read("2022年发生了什么"), ["2022-01-01..2022-12-31"]);
    }

    #[test]
    fn relative_stretches_resolve_against_now() {
        assert_eq!(read("what did we plan last week?"), ["2024-05-06..2024-05-12"]);
        assert_eq!(read("and last weekend?"), ["2024-05-11..2024-05-12"]);
        assert_eq!(read("anything this month"), ["2024-05-01..2024-05-31"]);
        assert_eq!(read("what happened last year"), ["2023-01-01..2023-12-31"]);
        assert_eq!(
            read("Where did Caroline move from 4 years ago?"),
            ["2020-01-01..2020-12-31"]
        );
        assert_eq!(read("a month ago"), ["2024-04-01..2024-04-30"]);
        assert_eq!(read("last May"), ["2023-05-01..2023-05-31"]);
        assert_eq!(read("next March"), ["2025-03-01..2025-03-31"]);
        assert_eq!(read("yesterday"), ["2024-05-17..2024-05-17"]);
        assert_eq!(read("去年我们去哪儿了"), ["2023-01-01..2023-12-31"]);
        assert_eq!(read("上个月的事"), ["2024-04-01..2024-04-30"]);
        assert_eq!(read("上周说的"), ["2024-05-06..2024-05-12"]);
        assert_eq!(read("两年前"), ["2022-01-01..2022-12-31"]);
        assert_eq!(read("三天前"), ["2024-05-15..2024-05-15"]);
    }

    /// The events `text` gives times by, as `side words`.
    fn events(text: &str) -> Vec<String> {
        period(text, NOW)
            .map(|p| p.events)
            .unwrap_or_default()
            .into_iter()
            .map(|e| format!("{:?} {}", e.side, e.words))
            .collect()
    }

    #[test]
    fn a_time_given_by_another_event_is_left_for_the_memory_to_date() {
        assert_eq!(events("What did Mel paint before the trip?"), ["Before trip"]);
        assert_eq!(
            events("What did she do after the charity race?"),
            ["After charity race"]
        );
        assert_eq!(events("What changed since her wedding?"), ["Since wedding"]);
        assert_eq!(events("Where did they go before the trip to Paris?"), ["Before trip"]);
        assert_eq!(events("搬家以后她做了什么"), ["After 搬家"]);
        assert_eq!(events("婚礼之前"), ["Before 婚礼"]);
        // Times, not events.
        assert!(events("before the end of May").is_empty());
        assert!(events("after last May").is_empty());
        assert!(events("两年之前").is_empty());
        assert!(events("before we left").is_empty());
        // An event and a time together.
        let p = period("What did she do in May 2024 after the move?", NOW).expect("both");
        assert_eq!((p.spans.len(), p.events.len()), (1, 1));
        // The stretch each side asks about, from the day the memory dates the event.
        let d = days_from_civil(2024, 3, 10);
        let today = days_from_civil(2024, 5, 18);
        let e = |side| Anchor {
            side,
            words: "trip".into(),
        };
        assert_eq!(
            e(Side::Before).span(d, today),
            Span::Days {
                from: d - 30,
                to: d + 1
            }
        );
        assert_eq!(e(Side::After).span(d, today), Span::Days { from: d, to: d + 30 });
        assert_eq!(e(Side::Since).span(d, today), Span::Days { from: d, to: today + 1 });
    }

    #[test]
    fn huge_counts_are_no_time_rather_than_an_overflow() {
        assert!(read("9223372036854775807 days ago").is_empty());
        assert!(read("9223372036854775807 years ago and 99999999999999999999 weeks ago").is_empty());
        assert_eq!(read("100000 days ago").len(), 1);
        assert!(read("100001 months ago").is_empty());
    }

    #[test]
    fn words_that_only_look_like_times_are_not() {
        assert!(read("May I ask what Melanie paints?").is_empty());
        assert!(read("We march on").is_empty());
        assert!(read("She ran 2023 metres").is_empty());
        assert!(read("What does Melanie do to destress?").is_empty());
    }

    #[test]
    fn a_stretch_holds_what_was_said_in_it_and_told_a_week_after() {
        let june = period("camping in June", NOW).expect("a month");
        assert!(june.contains(at(2023, 6, 20)));
        assert!(june.contains(at(2021, 6, 1)), "any year's June");
        assert!(june.contains(at(2023, 7, 5)), "told days after");
        assert!(!june.contains(at(2023, 7, 9)));
        assert!(!june.contains(at(2023, 5, 31)));
        let day = period("on 8 May 2023", NOW).expect("a day");
        assert!(day.contains(at(2023, 5, 8)));
        assert!(day.contains(at(2023, 5, 15)));
        assert!(!day.contains(at(2023, 5, 16)));
        assert!(!day.contains(at(2023, 5, 7)));
    }
}
