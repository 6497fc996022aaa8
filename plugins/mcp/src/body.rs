//! Reading an HTTP answer's body with a cap, so a hostile or broken server cannot fill
//! the memory. Its own module because both the MCP transport (`http`) and the OAuth
//! client (`oauth`) read bodies, and `http` already builds on `oauth`.

use std::io::Read;

/// Reads at most `max` bytes of `body` as text; `Err` names the cap when it is hit.
pub fn read_capped(body: impl Read, max: u64) -> Result<String, String> {
    let mut buf = Vec::new();
    body.take(max + 1).read_to_end(&mut buf).map_err(|e| e.to_string())?;
    if buf.len() as u64 > max {
        return Err(format!("the server's answer is larger than {max} bytes; refused"));
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_body_over_the_cap_is_refused_naming_it() {
        assert_eq!(super::read_capped(&b"hello"[..], 5).unwrap(), "hello");
        let e = super::read_capped(&b"hello!"[..], 5).unwrap_err();
        assert!(e.contains("larger than 5 bytes"), "{e}");
    }
}
