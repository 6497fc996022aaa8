//! The owner token: the one secret that lets a client drive this daemon.
//!
//! Created at first start in `DATA/api-token` (mode 0600, like an SSH key), printed in
//! the ready line as a login URL, read by `homed token`. API clients send it as
//! `Authorization: Bearer <token>`; the WebUI trades it once for a session cookie whose
//! value is derived from the token (an HMAC), so a rotation logs every browser out and
//! a restart logs none out. The file is re-read when it changes, so `homed token
//! --rotate` takes effect on a running daemon at once.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use sha2::Sha256;

/// The token file's name inside the data directory.
pub const TOKEN_FILE: &str = "api-token";
/// The WebUI's session cookie.
pub const SESSION_COOKIE: &str = "homed_session";

/// Why the token could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the API token {path}: {source}; check the data directory's permissions")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write the API token {path}: {source}; check that the data directory is writable")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("no API token in {0}; start homed once (it creates one) or run `homed token --rotate`")]
    Missing(PathBuf),
    #[error("cannot get random bytes for a token: {0}")]
    Random(std::io::Error),
    #[error(
        "the API token in {path} is only {len} characters long (a damaged file?); it would be trivial to guess, so homed refuses it: run `homed token --rotate` for a new one"
    )]
    Weak { path: PathBuf, len: usize },
    #[error(
        "the API token in {path} holds characters no client can send (a damaged file?), so homed refuses it: run `homed token --rotate` for a new one"
    )]
    Malformed { path: PathBuf },
}

/// The shortest token accepted from the file (a generated one has 64 characters).
pub const MIN_TOKEN_LEN: usize = 32;

/// The token file of `data_dir`.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// A new random token: 32 bytes from the OS, hex (64 characters).
fn new_token() -> Result<String, TokenError> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(TokenError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` atomically with mode 0600 (a temporary file renamed into place, so a
/// reader never sees half a token and the mode is right from the first byte).
fn write_token(path: &Path, token: &str) -> Result<(), TokenError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |source| TokenError::Write {
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(format!("{token}\n").as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Reads the token of `data_dir`.
pub fn read_token(data_dir: &Path) -> Result<String, TokenError> {
    let path = token_path(data_dir);
    match std::fs::read(&path) {
        Ok(bytes) => parse_token(path, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(TokenError::Missing(path)),
        Err(source) => Err(TokenError::Read { path, source }),
    }
}

/// The token in a token file's bytes: one line of visible ASCII (what a header, a
/// cookie and the login URL can carry), at least [`MIN_TOKEN_LEN`] long. Anything else
/// is a damaged file, refused rather than trusted: a cut-off or garbled token would be
/// easy to guess or impossible to send.
fn parse_token(path: PathBuf, bytes: &[u8]) -> Result<String, TokenError> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err(TokenError::Malformed { path });
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(TokenError::Missing(path));
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::Malformed { path });
    }
    if t.len() < MIN_TOKEN_LEN {
        return Err(TokenError::Weak { path, len: t.len() });
    }
    Ok(t.to_owned())
}

/// The token of `data_dir`, created on first use. Returns it and whether it is new.
pub fn ensure_token(data_dir: &Path) -> Result<(String, bool), TokenError> {
    match read_token(data_dir) {
        Ok(t) => Ok((t, false)),
        Err(TokenError::Missing(_)) => {
            let t = new_token()?;
            write_token(&token_path(data_dir), &t)?;
            tracing::info!(path = %token_path(data_dir).display(), "created the owner API token");
            Ok((t, true))
        }
        Err(e) => Err(e),
    }
}

/// Replaces the token of `data_dir` with a new one (every client must use the new one).
pub fn rotate_token(data_dir: &Path) -> Result<String, TokenError> {
    let t = new_token()?;
    write_token(&token_path(data_dir), &t)?;
    Ok(t)
}

/// The session cookie value for `token`.
pub fn session_value(token: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes any key");
    mac.update(b"homed-webui-session-v1");
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// Equality that takes the same time wherever the inputs differ (no timing oracle for
/// guessing the token byte by byte).
pub fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The daemon's view of its token: re-read when the file changes.
pub struct Owner {
    path: PathBuf,
    cached: Mutex<(Option<SystemTime>, String, String)>,
}

impl Owner {
    /// Watches the token file of `data_dir` (which must exist: see [`ensure_token`]).
    pub fn new(data_dir: &Path) -> Result<Self, TokenError> {
        let token = read_token(data_dir)?;
        let path = token_path(data_dir);
        let mtime = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let session = session_value(&token);
        Ok(Self {
            path,
            cached: Mutex::new((mtime, token, session)),
        })
    }

    /// The current token and session value (re-read after `homed token --rotate`).
    fn current(&self) -> (String, String) {
        let mtime = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
        let mut c = self.cached.lock();
        if mtime.is_some() && mtime != c.0 {
            // The same rules as at start: a file cut short while the daemon runs never
            // becomes the owner's token.
            let read = std::fs::read(&self.path)
                .map_err(|source| TokenError::Read {
                    path: self.path.clone(),
                    source,
                })
                .and_then(|b| parse_token(self.path.clone(), &b));
            match read {
                Ok(t) => {
                    if t != c.1 {
                        tracing::info!("the owner API token changed; clients must use the new one");
                    }
                    let session = session_value(&t);
                    *c = (mtime, t, session);
                }
                // A failed read keeps the last good token rather than locking the owner out.
                Err(e) => {
                    tracing::warn!("keeping the last good API token: {e}");
                    c.0 = mtime;
                }
            }
        }
        (c.1.clone(), c.2.clone())
    }

    /// Whether `bearer` is the owner's token.
    pub fn token_ok(&self, bearer: &str) -> bool {
        same(bearer, &self.current().0)
    }

    /// Whether `cookie` is the current session value.
    pub fn session_ok(&self, cookie: &str) -> bool {
        same(cookie, &self.current().1)
    }

    /// The session cookie value to hand out after a login.
    pub fn session(&self) -> String {
        self.current().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A damaged token file (cut to a few bytes) is refused with what to do, never
    /// taken as the owner's token.
    #[test]
    fn a_truncated_token_is_refused_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(token_path(dir.path()), "x\n").unwrap();
        let e = ensure_token(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("only 1 characters") && e.contains("homed token --rotate"),
            "{e}"
        );
        assert!(Owner::new(dir.path()).is_err());
        let t = rotate_token(dir.path()).unwrap();
        assert_eq!(ensure_token(dir.path()).unwrap(), (t.clone(), false));

        // Garbled bytes of a full length are refused too.
        std::fs::write(token_path(dir.path()), [0xffu8; 64]).unwrap();
        let e = ensure_token(dir.path()).unwrap_err().to_string();
        assert!(e.contains("characters no client can send"), "{e}");
        std::fs::write(token_path(dir.path()), format!("{}\u{7}{}", &t[..40], &t[40..])).unwrap();
        assert!(matches!(ensure_token(dir.path()), Err(TokenError::Malformed { .. })));

        // Cut short while the daemon runs: the last good token stays the owner's.
        std::fs::write(token_path(dir.path()), format!("{t}\n")).unwrap();
        let owner = Owner::new(dir.path()).unwrap();
        std::fs::write(token_path(dir.path()), "x\n").unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(token_path(dir.path()))
            .unwrap();
        f.set_modified(SystemTime::now() + std::time::Duration::from_secs(1))
            .unwrap();
        assert!(owner.token_ok(&t) && !owner.token_ok("x"));
    }

    #[test]
    fn created_once_private_rotated_and_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (t, new) = ensure_token(dir.path()).unwrap();
        assert!(new && t.len() == 64 && t.chars().all(|c| c.is_ascii_hexdigit()));
        let mode = std::fs::metadata(token_path(dir.path())).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(ensure_token(dir.path()).unwrap(), (t.clone(), false), "kept");
        let owner = Owner::new(dir.path()).unwrap();
        assert!(owner.token_ok(&t) && !owner.token_ok("nope") && !owner.token_ok(""));
        assert!(owner.session_ok(&session_value(&t)));
        assert!(!owner.session_ok(&t), "the token itself is not a session");
        // Rotation: a new mtime makes the daemon re-read it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let t2 = rotate_token(dir.path()).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(token_path(dir.path()))
            .unwrap();
        f.set_modified(SystemTime::now() + std::time::Duration::from_secs(1))
            .unwrap();
        assert_ne!(t, t2);
        assert!(owner.token_ok(&t2) && !owner.token_ok(&t));
        assert!(owner.session_ok(&session_value(&t2)) && !owner.session_ok(&session_value(&t)));
    }

    #[test]
    fn comparison_is_exact() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd") && !same("abc", "ab") && !same("", "a"));
    }
}
