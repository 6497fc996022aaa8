//! The self-check (`healthcheck`): the `selftest` tool and `homed selftest`.
//!
//! One [`Part`] per thing the agent depends on — each LLM source (a real minimal call
//! to that source alone, see [`crate::llm::provider::ProbeSource`]), the embedder (a
//! test embedding), every database (`PRAGMA quick_check` on its own read-only
//! connection) and every plugin (running, with its tools) — and a verdict.
//!
//! The pure part is the report ([`Report`], [`plugin_part`], [`embedder_part`],
//! [`source_part`]) and the database check ([`check_databases`], plain files); the
//! async functions below only gather inputs from the live actors. The CLI builds the
//! same parts from a running daemon's API and its own LLM actor (`src/selftest.rs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use homeagent_i18n::Msg;
use serde_json::Value;

use crate::addr::TAddr;
use crate::llm::provider::{GetLlmStatus, LlmActor, ProbeSource};
use crate::llm::{CompletionRequest, Message};

/// The tool's name.
pub const SELFTEST_TOOL: &str = "selftest";

/// How a part fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Broken: the verdict fails.
    Fail,
    /// Not set up (a source without a key, no dense embedder): reported, not broken.
    NotConfigured,
    /// Deliberately off (a disabled plugin): reported, not broken.
    Off,
}

impl Status {
    fn tag(self) -> &'static str {
        match self {
            Status::Ok => "OK  ",
            Status::Fail => "FAIL",
            Status::NotConfigured => "N/C ",
            Status::Off => "OFF ",
        }
    }
}

/// One checked thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// `llm`, `embedder`, `database`, `plugin` or `daemon`.
    pub kind: &'static str,
    pub name: String,
    pub status: Status,
    /// What was seen; for a failure, what to do about it.
    pub detail: String,
}

impl Part {
    pub fn new(kind: &'static str, name: impl Into<String>, status: Status, detail: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
            status,
            detail: detail.into(),
        }
    }
}

/// Every part and the verdict.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub parts: Vec<Part>,
}

impl Report {
    pub fn broken(&self) -> usize {
        self.parts.iter().filter(|p| p.status == Status::Fail).count()
    }

    /// Healthy: nothing failed, and at least one LLM source answered (an agent
    /// without a model cannot do anything, even if nothing is "broken").
    pub fn ok(&self) -> bool {
        self.broken() == 0 && self.parts.iter().any(|p| p.kind == "llm" && p.status == Status::Ok)
    }

    /// One line per part, then the verdict.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            out.push_str(&format!("{} {:<8} {}: {}\n", p.status.tag(), p.kind, p.name, p.detail));
        }
        let total = self.parts.len();
        let verdict = if !self.ok() && self.broken() == 0 {
            // Nothing failed, yet no model answered: say so rather than point at FAIL
            // lines that are not there.
            Msg::SelftestNoModel { total }
        } else {
            Msg::SelftestVerdict {
                ok: self.ok(),
                broken: self.broken(),
                total,
            }
        };
        out.push_str(&verdict.text());
        out
    }
}

/// A source's part from its probe: `Ok` is (model, milliseconds); the error is shown
/// as it reads.
pub fn source_part(name: &str, probe: Result<(String, u128), impl std::fmt::Display>) -> Part {
    match probe {
        Ok((model, ms)) => Part::new("llm", name, Status::Ok, format!("answered in {ms} ms ({model})")),
        Err(e) => Part::new(
            "llm",
            name,
            Status::Fail,
            format!("{e}; check its base_url, api_key and model under core.llm.sources.{name}"),
        ),
    }
}

/// A plugin's part from its status as `GET /api/v1/plugins` shows it.
pub fn plugin_part(p: &Value) -> Part {
    let name = p["name"].as_str().unwrap_or("?");
    let state = p["state"].as_str().unwrap_or("unknown");
    let tools: Vec<&str> = p["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let tools = if tools.is_empty() {
        "no tools".to_owned()
    } else {
        format!("tools: {}", tools.join(", "))
    };
    if let Some(problem) = p["problem"].as_str() {
        return Part::new("plugin", name, Status::Fail, format!("cannot run: {problem}"));
    }
    match state {
        "running" => Part::new("plugin", name, Status::Ok, format!("running, {tools}")),
        "disabled" => Part::new(
            "plugin",
            name,
            Status::Off,
            "disabled by the owner (plugin_enable starts it)",
        ),
        "idle" => Part::new(
            "plugin",
            name,
            Status::Off,
            "idle: auto_start is false, so it waits to be asked (plugin_enable starts it)",
        ),
        other => {
            let exit = p["last_exit"]
                .as_str()
                .map(|e| format!(", last exit: {e}"))
                .unwrap_or_default();
            let stderr = p["stderr_tail"]
                .as_array()
                .and_then(|l| l.last())
                .and_then(Value::as_str)
                .map(|l| format!(", stderr: {l}"))
                .unwrap_or_default();
            Part::new(
                "plugin",
                name,
                Status::Fail,
                format!("{other}{exit}{stderr}; see its log, then plugin_reload"),
            )
        }
    }
}

/// The embedder's part from its status (as in `GET /api/v1/memory/status`) and, when
/// one was made, a test embedding (`Ok(dimensions)`, or why none came back as it reads).
pub fn embedder_part(status: &Value, test: Option<Result<usize, ProbeError>>) -> Part {
    let active = status["active"].as_str().unwrap_or("none");
    let configured = status["configured"].as_str().unwrap_or("?");
    if active == "tfidf" {
        return match status["fallback"].as_str() {
            // Explicitly configured for vectors but fell back: broken. (`auto` falling
            // back to keywords when no ONNX model is installed is what it promises.)
            Some(why) if configured == "onnx" || configured == "remote" => Part::new(
                "embedder",
                configured,
                Status::Fail,
                format!("not active: {why}; memory search runs on keywords only until it is fixed"),
            ),
            fallback => Part::new(
                "embedder",
                configured,
                Status::NotConfigured,
                match fallback {
                    Some(why) => format!("keyword search only: {why}"),
                    None => "no dense embedder configured (keyword search only)".to_owned(),
                },
            ),
        };
    }
    match test {
        Some(Ok(dims)) => Part::new(
            "embedder",
            active,
            Status::Ok,
            format!("test embedding of {dims} dimensions (loaded: {})", status["loaded"]),
        ),
        Some(Err(e)) => Part::new(
            "embedder",
            active,
            Status::Fail,
            format!("test embedding failed: {e}; see core.memory.embedder settings"),
        ),
        None => match status["last_error"].as_str() {
            Some(e) => Part::new("embedder", active, Status::Fail, format!("last step failed: {e}")),
            None => Part::new(
                "embedder",
                active,
                Status::Ok,
                format!("active (loaded: {})", status["loaded"]),
            ),
        },
    }
}

/// Every SQLite database under the data dir (`DATA/*.db`, `DATA/memory/*.db`,
/// `DATA/plugin_data/<plugin>/*.db`), sorted.
pub fn databases(data_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![data_dir.to_owned(), data_dir.join("memory")];
    if let Ok(rd) = std::fs::read_dir(data_dir.join("plugin_data")) {
        dirs.extend(rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()));
    }
    let mut out: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "db") && p.is_file())
        .collect();
    out.sort();
    out
}

/// `PRAGMA quick_check` on each database, on a read-only connection of its own (the
/// daemon's writers are not disturbed; WAL readers see the last commit).
pub fn check_databases(data_dir: &Path) -> Vec<Part> {
    let dbs = databases(data_dir);
    if dbs.is_empty() {
        return vec![Part::new(
            "database",
            data_dir.display().to_string(),
            Status::Fail,
            "no database found; is this the daemon's data directory (--data)?",
        )];
    }
    dbs.iter()
        .map(|path| {
            let name = path.strip_prefix(data_dir).unwrap_or(path).display().to_string();
            let checked = rusqlite::Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .and_then(|c| {
                c.busy_timeout(std::time::Duration::from_secs(5))?;
                c.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0))
            });
            match checked {
                Ok(ok) if ok == "ok" => Part::new("database", name, Status::Ok, "quick_check ok"),
                Ok(problem) => Part::new(
                    "database",
                    name,
                    Status::Fail,
                    format!("quick_check: {problem}; restore it from a backup"),
                ),
                Err(e) => Part::new(
                    "database",
                    name,
                    Status::Fail,
                    format!("cannot open: {e}; is it a SQLite file the daemon wrote?"),
                ),
            }
        })
        .collect()
}

/// A minimal request: a few output tokens, no tools.
pub fn probe_request() -> CompletionRequest {
    CompletionRequest {
        model: String::new(),
        messages: vec![Message::text("user", "selftest: reply with OK")],
        temperature: 0.0,
        max_tokens: 8,
        stream: false,
        tools: Default::default(),
        tool_choice: None,
        disable_thinking: true,
        extra_body: Default::default(),
    }
}

/// Why a probe of a source or of the embedder came back without an answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The LLM actor or the embedder did not answer (restarting, or stopped).
    #[error(transparent)]
    Unavailable(#[from] crate::addr::SendError),
    /// The source answered with an error.
    #[error(transparent)]
    Llm(#[from] crate::llm::provider::LlmError),
    /// The embedder answered no vector: its last error, as its status shows it.
    #[error("{0}")]
    NoVector(String),
}

/// One part per configured source: each answers a minimal call on its own; a source
/// the settings leave unusable (no key, no model) is reported as not configured.
pub async fn check_sources(llm: &TAddr<LlmActor>) -> Vec<Part> {
    let status = match llm.send(GetLlmStatus).await {
        Ok(s) => s,
        Err(e) => return vec![Part::new("llm", "kernel/llm", Status::Fail, e.to_string())],
    };
    let mut out = Vec::new();
    for s in &status.sources {
        let name = s.config.name.clone();
        let t = Instant::now();
        let probe = llm
            .send(ProbeSource {
                name: name.clone(),
                request: probe_request(),
            })
            .await
            .map_err(ProbeError::from)
            .and_then(|r| r.map_err(ProbeError::from))
            .map(|c| (c.model, t.elapsed().as_millis()));
        tracing::info!(source = %name, ok = probe.is_ok(), "selftest: LLM source probed");
        out.push(source_part(&name, probe));
    }
    for s in &status.skipped {
        out.push(Part::new("llm", &s.name, Status::NotConfigured, s.reason.clone()));
    }
    if out.is_empty() {
        out.push(Part::new(
            "llm",
            "sources",
            Status::Fail,
            "no LLM source is configured; add one under core.llm.sources.<name>",
        ));
    }
    out
}

/// The embedder's part: its status and a test embedding when a dense one is active.
pub async fn check_embedder(embedder: &crate::memory::embed::actor::EmbedderHandle) -> Part {
    let status = serde_json::to_value(&*embedder.status.read()).unwrap_or(Value::Null);
    let test = if status["active"] == "tfidf" {
        None
    } else {
        Some(
            match embedder
                .addr
                .send(crate::memory::embed::actor::EmbedTexts(vec!["selftest".into()]))
                .await
            {
                Ok(Some((_, v))) if v.first().is_some_and(|x| !x.is_empty()) => Ok(v[0].len()),
                Ok(_) => Err(ProbeError::NoVector(
                    status["last_error"]
                        .as_str()
                        .unwrap_or("no vector came back")
                        .to_owned(),
                )),
                Err(e) => Err(ProbeError::from(e)),
            },
        )
    };
    embedder_part(&status, test)
}

/// What the `selftest` tool checks, as live handles.
pub struct Selftest {
    pub llm: TAddr<LlmActor>,
    pub embedder: crate::memory::embed::actor::EmbedderHandle,
    /// Each plugin's status as `GET /api/v1/plugins` shows it, asked at each run (the
    /// plugin host stands above the agent, so it is handed in as this question).
    pub plugins: Box<dyn Fn() -> Vec<Value> + Send + Sync>,
    pub data_dir: PathBuf,
}

impl Selftest {
    /// Every part: sources, embedder, databases, plugins.
    pub async fn run(&self) -> Report {
        let mut parts = check_sources(&self.llm).await;
        parts.push(check_embedder(&self.embedder).await);
        let dir = self.data_dir.clone();
        match tokio::task::spawn_blocking(move || check_databases(&dir)).await {
            Ok(p) => parts.extend(p),
            Err(e) => parts.push(Part::new("database", "all", Status::Fail, e.to_string())),
        }
        parts.extend((self.plugins)().iter().map(plugin_part));
        let report = Report { parts };
        tracing::info!(ok = report.ok(), broken = report.broken(), "selftest done");
        report
    }
}

/// The tool's declaration.
pub fn spec() -> crate::stages::ToolSpec {
    let mut s = crate::stages::ToolSpec::typed::<crate::stages::tools::NoArgs>(
        SELFTEST_TOOL,
        "Check the agent itself: each LLM source answers a minimal call, the embedder makes a test embedding, \
         every database passes an integrity check and every plugin is running with its tools. \
         Answers one line per part (OK, FAIL, N/C = not configured, OFF = disabled) and a verdict. No arguments; \
         takes a few seconds (a failing source is retried once).",
    );
    s.plugin = "builtin.healthcheck".into();
    s.no_memory = true;
    s.with_keywords("self-test, selftest, health, diagnose, diagnosis, broken, working, status, 自检, 诊断, 健康")
}

/// The tool's handler over the live handles.
pub fn handler(check: std::sync::Arc<Selftest>) -> std::sync::Arc<dyn crate::stages::ToolHandler> {
    crate::stages::typed(move |_: crate::stages::tools::NoArgs| {
        let check = check.clone();
        async move { Ok::<_, std::convert::Infallible>(check.run().await.render()) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_part_fails_the_verdict_and_not_configured_does_not() {
        let mut r = Report {
            parts: vec![
                source_part("good", Ok::<_, &str>(("m".into(), 3))),
                Part::new("llm", "nokey", Status::NotConfigured, "no API key"),
                plugin_part(&json!({"name": "echo", "state": "disabled"})),
            ],
        };
        assert!(r.ok());
        assert!(
            r.render().ends_with("verdict: healthy (3 checks passed)"),
            "{}",
            r.render()
        );
        r.parts.push(source_part("bad", Err::<(String, u128), _>("HTTP 500")));
        assert!(!r.ok());
        let text = r.render();
        assert!(
            text.contains("FAIL llm      bad: HTTP 500; check its base_url"),
            "{text}"
        );
        assert!(text.contains("N/C  llm      nokey: no API key"), "{text}");
        assert!(text.ends_with("verdict: BROKEN (1 of 4 checks failed; see the lines marked FAIL)"));
        // No source answered at all: broken even without a failed line.
        let none = Report {
            parts: vec![Part::new("llm", "k", Status::NotConfigured, "no key")],
        };
        assert!(!none.ok());
        let text = none.render();
        assert!(
            text.ends_with("no LLM source answered, so the agent cannot reply; give a source its key: see the N/C lines, or the settings page)"),
            "{text}"
        );
        assert!(
            !text.contains("marked FAIL"),
            "there is no FAIL line to point at: {text}"
        );
    }

    #[test]
    fn plugins_and_embedders_read_from_their_status() {
        let ok = plugin_part(&json!({"name": "web", "state": "running", "tools": ["web_fetch"]}));
        assert_eq!(
            (ok.status, ok.detail.as_str()),
            (Status::Ok, "running, tools: web_fetch")
        );
        let bad =
            plugin_part(&json!({"name": "x", "state": "quarantined", "last_exit": "exit 1", "stderr_tail": ["boom"]}));
        assert_eq!(bad.status, Status::Fail);
        assert!(
            bad.detail.contains("quarantined, last exit: exit 1, stderr: boom"),
            "{}",
            bad.detail
        );
        let broken = plugin_part(&json!({"name": "y", "state": "disabled", "problem": "bad manifest"}));
        assert_eq!(broken.status, Status::Fail);
        let idle = plugin_part(&json!({"name": "z", "state": "idle"}));
        assert_eq!(idle.status, Status::Off, "waiting to be asked is not a fault");
        let fell_back = embedder_part(
            &json!({"configured": "onnx", "active": "tfidf", "fallback": "model missing"}),
            None,
        );
        assert_eq!(fell_back.status, Status::Fail);
        let none = embedder_part(&json!({"configured": "tfidf", "active": "tfidf"}), None);
        assert_eq!(none.status, Status::NotConfigured);
        let auto = embedder_part(
            &json!({"configured": "auto", "active": "tfidf", "fallback": "no model installed"}),
            None,
        );
        assert_eq!(auto.status, Status::NotConfigured, "auto promises the fallback");
        let dense = embedder_part(&json!({"active": "remote", "loaded": true}), Some(Ok(8)));
        assert_eq!(
            (dense.status, dense.detail.contains("8 dimensions")),
            (Status::Ok, true)
        );
        let failed = embedder_part(
            &json!({"active": "remote"}),
            Some(Err(ProbeError::NoVector("refused".into()))),
        );
        assert_eq!(failed.status, Status::Fail);
    }

    #[test]
    fn databases_pass_quick_check_and_a_corrupt_one_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("memory")).unwrap();
        let c = rusqlite::Connection::open(dir.path().join("memory/memory.db")).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        drop(c);
        std::fs::write(dir.path().join("config.db"), vec![7u8; 4096]).unwrap();
        let parts = check_databases(dir.path());
        assert_eq!(parts.len(), 2);
        assert_eq!((parts[0].name.as_str(), parts[0].status), ("config.db", Status::Fail));
        assert_eq!(
            (parts[1].name.as_str(), parts[1].status),
            ("memory/memory.db", Status::Ok)
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(check_databases(empty.path())[0].status, Status::Fail);
    }
}
