//! The rule distiller's extraction: facts a speaker states about themself ("我叫…",
//! "我住在…", "我喜欢…", "我…岁", "我的工作是…") become `用户 —relation→ value`
//! triples. These are prefix rules on clauses, not regular expressions: a clause must
//! start with the prefix, and the value is the rest of the clause.
//!
//! Clauses are split at sentence and clause punctuation (`。！？；，,!?;` and newlines),
//! so "我叫张三，我住在北京" yields both the name and the place. Values over the
//! reference's byte limits are rejected (they are more likely a whole sentence than a
//! fact).

use crate::memory::graph::{Triple, USER};

/// Relation, prefixes, and the value's limit in bytes (exclusive).
const RULES: &[(&str, &[&str], usize)] = &[
    ("姓名", &["我的名字是", "我叫", "名字是"], 20),
    ("居住地", &["我居住在", "我住在", "我家在", "住在"], 50),
    ("喜好", &["我最喜欢", "我喜欢", "我爱"], 50),
    ("年龄", &["我的年龄是"], 5),
    ("职业", &["我的工作是"], 20),
    // Another name: the graph makes it an alias of the speaker (`graph::is_alias_relation`).
    ("小名", crate::memory::text::aliases::ZH_CUES, 20),
];

/// Relatives a Chinese self-statement may name ("我妹妹叫…").
const RELATIVES_ZH: &[&str] = &[
    "妹妹",
    "姐姐",
    "哥哥",
    "弟弟",
    "妈妈",
    "爸爸",
    "母亲",
    "父亲",
    "老公",
    "老婆",
    "丈夫",
    "妻子",
    "女朋友",
    "男朋友",
    "儿子",
    "女儿",
    "朋友",
    "奶奶",
    "爷爷",
    "外婆",
    "外公",
    "猫",
    "狗",
];

fn clauses(text: &str) -> impl Iterator<Item = &str> {
    text.split(['。', '！', '？', '；', '，', ',', '!', '?', ';', '\n', ' ', '\t'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
}

fn fact(relation: &str, value: &str, limit: usize, sentence: &str) -> Option<Triple> {
    let value = value.trim();
    (!value.is_empty() && value.len() < limit).then(|| Triple {
        subject: USER.into(),
        subject_type: "Person".into(),
        relation: relation.into(),
        object: value.into(),
        confidence: 0.8,
        sentence: sentence.trim().into(),
        ..Default::default()
    })
}

/// Prefixes that are labels, not speakers ("Note: …", "注意：…").
const NOT_SPEAKERS: &[&str] = &[
    "note", "ps", "update", "reminder", "todo", "question", "answer", "re", "fyi", "edit", "warning", "error", "tip",
    "hint", "summary", "注意", "提醒", "备注", "问题", "回答", "总结", "更新", "今天", "明天", "昨天",
];

/// `Name: text` (as imported conversations and the evaluation write a turn between
/// people): the statements are the speaker's, not the user's. A name is 1–3
/// capitalised words or 2–4 Chinese characters not starting with a pronoun.
pub fn speaker(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.split_once(": ").or_else(|| text.split_once('：'))?;
    let name = name.trim();
    let cjk = |c: char| ('\u{4E00}'..='\u{9FFF}').contains(&c);
    let words: Vec<&str> = name.split_whitespace().collect();
    let english = (1..=3).contains(&words.len())
        && words.iter().all(|w| {
            w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && w.chars().all(|c| c.is_ascii_alphabetic() || c == '.')
        });
    let n = name.chars().count();
    let chinese = (2..=4).contains(&n) && name.chars().all(cjk) && !name.starts_with(['我', '你', '他', '她', '它']);
    let label = NOT_SPEAKERS.contains(&name.to_lowercase().as_str());
    ((english || chinese) && !label).then_some((name, rest))
}

/// What `speaker` said, as [`extract_triples`] reads it: `Name: text` when the speaker
/// has a person's name (an imported conversation's `Caroline`), so the facts are the
/// speaker's; the text alone when the speaker is a channel (`http`, `webui/tab-1`, a
/// plugin), so they are the user's.
pub fn said_by(who: &str, text: &str) -> String {
    let who = who.trim();
    let named = format!("{who}: {text}");
    if !who.is_empty() && speaker(&named).is_some_and(|(name, _)| name == who) {
        named
    } else {
        text.to_owned()
    }
}

/// The facts stated in `text` (one message), in order: the speaker's when it starts
/// with `Name: `, else the user's. Chinese clauses go through the prefix rules below,
/// English ones through [`crate::memory::text::rules_en`].
pub fn extract_triples(text: &str) -> Vec<Triple> {
    let (subject, body) = speaker(text).unwrap_or_else(|| {
        // "Note: I like tea": a label, not a speaker; the statement is the user's.
        let labelled = text
            .split_once(": ")
            .filter(|(l, _)| NOT_SPEAKERS.contains(&l.trim().to_lowercase().as_str()));
        (USER, labelled.map_or(text, |(_, r)| r))
    });
    let mut out = Vec::new();
    for part in body
        .split(['。', '！', '？', '；', '，', ',', '!', '?', ';', '\n', '.'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        if crate::memory::text::rules_en::is_english(part) {
            out.extend(crate::memory::text::rules_en::extract_clause(part, subject, text));
            continue;
        }
        for clause in clauses(part) {
            if let Some(mut t) = extract_clause(clause, text) {
                t.subject = subject.into();
                out.push(t);
            }
        }
    }
    out
}

fn extract_clause(c: &str, sentence: &str) -> Option<Triple> {
    for (relation, prefixes, limit) in RULES {
        if let Some(v) = prefixes.iter().find_map(|p| c.strip_prefix(p)) {
            return fact(relation, v, *limit, sentence);
        }
    }
    // 我(的)妹妹叫李婷 → 妹妹: 李婷.
    if let Some(r) = c.strip_prefix('我') {
        let r = r.strip_prefix('的').unwrap_or(r);
        if let Some(rel) = RELATIVES_ZH.iter().find(|rel| r.starts_with(**rel)) {
            let r = &r[rel.len()..];
            if let Some(name) = ["名字叫", "叫做", "叫"].iter().find_map(|p| r.strip_prefix(p)) {
                return fact(rel, name, 20, sentence);
            }
        }
    }
    // 我(从小就)对花生过敏 → 过敏: 花生.
    if let Some(v) = c
        .strip_prefix('我')
        .and_then(|r| r.split_once('对'))
        .and_then(|(_, r)| r.strip_suffix("过敏"))
    {
        return fact("过敏", v, 30, sentence);
    }
    // 我在<place>工作 → occupation (where the user works).
    if let Some(v) = c.strip_prefix("我在").and_then(|r| r.strip_suffix("工作")) {
        return fact("职业", v, 20, sentence);
    }
    // 我<n>岁 / 我今年<n>岁 → age.
    if let Some(v) = c.strip_prefix('我').and_then(|r| r.strip_suffix('岁')) {
        let v = v.strip_prefix("今年").unwrap_or(v);
        return fact("年龄", v, 5, sentence);
    }
    // 我是一名医生 → occupation; 我是小明 (≤ 4 characters) → name.
    if let Some(v) = c.strip_prefix("我是") {
        if let Some(job) = ["一个", "一名", "一位"].iter().find_map(|a| v.strip_prefix(a)) {
            return fact("职业", job, 20, sentence);
        }
        if v.chars().count() <= 4 {
            return fact("姓名", v, 20, sentence);
        }
        return fact("职业", v, 20, sentence);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(text: &str) -> Vec<(String, String)> {
        extract_triples(text)
            .into_iter()
            .map(|t| (t.relation, t.object))
            .collect()
    }

    fn f(r: &str, o: &str) -> (String, String) {
        (r.into(), o.into())
    }

    #[test]
    fn each_rule_yields_its_relation() {
        assert_eq!(facts("我叫小明"), vec![f("姓名", "小明")]);
        assert_eq!(facts("我住在上海"), vec![f("居住地", "上海")]);
        assert_eq!(facts("我喜欢围棋"), vec![f("喜好", "围棋")]);
        assert_eq!(facts("我30岁"), vec![f("年龄", "30")]);
        assert_eq!(facts("我今年30岁"), vec![f("年龄", "30")]);
        assert_eq!(facts("我的工作是程序员"), vec![f("职业", "程序员")]);
        assert_eq!(facts("我在医院工作"), vec![f("职业", "医院")]);
        assert_eq!(facts("我是一名医生"), vec![f("职业", "医生")]);
        assert_eq!(facts("我是小红"), vec![f("姓名", "小红")]);
        assert_eq!(facts("我的小名是小王"), vec![f("小名", "小王")]);
        assert_eq!(facts("大家都叫我阿明"), vec![f("小名", "阿明")]);
        assert!(
            crate::memory::graph::is_alias_relation("小名"),
            "a nickname becomes an alias"
        );
    }

    #[test]
    fn clauses_of_one_message_are_all_read() {
        let ts = extract_triples("我叫张三，我住在北京。天气不错");
        assert_eq!(ts.len(), 2);
        assert_eq!((ts[0].object.as_str(), ts[1].object.as_str()), ("张三", "北京"));
        assert!(
            ts.iter()
                .all(|t| t.subject == USER && t.sentence == "我叫张三，我住在北京。天气不错")
        );
    }

    #[test]
    fn relatives_allergies_and_speakers() {
        assert_eq!(facts("我妹妹叫李婷"), vec![f("妹妹", "李婷")]);
        assert_eq!(facts("我从小就对花生过敏"), vec![f("过敏", "花生")]);
        let ts = extract_triples("王磊：我从小就对花生过敏，这次脸肿了");
        assert_eq!((ts[0].subject.as_str(), ts[0].object.as_str()), ("王磊", "花生"));
        let ts = extract_triples("Ana: I live in Lisbon. My sister adopted a greyhound called Biscuit!");
        let got: Vec<(&str, &str, &str)> = ts
            .iter()
            .map(|t| (t.subject.as_str(), t.relation.as_str(), t.object.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("Ana", "lives_in", "Lisbon"),
                ("Ana's sister", "adopted", "Biscuit"),
                ("Biscuit", "is_a", "greyhound"),
                ("Ana", "sister", "Ana's sister")
            ]
        );
        assert_eq!(
            extract_triples("Note: I like tea")[0].subject,
            USER,
            "a label is no speaker"
        );
        assert_eq!(extract_triples("我叫张三：你好")[0].subject, USER);
    }

    #[test]
    fn over_long_values_and_other_text_are_rejected() {
        assert!(facts("我叫一个非常非常非常长的名字").is_empty(), "≥ 20 bytes");
        assert!(facts("我今年一百二十岁").is_empty(), "≥ 5 bytes");
        assert!(facts("今天天气很好").is_empty());
        assert!(facts("").is_empty());
        assert!(facts("我叫").is_empty());
    }
}
