//! The daemon as a black box: real process, real SQLite, real HTTP on loopback.

mod common;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::Daemon;
use serde_json::{Value, json};

fn get(d: &Daemon, path: &str) -> (u16, Value) {
    let r = d.client().get(d.url(path)).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn send(d: &Daemon, method: reqwest::Method, path: &str, body: Option<&str>) -> (u16, Value) {
    let client = d.client();
    let mut req = client.request(method, d.url(path));
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b.to_owned());
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn actor<'a>(actors: &'a Value, id: &str) -> &'a Value {
    actors["actors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {actors}"))
}

#[test]
fn health_tree_restart_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));

    let (status, health) = get(&d, "/healthz");
    assert_eq!((status, health), (200, json!({"status": "ok"})));
    // `Daemon::start` waited for /readyz; the server was listening before the boot.
    assert_eq!(get(&d, "/readyz"), (200, json!({"status": "ready"})));
    let log = d.log_text();
    let listening = log
        .find("listening; the kernel boots behind /healthz")
        .expect("the listening line");
    let ready = log.find("homed ready").expect("the ready line");
    let booted = log.find("plugins loaded").expect("the plugin host's line");
    assert!(listening < booted && booted < ready, "{log}");

    let (_, tree) = get(&d, "/api/v1/actors");
    let root = actor(&tree, "kernel");
    assert_eq!(root["parent"], Value::Null);
    assert_eq!(root["kind"], "supervisor");
    let children: Vec<_> = tree["actors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["parent"] == "kernel")
        .collect();
    assert!(children.len() >= 2, "{tree}");
    for a in tree["actors"].as_array().unwrap() {
        for field in [
            "id",
            "parent",
            "kind",
            "state",
            "queued",
            "handled",
            "oldest_queued_ms",
            "busy_ms",
            "restarts",
            "last_exit",
        ] {
            assert!(a.get(field).is_some(), "field {field} missing in {a}");
        }
        // Alive: idle, or handling the start-up work still under way (the
        // plugins that start after `/healthz` answers read their settings).
        assert!(a["state"] == "running" || a["state"] == "busy", "{a}");
    }

    // Subscribe before the restart so the restart's events are seen live.
    let resp = d
        .client()
        .get(d.url("/api/v1/events?interval_ms=200"))
        .timeout(Duration::from_secs(10))
        .send()
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut lines = BufReader::new(resp).lines();
    let mut seen_actors = false;
    while let Some(Ok(line)) = lines.next() {
        if line == "event: actors" {
            seen_actors = true;
            break;
        }
    }
    assert!(seen_actors, "an actors event on the stream");

    let (status, body) = send(&d, reqwest::Method::POST, "/api/v1/actors/kernel/config/restart", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["restarts"], 1);
    let mut kinds = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        if let Some(k) = line.strip_prefix("event: ")
            && k != "actors"
        {
            kinds.push(k.to_owned());
        }
        if kinds.iter().any(|k| k == "actor_started") {
            break;
        }
    }
    assert!(kinds.contains(&"actor_restart".to_owned()), "{kinds:?}");
    let (_, tree) = get(&d, "/api/v1/actors");
    assert_eq!(actor(&tree, "kernel/config")["restarts"], 1);
    assert_eq!(actor(&tree, "kernel/config")["last_exit"], "shutdown");

    let (status, _) = send(&d, reqwest::Method::POST, "/api/v1/actors/kernel/restart", None);
    assert_eq!(status, 409);
    let (status, body) = send(&d, reqwest::Method::POST, "/api/v1/actors/kernel/missing/restart", None);
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("kernel/missing"));

    // The dashboard and the API description.
    let html = d.client().get(d.url("/")).send().unwrap();
    assert!(
        html.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(html.text().unwrap().contains("HomeAgent"));
    let (status, spec) = get(&d, "/api/v1/openapi.json");
    assert_eq!(status, 200);
    for path in [
        "/healthz",
        "/readyz",
        "/api/v1/actors",
        "/api/v1/actors/{id}/restart",
        "/api/v1/events",
        "/api/v1/settings",
    ] {
        assert!(spec["paths"].get(path).is_some(), "{path} undocumented");
    }

    let status = d.terminate();
    assert!(status.success(), "graceful SIGTERM exit: {status:?}");
}

#[test]
fn bad_input_gets_a_json_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let put = |body: &str| send(&d, reqwest::Method::PUT, "/api/v1/settings", Some(body));

    for (body, why) in [
        ("{not json", "malformed"),
        ("[1,2]", "not an object"),
        (r#"{"core.agent.max_tool_turns": "ten"}"#, "wrong type"),
        (r#"{"core.nope": 1}"#, "unknown key"),
        (r#"{"core.daemon.heartbeat_interval": "5 parsecs"}"#, "bad duration"),
        ("{}", "empty"),
    ] {
        let (status, body) = put(body);
        assert_eq!(status, 400, "{why}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{why}: {body}");
    }
    let big = format!(r#"{{"core.agent.personal_prompt": "{}"}}"#, "x".repeat(100 * 1024));
    let (status, body) = put(&big);
    assert_eq!(status, 413, "{body}");
    let (status, _) = get(&d, "/api/v1/events?interval_ms=abc");
    assert_eq!(status, 400);
    let (status, _) = get(&d, "/api/v1/events?interval_ms=50");
    assert_eq!(status, 400);
    let (status, body) = get(&d, "/api/v1/nope");
    assert_eq!(status, 404);
    assert!(body["error"].is_string());
    // Still healthy after all that.
    assert_eq!(get(&d, "/healthz").0, 200);
}

/// Words by which a refusal tells its reader what to do next: an action to take, a
/// route that lists what exists, or an example of a right request.
const NEXT_STEP: &[&str] = &[
    "send ",
    "use ",
    "omit ",
    "fix ",
    "give ",
    "start ",
    "lists them",
    "for example",
    "such as",
    "did you mean",
    "GET /api/v1/",
];

/// The API's refusals across its route groups say what to do next (ARCHITECTURE's
/// invariant): each is a JSON 4xx whose text names an action, a listing route or an
/// example. A refusal that only says what is wrong ("invalid JSON body: …") fails.
#[test]
fn every_refusal_of_the_api_says_what_to_do_next() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let cases: &[(Method, &str, Option<&str>)] = &[
        (Method::PUT, "/api/v1/settings", Some("{not json")),
        (Method::PUT, "/api/v1/settings", Some("[1,2]")),
        (
            Method::PUT,
            "/api/v1/settings",
            Some(r#"{"core.agent.max_tool_turns": "ten"}"#),
        ),
        (Method::PUT, "/api/v1/settings", Some(r#"{"core.nope": 1}"#)),
        (
            Method::PUT,
            "/api/v1/settings",
            Some(r#"{"core.daemon.heartbeat_interval": "5 parsecs"}"#),
        ),
        (Method::PUT, "/api/v1/settings", Some("{}")),
        (Method::GET, "/api/v1/events?interval_ms=abc", None),
        (Method::GET, "/api/v1/events?interval_ms=50", None),
        (Method::GET, "/api/v1/nope", None),
        (Method::POST, "/api/v1/messages", Some("{}")),
        (Method::POST, "/api/v1/messages", Some(r#"{"text": "  "}"#)),
        (Method::POST, "/api/v1/messages", Some(r#"{"text": 3}"#)),
        (Method::POST, "/api/v1/actors/kernel/nope/restart", None),
        (Method::POST, "/api/v1/plugins/nope/restart", None),
        (Method::DELETE, "/api/v1/memory/documents/999999", None),
        (Method::POST, "/api/v1/memory/import", Some("garbage")),
        (
            Method::POST,
            "/api/v1/memory/knowledge",
            Some(r#"{"name": " ", "content": "x"}"#),
        ),
        (Method::POST, "/api/v1/clock/advance", Some(r#"{"by": "1d"}"#)),
        (Method::GET, "/api/v1/logs?level=loud", None),
    ];
    for (method, path, body) in cases {
        let (status, reply) = send(&d, method.clone(), path, *body);
        assert!((400..500).contains(&status), "{method} {path}: {status} {reply}");
        let text = reply["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path}: {reply}"));
        assert!(
            NEXT_STEP.iter().any(|w| text.contains(w)),
            "{method} {path} ({status}) does not say what to do next: {text}"
        );
    }
}

#[test]
fn settings_persist_across_kill_9_and_second_daemon_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);

    let (status, body) = send(
        &d,
        reqwest::Method::PUT,
        "/api/v1/settings",
        Some(r#"{"core.agent.max_tool_turns": 7, "plugin.timer.tick": "5s", "core.llm.api_key": "sk-secret"}"#),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["settings"]["core.agent.max_tool_turns"], 7);
    assert_eq!(body["settings"]["core.llm.api_key"], "********", "secrets are masked");

    // A second daemon on the same data dir refuses to start, with a clear message.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already using the data directory"), "{err}");

    // Acknowledged writes survive SIGKILL.
    d.kill9();
    let d = Daemon::start(&data);
    let (_, body) = get(&d, "/api/v1/settings");
    assert_eq!(body["settings"]["core.agent.max_tool_turns"], 7);
    assert_eq!(body["settings"]["plugin.timer.tick"], "5s");
    // null deletes: back to the default.
    let (status, body) = send(
        &d,
        reqwest::Method::PUT,
        "/api/v1/settings",
        Some(r#"{"core.agent.max_tool_turns": null}"#),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["settings"]["core.agent.max_tool_turns"], 10);
}

/// `--listen …:0` serves on a port the kernel picked and names it in DATA/http-address
/// (the black-box harness starts every daemon that way); a port another program holds
/// is refused before the data dir is touched, with what to do.
#[test]
fn port_zero_is_named_in_the_data_dir_and_a_busy_port_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let named = std::fs::read_to_string(data.join("http-address")).unwrap();
    assert_eq!(named, format!("127.0.0.1:{}\n", d.port));
    let (status, _) = get(&d, "/api/v1/settings");
    assert_eq!(status, 200);
    assert!(
        d.log_text().contains(&format!("listen=127.0.0.1:{}", d.port)),
        "the log names the real port"
    );

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fresh = dir.path().join("never-made");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
        .args([
            "--data",
            fresh.to_str().unwrap(),
            "--listen",
            &busy.local_addr().unwrap().to_string(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is another program using it? pick another with --listen"),
        "{err}"
    );
    assert!(!fresh.exists(), "nothing is created for a daemon that cannot listen");
}

#[test]
fn the_log_level_setting_applies_at_start_and_live_unless_rust_log_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let d = common::Daemon::start_with(&dir.path().join("data"), None);
    let log = d.log_text();
    assert!(log.contains("log level set (core.daemon.log_level)"), "{log}");
    assert!(!log.contains("DEBUG"), "info by default");
    let r = d
        .client()
        .put(d.url("/api/v1/settings"))
        .json(&serde_json::json!({"core.daemon.log_level": "debug"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // A turn logs at debug level now (task start, safe points).
    let v = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(&d, 1);
    let (status, _) = common::api::post(&d, "/api/v1/messages", serde_json::json!({"text": "hello"}));
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !d.log_text().contains("DEBUG") {
        assert!(
            std::time::Instant::now() < deadline,
            "no debug line after the switch:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // With RUST_LOG set, the operator's filter wins.
    let dir2 = tempfile::tempdir().unwrap();
    let d2 = common::Daemon::start_with(&dir2.path().join("data"), Some("info"));
    assert!(!d2.log_text().contains("log level set (core.daemon.log_level)"));
}

/// A person who runs `homed` sees where to sign in first: the login URL is the first
/// line on stdout (the log goes to stderr), with the port really bound and the owner's
/// token, and it signs a browser in.
#[test]
fn the_login_url_is_the_first_line_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["run", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let token = std::fs::read_to_string(data.join("api-token")).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in the first line: {first:?}"))
        .to_owned();
    assert!(
        url.ends_with(&format!("/login?token={}", token.trim())) && !url.contains(":0/"),
        "{first:?}"
    );
    let signed_in = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&url)
        .send()
        .unwrap();
    assert!(
        signed_in.status().is_redirection() && signed_in.headers().contains_key("set-cookie"),
        "{:?}",
        signed_in.status()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A fresh daemon seeds no model source (the first comes from the setup or the owner),
/// so nothing reappears that the owner removed: a source deleted is gone after a
/// restart, and the message without a model says where to connect one.
#[test]
fn no_source_is_seeded_and_a_removed_source_stays_removed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let (_, s) = get(&d, "/api/v1/llm/sources");
    assert_eq!(
        (
            s["sources"].as_array().map(Vec::len),
            s["skipped"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0)),
        "{s}"
    );
    let (status, body) = send(
        &d,
        reqwest::Method::POST,
        "/api/v1/messages",
        Some(r#"{"text":"hello?"}"#),
    );
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap_or("").contains("setup card"), "{body}");
    let (_, presets) = get(&d, "/api/v1/llm/presets");
    assert_eq!(presets["configured"], false);
    assert!(
        presets["presets"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["adapter"] == "deepseek")),
        "{presets}"
    );

    let put = |body: &str| send(&d, reqwest::Method::PUT, "/api/v1/settings", Some(body));
    let (status, _) = put(
        r#"{"core.llm.sources.deepseek.base_url":"https://api.deepseek.com","core.llm.sources.deepseek.model":"deepseek-chat","core.llm.sources.deepseek.adapter":"deepseek"}"#,
    );
    assert_eq!(status, 200);
    let (status, _) = put(
        r#"{"core.llm.sources.deepseek.base_url":null,"core.llm.sources.deepseek.model":null,"core.llm.sources.deepseek.adapter":null}"#,
    );
    assert_eq!(status, 200);
    d.terminate();
    let d = Daemon::start(&data);
    let (_, s) = get(&d, "/api/v1/llm/sources");
    assert_eq!(
        s["skipped"].as_array().map(Vec::len),
        Some(0),
        "the removed source came back: {s}"
    );
}
