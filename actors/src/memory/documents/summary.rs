//! Extractive summaries of archived conversation: what a document holds, in one line.
//!
//! A document's summary is what the model sees first when the document is recalled
//! (and what `doc_query` lists), so it has to say what is inside: when, who, about
//! what, which names and dates, and the few sentences that carry the most. Everything
//! here is taken from the text itself (nothing is generated), so it can be computed
//! on the archive path without a model:
//!
//! * **topics** — jieba's TF-IDF keywords (it segments Chinese and passes English words
//!   through), minus names, fillers and function words;
//! * **entities** — [`crate::memory::text::names`]: capitalised runs in English, jieba's proper-noun
//!   and HMM-discovered words in Chinese;
//! * **dates** — the span of the turns' own times plus every date the text mentions,
//!   made absolute against the moment it was said ([`crate::memory::text::dates`]);
//! * **key sentences** — TextRank (PageRank over a sentence-similarity graph, Mihalcea
//!   & Tarau 2004) on the analyser's terms ([`crate::memory::index::retrieve::analyze`]: stemmed
//!   English words, CJK bigrams), 2–4 of them, redundant ones skipped, in time order.
//!
//! [`DocSummary::render`] writes the line in the conversation's language (Chinese
//! labels when most of the text is Chinese, English otherwise).

use std::collections::HashSet;

use crate::memory::context::Event;
use crate::memory::index::retrieve::{analyze, is_stop_word};
use crate::memory::text::dates::{self, Day};
use crate::memory::text::keywords::Keywords;
use crate::memory::text::sentences::sentences;

/// One thing said: who, when, what.
#[derive(Debug, Clone, PartialEq)]
pub struct Utterance {
    pub ts_ms: i64,
    pub speaker: String,
    pub text: String,
}

/// A sentence picked to stand for the document.
#[derive(Debug, Clone, PartialEq)]
pub struct KeySentence {
    pub ts_ms: i64,
    pub speaker: String,
    pub text: String,
}

/// A date the conversation talks about, with the words around it.
#[derive(Debug, Clone, PartialEq)]
pub struct DatedMention {
    pub day: Day,
    pub context: String,
}

/// What a document holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DocSummary {
    pub turns: usize,
    /// The first and last turn's day.
    pub span: Option<(Day, Day)>,
    /// In order of first appearance.
    pub speakers: Vec<String>,
    pub topics: Vec<String>,
    pub entities: Vec<String>,
    /// Dates mentioned in the text (other than "today"), chronological.
    pub dates: Vec<DatedMention>,
    /// Chronological.
    pub key_sentences: Vec<KeySentence>,
    /// Most of the text is Chinese: render with Chinese labels.
    pub chinese: bool,
}

const MAX_TOPICS: usize = 6;
const MAX_ENTITIES: usize = 8;
const MAX_DATES: usize = 6;
/// Sentences considered by TextRank (the most recent ones; the graph is quadratic).
const MAX_SENTENCES: usize = 400;
/// Characters of a key sentence kept in the rendered line.
const KEY_CHARS: usize = 100;
/// Characters of context shown beside a date.
const DATE_CONTEXT_CHARS: usize = 24;

/// Conversational fillers that TF-IDF ranks high in chat but that say nothing about
/// what was talked about.
const FILLERS: &[&str] = &[
    "really",
    "shares",
    "photo",
    "like",
    "just",
    "yeah",
    "know",
    "think",
    "good",
    "great",
    "thanks",
    "thank",
    "sounds",
    "awesome",
    "amazing",
    "love",
    "glad",
    "hope",
    "feel",
    "lot",
    "things",
    "thing",
    "way",
    "time",
    "also",
    "much",
    "well",
    "get",
    "got",
    "going",
    "make",
    "made",
    "want",
    "see",
    "sure",
    "hey",
    "wow",
    "oh",
    "nice",
    "cool",
    "haha",
    "lol",
    "哈哈",
    "哈哈哈",
    "真的",
    "就是",
    "还是",
    "一下",
    "觉得",
    "没有",
    "感觉",
    "时候",
    "不过",
    "而且",
    "所以",
    "然后",
    "已经",
    "一定",
    "特别",
    "非常",
    "有点",
    "最近",
    "好像",
    "那个",
    "这个",
    "怎么样",
    "恭喜",
    "谢谢",
    "厉害",
    "不错",
];

/// `Name: text` as the importers and the evaluation store a turn between people.
fn split_speaker(input: &str) -> Option<(&str, &str)> {
    let (name, text) = input.split_once(": ").or_else(|| input.split_once('：'))?;
    let n = name.chars().count();
    ((1..=24).contains(&n) && !name.contains(['\n', '[', ']'])).then_some((name.trim(), text.trim()))
}

/// The utterances of archived events: a `Name: text` input is said by `Name`, any other
/// input by its channel; a reply by `agent`.
pub fn utterances(events: &[Event]) -> Vec<Utterance> {
    let mut out = Vec::new();
    for e in events {
        let input = e.input.trim();
        // An agent event's text is its response (added below), not its input.
        let agent_reply = e.source == "agent" && !e.response.is_empty();
        if !input.is_empty() && !agent_reply {
            let (speaker, text) = split_speaker(input).unwrap_or((e.source.as_str(), input));
            out.push(Utterance {
                ts_ms: e.ts_ms,
                speaker: speaker.to_owned(),
                text: text.to_owned(),
            });
        }
        if !e.response.trim().is_empty() {
            out.push(Utterance {
                ts_ms: e.ts_ms,
                speaker: "agent".into(),
                text: e.response.trim().to_owned(),
            });
        }
    }
    out
}

fn is_cjk(c: char) -> bool {
    ('\u{4E00}'..='\u{9FFF}').contains(&c)
}

/// Builds the summary of `items` (in time order).
pub fn summarize(items: &[Utterance]) -> DocSummary {
    let mut s = DocSummary {
        turns: items.len(),
        ..Default::default()
    };
    if items.is_empty() {
        return s;
    }
    let (first, last) = (
        items.iter().map(|u| u.ts_ms).min().unwrap_or(0),
        items.iter().map(|u| u.ts_ms).max().unwrap_or(0),
    );
    s.span = Some((Day::of_ms(first), Day::of_ms(last)));
    for u in items {
        if !s.speakers.contains(&u.speaker) {
            s.speakers.push(u.speaker.clone());
        }
    }
    let (cjk, letters) = items
        .iter()
        .flat_map(|u| u.text.chars())
        .fold((0usize, 0usize), |(c, l), ch| {
            (c + usize::from(is_cjk(ch)), l + usize::from(ch.is_alphanumeric()))
        });
    s.chinese = letters > 0 && cjk * 10 >= letters * 3;

    let kw = Keywords::shared();
    let texts: Vec<&str> = items.iter().map(|u| u.text.as_str()).collect();
    let speakers_lower: HashSet<String> = s.speakers.iter().map(|x| x.to_lowercase()).collect();
    s.entities = crate::memory::text::names::names(kw.jieba(), texts.iter().copied())
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !speakers_lower.contains(&n.to_lowercase()))
        .take(MAX_ENTITIES)
        .collect();

    let taken: HashSet<String> = s
        .entities
        .iter()
        .flat_map(|e| e.split(' ').map(str::to_lowercase).chain([e.to_lowercase()]))
        .chain(speakers_lower.iter().cloned())
        .collect();
    let all = texts.join("\n");
    s.topics = kw
        .extract(&all, MAX_TOPICS * 4)
        .into_iter()
        .filter(|t| {
            let l = t.to_lowercase();
            let latin = l.chars().all(|c| c.is_ascii_alphanumeric());
            !taken.contains(&l)
                && !FILLERS.contains(&l.as_str())
                && !is_stop_word(&l)
                && !l.chars().all(|c| c.is_ascii_digit())
                && (if latin { l.len() >= 3 } else { l.chars().count() >= 2 })
        })
        .take(MAX_TOPICS)
        .collect();

    s.dates = mentioned_dates(items, s.chinese);
    let salient: Vec<String> = s.entities.iter().chain(&s.topics).map(|x| x.to_lowercase()).collect();
    s.key_sentences = key_sentences(items, &salient);
    s
}

fn mentioned_dates(items: &[Utterance], chinese: bool) -> Vec<DatedMention> {
    let limit = if chinese {
        DATE_CONTEXT_CHARS
    } else {
        DATE_CONTEXT_CHARS * 2
    };
    let mut out: Vec<DatedMention> = Vec::new();
    for u in items {
        let today = Day::of_ms(u.ts_ms);
        for m in dates::mentions(&u.text, u.ts_ms) {
            if m.day == today || out.iter().any(|d| d.day == m.day) {
                continue;
            }
            // The clause around the mention, so the date says what happened then.
            let before = u.text[..m.start].rfind(['，', ',', '。', '.', '！', '!', '？', '?', ';', '；']);
            let from = before.map_or(0, |i| i + u.text[i..].chars().next().map_or(1, char::len_utf8));
            let clause = u.text[from..].trim();
            let mut context: String = clause.chars().take(limit).collect();
            if context.len() < clause.len()
                && !chinese
                && let Some(i) = context.rfind(' ')
            {
                // Whole words only.
                context.truncate(i);
            }
            out.push(DatedMention {
                day: m.day,
                context: context.trim_end_matches(['，', ',', '。', '.']).to_owned(),
            });
        }
    }
    out.sort_by_key(|d| d.day);
    out.truncate(MAX_DATES);
    out
}

/// TextRank over the sentences of `items`; 2 key sentences up to 20 turns, 3 up to 60,
/// 4 beyond. Plain TextRank favours the chat's connective tissue ("你最近工作怎么样？"
/// is similar to everything), so a sentence's rank is weighted by the salient words
/// (the summary's names and topics) it contains, and questions count half: the key
/// sentences should be the ones that state something.
fn key_sentences(items: &[Utterance], salient: &[String]) -> Vec<KeySentence> {
    struct Unit<'a> {
        ts_ms: i64,
        speaker: &'a str,
        text: &'a str,
        terms: HashSet<String>,
    }
    let mut units: Vec<Unit<'_>> = items
        .iter()
        .flat_map(|u| {
            sentences(&u.text).into_iter().map(move |t| Unit {
                ts_ms: u.ts_ms,
                speaker: &u.speaker,
                text: t,
                terms: analyze(t).into_iter().collect(),
            })
        })
        // Too few terms to be about anything ("Nice!", "哈哈").
        .filter(|u| u.terms.len() >= 4)
        .collect();
    if units.len() > MAX_SENTENCES {
        units.drain(..units.len() - MAX_SENTENCES);
    }
    let n = units.len();
    if n == 0 {
        return Vec::new();
    }
    let want = match items.len() {
        0..=20 => 2,
        21..=60 => 3,
        _ => 4,
    }
    .min(n);
    // Edge weights: shared terms over the log lengths (the TextRank paper's measure).
    let mut w = vec![vec![0f32; n]; n];
    for i in 0..n {
        for j in i + 1..n {
            let shared = units[i].terms.intersection(&units[j].terms).count();
            if shared > 0 {
                let norm = (units[i].terms.len() as f32).ln() + (units[j].terms.len() as f32).ln();
                let x = shared as f32 / norm.max(1.0);
                w[i][j] = x;
                w[j][i] = x;
            }
        }
    }
    let out_sum: Vec<f32> = w.iter().map(|r| r.iter().sum()).collect();
    let mut score = vec![1f32; n];
    for _ in 0..30 {
        let next: Vec<f32> = (0..n)
            .map(|i| {
                let inflow: f32 = (0..n)
                    .filter(|&j| w[j][i] > 0.0 && out_sum[j] > 0.0)
                    .map(|j| w[j][i] / out_sum[j] * score[j])
                    .sum();
                0.15 + 0.85 * inflow
            })
            .collect();
        score = next;
    }
    for (i, u) in units.iter().enumerate() {
        let lower = u.text.to_lowercase();
        let hits = salient.iter().filter(|w| lower.contains(w.as_str())).count();
        let question = u.text.ends_with(['?', '？']);
        score[i] *= (1.0 + hits as f32) * if question { 0.5 } else { 1.0 };
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    let mut picked: Vec<usize> = Vec::new();
    for i in order {
        let redundant = picked.iter().any(|&p| {
            let inter = units[i].terms.intersection(&units[p].terms).count();
            let union = units[i].terms.union(&units[p].terms).count();
            inter * 2 > union
        });
        if !redundant {
            picked.push(i);
            if picked.len() == want {
                break;
            }
        }
    }
    picked.sort_unstable();
    picked
        .into_iter()
        .map(|i| KeySentence {
            ts_ms: units[i].ts_ms,
            speaker: units[i].speaker.to_owned(),
            text: crate::memory::truncate_chars(units[i].text, KEY_CHARS, "…"),
        })
        .collect()
}

impl DocSummary {
    /// The document's one-paragraph summary line.
    pub fn render(&self) -> String {
        let Some((first, last)) = self.span else {
            return if self.chinese {
                "空文档".into()
            } else {
                "empty document".into()
            };
        };
        let span = match (first == last, self.chinese) {
            (true, _) => first.to_string(),
            (false, true) => format!("{first} 至 {last}"),
            (false, false) => format!("{first} to {last}"),
        };
        let key = |k: &KeySentence| format!("[{} {}] {}", Day::of_ms(k.ts_ms), k.speaker, k.text);
        let date = |d: &DatedMention| {
            if d.context.is_empty() {
                d.day.to_string()
            } else if self.chinese {
                format!("{}（{}）", d.day, d.context)
            } else {
                format!("{} ({})", d.day, d.context)
            }
        };
        let mut out = String::new();
        if self.chinese {
            out.push_str(&format!(
                "{span}，{}的 {} 条对话。",
                self.speakers.join("、"),
                self.turns
            ));
            let mut part = |label: &str, items: Vec<String>, sep: &str| {
                if !items.is_empty() {
                    out.push_str(&format!("{label}：{}。", items.join(sep)));
                }
            };
            part("话题", self.topics.clone(), "、");
            part("提到", self.entities.clone(), "、");
            part("日期", self.dates.iter().map(date).collect(), "；");
            part("要点", self.key_sentences.iter().map(key).collect(), "；");
        } else {
            out.push_str(&format!(
                "{span}: {} turns between {}.",
                self.turns,
                english_list(&self.speakers)
            ));
            let mut part = |label: &str, items: Vec<String>, sep: &str| {
                if !items.is_empty() {
                    out.push_str(&format!(" {label}: {}.", items.join(sep)));
                }
            };
            part("Topics", self.topics.clone(), ", ");
            part("Mentions", self.entities.clone(), ", ");
            part("Dates", self.dates.iter().map(date).collect(), "; ");
            part("Key points", self.key_sentences.iter().map(key).collect(), " ");
        }
        out
    }
}

fn english_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [a] => a.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Was `summary` written by [`DocSummary::render`] (or the count line it replaced)
/// rather than by the model or a user? Generated lines are no topic of their own.
pub fn is_generated(summary: &str) -> bool {
    let s = summary.trim();
    let dated = s.get(..10).and_then(Day::parse).is_some();
    (dated && (s.contains(" 条对话。") || s.contains(" turns between ")))
        || (s.starts_with("来自") && s.contains("条对话"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 March 2024 19:30 UTC.
    const T0: i64 = 1_709_407_800_000;
    const MIN: i64 = 60_000;
    const DAY: i64 = 86_400_000;

    fn u(ts: i64, speaker: &str, text: &str) -> Utterance {
        Utterance {
            ts_ms: ts,
            speaker: speaker.into(),
            text: text.into(),
        }
    }

    fn english() -> Vec<Utterance> {
        vec![
            u(T0, "Ana", "Morning Ben! I finally started pottery classes on Tuesdays."),
            u(
                T0 + MIN,
                "Ben",
                "Nice! I have been training for a half marathon in Lisbon.",
            ),
            u(
                T0 + 2 * MIN,
                "Ana",
                "Lisbon is lovely. My sister Carla lives there with her two cats.",
            ),
            u(T0 + 3 * MIN, "Ben", "I did not know you had a sister."),
            u(
                T0 + 4 * MIN,
                "Ana",
                "Yes, she is a marine biologist studying octopuses in Lisbon.",
            ),
            u(
                T0 + DAY,
                "Ben",
                "I finished the half marathon yesterday, in one hour fifty minutes!",
            ),
            u(
                T0 + DAY + MIN,
                "Ana",
                "Congratulations! My pottery teacher says my pottery bowls are improving.",
            ),
            u(
                T0 + DAY + 2 * MIN,
                "Ana",
                "Carla is visiting on 20 April 2024 to see the octopus exhibit.",
            ),
        ]
    }

    #[test]
    fn an_english_conversation_says_who_when_what() {
        let s = summarize(&english());
        assert!(!s.chinese);
        assert_eq!(s.turns, 8);
        assert_eq!(s.speakers, ["Ana", "Ben"]);
        assert_eq!(
            s.span.map(|(a, b)| (a.to_string(), b.to_string())),
            Some(("2024-03-02".into(), "2024-03-03".into()))
        );
        assert!(
            s.entities.starts_with(&["Lisbon".to_string(), "Carla".to_string()]),
            "{:?}",
            s.entities
        );
        assert!(
            !s.entities.iter().any(|e| e == "Ana" || e == "Ben"),
            "speakers are not mentions: {:?}",
            s.entities
        );
        assert!(s.topics.iter().any(|t| t.to_lowercase() == "pottery"), "{:?}", s.topics);
        let days: Vec<String> = s.dates.iter().map(|d| d.day.to_string()).collect();
        assert_eq!(days, ["2024-03-02", "2024-04-20"], "yesterday of 3 March, and 20 April");
        assert!((2..=4).contains(&s.key_sentences.len()));
        assert!(
            s.key_sentences.windows(2).all(|w| w[0].ts_ms <= w[1].ts_ms),
            "time order"
        );
        let line = s.render();
        assert!(
            line.starts_with("2024-03-02 to 2024-03-03: 8 turns between Ana and Ben."),
            "{line}"
        );
        assert!(
            line.contains("Mentions: Lisbon, Carla") && line.contains("Key points: [2024-03-0"),
            "{line}"
        );
        assert!(is_generated(&line));
    }

    #[test]
    fn a_chinese_conversation_gets_chinese_labels() {
        let items = vec![
            u(T0, "李娜", "我拿到杭州一家设计公司的offer了，下个月就去上班。"),
            u(T0 + MIN, "王磊", "恭喜！我家豆豆这两天病了，一直不吃东西。"),
            u(T0 + 2 * MIN, "李娜", "豆豆是你那只英短吧？希望豆豆快点好起来。"),
            u(T0 + 3 * MIN, "王磊", "我最近开始自学吉他了，每天晚上练半小时吉他。"),
            u(
                T0 + 4 * MIN,
                "李娜",
                "我妹妹李婷五月份要在成都结婚了，婚礼定在5月11日。",
            ),
            u(T0 + 5 * MIN, "王磊", "哈哈"),
        ];
        let s = summarize(&items);
        assert!(s.chinese);
        for want in ["豆豆", "李婷", "成都", "杭州"] {
            assert!(s.entities.iter().any(|e| e == want), "{want} in {:?}", s.entities);
        }
        assert!(s.topics.iter().any(|t| t == "吉他"), "{:?}", s.topics);
        assert_eq!(s.dates.len(), 1);
        assert_eq!(s.dates[0].day.to_string(), "2024-05-11");
        let line = s.render();
        assert!(line.starts_with("2024-03-02，李娜、王磊的 6 条对话。"), "{line}");
        assert!(
            line.contains("日期：2024-05-11（") && line.contains("要点：[2024-03-02 "),
            "{line}"
        );
        assert!(!line.contains("哈哈"), "too short to be a key sentence: {line}");
        assert!(is_generated(&line));
    }

    #[test]
    fn events_become_utterances_with_their_speakers() {
        let ev = |source: &str, input: &str, response: &str| Event {
            id: 0,
            ts_ms: T0,
            source: source.into(),
            input: input.into(),
            response: response.into(),
            tools_used: vec![],
            tool_results: vec![],
            principal: String::new(),
        };
        let us = utterances(&[
            ev("locomo", "Ana: I love Lisbon.", ""),
            ev("http", "what is the time", "It is noon."),
            ev("agent", "", "Done."),
        ]);
        let got: Vec<(&str, &str)> = us.iter().map(|u| (u.speaker.as_str(), u.text.as_str())).collect();
        assert_eq!(
            got,
            [
                ("Ana", "I love Lisbon."),
                ("http", "what is the time"),
                ("agent", "It is noon."),
                ("agent", "Done.")
            ]
        );
    }

    #[test]
    fn nothing_to_summarise_and_old_lines() {
        assert_eq!(summarize(&[]).render(), "empty document");
        assert!(is_generated("来自 2 个来源的 132 条对话 (agent,http)"));
        assert!(!is_generated("Trip planning for Kyoto"));
    }
}
