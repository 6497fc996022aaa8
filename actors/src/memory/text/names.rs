//! Names in text — people, places, pets, organisations — in English and Chinese, for
//! document summaries and the graph index.
//!
//! English has no dictionary here, so a name is a run of Capitalised words
//! ("Biscuit", "New York", "Dr Seuss"); a capitalised word at the start of a sentence
//! counts only when the same word is also capitalised mid-sentence somewhere. Chinese uses jieba's part-of-speech tags
//! (`nr` person, `ns` place, `nt` organisation, `nz` other proper noun) plus the
//! 2–4 character words its HMM discovers (tag `x`), which is how unknown personal
//! names and pets' names come out.

use std::collections::{HashMap, HashSet};

use jieba_rs::Jieba;

use crate::memory::index::retrieve::is_stop_word;

/// Capitalised words that are not names even mid-sentence, and sentence openers that
/// are not names (interjections, fillers, titles without a name).
const NOT_NAMES: &[&str] = &[
    "i",
    "i'm",
    "i've",
    "i'd",
    "i'll",
    "im",
    "ok",
    "okay",
    "oh",
    "hey",
    "hi",
    "hello",
    "yes",
    "yeah",
    "yep",
    "no",
    "nope",
    "wow",
    "thanks",
    "thank",
    "congrats",
    "congratulations",
    "sure",
    "well",
    "great",
    "nice",
    "cool",
    "awesome",
    "sorry",
    "please",
    "good",
    "morning",
    "night",
    "haha",
    "lol",
    "omg",
    "also",
    "maybe",
    "really",
    "totally",
    "definitely",
    "absolutely",
    "anyway",
    "sounds",
    "let's",
    "lets",
    "that's",
    "it's",
    "what's",
    "there's",
    "here's",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "mr",
    "mrs",
    "ms",
    "dr",
];

/// Words that may sit inside a multi-word name ("Bank of America", "Leonardo da Vinci").
const NAME_JOINERS: &[&str] = &["of", "de", "da", "van", "von", "del", "la", "le"];

fn not_a_name(lower: &str) -> bool {
    NOT_NAMES.contains(&lower) || is_stop_word(lower)
}

/// A word with its position: does it start a sentence?
struct Word<'a> {
    text: &'a str,
    sentence_start: bool,
}

fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start = true;
    for raw in text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '"' | '“' | '”'))
    {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        let w = w.strip_suffix("'s").or_else(|| w.strip_suffix("’s")).unwrap_or(w);
        if !w.is_empty() {
            out.push(Word {
                text: w,
                sentence_start: start,
            });
        }
        if !raw.is_empty() {
            let abbreviation =
                ["mr.", "mrs.", "ms.", "dr.", "st.", "jr.", "prof."].contains(&raw.to_lowercase().as_str());
            start = (raw.ends_with(['.', '!', '?']) && !abbreviation) || raw.ends_with("...");
        }
    }
    out
}

fn capitalised(w: &str) -> bool {
    let mut cs = w.chars();
    cs.next().is_some_and(|c| c.is_ascii_uppercase()) && cs.any(|c| c.is_ascii_lowercase())
        || (w.len() >= 2
            && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && w.chars().any(|c| c.is_ascii_uppercase()))
}

/// English names in `texts`, each with how often it occurs, most frequent first.
pub fn english_names<'a>(texts: impl IntoIterator<Item = &'a str> + Clone) -> Vec<(String, usize)> {
    let mut mid_caps: HashSet<String> = HashSet::new();
    let all: Vec<Vec<Word<'_>>> = texts.into_iter().map(words).collect();
    for ws in &all {
        for w in ws {
            if !w.sentence_start && capitalised(w.text) {
                mid_caps.insert(w.text.to_owned());
            }
        }
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for ws in &all {
        let mut i = 0;
        while i < ws.len() {
            let w = &ws[i];
            let lower = w.text.to_lowercase();
            // A word that only ever opens a sentence is a name only when it is also
            // capitalised mid-sentence somewhere: without a dictionary, "Relaxing" or
            // "Anything" would look like one. Contractions are never names.
            let usable = capitalised(w.text)
                && !not_a_name(&lower)
                && !w.text.contains(['\'', '’'])
                && (!w.sentence_start || mid_caps.contains(w.text));
            if !usable {
                i += 1;
                continue;
            }
            let mut parts = vec![w.text];
            let mut j = i + 1;
            while j < ws.len() && !ws[j].sentence_start {
                let n = ws[j].text;
                let name_word = capitalised(n) && !not_a_name(&n.to_lowercase());
                let joiner = NAME_JOINERS.contains(&n)
                    && ws.get(j + 1).is_some_and(|x| !x.sentence_start && capitalised(x.text));
                if name_word || joiner {
                    parts.push(n);
                    j += 1;
                } else {
                    break;
                }
            }
            let name = parts.join(" ");
            if name.chars().count() >= 2 {
                let c = counts.entry(name.clone()).or_insert(0);
                if *c == 0 {
                    order.push(name);
                }
                *c += 1;
            }
            i = j;
        }
    }
    rank(order, &counts)
}

fn rank(order: Vec<String>, counts: &HashMap<String, usize>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = order.into_iter().map(|n| (n.clone(), counts[&n])).collect();
    // Stable: equally frequent names keep their first-seen order.
    out.sort_by_key(|x| std::cmp::Reverse(x.1));
    out
}

fn is_cjk(c: char) -> bool {
    ('\u{4E00}'..='\u{9FFF}').contains(&c)
}

/// Words jieba's dictionary tags as places (`ns`) that are ordinary words.
const NOT_PLACES: &[&str] = &[
    "东西", "吉他", "中间", "南北", "上下", "前后", "左右", "内外", "天下", "世界", "全国",
];

/// Words after which a name follows ("一只橘猫，叫橘子", "名叫小白", "我妹妹李婷").
const NAME_CUES: &[&str] = &[
    "叫",
    "名叫",
    "叫做",
    "取名",
    "名字叫",
    "起名叫",
    "妹妹",
    "姐姐",
    "哥哥",
    "弟弟",
    "朋友",
    "同事",
    "老师",
    "同学",
    "老公",
    "老婆",
    "男朋友",
    "女朋友",
    "儿子",
    "女儿",
    "室友",
    "邻居",
    "前辈",
];

/// Reduplicated words that are kinship terms or adverbs, not nicknames like 豆豆.
const NOT_NICKNAMES: &[&str] = &[
    "妹妹", "姐姐", "哥哥", "弟弟", "妈妈", "爸爸", "奶奶", "爷爷", "婆婆", "公公", "叔叔", "舅舅", "姑姑", "宝宝",
    "星星", "天天", "常常", "刚刚", "慢慢", "好好", "渐渐", "偷偷", "悄悄", "谢谢", "看看", "试试", "想想", "走走",
    "哈哈", "嘿嘿", "呵呵", "嘻嘻", "明明", "人人", "个个", "处处", "早早", "久久", "多多", "大大", "小小",
];

/// Chinese names in `texts`, each with its count, most frequent first: jieba's person,
/// place and organisation tags (`nr*`, `ns`, `nt`; `nz` is too noisy), words its HMM
/// discovered (unknown to the dictionary: usually names), reduplicated nicknames
/// (豆豆), the word after a naming cue (叫…) and quoted names (“半糖”, 《活着》).
pub fn chinese_names<'a>(jieba: &Jieba, texts: impl IntoIterator<Item = &'a str>) -> Vec<(String, usize)> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut unknown_counts: HashMap<String, usize> = HashMap::new();
    let mut unknown_order: Vec<String> = Vec::new();
    let mut add = |w: &str| {
        let c = counts.entry(w.to_owned()).or_insert(0);
        if *c == 0 {
            order.push(w.to_owned());
        }
        *c += 1;
    };
    for text in texts {
        if !text.chars().any(is_cjk) {
            continue;
        }
        let tags = jieba.tag(text, true);
        for (i, t) in tags.iter().enumerate() {
            let cs: Vec<char> = t.word.chars().collect();
            if cs.len() < 2 || !cs.iter().all(|&c| is_cjk(c)) {
                continue;
            }
            let person = t.tag.starts_with("nr");
            let place = (t.tag == "ns" || t.tag == "nt") && !NOT_PLACES.contains(&t.word);
            let unknown = t.tag == "x" && cs.len() <= 4;
            let nickname =
                cs.len() == 2 && cs[0] == cs[1] && matches!(t.tag, "n" | "x") && !NOT_NICKNAMES.contains(&t.word);
            let cued = i > 0 && NAME_CUES.contains(&tags[i - 1].word) && cs.len() <= 4;
            if person || place || nickname || cued {
                add(t.word);
            } else if unknown {
                if !unknown_counts.contains_key(t.word) {
                    unknown_order.push(t.word.to_owned());
                }
                // HMM fragments ("人住", "总点") are as common as real unknown names;
                // only a repeated one is kept (see the filter below).
                *unknown_counts.entry(t.word.to_owned()).or_insert(0) += 1;
            }
        }
        for (open, close) in [('“', '”'), ('「', '」'), ('《', '》'), ('"', '"')] {
            let mut rest = text;
            while let Some(a) = rest.find(open) {
                let after = &rest[a + open.len_utf8()..];
                let Some(b) = after.find(close) else { break };
                let inner = after[..b].trim();
                if (2..=12).contains(&inner.chars().count()) && inner.chars().any(is_cjk) {
                    add(inner);
                }
                rest = &after[b + close.len_utf8()..];
            }
        }
    }
    for w in unknown_order {
        let n = unknown_counts[&w];
        if n >= 2 {
            counts.entry(w.clone()).or_insert(0);
            if counts[&w] == 0 {
                order.push(w.clone());
            }
            *counts.get_mut(&w).expect("inserted") += n;
        }
    }
    rank(order, &counts)
}

/// Both languages' names in `texts`, most frequent first (English first on a tie).
pub fn names<'a>(jieba: &Jieba, texts: impl IntoIterator<Item = &'a str> + Clone) -> Vec<(String, usize)> {
    let mut all = english_names(texts.clone());
    all.extend(chinese_names(jieba, texts));
    all.sort_by_key(|x| std::cmp::Reverse(x.1));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn en(texts: &[&str]) -> Vec<String> {
        english_names(texts.iter().copied())
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn english_names_are_capitalised_runs() {
        let got = en(&[
            "My sister adopted a greyhound called Biscuit.",
            "We moved to New York last May.",
        ]);
        assert_eq!(got, ["Biscuit", "New York"]);
        let got = en(&["Lisbon is lovely. My sister Carla lives there.", "I love Lisbon!"]);
        assert_eq!(
            got,
            ["Lisbon", "Carla"],
            "Lisbon opens a sentence but is capitalised elsewhere too"
        );
    }

    #[test]
    fn sentence_openers_and_fillers_are_not_names() {
        let got = en(&[
            "Nice! Congratulations on the race.",
            "Finished it yesterday. I finished early.",
            "Yes, I'm OK.",
        ]);
        assert!(got.is_empty(), "{got:?}");
        assert_eq!(
            en(&["I read Dr. Seuss and the Bank of America report"]),
            ["Seuss", "Bank of America"]
        );
    }

    #[test]
    fn chinese_names_by_tag_and_hmm() {
        let j = crate::memory::text::keywords::load_jieba();
        let got: Vec<String> = chinese_names(
            &j,
            [
                "我妹妹李婷五月份要在成都结婚",
                "李婷的老公叫赵刚",
                "店名叫“半糖”，我家豆豆是只英短",
                "一只橘猫，叫橘子",
            ],
        )
        .into_iter()
        .map(|(n, _)| n)
        .collect();
        for want in ["李婷", "成都", "赵刚", "半糖", "豆豆", "橘子"] {
            assert!(got.iter().any(|g| g == want), "{want} in {got:?}");
        }
        assert_eq!(got[0], "李婷", "the most frequent first: {got:?}");
        assert!(!got.iter().any(|g| g == "五月份" || g == "东西"), "{got:?}");
    }
}
