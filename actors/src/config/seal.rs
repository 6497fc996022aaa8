//! Secrets at rest: every secret setting (API keys, the secrets store, a plugin's
//! secret settings) is stored in `config.db` sealed with ChaCha20-Poly1305 under a key
//! that is **not** in the data dir. A copy of the data dir (a backup, a stolen disk
//! image, a plugin that escaped its confinement long enough to read `config.db`) holds
//! only ciphertext.
//!
//! The key, 32 random bytes, comes from the first of:
//! 1. `HOMEAGENT_SECRET_KEY` (base64), for containers and secret managers;
//! 2. `$CREDENTIALS_DIRECTORY/homeagent-secret-key` (systemd's `LoadCredential=`);
//! 3. `$XDG_CONFIG_HOME/homeagent/secret.key` (else `~/.config/homeagent/secret.key`),
//!    created on first use with mode 0600 in a 0700 directory.
//!
//! A sealed value is the JSON string `enc:v1:<base64(nonce ‖ ciphertext ‖ tag)>`, with
//! the setting's key as associated data, so a sealed value moved to another key does
//! not open. Values stored before sealing existed are sealed at the next start.

use std::path::PathBuf;
use std::sync::OnceLock;

use base64::Engine as _;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;

const PREFIX: &str = "enc:v1:";
const KEY_FILE: &str = "secret.key";
const ENV_KEY: &str = "HOMEAGENT_SECRET_KEY";
const CREDENTIAL: &str = "homeagent-secret-key";

/// Why sealing or unsealing failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SealError {
    #[error(
        "no key to seal secrets with: {0}; set HOMEAGENT_SECRET_KEY (32 bytes, base64) or make $HOME/.config writable"
    )]
    NoKey(String),
    #[error(
        "the secret setting `{0}` cannot be opened with this machine's key ({1}); restore that key file or set the secret again"
    )]
    Open(String, String),
}

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// The key, read or created once per process.
fn key() -> Result<&'static LessSafeKey, SealError> {
    static KEY: OnceLock<Result<(LessSafeKey, String), SealError>> = OnceLock::new();
    KEY.get_or_init(|| {
        let (bytes, from) = load_key()?;
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| SealError::NoKey("the key is not 32 bytes".into()))?;
        tracing::debug!(from = %from, "secrets at rest sealed with the key");
        Ok((LessSafeKey::new(unbound), from))
    })
    .as_ref()
    .map(|(k, _)| k)
    .map_err(Clone::clone)
}

/// Where the key file lives when neither the environment nor systemd gives one.
pub fn key_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("homeagent").join(KEY_FILE))
}

fn decode_key(text: &str, from: &str) -> Result<Vec<u8>, SealError> {
    let bytes = b64()
        .decode(text.trim())
        .map_err(|e| SealError::NoKey(format!("{from} is not base64: {e}")))?;
    if bytes.len() != 32 {
        return Err(SealError::NoKey(format!("{from} holds {} bytes, not 32", bytes.len())));
    }
    Ok(bytes)
}

fn load_key() -> Result<(Vec<u8>, String), SealError> {
    if let Ok(v) = std::env::var(ENV_KEY) {
        return Ok((decode_key(&v, ENV_KEY)?, ENV_KEY.to_owned()));
    }
    if let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY") {
        let path = PathBuf::from(dir).join(CREDENTIAL);
        if let Ok(text) = std::fs::read_to_string(&path) {
            return Ok((
                decode_key(&text, &path.display().to_string())?,
                path.display().to_string(),
            ));
        }
    }
    let path = key_file().ok_or_else(|| SealError::NoKey("neither XDG_CONFIG_HOME nor HOME is set".into()))?;
    let shown = path.display().to_string();
    if let Ok(text) = std::fs::read_to_string(&path) {
        return Ok((decode_key(&text, &shown)?, shown));
    }
    create_key_file(&path).map_err(|e| SealError::NoKey(format!("cannot create {shown}: {e}")))?;
    let text = std::fs::read_to_string(&path).map_err(|e| SealError::NoKey(format!("cannot read {shown}: {e}")))?;
    tracing::info!(path = %shown, "created the key that seals secrets at rest; back it up apart from the data dir");
    Ok((decode_key(&text, &shown)?, shown))
}

/// Writes a new random key to `path` unless one appears there first (two daemons
/// starting at once both end up with the one that won the link).
fn create_key_file(path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = path.parent().expect("the key file has a directory");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| std::io::Error::other("the system has no random numbers"))?;
    let tmp = dir.join(format!(".{KEY_FILE}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(format!("{}\n", b64().encode(bytes)).as_bytes())?;
    f.sync_all()?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Whether a stored value is sealed.
pub fn is_sealed(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.starts_with(PREFIX))
}

/// `value` (any JSON) sealed for the setting `key`.
pub fn seal(key_name: &str, value: &Value) -> Result<Value, SealError> {
    let key = key()?;
    let mut nonce = [0u8; 12];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| SealError::NoKey("the system has no random numbers".into()))?;
    let mut data = value.to_string().into_bytes();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(key_name.as_bytes()),
        &mut data,
    )
    .map_err(|_| SealError::NoKey("sealing failed".into()))?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&data);
    Ok(Value::String(format!("{PREFIX}{}", b64().encode(out))))
}

/// A stored value opened: sealed ones decrypted, others as they are.
pub fn open(key_name: &str, stored: Value) -> Result<Value, SealError> {
    let Some(text) = stored.as_str().and_then(|s| s.strip_prefix(PREFIX)) else {
        return Ok(stored);
    };
    let fail = |why: &str| SealError::Open(key_name.to_owned(), why.to_owned());
    let key = key().map_err(|e| fail(&e.to_string()))?;
    let bytes = b64().decode(text).map_err(|_| fail("not base64"))?;
    if bytes.len() < 12 + 16 {
        return Err(fail("too short"));
    }
    let (nonce, rest) = bytes.split_at(12);
    let mut rest = rest.to_vec();
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| fail("bad nonce"))?;
    let plain = key
        .open_in_place(nonce, Aad::from(key_name.as_bytes()), &mut rest)
        .map_err(|_| fail("a different key, or the value was altered"))?;
    serde_json::from_slice(plain).map_err(|_| fail("not JSON inside"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sealed_values_open_only_under_their_own_key_name() {
        let v = json!({"github": "ghp_x"});
        let sealed = seal("core.security.secrets", &v).unwrap();
        assert!(is_sealed(&sealed));
        assert!(!sealed.to_string().contains("ghp_x"));
        assert_eq!(open("core.security.secrets", sealed.clone()).unwrap(), v);
        assert!(open("core.llm.api_key", sealed).is_err(), "moved to another key");
        assert_eq!(open("k", json!("plain")).unwrap(), json!("plain"));
    }
}
