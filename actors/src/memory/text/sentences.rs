//! Sentences of a turn, in English and Chinese alike: what the document summaries rank
//! ([`crate::memory::documents::summary`]) and what a recalled item is cut to
//! ([`crate::memory::recall::cut_to_match`]).

/// The sentences of `text`, trimmed, in order: split after `。！？` and line breaks
/// always, after `.!?` when a space or the end follows ("3.5" and "e.g.x" stay whole).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end_here = matches!(c, '。' | '！' | '？' | '\n')
            || (matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, n)| n.is_whitespace()));
        if end_here {
            let end = i + c.len_utf8();
            let s = text[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = end;
        }
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_and_chinese_sentences_split_where_they_end() {
        assert_eq!(
            sentences("I ran 3.5 km today! Felt great. Did you?"),
            ["I ran 3.5 km today!", "Felt great.", "Did you?"]
        );
        assert_eq!(
            sentences("今天跑了步。感觉很好！你呢？"),
            ["今天跑了步。", "感觉很好！", "你呢？"]
        );
        assert_eq!(sentences("first line\nsecond line"), ["first line", "second line"]);
        assert!(sentences("  ").is_empty());
    }
}
