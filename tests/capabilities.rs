//! The agent's hands on the user's path: HTTP → turn → the request the vendor receives
//! → the tool (a real subprocess plugin: files, cmd, web; or the built-in seq_run) →
//! the reply. Every tool runs under the firewall's sandbox on a real daemon; hostile
//! paths (`..`, absolute, symlinks) are refused by the kernel with the firewall's
//! reason, and what they point at never reaches the model.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::Daemon;
use common::api::call_tool as call;
use serde_json::{Value, json};

/// A daemon with the scripted vendor, once `plugins` have registered their tools.
fn daemon(plugins: &[&str]) -> (tempfile::TempDir, Daemon, common::vendor::Vendor) {
    let (dir, _data, d, v) = common::api::daemon_with_plugins(&[], plugins);
    (dir, d, v)
}

fn workspace(d: &Daemon) -> std::path::PathBuf {
    d.data.join("workspace").canonicalize().unwrap()
}

fn sandbox_refusals(d: &Daemon) -> Vec<Value> {
    common::api::get(d, "/api/v1/security")["decisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|x| x["gate"] == "sandbox" && x["allowed"] == false)
        .collect()
}

#[test]
fn files_are_written_and_read_inside_the_roots_and_escapes_are_refused() {
    const CANARY: &str = "CANARY-outside-the-roots-7731";
    let (dir, d, v) = daemon(&["files"]);
    let ws = workspace(&d);

    let out = call(
        &d,
        "files_write",
        json!({"path": "notes/today.md", "content": "# Today\nbuy tea\n"}),
    );
    assert!(out.starts_with("created") && out.contains("notes/today.md"), "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/today.md")).unwrap(),
        "# Today\nbuy tea\n"
    );
    let out = call(&d, "files_read", json!({"path": "notes/today.md"}));
    assert_eq!(
        out,
        format!(
            "{} (lines 1-2 of 2):\n# Today\nbuy tea",
            ws.join("notes/today.md").display()
        )
    );
    assert!(
        v.last.lock().unwrap().to_string().contains("buy tea"),
        "the model received the file"
    );
    let out = call(
        &d,
        "files_edit",
        json!({"path": "notes/today.md", "old": "tea", "new": "coffee"}),
    );
    assert!(out.starts_with("edited"), "{out}");
    let out = call(&d, "files_list", json!({}));
    assert!(out.contains("notes/"), "{out}");
    let out = call(&d, "files_search", json!({"pattern": "coffee"}));
    assert!(out.contains("today.md:2: buy coffee"), "{out}");

    // Escapes: the kernel refuses them before the plugin is asked.
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), CANARY).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("innocent.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("linkdir")).unwrap();
    let token = d.data.join("api-token");
    let cases = [
        (
            "files_read",
            json!({"path": token.to_str().unwrap()}),
            "is outside the read roots",
        ),
        ("files_read", json!({"path": "../api-token"}), "contains `..`"),
        ("files_read", json!({"path": "notes/../../api-token"}), "contains `..`"),
        (
            "files_read",
            json!({"path": "innocent.txt"}),
            "is outside the read roots",
        ),
        (
            "files_read",
            json!({"path": "linkdir/secret.txt"}),
            "is outside the read roots",
        ),
        (
            "files_write",
            json!({"path": "linkdir/planted.txt", "content": "x"}),
            "is outside the write roots",
        ),
        ("files_list", json!({"path": "/etc"}), "is outside the read roots"),
        (
            "files_search",
            json!({"pattern": "x", "path": "/"}),
            "is outside the read roots",
        ),
    ];
    let n_cases = cases.len();
    for (tool, args, why) in cases {
        let out = call(&d, tool, args.clone());
        assert!(
            out.starts_with(&format!("firewall (sandbox) refused {tool}: `path`:")) && out.contains(why),
            "{tool} {args}: {out}"
        );
        assert!(
            out.contains("core.security.sandbox") || out.contains("without `..`"),
            "says what to do: {out}"
        );
    }
    assert!(
        !outside.join("planted.txt").exists(),
        "nothing was written through the link"
    );
    let sent = v.last.lock().unwrap().to_string();
    assert!(
        !sent.contains(CANARY) && !sent.contains(&d.token()),
        "nothing outside reached the model"
    );
    let search = call(&d, "files_search", json!({"pattern": "CANARY"}));
    assert!(
        search.starts_with("no match"),
        "the search does not follow links: {search}"
    );
    let refused = sandbox_refusals(&d);
    assert!(
        refused.len() >= n_cases,
        "every refusal is a firewall decision: {refused:?}"
    );
    assert!(
        refused
            .iter()
            .all(|r| r["reason"].as_str().is_some_and(|s| !s.is_empty()))
    );
}

#[test]
fn cmd_run_answers_output_and_exit_code_times_out_and_honours_the_deny_list() {
    let (_dir, d, _v) = daemon(&["cmd"]);
    let ws = workspace(&d);
    let out = call(&d, "cmd_run", json!({"argv": ["echo", "hello", "caps"]}));
    assert_eq!(out.trim_end(), "exit code: 0\n--- stdout ---\nhello caps");
    let out = call(&d, "cmd_run", json!({"command": "pwd; echo oops >&2; exit 4"}));
    assert!(
        out.contains("exit code: 4") && out.contains(ws.to_str().unwrap()) && out.contains("oops"),
        "{out}"
    );

    let t0 = std::time::Instant::now();
    let out = call(&d, "cmd_run", json!({"command": "sleep 30", "timeout_secs": 1}));
    assert!(
        out.contains("timed out after 1s: its process group was killed"),
        "{out}"
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(25),
        "the turn did not wait for sleep 30"
    );

    let out = call(&d, "cmd_run", json!({"argv": ["sudo", "id"]}));
    assert!(
        out.contains("`sudo` is on the deny list"),
        "the default deny list: {out}"
    );
    common::api::put_settings(&d, json!({"plugin.cmd.deny": "rm, curl"}));
    let out = call(&d, "cmd_run", json!({"command": "touch keep.txt && rm -f keep.txt"}));
    assert!(out.contains("`rm` is on the deny list"), "{out}");
    assert!(!ws.join("keep.txt").exists(), "nothing of a denied line ran");

    let out = call(&d, "cmd_run", json!({"argv": ["ls"], "cwd": "/etc"}));
    assert!(out.starts_with("firewall (sandbox) refused cmd_run: `cwd`:"), "{out}");
    let out = call(&d, "cmd_run", json!({"argv": ["ls"], "cwd": "../"}));
    assert!(out.contains("contains `..`"), "{out}");
}

/// A tiny HTTP/1.1 server on 127.0.0.1 speaking the formats web_fetch meets: HTML,
/// JSON, a binary, a huge body, a redirect to the daemon, and a SearXNG `/search`.
struct Site {
    base: String,
    paths: Arc<Mutex<Vec<String>>>,
}

fn site(daemon_port: u16) -> Site {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let paths: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = paths.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                seen.lock().unwrap().push(target.clone());
                let path = target.split('?').next().unwrap_or("");
                let (status, ctype, body, extra): (&str, &str, Vec<u8>, String) = match path {
                    "/page.html" => (
                        "200 OK",
                        "text/html; charset=utf-8",
                        b"<html><head><title>Caps</title><style>p{}</style></head><body><h1>Capabilities</h1>\
                          <p>The agent has <a href=\"https://example.org/hands\">hands</a>.</p></body></html>"
                            .to_vec(),
                        String::new(),
                    ),
                    "/data.json" => (
                        "200 OK",
                        "application/json",
                        br#"{"tool":"web_fetch","ok":true}"#.to_vec(),
                        String::new(),
                    ),
                    "/image.png" => (
                        "200 OK",
                        "image/png",
                        vec![0x89, b'P', b'N', b'G', 0, 0, 1, 2],
                        String::new(),
                    ),
                    "/huge.txt" => ("200 OK", "text/plain", vec![b'z'; 3 * 1024 * 1024], String::new()),
                    "/to-daemon" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        format!("Location: http://localhost:{daemon_port}/api/v1/settings\r\n"),
                    ),
                    "/search" if target.contains("format=json") => {
                        let body = json!({"query": "q", "results": [
                            {"title": "HomeAgent capabilities", "url": "http://example.org/caps", "content": "files, cmd, web and seq"},
                            {"title": "Second", "url": "http://example.org/2", "content": ""}
                        ]});
                        (
                            "200 OK",
                            "application/json",
                            body.to_string().into_bytes(),
                            String::new(),
                        )
                    }
                    _ => ("404 Not Found", "text/plain", b"no such page".to_vec(), String::new()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            });
        }
    });
    Site { base, paths }
}

#[test]
fn web_fetch_reads_pages_as_text_and_web_search_asks_the_configured_endpoint() {
    let (_dir, d, _v) = daemon(&["web"]);
    let s = site(d.port);

    let out = call(&d, "web_fetch", json!({"url": format!("{}/page.html", s.base)}));
    assert!(out.contains("# Capabilities") && out.contains("[hands][1]"), "{out}");
    assert!(
        out.contains("https://example.org/hands") && !out.contains("<h1>"),
        "{out}"
    );
    let out = call(&d, "web_fetch", json!({"url": format!("{}/data.json", s.base)}));
    assert!(
        out.contains("{\n  \"ok\": true,\n  \"tool\": \"web_fetch\"\n}") || out.contains("\"tool\": \"web_fetch\""),
        "{out}"
    );
    let out = call(&d, "web_fetch", json!({"url": format!("{}/image.png", s.base)}));
    assert!(out.contains("`image/png`, not text"), "{out}");
    let out = call(
        &d,
        "web_fetch",
        json!({"url": format!("{}/huge.txt", s.base), "max_bytes": 100000}),
    );
    assert!(
        out.contains("[download stopped at 100000 bytes"),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
    assert!(out.len() < 20 * 1024, "the answer is capped: {} bytes", out.len());
    let out = call(&d, "web_fetch", json!({"url": format!("{}/missing", s.base)}));
    assert!(out.contains("HTTP 404") && out.contains("no such page"), "{out}");

    // The daemon's own API is refused, directly and through a redirect.
    let out = call(
        &d,
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{}/api/v1/settings", d.port)}),
    );
    assert!(out.contains("the daemon's own address"), "{out}");
    let out = call(&d, "web_fetch", json!({"url": format!("{}/to-daemon", s.base)}));
    assert!(out.contains("the daemon's own address"), "{out}");

    // web_search: a clear error until configured, then the endpoint's results.
    let out = call(&d, "web_search", json!({"query": "before configuring"}));
    assert!(
        out.contains("not configured") && out.contains("plugin.web.search_url"),
        "{out}"
    );
    common::api::put_settings(&d, json!({"plugin.web.search_url": s.base}));
    let out = call(&d, "web_search", json!({"query": "homeagent caps"}));
    assert!(
        out.starts_with("1. HomeAgent capabilities\n   http://example.org/caps\n   files, cmd, web and seq\n2. Second"),
        "{out}"
    );
    assert!(
        s.paths
            .lock()
            .unwrap()
            .iter()
            .any(|p| p == "/search?q=homeagent+caps&format=json"),
        "{:?}",
        s.paths.lock().unwrap()
    );

    // The network switch off: the kernel refuses before the plugin runs.
    let before = s.paths.lock().unwrap().len();
    common::api::put_settings(&d, json!({"core.security.sandbox.network": false}));
    common::api::wait_for(&d, "/api/v1/security", "the network switched off", |x| {
        x["network"] == false
    });
    let out = call(
        &d,
        "web_fetch",
        json!({"url": format!("{}/page.html", s.base), "timeout_secs": 5}),
    );
    assert!(
        out.starts_with("firewall (sandbox) refused web_fetch: network access is switched off"),
        "{out}"
    );
    assert_eq!(s.paths.lock().unwrap().len(), before, "no request left");
}

#[test]
fn seq_runs_its_steps_through_the_firewall_and_stops_at_the_first_failure() {
    let (_dir, d, _v) = daemon(&["files"]);
    let ws = workspace(&d);
    let out = call(
        &d,
        "seq_run",
        json!({"steps": [
            {"tool": "files_write", "args": {"path": "seq.txt", "content": "one step"}},
            {"parallel": [
                {"tool": "files_read", "args": {"path": "seq.txt"}},
                {"tool": "files_list", "args": {}}
            ]}
        ]}),
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["ok"], true, "{out}");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert!(steps[0]["result"].as_str().unwrap().starts_with("created"));
    assert!(steps[1]["result"].as_str().unwrap().ends_with("one step"), "{out}");
    assert!(steps[2]["result"].as_str().unwrap().contains("seq.txt"), "{out}");

    // A step the sandbox refuses stops the sequence; what follows does not run.
    let out = call(
        &d,
        "seq_run",
        json!({"steps": [
            {"tool": "files_read", "args": {"path": "/etc/hostname"}},
            {"tool": "files_write", "args": {"path": "after.txt", "content": "x"}}
        ]}),
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        (v["ok"].clone(), v["stopped_at"].clone()),
        (json!(false), json!(1)),
        "{out}"
    );
    assert_eq!(v["steps"][0]["status"], "denied");
    assert!(
        v["steps"][0]["result"]
            .as_str()
            .unwrap()
            .contains("outside the read roots")
    );
    assert_eq!(v["not_run"], json!(["files_write"]));
    assert!(!ws.join("after.txt").exists());

    // The owner's policy applies to every step, as to a direct call.
    common::api::put_settings(&d, json!({"core.security.tool_deny": "files_write"}));
    common::api::wait_for(&d, "/api/v1/security", "the deny list", |x| {
        x["tool_deny"] == json!(["files_write"])
    });
    let out = call(
        &d,
        "seq_run",
        json!({"steps": [{"tool": "files_write", "args": {"path": "no.txt", "content": "x"}}]}),
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["steps"][0]["status"], "denied", "{out}");
    assert!(
        v["steps"][0]["result"]
            .as_str()
            .unwrap()
            .contains("denied by the owner's policy")
    );
    assert!(!ws.join("no.txt").exists());
    let out = call(&d, "seq_run", json!({"steps": []}));
    assert!(out.contains("`steps` must be a non-empty array"), "{out}");
}
