//! Another name a speaker gives themself ("everyone calls me Mel", "大家都叫我阿明"):
//! the cues the rule distiller reads as a nickname fact (which the graph makes an
//! alias), and a scan for them anywhere in a turn, so the recall index can let a
//! question that names "Mel" find what Melanie said
//! ([`crate::memory::index::docindex`]'s person scopes).
//!
//! No imports: the text layer's lowest piece, shared by the rules and the index.

/// English cues of a name the speaker goes by, lower-case: the name follows.
pub const EN_CUES: &[&str] = &[
    "call me ",
    "just call me ",
    "you can call me ",
    "everyone calls me ",
    "everybody calls me ",
    "people call me ",
    "friends call me ",
    "my friends call me ",
    "i go by ",
];

/// Chinese cues of a name the speaker goes by (a clause starting with one states it).
pub const ZH_CUES: &[&str] = &[
    "我的小名是",
    "我的小名叫",
    "我小名叫",
    "我的外号是",
    "我外号叫",
    "大家都叫我",
    "大家叫我",
    "朋友们都叫我",
    "朋友们叫我",
    "你可以叫我",
];

/// The names a speaker says they go by in `text`, in order: the capitalised words
/// (at most two) after an English cue, the Han characters (two to four) after a Chinese
/// one. "Call me when you land" names no one (no capital).
pub fn nicknames(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // ASCII lower-casing keeps every byte offset.
    let lower = text.to_ascii_lowercase();
    for cue in EN_CUES {
        for (at, _) in lower.match_indices(cue) {
            let starts_word = lower[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            if !starts_word {
                continue;
            }
            // Capitalised words, up to punctuation: "Mel. It stuck" is Mel.
            let mut words: Vec<&str> = Vec::new();
            for raw in text[at + cue.len()..].split_whitespace().take(2) {
                let w = raw.trim_end_matches(|c: char| !c.is_alphanumeric());
                if !(w.chars().next().is_some_and(char::is_uppercase) && w.len() > 1) {
                    break;
                }
                words.push(w);
                if w.len() < raw.len() {
                    break;
                }
            }
            let name = words.join(" ");
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    for cue in ZH_CUES {
        for (at, _) in text.match_indices(cue) {
            let name: String = text[at + cue.len()..]
                .chars()
                .take_while(|c| ('\u{4E00}'..='\u{9FFF}').contains(c))
                .take(4)
                .collect();
            if name.chars().count() >= 2 && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_a_speaker_goes_by_is_read_anywhere_in_a_turn() {
        assert_eq!(nicknames("Haha, everyone calls me Mel. It stuck."), ["Mel"]);
        assert_eq!(nicknames("You can call me Jo Anne, by the way"), ["Jo Anne"]);
        assert_eq!(nicknames("I go by Sunny at work"), ["Sunny"]);
        assert!(nicknames("Call me when you land!").is_empty(), "no name follows");
        assert!(nicknames("the recall me function").is_empty(), "not a word's start");
        assert_eq!(nicknames("嗯，大家都叫我阿明。"), ["阿明"]);
        assert!(nicknames("大家都叫我。").is_empty());
    }
}
