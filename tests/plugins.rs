//! Subprocess plugins on a real daemon: tools, crash during a call, quarantine.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::api::plugin;
use common::{Daemon, vendor};
use serde_json::{Value, json};

/// Installs the test plugin `name` (from tests/plugins) into `data/plugins`.
fn install(data: &Path, name: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins").join(name);
    let dst = data.join("plugins").join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dst.join(f.file_name().unwrap())).unwrap(); // keeps the exec bit
    }
}

/// Writes a Lua plugin `name` (version 0.1.0) running `script` into `data/plugins`.
fn lua_plugin(data: &Path, name: &str, script: &str) {
    let dir = data.join("plugins").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.json"),
        json!({"name": name, "version": "0.1.0"}).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("main.lua"), script).unwrap();
}

fn wait_plugin(d: &Daemon, name: &str, timeout: Duration, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let p = plugin(d, name);
        if ok(&p) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "plugin {name} never {what}: {p}\nlog:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fake vendor configured as the daemon's LLM source, and loaded.
fn with_vendor(d: &Daemon) -> vendor::Vendor {
    let v = vendor::start();
    common::api::put_settings(d, vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(d, 1);
    v
}

fn ask(d: &Daemon, text: &str) -> Value {
    d.client()
        .post(d.url("/api/v1/messages"))
        .timeout(Duration::from_secs(60))
        .json(&json!({ "text": text }))
        .send()
        .unwrap()
        .json()
        .unwrap()
}

#[test]
fn plugin_tools_work_and_a_plugin_killed_mid_call_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "echo");
    let d = Daemon::start(&data);
    let running = |p: &Value| p["state"] == "running" && p["tools"] == json!(["echo_say"]);
    let p = wait_plugin(&d, "echo", Duration::from_secs(10), "ran", running);
    assert!(p["pid"].as_u64().is_some());
    let tree: Value = d.client().get(d.url("/api/v1/actors")).send().unwrap().json().unwrap();
    let ids: Vec<&str> = tree["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"kernel/plugins/echo") && ids.contains(&"kernel/plugins/echo/process"),
        "{ids:?}"
    );

    let _v = with_vendor(&d);
    let reply = ask(&d, r#"call-tool echo_say {"text":"hi"}"#);
    assert_eq!(reply["reply"], r#"tool said: echo: {"text": "hi"}"#, "{reply}");

    // SIGKILL the plugin while a call is in flight: the call fails at once with a clear
    // error, the turn goes on, and the plugin comes back with its tools.
    let url = d.url("/api/v1/messages");
    let client = d.client();
    let call = std::thread::spawn(move || {
        client
            .post(url)
            .timeout(Duration::from_secs(60))
            .json(&json!({"text": r#"call-tool echo_say {"hang":true}"#}))
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()
    });
    let p = wait_plugin(&d, "echo", Duration::from_secs(10), "hung", |p| {
        p["stderr_tail"]
            .as_array()
            .is_some_and(|t| t.iter().any(|l| l == "hanging on request"))
    });
    let pid = p["pid"].as_u64().unwrap();
    let killed_at = Instant::now();
    common::unsafe_kill(pid as u32, "KILL");
    let reply = call.join().unwrap();
    let text = reply["reply"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("tool said: ") && text.contains("plugin `echo` exited"),
        "{reply}"
    );
    let p = wait_plugin(&d, "echo", Duration::from_secs(10), "came back", |p| {
        running(p) && p["restarts"] == 1
    });
    eprintln!("plugin back with its tools {:?} after the kill", killed_at.elapsed());
    assert_ne!(p["pid"].as_u64().unwrap(), pid);
    assert!(p["last_exit"].as_str().unwrap().contains("signal: 9"), "{p}");
    let reply = ask(&d, r#"call-tool echo_say {"again":1}"#);
    assert_eq!(reply["reply"], r#"tool said: echo: {"again": 1}"#);
}

#[test]
fn a_plugin_that_dies_at_start_is_quarantined_until_an_operator_restarts_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "broken");
    let d = Daemon::start(&data);
    // 1 + 2 + 4 s of backoff, then the fourth failure exceeds 3 restarts in 5 minutes.
    let p = wait_plugin(&d, "broken", Duration::from_secs(40), "got quarantined", |p| {
        p["state"] == "quarantined"
    });
    assert!(
        p["last_exit"].as_str().unwrap().contains("missing configuration"),
        "stderr tail in the exit: {p}"
    );
    assert_eq!(p["restarts"], 3);
    // The daemon is fine.
    assert_eq!(d.client().get(d.url("/healthz")).send().unwrap().status().as_u16(), 200);
    let r = d.client().post(d.url("/api/v1/plugins/broken/restart")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text());
    wait_plugin(&d, "broken", Duration::from_secs(10), "left quarantine", |p| {
        p["state"] != "quarantined"
    });
    let r = d.client().post(d.url("/api/v1/plugins/nope/restart")).send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

#[test]
fn the_bundled_timer_plugin_reminds_the_agent_with_an_interrupt() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let p = wait_plugin(&d, "timer", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running" && p["tools"].as_array().is_some_and(|t| t.len() == 3)
    });
    assert_eq!(p["tools"], json!(["timer_set", "timer_list", "timer_cancel"]));
    let v = with_vendor(&d);
    let reply = ask(&d, r#"call-tool timer_set {"after":"1s","message":"tea time"}"#);
    assert_eq!(reply["reply"], "tool said: timer #1 set: reminder in 1s", "{reply}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let last = v.last.lock().unwrap().clone();
        let seen = last["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["content"] == "[Interrupt] ⏰ Reminder #1: tea time"));
        if seen {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reminder never reached the model; last request: {last}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn action(d: &Daemon, name: &str, action: &str) -> (u16, Value) {
    let r = d
        .client()
        .post(d.url(&format!("/api/v1/plugins/{name}/{action}")))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

#[test]
fn disable_survives_a_restart_enable_brings_it_back_and_a_new_entry_file_reloads_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "echo");
    let d = Daemon::start(&data);
    let running = |p: &Value| p["state"] == "running" && p["tools"] == json!(["echo_say"]);
    let first = wait_plugin(&d, "echo", Duration::from_secs(10), "ran", running);

    let (status, body) = action(&d, "echo", "disable");
    assert_eq!(status, 200, "{body}");
    let p = wait_plugin(&d, "echo", Duration::from_secs(10), "stopped", |p| {
        p["state"] == "disabled" && p["pid"].is_null()
    });
    assert_eq!(p["tools"], json!([]), "its tools left with it");
    let (status, _) = action(&d, "echo", "restart");
    assert_eq!(status, 409, "a disabled plugin is not restarted");

    // Disabled stays disabled across a daemon restart.
    assert!(d.terminate().success());
    let d = Daemon::start(&data);
    let p = plugin(&d, "echo");
    assert_eq!(p["state"], "disabled", "{p}");
    assert!(p["pid"].is_null());

    let (status, body) = action(&d, "echo", "enable");
    assert_eq!(status, 200, "{body}");
    let p = wait_plugin(&d, "echo", Duration::from_secs(10), "ran again", running);
    let pid = p["pid"].as_u64().unwrap();
    assert_ne!(Some(pid), first["pid"].as_u64());

    // Hot reload: a changed entry file restarts the plugin.
    let bin = data.join("plugins/echo/plugin.bin");
    let mut text = std::fs::read_to_string(&bin).unwrap();
    text.push_str("\n# changed\n");
    std::fs::write(&bin, text).unwrap();
    let p = wait_plugin(&d, "echo", Duration::from_secs(15), "reloaded", |p| {
        running(p) && p["pid"].as_u64() != Some(pid)
    });
    assert!(p["restarts"].as_u64().unwrap() >= 1, "{p}");
    let (status, _) = action(&d, "echo", "explode");
    assert_eq!(status, 404);
}

#[test]
fn a_skill_is_indexed_in_the_prompt_and_read_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "pdf-tools");
    let d = Daemon::start(&data);
    let p = plugin(&d, "pdf-tools");
    assert_eq!(
        (p["kind"].as_str(), p["state"].as_str()),
        (Some("skill"), Some("running")),
        "{p}"
    );
    let v = with_vendor(&d);
    let reply = ask(&d, r#"call-tool skill_info {"name":"pdf-tools"}"#);
    let text = reply["reply"].as_str().unwrap();
    assert!(
        text.starts_with("tool said: # Skill: pdf-tools") && text.contains("qpdf --empty --pages"),
        "{reply}"
    );
    let last = v.last.lock().unwrap().clone();
    let system = last["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(
        system.contains("# Skills") && system.contains("- pdf-tools: Merge, split and fill PDF files with qpdf."),
        "only the index is in the prompt"
    );
    assert!(!system.contains("qpdf --empty"), "the body is not in the prompt");

    // Disabled, the skill leaves the very next prompt; enabled, it comes back.
    // (Different texts: the duplicate guard drops a repeat within 10 s.)
    let system_prompt = |d: &Daemon, text: &str| {
        ask(d, text);
        let last = v.last.lock().unwrap().clone();
        last["messages"][0]["content"].as_str().unwrap().to_owned()
    };
    let (status, body) = action(&d, "pdf-tools", "disable");
    assert_eq!((status, body["state"].as_str()), (200, Some("disabled")), "{body}");
    assert!(
        !system_prompt(&d, "hello while disabled").contains("pdf-tools"),
        "a disabled skill is not offered"
    );
    let (status, body) = action(&d, "pdf-tools", "enable");
    assert_eq!(status, 200, "enabling a skill works: {body}");
    assert!(
        system_prompt(&d, "hello once enabled").contains("- pdf-tools: Merge, split and fill PDF files with qpdf."),
        "an enabled skill is back in the index"
    );
}

#[test]
fn garbage_from_a_plugin_gets_clear_errors_and_breaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "rude");
    let d = Daemon::start(&data);
    let p = wait_plugin(
        &d,
        "rude",
        Duration::from_secs(30),
        "registered its tool after the garbage",
        |p| p["tools"] == json!(["rude_ping"]),
    );
    assert_eq!(p["state"], "running");
    assert_eq!(p["restarts"], 0, "garbage is answered, not fatal: {p}");
    let errors = wait_plugin(&d, "rude", Duration::from_secs(10), "got its error answers", |p| {
        let tail = p["stderr_tail"]
            .as_array()
            .map(|t| t.iter().filter_map(|l| l.as_str()).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        tail.contains("GOT -32601") && tail.contains("GOT -32001") && tail.contains("GOT -32602")
    });
    let tail = errors["stderr_tail"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(tail.contains("unknown method `no.such.method`"), "{tail}");
    assert!(
        tail.contains("needs the `memory` capability") && tail.contains("plugin.json"),
        "the denial says what to declare: {tail}"
    );
    let more = wait_plugin(
        &d,
        "rude",
        Duration::from_secs(10),
        "got the own-settings answers",
        |p| {
            let tail = p["stderr_tail"].to_string();
            tail.contains("needs the `events` capability")
                && tail.contains("may read only its own settings")
                && tail.contains("no tool `nobody_has_this`")
        },
    );
    assert_eq!(more["restarts"], 0);
    assert!(
        d.log_text().contains("over 1048576 bytes"),
        "the oversized frame was reported"
    );

    // The kernel is fine and the plugin's tool works.
    let _v = with_vendor(&d);
    assert_eq!(ask(&d, "call-tool rude_ping {}")["reply"], "tool said: pong");
    assert_eq!(d.client().get(d.url("/healthz")).send().unwrap().status().as_u16(), 200);
}

#[test]
fn a_plugin_that_never_handshakes_is_stopped_with_a_clear_reason() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "mute");
    let d = Daemon::start(&data);
    let p = wait_plugin(&d, "mute", Duration::from_secs(20), "was stopped", |p| {
        p["last_exit"].as_str().is_some_and(|e| e.contains("handshake"))
    });
    assert!(
        p["last_exit"]
            .as_str()
            .unwrap()
            .contains("no handshake answer within 10s"),
        "{p}"
    );
    assert_eq!(d.client().get(d.url("/healthz")).send().unwrap().status().as_u16(), 200);
}

#[test]
fn a_lua_plugin_offers_tools_and_stage_handlers_and_a_runaway_script_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "greeter");
    let d = Daemon::start(&data);
    let p = wait_plugin(&d, "greeter", Duration::from_secs(10), "ran", |p| {
        p["tools"].as_array().is_some_and(|t| t.len() == 7)
    });
    assert_eq!(
        (p["kind"].as_str(), p["state"].as_str()),
        (Some("lua"), Some("running")),
        "{p}"
    );
    let _v = with_vendor(&d);
    assert_eq!(
        ask(&d, r#"call-tool greeter_hello {"name":"Ada"}"#)["reply"],
        "tool said: hello, Ada (greeted)"
    );
    let reply = ask(&d, "call-tool greeter_spin {}");
    let text = reply["reply"].as_str().unwrap();
    assert!(
        text.contains("instruction budget"),
        "the runaway tool was stopped: {reply}"
    );
    // No pcall swallows the abort; the C matcher is never asked for hours of work.
    let reply = ask(&d, "call-tool greeter_pcall_spin {}");
    assert!(
        reply["reply"].as_str().unwrap().contains("instruction budget"),
        "{reply}"
    );
    let reply = ask(&d, "call-tool greeter_pattern {}");
    assert!(
        reply["reply"].as_str().unwrap().contains("simplify the pattern"),
        "{reply}"
    );
    // Still alive and serving.
    assert_eq!(
        ask(&d, r#"call-tool greeter_hello {}"#)["reply"],
        "tool said: hello, stranger (greeted)"
    );
    assert_eq!(plugin(&d, "greeter")["restarts"], 0);
}

/// A Lua plugin that registers a tool name another plugin holds is refused that tool:
/// the plugin that lost it does not list it (the stage host's answer is awaited before
/// the plugin is ready), and the tool stays its first owner's.
#[test]
fn a_lua_tool_whose_name_is_taken_is_not_listed_by_the_plugin_that_lost_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "greeter");
    lua_plugin(
        &data,
        "copycat",
        r#"
sdk.register_tool("greeter_hello", {description = "A copy"}, function(args) return "copied" end)
sdk.register_tool("copycat_own", {description = "Its own"}, function(args) return "own" end)
"#,
    );
    let d = Daemon::start(&data);
    let cat = wait_plugin(&d, "copycat", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running"
    });
    let greeter = wait_plugin(&d, "greeter", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running"
    });
    let listed = |p: &Value| -> Vec<String> {
        p["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    let (cat, greeter) = (listed(&cat), listed(&greeter));
    let holders = [&cat, &greeter]
        .iter()
        .filter(|l| l.contains(&"greeter_hello".to_owned()))
        .count();
    assert_eq!(
        holders, 1,
        "one plugin holds the name: copycat {cat:?}, greeter {greeter:?}"
    );
    assert!(cat.contains(&"copycat_own".to_owned()), "{cat:?}");
    assert_eq!(cat.len() + greeter.len(), 8, "copycat {cat:?}, greeter {greeter:?}");
    // The tool answers as its holder's (greeter's global stage marks every reply).
    let _v = with_vendor(&d);
    let reply = ask(&d, r#"call-tool greeter_hello {"name":"Ada"}"#)["reply"].clone();
    let expected = if greeter.contains(&"greeter_hello".to_owned()) {
        "tool said: hello, Ada (greeted)"
    } else {
        "tool said: copied (greeted)"
    };
    assert_eq!(reply, expected);
}

/// A plugin cannot take the name of a kernel tool group: a plugin called `memory` would
/// own the kernel's memory tools' group, and its stop would withdraw them (the stage
/// host withdraws a plugin's tools by its name). It is refused at discovery, and the
/// kernel's memory tools stay whatever is done to that name.
#[test]
fn a_plugin_named_after_a_kernel_tool_group_is_refused_and_the_kernels_tools_stay() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "greeter");
    lua_plugin(
        &data,
        "memory",
        r#"sdk.register_tool("memory_own", {description = "Mine"}, function(args) return "mine" end)"#,
    );
    let d = Daemon::start(&data);
    wait_plugin(&d, "greeter", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running"
    });
    let _v = with_vendor(&d);
    // A new text each time (the same text within 10 s is a duplicate).
    let recall = |q: &str| ask(&d, &format!(r#"call-tool memory_recall {{"query":"{q}"}}"#))["reply"].clone();
    let works = |reply: &Value| {
        reply
            .as_str()
            .is_some_and(|r| r.starts_with("tool said:") && !r.contains("does not exist"))
    };
    let before = recall("anything");
    assert!(works(&before), "{before}");
    let (status, body) = action(&d, "memory", "disable");
    assert_eq!(status, 404, "no plugin may hold the name: {body}");
    assert!(
        d.log_text().contains("reserved"),
        "the refusal is logged with why:\n{}",
        d.log_text()
    );
    let after = recall("something");
    assert!(works(&after), "the kernel's memory tools are still there: {after}");
}

/// A daemon with the greeter Lua plugin running (its seven tools registered) and the
/// fake vendor.
fn greeter() -> (tempfile::TempDir, std::path::PathBuf, Daemon, vendor::Vendor) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "greeter");
    let d = Daemon::start(&data);
    wait_plugin(&d, "greeter", Duration::from_secs(10), "ran", |p| {
        p["tools"].as_array().is_some_and(|t| t.len() == 7)
    });
    let v = with_vendor(&d);
    (dir, data, d, v)
}

/// A Lua call stuck in C code (within every guard, minutes of pattern matching) meets
/// its deadline: the caller gets an error, the plugin is restarted on a fresh thread
/// while the old one is abandoned, and the kernel answers all along.
#[test]
fn a_lua_call_stuck_in_c_code_meets_its_deadline_and_the_chat_keeps_answering() {
    let (_dir, _data, d, _v) = greeter();
    let slow = {
        let (client, url) = (d.client(), d.url("/api/v1/messages"));
        std::thread::spawn(move || {
            client
                .post(url)
                .timeout(Duration::from_secs(120))
                .json(&json!({"text": "call-tool greeter_slow {}"}))
                .send()
                .unwrap()
                .json::<Value>()
                .unwrap()
        })
    };
    // The kernel is not frozen while the plugin's thread is stuck (before, a Lua
    // plugin's C call stalled the thread every turn and plugin shared). The stuck turn
    // itself holds the agent until the call's deadline, then the chat goes on.
    std::thread::sleep(Duration::from_millis(500));
    let r = d
        .client()
        .get(d.url("/api/v1/plugins"))
        .timeout(Duration::from_secs(5))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "the API answers while a Lua call is stuck");
    let reply = slow.join().unwrap();
    let text = reply["reply"].as_str().unwrap_or_default();
    assert!(text.contains("did not answer within 10 s"), "{reply}");
    // Restarted on a fresh thread: it answers again.
    let p = wait_plugin(&d, "greeter", Duration::from_secs(30), "restarted", |p| {
        p["restarts"].as_u64().unwrap_or(0) >= 1 && p["state"] == "running"
    });
    assert_eq!(p["kind"], "lua");
    assert_eq!(
        ask(&d, r#"call-tool greeter_hello {"name":"again"}"#)["reply"],
        "tool said: hello, again (greeted)"
    );
}

/// Builds a zip (an `.hmap` package) from `(path, body, unix mode)` entries.
fn hmap(files: &[(&str, &str, u32)]) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, body, mode) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default().unix_permissions(*mode))
            .unwrap();
        w.write_all(body.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn post_package(d: &Daemon, bytes: Vec<u8>) -> (u16, Value) {
    let r = d
        .client()
        .post(d.url("/api/v1/plugins/install"))
        .header("content-type", "application/zip")
        .body(bytes)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap())
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn an_hmap_package_installs_and_runs_without_a_restart_and_bad_ones_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let plugins = data.join("plugins");
    let before = listing(&plugins);

    let manifest =
        r#"{"name": "pkgdemo", "version": "1.2.0", "entry": "main.lua", "description": "installed from a package"}"#;
    let lua = r#"sdk.register_tool("pkgdemo_hi", {description = "Say hi", parameters = {type = "object", properties = {}}}, function(args) return "hi from a package" end)"#;
    let bad: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"PK not really".to_vec(), 400, "not a zip archive"),
        (Vec::new(), 400, "empty"),
        (
            hmap(&[("plugin.json", manifest, 0o644), ("../../evil.lua", "x", 0o644)]),
            400,
            "unsafe path",
        ),
        (
            hmap(&[("plugin.json", manifest, 0o644), ("/tmp/evil.lua", "x", 0o644)]),
            400,
            "unsafe path",
        ),
        (hmap(&[("main.lua", lua, 0o644)]), 400, "no plugin.json at its root"),
        (hmap(&[("plugin.json", manifest, 0o644)]), 400, "does not contain it"),
        (
            hmap(&[
                (
                    "plugin.json",
                    r#"{"name": "binpkg", "version": "1", "entry": "plugin.bin"}"#,
                    0o644,
                ),
                ("plugin.bin", "#!/bin/sh\n", 0o644),
            ]),
            400,
            "chmod +x",
        ),
        // The name of a kernel tool group: refused, and nothing of it is kept.
        (
            hmap(&[
                (
                    "plugin.json",
                    r#"{"name": "knowledge", "version": "1", "entry": "main.lua"}"#,
                    0o644,
                ),
                ("main.lua", lua, 0o644),
            ]),
            409,
            "reserved for the kernel's own tools",
        ),
    ];
    for (bytes, code, want) in bad {
        let (status, body) = post_package(&d, bytes);
        assert_eq!(status, code, "{body}");
        let err = body["error"].as_str().unwrap_or_default();
        assert!(err.contains(want), "expected `{want}` in {body}");
        assert!(body["kind"].is_string(), "{body}");
        assert_eq!(
            listing(&plugins),
            before,
            "a refused package left files behind ({body})"
        );
    }
    // A symbolic link inside the package.
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    w.start_file("plugin.json", zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(&mut w, manifest.as_bytes()).unwrap();
    w.add_symlink("main.lua", "/etc/passwd", zip::write::SimpleFileOptions::default())
        .unwrap();
    let (status, body) = post_package(&d, w.finish().unwrap().into_inner());
    assert_eq!((status, body["kind"].as_str()), (400, Some("link")), "{body}");
    assert_eq!(listing(&plugins), before);

    // The good package: installed, started and its tool usable at once.
    let good = hmap(&[("plugin.json", manifest, 0o644), ("main.lua", lua, 0o644)]);
    let (status, body) = post_package(&d, good.clone());
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (body["name"].as_str(), body["version"].as_str()),
        (Some("pkgdemo"), Some("1.2.0"))
    );
    assert_eq!(body["checksum"].as_str().map(str::len), Some(64));
    let p = wait_plugin(&d, "pkgdemo", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running" && p["tools"] == json!(["pkgdemo_hi"])
    });
    assert_eq!(p["kind"], "lua");
    assert!(plugins.join("pkgdemo/main.lua").is_file());
    assert!(
        !listing(&plugins).iter().any(|n| n.starts_with(".install-")),
        "no staging directory left: {:?}",
        listing(&plugins)
    );
    let _v = with_vendor(&d);
    assert_eq!(
        ask(&d, "call-tool pkgdemo_hi {}")["reply"],
        "tool said: hi from a package"
    );

    // The same package again: refused, the installed plugin untouched.
    let after = listing(&plugins);
    let (status, body) = post_package(&d, good);
    assert_eq!((status, body["action"].as_str()), (409, Some("remove_first")), "{body}");
    assert_eq!(listing(&plugins), after);
    assert_eq!(plugin(&d, "pkgdemo")["state"], "running");

    // The same through the command line: `homed plugin install FILE`.
    let file = dir.path().join("skilldemo.hmap");
    let skill = "---\nname: skilldemo\ndescription: A skill installed from the command line.\n---\nBody.\n";
    std::fs::write(
        &file,
        hmap(&[
            (
                "plugin.json",
                r#"{"name": "skilldemo", "version": "0.3.0", "entry": "SKILL.md"}"#,
                0o644,
            ),
            ("SKILL.md", skill, 0o644),
        ]),
    )
    .unwrap();
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
            .args([
                "--listen",
                &format!("127.0.0.1:{}", d.port),
                "--data",
                data.to_str().unwrap(),
            ])
            .args(["plugin", "install"])
            .arg(&file)
            .output()
            .unwrap()
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("installed skilldemo 0.3.0 (skill)"),
        "{out:?}"
    );
    assert_eq!(plugin(&d, "skilldemo")["state"], "running");
    assert!(via_tool(&d, "skill_info", json!({"name": "skilldemo"})).contains("Body."));
    let again = run();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already exists"),
        "{again:?}"
    );
}

#[test]
fn a_fresh_daemon_runs_the_bundled_lua_and_skill_examples_and_remembers_removals() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let units = wait_plugin(&d, "units", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running" && p["tools"].as_array().is_some_and(|t| t.len() == 2)
    });
    assert_eq!(units["kind"], "lua");
    assert_eq!(units["tools"], json!(["units_convert", "units_list"]));
    let skill = plugin(&d, "meeting-notes");
    assert_eq!(
        (skill["kind"].as_str(), skill["state"].as_str()),
        (Some("skill"), Some("running")),
        "{skill}"
    );
    wait_plugin(&d, "timer", Duration::from_secs(10), "ran", |p| p["state"] == "running");

    let v = with_vendor(&d);
    assert_eq!(
        ask(&d, r#"call-tool units_convert {"value": 10, "from": "mi", "to": "km"}"#)["reply"],
        "tool said: 10 mi = 16.0934 km"
    );
    assert_eq!(
        ask(&d, r#"call-tool units_convert {"value": 212, "from": "°F", "to": "C"}"#)["reply"],
        "tool said: 212 °F = 100 C"
    );
    let wrong = ask(&d, r#"call-tool units_convert {"value": 1, "from": "kg", "to": "km"}"#);
    assert!(
        wrong["reply"]
            .as_str()
            .unwrap()
            .contains("cannot convert mass (kg) to length (km)"),
        "{wrong}"
    );
    // The skill: indexed in the system prompt, its body read through skill_info.
    let last = v.last.lock().unwrap().clone();
    let system = last["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
    assert!(system.contains("meeting-notes"), "skill index missing: {system}");
    let body = ask(&d, r#"call-tool skill_info {"name": "meeting-notes"}"#);
    assert!(body["reply"].as_str().unwrap().contains("Action items"), "{body}");
    drop(d);

    // Removed by the user: not reinstalled on the next start.
    std::fs::remove_dir_all(data.join("plugins/units")).unwrap();
    let d = Daemon::start(&data);
    wait_plugin(&d, "timer", Duration::from_secs(10), "ran", |p| p["state"] == "running");
    assert_eq!(plugin(&d, "units"), Value::Null, "a removed bundled plugin came back");
    assert!(!data.join("plugins/units").exists());
}

/// Asks the model (the fake vendor) to call `tool` with `args`; answers the tool's text.
fn via_tool(d: &Daemon, tool: &str, args: Value) -> String {
    let reply = ask(d, &format!("call-tool {tool} {args}"));
    let text = reply["reply"].as_str().unwrap_or_default();
    text.strip_prefix("tool said: ")
        .unwrap_or_else(|| panic!("no tool answer: {reply}"))
        .to_owned()
}

/// Calls a kernel method from inside the probe plugin; answers its JSON result.
fn probe(d: &Daemon, method: &str, params: Value) -> Value {
    let text = via_tool(d, "probe_call", json!({"method": method, "params": params}));
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} failed: {text}"))
}

#[test]
fn a_subprocess_plugin_uses_memory_documents_knowledge_social_stages_channels_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "probe");
    let d = Daemon::start(&data);
    wait_plugin(&d, "probe", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running" && p["tools"].as_array().is_some_and(|t| t.len() == 3)
    });
    let _v = with_vendor(&d);

    // Graph memory.
    let c = probe(
        &d,
        "memory.commit",
        json!({"triples": [
            {"subject": "Alice", "subject_type": "person", "relation": "trait:hobby", "object": "chess", "object_type": "trait_value"},
            {"subject": "Alice", "subject_type": "person", "relation": "friend", "object": "Bob", "object_type": "person"}
        ]}),
    );
    assert_eq!(c["relations"], 2, "{c}");
    let r = probe(&d, "memory.recall", json!({"query": ["Alice"], "depth": 1}));
    let names: Vec<&str> = r["entities"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(names.contains(&"Alice") && names.contains(&"Bob"), "{r}");
    assert!(
        probe(&d, "memory.introspect", json!({}))["entity_count"]
            .as_i64()
            .unwrap()
            >= 3
    );
    // Social reads on the same graph.
    assert_eq!(
        probe(&d, "social.getTrait", json!({"name": "Alice", "trait": "hobby"})),
        json!({"found": true, "value": "chess"})
    );
    let person = probe(&d, "social.getPerson", json!({"name": "Alice"}));
    assert_eq!(person["traits"], json!({"hobby": "chess"}), "{person}");
    assert_eq!(person["relations"][0]["target"], "Bob");
    assert_eq!(
        probe(&d, "social.listPersons", json!({}))["persons"],
        json!(["Alice", "Bob"])
    );
    assert_eq!(
        probe(
            &d,
            "social.setTrait",
            json!({"name": "Bob", "trait": "job", "value": "baker"})
        )["relations"],
        1
    );
    assert_eq!(
        probe(
            &d,
            "social.relate",
            json!({"a": "Bob", "relation": "colleague", "b": "Eve"})
        )["relations"],
        1
    );
    assert_eq!(
        probe(&d, "social.getTrait", json!({"name": "Bob", "trait": "job"}))["value"],
        "baker"
    );
    assert_eq!(
        probe(&d, "social.getRelations", json!({"name": "Eve"}))["relations"][0]["source"],
        "Bob"
    );
    let net = probe(&d, "social.getNetwork", json!({"name": "Alice", "depth": 2}));
    let people: Vec<&str> = net["people"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(people.contains(&"Bob") && people.contains(&"Eve"), "{net}");
    // Documents.
    let id = probe(
        &d,
        "doc.insert",
        json!({"content": "the boiler was serviced in March", "summary": "boiler"}),
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let q = probe(&d, "doc.query", json!({"query": "boiler serviced", "top_k": 3}));
    assert_eq!(q["documents"][0]["id"], id.as_str(), "{q}");
    assert!(probe(&d, "doc.stats", json!({}))["documents"].as_u64().unwrap() >= 1);
    assert_eq!(probe(&d, "doc.remove", json!({"id": id}))["removed"], true);
    // Knowledge.
    assert_eq!(
        probe(
            &d,
            "knowledge.add",
            json!({"name": "home/wifi", "content": "The guest wifi password is on the fridge."})
        )["name"],
        "home/wifi"
    );
    let k = probe(&d, "knowledge.search", json!({"query": "wifi password"}));
    assert_eq!(k["results"][0]["name"], "home/wifi", "{k}");
    assert_eq!(k["results"][0]["category"], "home");
    assert_eq!(probe(&d, "knowledge.list", json!({}))["items"][0]["name"], "home/wifi");
    assert!(data.join("knowledge/home/wifi/content.md").is_file());
    // Settings over the wire: own keys freely, core keys need settings_cross.
    assert_eq!(
        probe(&d, "settings.set", json!({"key": "mode", "value": "fast"})),
        json!({"ok": true, "key": "mode", "changed": true})
    );
    assert_eq!(
        probe(&d, "settings.get", json!({"key": "plugin.probe.mode"}))["value"],
        "fast"
    );
    assert_eq!(
        probe(&d, "settings.list", json!({}))["settings"],
        json!({"mode": "fast"})
    );
    let denied = via_tool(
        &d,
        "probe_call",
        json!({"method": "settings.getCore", "params": {"key": "core.llm.max_tokens"}}),
    );
    assert!(
        denied.starts_with("ERROR -32001") && denied.contains("`settings_cross` capability"),
        "{denied}"
    );
    // Text memory: a line in the JSONL log under the plugin's source.
    assert_eq!(
        probe(
            &d,
            "textmemory.append",
            json!({"role": "user", "content": "probe line 42", "channel": "lab"})
        ),
        json!({"ok": true})
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = std::fs::read_dir(data.join("memory/text"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|f| {
                std::fs::read_to_string(f.path()).is_ok_and(|t| t.contains("probe line 42") && t.contains("probe/lab"))
            });
        if found {
            break;
        }
        assert!(Instant::now() < deadline, "the text memory line never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Output channel: the model sends to it and the plugin delivers.
    assert_eq!(
        via_tool(&d, "output_send__probe_out", json!({"payload": "ping"})),
        "delivered: ping"
    );
    assert_eq!(via_tool(&d, "probe_outbox", json!({})), r#"["ping"]"#);
    // Stage handler on before_output.
    assert_eq!(ask(&d, "stage-me please")["reply"], "echo: stage-me please [probed]");
    // Events: the plugin saw agent_output events of the turns above.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = via_tool(&d, "probe_events", json!({}));
        if seen.contains("agent_output") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no agent_output event reached the plugin: {seen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A capability it did not declare: refused with what to declare.
    let denied = via_tool(
        &d,
        "probe_call",
        json!({"method": "io.injectText", "params": {"text": "x"}}),
    );
    assert!(
        denied.starts_with("ERROR -32001") && denied.contains("`io` capability") && denied.contains("plugin.json"),
        "{denied}"
    );
    // Bad params get a clear error, not a crash.
    let bad = via_tool(
        &d,
        "probe_call",
        json!({"method": "memory.commit", "params": {"triples": "nope"}}),
    );
    assert!(bad.starts_with("ERROR -32602") && bad.contains("triples"), "{bad}");
    let bad = via_tool(
        &d,
        "probe_call",
        json!({"method": "stage.register", "params": {"stage": "later"}}),
    );
    assert!(
        bad.contains("unknown stage `later`") && bad.contains("before_output"),
        "{bad}"
    );

    // A crash detaches the channel; the restarted plugin registers it again.
    let pid = plugin(&d, "probe")["pid"].as_u64().unwrap();
    common::unsafe_kill(pid as u32, "KILL");
    wait_plugin(&d, "probe", Duration::from_secs(10), "came back", |p| {
        p["restarts"].as_u64() >= Some(1)
            && p["state"] == "running"
            && p["tools"].as_array().is_some_and(|t| t.len() == 3)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = ask(&d, r#"call-tool output_send__probe_out {"payload": "again"}"#)["reply"].to_string();
        if text.contains("delivered: again") {
            break;
        }
        assert!(Instant::now() < deadline, "the channel never came back: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_lua_plugin_uses_the_sdk_data_apis_channels_stages_and_events_with_capability_checks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "luaprobe");
    let d = Daemon::start(&data);
    wait_plugin(&d, "luaprobe", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running" && p["tools"].as_array().is_some_and(|t| t.len() == 3)
    });
    let _v = with_vendor(&d);

    let text = via_tool(&d, "lp_data", json!({}));
    let out: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    assert_eq!(out["commit"], 2, "{out}");
    assert!(out["recall"].as_u64().unwrap() >= 2, "{out}");
    assert!(out["introspect"].as_u64().unwrap() >= 3, "{out}");
    assert_eq!(out["trait"], "cat");
    assert_eq!(out["persons"], json!(["Carol", "Dana"]));
    assert_eq!(out["relations"], 1);
    assert_eq!(
        (out["set_trait"].as_u64(), out["dana_city"].as_str()),
        (Some(1), Some("Oslo")),
        "{out}"
    );
    assert_eq!(
        (out["doc"].as_bool(), out["removed"].as_bool()),
        (Some(true), Some(true)),
        "{out}"
    );
    assert_eq!(out["stats"], 1);
    assert_eq!(
        (out["kadd"].as_str(), out["kfound"].as_str()),
        (Some("recipes/soup"), Some("recipes/soup"))
    );
    assert_eq!(out["klist"], 1);
    let denied = out["text_denied"].as_str().unwrap();
    assert!(
        denied.contains("`text_memory` capability") && denied.contains("plugin.json"),
        "{out}"
    );
    assert!(
        out["inject_denied"].as_str().unwrap().contains("`io` capability"),
        "{out}"
    );
    assert!(out["bad"].as_str().unwrap().contains("triples"), "{out}");

    assert_eq!(
        via_tool(&d, "output_send__lp_out", json!({"payload": "hey"})),
        "lua got hey"
    );
    assert_eq!(ask(&d, "lua-stage now")["reply"], "echo: lua-stage now [lua]");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state: Value = serde_json::from_str(&via_tool(&d, "lp_state", json!({}))).unwrap();
        assert_eq!(state["outbox"], json!(["hey"]));
        if state["events"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no event reached the Lua plugin: {state}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(plugin(&d, "luaprobe")["restarts"], 0);
}

/// Runs a Lua fixture's tool and parses its JSON answer.
fn lua_tool(d: &Daemon, tool: &str, args: Value) -> (String, Value) {
    let text = via_tool(d, tool, args);
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{tool} did not answer JSON: {text}"));
    (text, v)
}

fn settings(d: &Daemon) -> Value {
    common::api::get(d, "/api/v1/settings")["settings"].clone()
}

fn err_text<'v>(out: &'v Value, field: &str) -> &'v str {
    out[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is not an error text: {out}"))
}

#[test]
fn lua_plugins_use_settings_across_namespaces_pick_llm_sources_and_offer_named_apis() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "luaprobe");
    install(&data, "luaadmin");
    let d = Daemon::start(&data);
    for (name, tools) in [("luaprobe", 3), ("luaadmin", 2)] {
        wait_plugin(&d, name, Duration::from_secs(10), "ran", |p| {
            p["state"] == "running" && p["tools"].as_array().is_some_and(|t| t.len() == tools)
        });
    }
    let v = with_vendor(&d);
    common::api::put_settings(&d, vendor::source_settings("spare", &v.url, 0));
    common::api::wait_sources(&d, 2);

    // The plugin's own settings: declared in start() with defaults, read and written
    // freely (its own secret in clear); everything else refused with what to declare.
    let (_, out) = lua_tool(&d, "lp_settings", json!({"greeting": "hi there"}));
    assert_eq!(
        (&out["greeting"], &out["set"], &out["greeting2"]),
        (&json!("hello"), &json!(true), &json!("hi there")),
        "{out}"
    );
    assert_eq!(
        (&out["token_set"], &out["token_own"]),
        (&json!(true), &json!("tok-123"))
    );
    assert_eq!(out["unset"], true);
    assert_eq!(out["list"], json!({"greeting": "hi there", "token": "tok-123"}));
    assert_eq!(out["own_via_plugin"], "hi there");
    assert_eq!(out["own_list"]["token"], "tok-123");
    let defs = out["defs"].as_array().unwrap();
    assert_eq!(defs.len(), 2, "{out}");
    assert_eq!(
        (&defs[0]["key"], &defs[0]["default"], &defs[0]["secret"]),
        (&json!("greeting"), &json!("hello"), &json!(false))
    );
    assert_eq!(defs[0]["description"], "What the Lua probe says first");
    assert_eq!((&defs[1]["key"], &defs[1]["secret"]), (&json!("token"), &json!(true)));
    for field in ["cross_write", "cross_read"] {
        let e = err_text(&out, field);
        assert!(
            e.contains("`settings_cross` capability") && e.contains("plugin.json") && e.contains("plugin `luaadmin`"),
            "{field}: {e}"
        );
    }
    for field in ["core_read", "dump"] {
        assert!(err_text(&out, field).contains("`settings_cross` capability"), "{out}");
    }
    let e = err_text(&out, "own_only");
    assert!(e.contains("own settings") && e.contains("settings_cross"), "{e}");
    assert!(err_text(&out, "llm").contains("`llm` capability"), "{out}");
    assert!(err_text(&out, "bad_key").contains("a-z"), "{out}");
    assert!(
        out["api_errors"]["no_handler"]
            .as_str()
            .unwrap()
            .contains("needs a handler")
    );
    assert!(out["api_errors"]["bad_name"].as_str().unwrap().contains("not usable"));
    assert_eq!(out["api_route"], "/api/v1/plugins/luaprobe/api/greet");
    // The operator sees the plugin's settings, its secret masked.
    let s = settings(&d);
    assert_eq!(
        (&s["plugin.luaprobe.greeting"], &s["plugin.luaprobe.token"]),
        (&json!("hi there"), &json!("********")),
        "{s}"
    );

    // With settings_cross: core and other plugins' settings, secrets never in clear.
    let (text, out) = lua_tool(&d, "la_settings", json!({}));
    assert!(
        !text.contains("sk-test") && !text.contains("tok-123"),
        "a secret leaked: {text}"
    );
    assert!(out["model"].as_str().is_some_and(|m| !m.is_empty()), "{out}");
    assert_eq!(out["source_key"], "********");
    assert_eq!(out["llm_list"]["core.llm.sources.spare.api_key"], "********");
    assert_eq!(out["llm_list"]["core.llm.sources.spare.base_url"], v.url.as_str());
    assert!(
        out["llm_list"]
            .as_object()
            .unwrap()
            .keys()
            .all(|k| k.starts_with("core.llm."))
    );
    assert_eq!(out["probe_token"], "********");
    assert_eq!(out["probe_list"], json!({"greeting": "hi there", "token": "********"}));
    assert_eq!(out["dump"]["plugin.luaprobe.token"], "********");
    assert_eq!(out["dump"]["core.llm.sources.fake.api_key"], "********");
    assert!(out["plugins"].as_array().unwrap().contains(&json!("luaprobe")), "{out}");
    assert_eq!(
        (&out["set_core"], &out["set_probe"], &out["own"]),
        (&json!(true), &json!(true), &json!(true))
    );
    assert!(
        err_text(&out, "bad_core").contains("invalid value for `core.agent.max_tool_turns`"),
        "{out}"
    );
    assert!(
        err_text(&out, "typo").contains("did you mean `core.llm.max_tokens`"),
        "{out}"
    );
    for refused in ["retarget", "unreview"] {
        assert!(err_text(&out, refused).contains("only the owner changes it"), "{out}");
    }
    let s = settings(&d);
    assert_eq!(s["core.llm.sources.fake.base_url"], json!(v.url), "{s}");
    assert_eq!(s["core.security.review"], json!(true));
    assert_eq!(
        (
            &s["core.agent.max_tool_turns"],
            &s["plugin.luaprobe.greeting"],
            &s["plugin.luaadmin.note"]
        ),
        (&json!(7), &json!("set by admin"), &json!("admin note")),
        "{s}"
    );

    // LLM sources: listed with availability (no keys), the current one, and a switch
    // that persists as the source's priority and applies at once.
    let (text, out) = lua_tool(&d, "la_llm", json!({}));
    assert!(!text.contains("sk-test") && !text.contains("api_key"), "{text}");
    let sources = out["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2, "{out}");
    assert!(sources.iter().all(|s| s["available"] == true), "{out}");
    assert_eq!(out["current"], "fake", "{out}");
    assert!(
        sources.iter().any(|s| s["name"] == "fake" && s["current"] == true),
        "{out}"
    );
    let (_, out) = lua_tool(&d, "la_llm", json!({"prefer": "spare"}));
    assert_eq!(
        (&out["set"]["source"], &out["set"]["priority"], &out["current"]),
        (&json!("spare"), &json!(1), &json!("spare")),
        "{out}"
    );
    assert_eq!(settings(&d)["core.llm.sources.spare.priority"], 1);
    assert_eq!(common::api::get(&d, "/api/v1/llm/sources")["current"], "spare");
    let (_, out) = lua_tool(&d, "la_llm", json!({"prefer": "nope"}));
    let e = err_text(&out, "set");
    assert!(
        e.contains("unknown LLM source `nope`") && e.contains("fake, spare"),
        "{e}"
    );
    assert_eq!(out["current"], "spare");

    // Named APIs over HTTP: JSON in, the handler's result out.
    assert_eq!(plugin(&d, "luaprobe")["apis"], json!(["greet", "refuse"]));
    let greet = "/api/v1/plugins/luaprobe/api/greet";
    let (status, body) = common::api::post(&d, greet, json!({"name": "Ann"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"result": {"greeting": "set by admin", "to": "Ann"}}));
    let (status, body) = common::api::post(&d, "/api/v1/plugins/luaprobe/api/refuse", json!({"why": "test"}));
    assert_eq!(status, 502, "{body}");
    assert!(body["error"].as_str().unwrap().contains("refused: test"), "{body}");
    let (status, body) = common::api::post(&d, "/api/v1/plugins/luaprobe/api/lonely", json!({}));
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("greet, refuse"), "{body}");
    let (status, _) = common::api::post(&d, "/api/v1/plugins/ghost/api/greet", json!({}));
    assert_eq!(status, 404);
    let r = d.client().post(d.url(greet)).body("{not json").send().unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // A restarted plugin offers its APIs again.
    let (status, _) = common::api::post(&d, "/api/v1/plugins/luaprobe/restart", json!({}));
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = common::api::post(&d, greet, Value::Null);
        if status == 200 {
            assert_eq!(body["result"]["to"], "nobody", "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "the API never came back: {status} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ask(&d, "still there?")["reply"], "echo: still there?");
}

/// A hostile Lua plugin with no capabilities: every named route out of the sandbox is
/// closed (files, processes, bytecode, the daemon's own API), and undeclared
/// capabilities are denied with what to declare.
#[test]
fn a_hostile_lua_plugin_cannot_read_files_run_processes_or_drive_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "luaescape");
    let secret = dir.path().join("secret.lua");
    std::fs::write(&secret, "return 'SECRET-CANARY'").unwrap();
    let d = Daemon::start(&data);
    wait_plugin(&d, "luaescape", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running"
    });
    let _v = with_vendor(&d);
    let servers_before = common::api::get(&d, "/api/v1/settings")["settings"]["plugin.mcp.servers"].clone();
    let (text, out) = lua_tool(
        &d,
        "escape_try",
        json!({"secret": secret.display().to_string(), "api": d.url("/api/v1/settings")}),
    );
    assert!(!text.contains("SECRET-CANARY") && !text.contains("ESCAPED"), "{out:#}");
    let expect = [
        ("loadfile", "loadfile"),
        ("dofile", "dofile"),
        ("dump", "dump"),
        ("load_binary", "only text chunks"),
        ("require_file", "not found"),
        ("io", "io"),
        ("os", "os"),
        ("package", "package"),
        ("debug", "debug"),
        ("http_own", "daemon's own address"),
        ("http_own_localhost", "daemon's own address"),
        ("settings_core", "settings_cross"),
        ("memory", "`memory` capability"),
        ("inject", "`io` capability"),
    ];
    for (field, why) in expect {
        let got = out[field].as_str().unwrap_or_default();
        assert!(got.starts_with("blocked: ") && got.contains(why), "{field}: {got}");
    }
    assert_eq!(
        common::api::get(&d, "/api/v1/settings")["settings"]["plugin.mcp.servers"],
        servers_before,
        "the MCP servers setting is unchanged"
    );
}

/// Every actor id in the supervision tree.
fn actor_ids(d: &Daemon) -> Vec<String> {
    let tree: Value = d.client().get(d.url("/api/v1/actors")).send().unwrap().json().unwrap();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(id) = m.get("id").and_then(Value::as_str) {
                    out.push(id.to_owned());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&tree, &mut out);
    out
}

#[test]
fn a_package_whose_plugin_does_not_start_is_rolled_back_and_can_be_installed_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let plugins = data.join("plugins");
    let before = listing(&plugins);
    let manifest = r#"{"name": "dies", "version": "0.1.0", "entry": "plugin.bin"}"#;
    let dies = "#!/bin/sh\necho 'dies: missing configuration, giving up' >&2\nexit 1\n";
    let (status, body) = post_package(
        &d,
        hmap(&[("plugin.json", manifest, 0o644), ("plugin.bin", dies, 0o755)]),
    );
    assert_eq!((status, body["kind"].as_str()), (422, Some("start_failed")), "{body}");
    let err = body["error"].as_str().unwrap();
    assert!(err.contains("rolled back") && err.contains("install it again"), "{err}");
    assert_eq!(listing(&plugins), before, "nothing of it stays on disk");
    let plugins_api: Value = d.client().get(d.url("/api/v1/plugins")).send().unwrap().json().unwrap();
    assert!(
        !plugins_api.to_string().contains("\"dies\""),
        "not listed: {plugins_api}"
    );
    assert!(
        !actor_ids(&d).iter().any(|id| id.contains("/dies")),
        "no actor of it left in the tree: {:?}",
        actor_ids(&d)
    );
    // Fixed, the same name installs and runs (the old subtree is really gone).
    let lua = r#"sdk.register_tool("dies_not", {description = "Alive", parameters = {type = "object", properties = {}}}, function(args) return "alive" end)"#;
    let fixed = r#"{"name": "dies", "version": "0.2.0", "entry": "main.lua"}"#;
    let (status, body) = post_package(&d, hmap(&[("plugin.json", fixed, 0o644), ("main.lua", lua, 0o644)]));
    assert_eq!(status, 201, "{body}");
    wait_plugin(&d, "dies", Duration::from_secs(10), "ran", |p| {
        p["state"] == "running" && p["tools"] == json!(["dies_not"])
    });
    assert!(
        actor_ids(&d).iter().any(|id| id.ends_with("/dies")),
        "{:?}",
        actor_ids(&d)
    );
}

/// The typed protocol's new pieces through a real subprocess plugin (`asker`, raw
/// JSON over its pipes): a named API registered with `api.register` answers HTTP under
/// the API's auth; from that API's handler, `io.injectInputSync` gets the agent's
/// reply (HTTP → plugin → turn → vendor → reply → plugin → HTTP); from inside one of
/// the plugin's own tool calls the same call is refused at once instead of waiting
/// out the tool's timeout; bad API names and unknown methods are typed errors.
#[test]
fn a_subprocess_plugin_offers_http_apis_and_asks_the_agent_synchronously() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install(&data, "asker");
    let d = Daemon::start(&data);
    let p = wait_plugin(&d, "asker", Duration::from_secs(10), "registered its APIs", |p| {
        p["state"] == "running" && p["apis"].as_array().is_some_and(|a| a.len() == 4)
    });
    assert_eq!(p["apis"], json!(["ask", "echo", "refuse", "look"]), "{p}");
    let v = with_vendor(&d);

    // A named API: the body reaches the plugin and its answer comes back.
    let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/echo", json!({"n": [1, 2]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["body"], json!({"n": [1, 2]}), "{body}");
    // The bad name was refused with the rule (and never listed).
    let bad = &body["result"]["bad_api"];
    assert_eq!(bad["code"], -32602, "{body}");
    assert!(bad["message"].as_str().unwrap().contains("1 to 64 of A-Z"), "{body}");
    // An error answer is a 502 with the plugin's message; an unknown API a 404 listing them.
    let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/refuse", json!({}));
    assert_eq!(status, 502, "{body}");
    assert!(body["error"].as_str().unwrap().contains("refused on purpose"), "{body}");
    let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/nope", json!({}));
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("ask, echo, refuse, look"),
        "{body}"
    );
    // The same auth as the rest of the API: no token, no call.
    let anon = reqwest::blocking::Client::new()
        .post(d.url("/api/v1/plugins/asker/api/echo"))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(anon.status().as_u16(), 401);

    // Synchronous inject from the API handler: the agent's reply is the plugin's answer.
    let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/ask", json!({"text": "ping from asker"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["reply"], "echo: ping from asker", "{body}");
    assert!(body["result"]["task_id"].as_u64().unwrap() > 0, "{body}");
    let last_inputs = || -> Vec<String> { v.stamps.lock().unwrap().iter().map(|s| s.text.clone()).collect() };
    assert!(
        last_inputs().iter().any(|t| t.contains("ping from asker")),
        "the vendor never saw the injected input: {:?}",
        last_inputs()
    );

    // The same service carries images: checked, stored as a block, sent, replied to;
    // text bytes labelled as a PNG are refused with nothing stored.
    let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/look", json!({"text": "what is this"}));
    assert_eq!(status, 200, "{body}");
    let r = &body["result"]["result"];
    // (The fake vendor echoes only plain-string contents; this one is text + image.)
    assert!(r["reply"].as_str().is_some_and(|t| t.starts_with("echo:")), "{body}");
    assert_eq!(r["media"].as_array().map(Vec::len), Some(1), "{body}");
    let sent = v.last.lock().unwrap().to_string();
    assert!(
        sent.contains("data:image/png;base64,") && sent.contains("what is this"),
        "the image and its text never reached the vendor: {sent}"
    );
    let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/look", json!({"text": "x", "bad": true}));
    assert_eq!(status, 200, "{body}");
    let err = &body["result"]["error"];
    assert_eq!(err["code"], -32602, "{body}");
    assert!(!err["message"].as_str().unwrap_or("").is_empty(), "{body}");
    assert!(body["result"]["result"].is_null(), "{body}");

    // The trap: inject-and-wait from inside its own tool call of the running turn.
    let reply = ask(&d, r#"call-tool asker_wait {"text": "inner question"}"#);
    let text = reply["reply"].as_str().unwrap_or_default();
    assert!(text.starts_with("tool said: ERROR -32602: "), "{reply}");
    assert!(
        text.contains("cannot wait here") && text.contains("io.injectText instead"),
        "{reply}"
    );
    // The refused input never ran.
    assert!(
        !last_inputs().iter().any(|t| t == "inner question"),
        "the refused input reached the model: {:?}",
        last_inputs()
    );
    assert_eq!(ask(&d, "still fine?")["reply"], "echo: still fine?");

    // A restart drops the APIs with the process and the new one registers them again.
    let (status, _) = action(&d, "asker", "restart");
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = common::api::post(&d, "/api/v1/plugins/asker/api/echo", json!("again"));
        if status == 200 {
            assert_eq!(body["result"]["body"], "again", "{body}");
            break;
        }
        // Between the two processes: not running, or no such API yet.
        assert!([404, 502, 503].contains(&status), "{status} {body}");
        assert!(Instant::now() < deadline, "the API never came back: {status} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(plugin(&d, "asker")["apis"], json!(["ask", "echo", "refuse", "look"]));
}

/// Polls the fake model's last request until one of its messages is `content`.
fn wait_model_saw(d: &Daemon, v: &vendor::Vendor, content: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = v.last.lock().unwrap().clone();
        if last["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["content"] == content))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{content:?} never reached the model; last request: {last}\nlog:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The page's view of the notes: the memo plugin's `list` API.
fn memo_list(d: &Daemon, body: Value) -> Value {
    let (status, out) = common::api::post(d, "/api/v1/plugins/memo/api/list", body);
    assert_eq!(status, 200, "{out}");
    out["result"].clone()
}

fn note_ids(list: &Value) -> Vec<u64> {
    list["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn the_bundled_memo_plugin_keeps_notes_across_a_kill_and_reminds_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let tools = json!([
        "memo_add",
        "memo_list",
        "memo_search",
        "memo_update",
        "memo_done",
        "memo_delete"
    ]);
    let p = wait_plugin(&d, "memo", Duration::from_secs(20), "ran", |p| {
        p["state"] == "running" && p["tools"] == tools && p["apis"].as_array().is_some_and(|a| a.len() == 3)
    });
    assert_eq!(p["apis"], json!(["list", "done", "delete"]), "{p}");
    let v = with_vendor(&d);

    // Notes added by the model through the tool loop.
    assert_eq!(
        via_tool(&d, "memo_add", json!({"text": "买牛奶和面包", "tags": ["购物"]})),
        "note #1 saved (tags: 购物)"
    );
    let saved = via_tool(&d, "memo_add", json!({"text": "Call the plumber", "remind_at": "2s"}));
    assert!(saved.starts_with("note #2 saved; reminder at "), "{saved}");
    assert!(via_tool(&d, "memo_search", json!({"query": "牛奶"})).contains("#1 买牛奶和面包 [tags: 购物]"));

    // What the page reads: the list, and the search through the same API.
    let all = memo_list(&d, json!({}));
    assert_eq!((all["total"].as_u64(), note_ids(&all)), (Some(2), vec![2, 1]), "{all}");
    let found = memo_list(&d, json!({"query": "牛奶"}));
    assert_eq!(note_ids(&found), [1], "{found}");
    assert_eq!(found["notes"][0]["tags"], json!(["购物"]));
    assert_eq!(note_ids(&memo_list(&d, json!({"query": "PLUMBER"}))), [2]);
    assert_eq!(
        note_ids(&memo_list(&d, json!({"query": "购物"}))),
        [1],
        "tags are searched"
    );

    // The due reminder reaches the agent as an interrupt, and the note records it.
    wait_model_saw(&d, &v, "[Interrupt] 📝 Reminder of note #2: Call the plumber");
    let deadline = Instant::now() + Duration::from_secs(10);
    while memo_list(&d, json!({"query": "plumber"}))["notes"][0]["reminded_ms"].is_null() {
        assert!(Instant::now() < deadline, "the delivery was never recorded");
        std::thread::sleep(Duration::from_millis(50));
    }

    // One more with a reminder, then kill -9 the daemon at once: the answer said it was
    // saved, so it is on disk; the reminder that comes while the daemon is down is
    // delivered when it is back.
    let saved = via_tool(&d, "memo_add", json!({"text": "water the plants", "remind_at": "3s"}));
    assert!(saved.starts_with("note #3 saved; reminder at "), "{saved}");
    d.kill9();
    let d = Daemon::start(&data);
    wait_plugin(&d, "memo", Duration::from_secs(20), "came back", |p| {
        p["state"] == "running" && p["apis"].as_array().is_some_and(|a| a.len() == 3)
    });
    let all = memo_list(&d, json!({}));
    assert_eq!(note_ids(&all), [3, 2, 1], "{all}");
    assert_eq!(all["notes"][2]["text"], "买牛奶和面包");
    assert!(all["notes"][1]["reminded_ms"].is_i64(), "{all}");
    wait_model_saw(&d, &v, "[Interrupt] 📝 Reminder of note #3: water the plants");

    // Done from the page: out of the default listing, still found with include_done;
    // deleted: gone.
    let (status, out) = common::api::post(&d, "/api/v1/plugins/memo/api/done", json!({"id": 1}));
    assert_eq!(status, 200, "{out}");
    assert!(out["result"]["note"]["done_ms"].is_i64(), "{out}");
    assert_eq!(note_ids(&memo_list(&d, json!({}))), [3, 2]);
    assert_eq!(
        note_ids(&memo_list(&d, json!({"query": "面包", "include_done": true}))),
        [1]
    );
    let (status, _) = common::api::post(&d, "/api/v1/plugins/memo/api/delete", json!({"id": 2}));
    assert_eq!(status, 200);
    let (status, out) = common::api::post(&d, "/api/v1/plugins/memo/api/delete", json!({"id": 2}));
    assert_eq!(status, 502, "{out}");
    assert!(out["error"].as_str().unwrap().contains("no note #2"), "{out}");
    assert_eq!(note_ids(&memo_list(&d, json!({"include_done": true}))), [3, 1]);
    assert!(data.join("plugin_data/memo/memo.db").exists());
}

/// Cleaners from a Lua plugin (issue 33 item 6; a subprocess plugin's are in
/// tests/onebot.rs): the model reads a tool's output and a channel's input whole;
/// what memory keeps of them is what the declared rules leave.
#[test]
fn a_lua_plugins_cleaners_decide_what_memory_keeps() {
    let (_dir, data, d, _v) = greeter();
    assert_eq!(
        ask(&d, "call-tool greeter_card {}")["reply"],
        "tool said: [CARD v2] hello card (greeted)",
        "the model reads the output whole"
    );
    assert_eq!(
        ask(&d, r#"call-tool greeter_tell {"text": "the red door"}"#)["reply"],
        "tool said: told (greeted)"
    );
    let db = rusqlite::Connection::open(data.join("memory/memory.db")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let inputs = loop {
        let mut st = db
            .prepare("SELECT input FROM context_events WHERE source = 'greeter'")
            .unwrap();
        let v: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        if !v.is_empty() {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "the injected line never ran; log:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        inputs,
        ["the red door"],
        "the channel's cleaner applied; log:\n{}",
        d.log_text()
    );
    let results: String = db
        .query_row(
            "SELECT tool_results FROM context_events WHERE tool_results LIKE '%greeter_card%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let results: Value = serde_json::from_str(&results).unwrap();
    assert_eq!(
        results[0]["output"], "[CARD v2] hello card",
        "stored as it was: {results}"
    );
    assert_eq!(
        results[0]["compute"], "hello card",
        "the compute layer's view: {results}"
    );
}
