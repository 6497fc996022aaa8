//! The built-in `pluginmgr` tools through the tool loop (HTTP → turn → the request the
//! fake vendor receives → the tool → the reply): the model lists, disables, enables and
//! installs plugins and switches the primary LLM source; a guest is refused.

mod common;

use common::Daemon;
use common::api::ask;
use serde_json::{Value, json};

/// The tool names the vendor was offered in its last request.
fn offered(v: &common::vendor::Vendor) -> Vec<String> {
    v.last.lock().unwrap()["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn state_of(p: &Value, name: &str) -> Option<String> {
    p["plugins"]
        .as_array()?
        .iter()
        .find(|x| x["name"] == name)
        .and_then(|x| x["state"].as_str().map(str::to_owned))
}

fn echo_running(p: &Value) -> bool {
    p["plugins"].as_array().is_some_and(|ps| {
        ps.iter()
            .any(|p| p["name"] == "echo" && p["state"] == "running" && p["tools"] == json!(["echo_say"]))
    })
}

/// A valid Lua package with one tool.
fn package(name: &str) -> Vec<u8> {
    use std::io::Write as _;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    w.start_file("plugin.json", opts).unwrap();
    w.write_all(format!(r#"{{"name": "{name}", "version": "1.2.0", "entry": "main.lua"}}"#).as_bytes())
        .unwrap();
    w.start_file("main.lua", opts).unwrap();
    w.write_all(
        format!(
            r#"sdk.register_tool("{name}_hi", {{description = "say hi"}}, function(args) return "hi from {name}" end)"#
        )
        .as_bytes(),
    )
    .unwrap();
    w.finish().unwrap().into_inner()
}

/// The model disables a plugin: its tool leaves the very next request's tool list, the
/// choice shows in the API and survives a daemon restart; enabling brings it back.
/// Unknown names and a catalogue lookup answer through the same loop.
#[test]
fn the_model_disables_a_plugin_and_its_tool_leaves_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::api::install_test_plugin(&data, "echo");
    let d = Daemon::start(&data);
    let v = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(&d, 1);
    common::api::wait_for(&d, "/api/v1/plugins", "echo running", echo_running);
    common::api::offer_every_tool(&d);

    let reply = ask(&d, "call-tool plugin_list {}");
    let listed: Value = serde_json::from_str(reply.strip_prefix("tool said: ").unwrap()).unwrap();
    let echo = listed["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "echo")
        .unwrap_or_else(|| panic!("echo not listed: {reply}"));
    assert_eq!(
        (echo["state"].as_str(), echo["tools"].clone()),
        (Some("running"), json!(["echo_say"]))
    );
    let tools = offered(&v);
    for t in [
        "echo_say",
        "plugin_disable",
        "plugin_install",
        "llm_source_use",
        "get_plugin_tools",
    ] {
        assert!(tools.iter().any(|x| x == t), "{t} not offered: {tools:?}");
    }

    let reply = ask(&d, r#"call-tool plugin_disable {"name":"echo"}"#);
    assert!(
        reply.contains("plugin `echo` disabled") && reply.contains("echo_say"),
        "{reply}"
    );
    ask(&d, "hello");
    let tools = offered(&v);
    assert!(
        !tools.iter().any(|t| t == "echo_say"),
        "echo_say still offered: {tools:?}"
    );
    assert!(tools.iter().any(|t| t == "plugin_enable"));
    assert_eq!(
        state_of(&common::api::get(&d, "/api/v1/plugins"), "echo").as_deref(),
        Some("disabled")
    );
    let reply = ask(&d, r#"call-tool plugin_disable {"name": "echo"}"#);
    assert!(reply.contains("already disabled"), "{reply}");

    // Bad input: a clear error naming what exists, nothing changed.
    let reply = ask(&d, r#"call-tool plugin_disable {"name":"../echo"}"#);
    assert!(reply.contains("no plugin `../echo`; plugins: cmd, echo,"), "{reply}");
    let reply = ask(&d, "call-tool plugin_reload {}");
    assert!(reply.contains("`name` is required"), "{reply}");

    // Persisted: a restarted daemon keeps it stopped.
    drop(d);
    let d = Daemon::start(&data);
    common::api::wait_sources(&d, 1);
    assert_eq!(
        state_of(&common::api::get(&d, "/api/v1/plugins"), "echo").as_deref(),
        Some("disabled")
    );

    let reply = ask(&d, r#"call-tool plugin_enable {"name":"echo"}"#);
    assert!(reply.contains("plugin `echo` enabled"), "{reply}");
    common::api::wait_for(&d, "/api/v1/plugins", "echo running again", echo_running);
    ask(&d, "hello again");
    assert!(offered(&v).iter().any(|t| t == "echo_say"), "echo_say is back");

    let reply = ask(&d, r#"call-tool get_plugin_tools {"plugin":"echo"}"#);
    let one: Value = serde_json::from_str(reply.strip_prefix("tool said: ").unwrap()).unwrap();
    assert_eq!(one["tools"][0]["name"], "echo_say", "{reply}");
    let reply = ask(&d, "call-tool get_plugin_tools {}");
    assert!(
        reply.contains("\"builtin.pluginmgr\"") && reply.contains("\"echo\""),
        "{reply}"
    );
}

/// A guest principal (the bridge injects as its `guest` profile) is refused
/// `plugin_disable` by the firewall with the default owner-only list; the plugin keeps
/// running. The owner's own request may.
#[test]
fn a_guest_is_refused_plugin_disable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::api::install_test_plugin(&data, "echo");
    common::api::install_test_plugin(&data, "bridge");
    let d = Daemon::start(&data);
    let v = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(&d, 1);
    common::api::wait_for(&d, "/api/v1/plugins", "both plugins running", |p| {
        echo_running(p) && state_of(p, "bridge").as_deref() == Some("running")
    });
    let args = json!({"text": r#"call-tool plugin_disable {"name":"echo"}"#, "profile": "guest"});
    assert_eq!(
        ask(&d, &format!("call-tool bridge_inject {args}")),
        "tool said: injected"
    );
    let refused = common::api::wait_for(&d, "/api/v1/security", "the guest refused", |s| {
        s["decisions"].as_array().is_some_and(|ds| {
            ds.iter().any(|x| {
                x["gate"] == "principal"
                    && x["tool"] == "plugin_disable"
                    && x["reason"].as_str().unwrap_or("").contains("bridge.guest")
            })
        })
    });
    assert!(refused.to_string().contains("plugin_disable"));
    assert_eq!(
        state_of(&common::api::get(&d, "/api/v1/plugins"), "echo").as_deref(),
        Some("running")
    );
}

/// `plugin_install` from a path: inside the work directory the package installs and
/// its tool is offered; outside every root the sandbox refuses before anything is
/// read; a file that is no package is refused and leaves nothing behind.
#[test]
fn the_model_installs_a_package_from_a_path_inside_the_roots_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let v = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(&d, 1);
    let work = data.join("workspace");
    std::fs::write(work.join("notes.hmap"), package("notes")).unwrap();
    std::fs::write(dir.path().join("outside.hmap"), package("outside")).unwrap();
    std::fs::write(work.join("junk.hmap"), b"not a zip at all").unwrap();

    let outside = dir.path().join("outside.hmap");
    let reply = ask(
        &d,
        &format!(
            "call-tool plugin_install {}",
            json!({"path": outside.to_str().unwrap()})
        ),
    );
    assert!(reply.contains("firewall (sandbox) refused plugin_install"), "{reply}");
    let reply = ask(&d, r#"call-tool plugin_install {"path":"../outside.hmap"}"#);
    assert!(reply.contains("refused"), "{reply}");
    let reply = ask(&d, r#"call-tool plugin_install {"path":"junk.hmap"}"#);
    assert!(
        reply.contains("cannot install") && reply.contains("junk.hmap"),
        "{reply}"
    );

    let reply = ask(&d, r#"call-tool plugin_install {"path":"notes.hmap"}"#);
    assert!(reply.contains("plugin `notes` 1.2.0 installed"), "{reply}");
    common::api::wait_for(&d, "/api/v1/plugins", "notes running", |p| {
        state_of(p, "notes").as_deref() == Some("running")
    });
    let names: Vec<String> = common::api::get(&d, "/api/v1/plugins")["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!names.iter().any(|n| n == "outside"), "{names:?}");
    assert_eq!(ask(&d, "call-tool notes_hi {}"), "tool said: hi from notes");
    let reply = ask(&d, r#"call-tool plugin_install {"path":"./notes.hmap"}"#);
    assert!(
        reply.contains("remove the installed plugin first") || reply.contains("exists"),
        "{reply}"
    );
}

/// `llm_source_use`: the next request goes to the chosen source; an unknown one is
/// refused with the list.
#[test]
fn the_model_switches_the_primary_llm_source() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let first = common::vendor::start();
    let second = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("first", &first.url, 5));
    common::api::put_settings(&d, common::vendor::source_settings("second", &second.url, 0));
    common::api::wait_sources(&d, 2);
    assert_eq!(ask(&d, "one"), "echo: one");
    let before = second.calls.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(before, 0, "the higher priority answers first");

    let reply = ask(&d, r#"call-tool llm_source_use {"source":"nope"}"#);
    assert!(
        reply.contains("no LLM source `nope`; sources: first, second"),
        "{reply}"
    );
    let reply = ask(&d, r#"call-tool llm_source_use {"source":"second"}"#);
    assert!(reply.contains("primary LLM source is now `second`"), "{reply}");
    common::api::wait_for(&d, "/api/v1/llm/sources", "second is current", |s| {
        s["current"] == "second"
    });
    let n = second.calls.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(ask(&d, "two"), "echo: two");
    assert_eq!(
        second.calls.load(std::sync::atomic::Ordering::SeqCst),
        n + 1,
        "second answered"
    );
}

/// `output_list_channels` shows the kernel's channels and a plugin's own (with its send
/// tools); a disabled plugin's channel leaves the list and the next request's tools.
#[test]
fn the_model_lists_the_output_channels_and_a_disabled_plugins_channel_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::api::install_test_plugin(&data, "luaprobe");
    let d = Daemon::start(&data);
    let v = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(&d, 1);
    common::api::wait_for(&d, "/api/v1/plugins", "luaprobe running", |p| {
        state_of(p, "luaprobe").as_deref() == Some("running")
    });
    let channels = |reply: &str| -> Vec<String> {
        let v: Value =
            serde_json::from_str(reply.strip_prefix("tool said: ").unwrap()).unwrap_or_else(|e| panic!("{e}: {reply}"));
        v["channels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["channel"].as_str().unwrap().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    // (Sorted: plugins' channels come in the order the plugins started. `qq` is the
    // bundled OneBot bridge's.)
    let reply = ask(&d, "call-tool output_list_channels {}");
    assert_eq!(channels(&reply), ["cli", "http", "lp_out", "qq", "webui"], "{reply}");
    assert!(
        reply.contains("output_send__lp_out_help") && reply.contains("\"synchronous\": false"),
        "{reply}"
    );

    let reply = ask(&d, r#"call-tool plugin_disable {"name":"luaprobe"}"#);
    assert!(reply.contains("plugin `luaprobe` disabled"), "{reply}");
    let reply = ask(&d, "call-tool output_list_channels { }");
    assert_eq!(channels(&reply), ["cli", "http", "qq", "webui"], "{reply}");
    let tools = offered(&v);
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("output_send__lp_out") || t.starts_with("lp_")),
        "{tools:?}"
    );
}
