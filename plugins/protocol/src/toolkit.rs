//! Small helpers the bundled tool plugins share: reading arguments, capping output
//! with a marker the model understands, telling text from binary data.
//!
//! Tool output goes into the model's context: a huge or binary result must become a
//! bounded text that says what was left out and how to get the rest.

use serde_json::Value;

/// A required non-empty string argument, or an error naming it.
pub fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("`{key}` (a string) is required"))
}

/// An optional string argument (`None` when absent, null or empty).
pub fn opt_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// An optional unsigned integer argument within `1..=max` (`default` when absent);
/// out of range is an error saying the range. Numbers sent as strings are accepted
/// (models do that).
pub fn uint_arg(args: &Value, key: &str, default: u64, max: u64) -> Result<u64, String> {
    let v = match args.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(v) => v.as_u64(),
    };
    match v {
        Some(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("`{key}` must be a whole number from 1 to {max}")),
    }
}

/// An optional boolean argument (`"true"`/`"false"` strings accepted).
pub fn bool_arg(args: &Value, key: &str) -> bool {
    match args.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `text` cut to `max` bytes, with a marker saying how much was left out and `hint`
/// (how to get the rest) when it was cut.
pub fn cap(text: &str, max: usize, hint: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let kept = prefix(text, max);
    format!(
        "{kept}\n[truncated: {} of {} bytes shown{}{hint}]",
        kept.len(),
        text.len(),
        if hint.is_empty() { "" } else { "; " }
    )
}

/// Whether `bytes` look like binary data rather than text: a NUL byte, or not valid
/// UTF-8 (a multi-byte character cut at the end of a sample is allowed).
pub fn looks_binary(bytes: &[u8]) -> bool {
    if bytes.contains(&0) {
        return true;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => false,
        // Only an incomplete character at the very end (a cut sample) is text.
        Err(e) => e.error_len().is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments() {
        let a = json!({"p": "x", "e": "", "n": 5, "s": "7", "big": 99, "b": "true"});
        assert_eq!(str_arg(&a, "p").unwrap(), "x");
        assert!(str_arg(&a, "e").unwrap_err().contains("`e`"));
        assert_eq!(opt_str(&a, "e"), None);
        assert_eq!(uint_arg(&a, "n", 1, 10).unwrap(), 5);
        assert_eq!(uint_arg(&a, "s", 1, 10).unwrap(), 7);
        assert_eq!(uint_arg(&a, "missing", 3, 10).unwrap(), 3);
        assert!(uint_arg(&a, "big", 1, 10).unwrap_err().contains("from 1 to 10"));
        assert!(bool_arg(&a, "b") && !bool_arg(&a, "p"));
    }

    #[test]
    fn capping_keeps_whole_characters_and_says_what_was_cut() {
        assert_eq!(cap("short", 10, "x"), "short");
        let c = cap("ééééé", 5, "read on with offset");
        assert!(
            c.starts_with("éé\n[truncated: 4 of 10 bytes shown; read on with offset]"),
            "{c}"
        );
        assert_eq!(prefix("aé", 2), "a");
    }

    #[test]
    fn binary_is_told_from_text() {
        assert!(!looks_binary("plain text, ünïcode".as_bytes()));
        assert!(looks_binary(b"PNG\x00\x01"));
        assert!(looks_binary(&[0xff, 0xfe, b'a']));
        let cut = &"é".as_bytes()[..1];
        assert!(
            !looks_binary(&[b"abc", cut].concat()),
            "a character cut by the sample is text"
        );
    }
}
