//! `homed plugin pack` and the manifest's `min_version`, `platforms` and `auto_start`
//! on a real daemon: a plugin for a newer homed is refused at install (both versions
//! named) and not started from disk; a packed directory installs over HTTP and the
//! command line; an `auto_start: false` plugin needs its skill to be packed, installs
//! idle with its skill in the index, and starts when enabled.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::api::{call_tool, offer_every_tool, plugin, put_settings, wait_for, wait_sources};
use common::{Daemon, vendor};
use serde_json::{Value, json};

/// The daemon's version (the workspace's crates share it).
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn homed(cwd: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
        .current_dir(cwd)
        .env("LANG", "C")
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A Lua plugin directory `root/name` with one tool `<name>_hi`.
fn lua_plugin(root: &Path, name: &str, extra_manifest: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.json"),
        format!(r#"{{"name": "{name}", "version": "1.0.0", "entry": "main.lua"{extra_manifest}}}"#),
    )
    .unwrap();
    std::fs::write(
        dir.join("main.lua"),
        format!(
            r#"sdk.register_tool("{name}_hi", {{description = "Say hi", parameters = {{type = "object", properties = {{}}}}}}, function(args) return "hi from {name}" end)"#
        ),
    )
    .unwrap();
    dir
}

fn post_package(d: &Daemon, bytes: Vec<u8>) -> (u16, Value) {
    let r = d
        .client()
        .post(d.url("/api/v1/plugins/install"))
        .header("content-type", "application/zip")
        .body(bytes)
        .send()
        .unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

fn wait_plugin(d: &Daemon, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let v = wait_for(d, "/api/v1/plugins", what, |v| {
        v["plugins"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["name"] == name && ok(p)))
    });
    v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap()
}

#[test]
fn newer_plugins_are_refused_and_packed_ones_install_and_lazy_ones_wait_for_enable() {
    let dir = tempfile::tempdir().unwrap();
    let (data, src, out) = (dir.path().join("data"), dir.path().join("src"), dir.path().join("out"));
    std::fs::create_dir_all(&out).unwrap();
    // Already on disk when the daemon starts, wanting a newer daemon: not started,
    // shown with its reason, and the daemon runs on.
    lua_plugin(&data.join("plugins"), "future", r#", "min_version": "999.0.0""#);
    let d = Daemon::start(&data);
    let future = plugin(&d, "future");
    let problem = future["problem"].as_str().unwrap_or_default();
    assert!(
        problem.contains("999.0.0") && problem.contains(&format!("this is homed {VERSION}")),
        "{future}"
    );
    assert!(future["pid"].is_null() && future["tools"] == json!([]), "{future}");

    // Packed all the same (a package may be built for a newer daemon), refused at
    // install with both versions named; nothing is left in DATA/plugins.
    lua_plugin(&src, "newer", r#", "min_version": "999.0.0""#);
    let o = homed(
        &out,
        &[
            "plugin",
            "pack",
            src.join("newer").to_str().unwrap(),
            "-o",
            "newer.hmap",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let (status, body) = post_package(&d, std::fs::read(out.join("newer.hmap")).unwrap());
    assert_eq!(
        (status, body["kind"].as_str()),
        (400, Some("version_too_old")),
        "{body}"
    );
    let err = body["error"].as_str().unwrap();
    assert!(
        err.contains("needs homed 999.0.0 or newer") && err.contains(&format!("this is homed {VERSION}")),
        "{err}"
    );
    assert!(err.contains("upgrade homed"), "says what to do: {err}");
    assert!(!data.join("plugins/newer").exists());
    assert!(plugin(&d, "newer").is_null());

    // Pack → install: the default file name, then the package over HTTP.
    lua_plugin(&src, "greet", "");
    let o = homed(&out, &["plugin", "pack", src.join("greet").to_str().unwrap()]);
    let stdout = text(&o.stdout);
    assert!(
        o.status.success() && stdout.contains("wrote greet-1.0.0.hmap: greet 1.0.0, 2 files"),
        "{o:?}"
    );
    let sha = stdout
        .split("sha256 ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (status, body) = post_package(&d, std::fs::read(out.join("greet-1.0.0.hmap")).unwrap());
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["checksum"].as_str(),
        Some(sha.as_str()),
        "the checksum pack printed"
    );
    wait_plugin(&d, "greet", "greet running with its tool", |p| {
        p["state"] == "running" && p["tools"] == json!(["greet_hi"])
    });

    // auto_start: false without a skill is not packed; with one it is.
    let lazy = lua_plugin(&src, "lazy", r#", "auto_start": false"#);
    let o = homed(&out, &["plugin", "pack", lazy.to_str().unwrap(), "-o", "lazy.hmap"]);
    let stderr = text(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("auto_start: false but ships no SKILL.md"),
        "{o:?}"
    );
    assert!(!out.join("lazy.hmap").exists());
    std::fs::write(
        lazy.join("SKILL.md"),
        "---\nname: lazy\ndescription: Greets lazily; start the plugin first.\n---\nCall plugin_enable with name lazy, then lazy_hi.\n",
    )
    .unwrap();
    let o = homed(&out, &["plugin", "pack", lazy.to_str().unwrap(), "-o", "lazy.hmap"]);
    assert!(o.status.success(), "{o:?}");
    // Installed through the command line: not started, its skill in the index.
    let listen = format!("127.0.0.1:{}", d.port);
    let o = homed(
        &out,
        &[
            "--listen",
            &listen,
            "--data",
            data.to_str().unwrap(),
            "plugin",
            "install",
            "lazy.hmap",
        ],
    );
    assert!(o.status.success() && text(&o.stdout).contains("state idle"), "{o:?}");
    let p = plugin(&d, "lazy");
    assert_eq!((p["state"].as_str(), &p["tools"]), (Some("idle"), &json!([])), "{p}");
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);
    offer_every_tool(&d);
    assert!(call_tool(&d, "skill_info", json!({"name": "lazy"})).contains("Call plugin_enable with name lazy"));
    // The model starts it when it needs it.
    let said = call_tool(&d, "plugin_enable", json!({"name": "lazy"}));
    assert!(said.contains("plugin `lazy` enabled"), "{said}");
    wait_plugin(&d, "lazy", "lazy running once enabled", |p| {
        p["state"] == "running" && p["tools"] == json!(["lazy_hi"])
    });
    assert_eq!(call_tool(&d, "lazy_hi", json!({})), "hi from lazy");
}
