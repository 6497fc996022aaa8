//! The tools over real PTYs, without a kernel: the sandbox comes on the call as the
//! kernel sends it, events go to a collecting sink.

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use homeagent_plugin_protocol::sandbox::SandboxInfo;

use super::*;

type Events = Arc<Mutex<Vec<(String, Value)>>>;

fn tools_with(settings: Value) -> (Tools, Events) {
    let events: Events = Arc::default();
    let e = events.clone();
    let sink: session::Sink = Arc::new(move |topic, data| e.lock().unwrap().push((topic.to_owned(), data)));
    let get = Arc::new(move |k: &str| settings.get(k).cloned().unwrap_or(Value::Null));
    (Tools::new(sink, get), events)
}

fn call(dir: &Path) -> Call {
    Call::new(1).with_sandbox(SandboxInfo {
        write_roots: vec![dir.canonicalize().unwrap()],
        ..SandboxInfo::default()
    })
}

fn read_until(t: &Tools, id: u32, until: &str) -> String {
    t.read(&json!({"session": id, "until": until, "timeout_ms": 20000}))
        .unwrap()
}

#[test]
fn a_shell_session_runs_commands_keeps_state_and_reads_only_new_output() {
    let d = tempfile::tempdir().unwrap();
    let (t, events) = tools_with(json!({}));
    let out = t.create(&json!({}), &call(d.path())).unwrap();
    assert!(out.starts_with("terminal session 1 started: `/bin/bash"), "{out}");
    t.send(&json!({"session": 1, "text": "cd sub 2>/dev/null || mkdir sub && cd sub; X=$((6*7))\n"}))
        .unwrap();
    t.send(&json!({"session": 1, "text": "echo first-$X; pwd\n"})).unwrap();
    let first = read_until(&t, 1, "/sub\n");
    assert!(first.contains("first-42"), "{first}");
    assert!(!first.contains("\x1b["), "escapes are stripped: {first:?}");
    t.send(&json!({"session": 1, "text": "echo second-$X"})).unwrap();
    t.send(&json!({"session": 1, "keys": ["Enter"]})).unwrap();
    let second = read_until(&t, 1, "second-42\n");
    assert!(
        !second.contains("first-42"),
        "a read answers only what is new: {second}"
    );
    // `offset` re-reads from the start without moving the position.
    let all: Value = serde_json::from_str(
        &t.read(&json!({"session": 1, "offset": 0, "format": "json", "timeout_ms": 1}))
            .unwrap(),
    )
    .unwrap();
    let data = all["data"].as_str().unwrap();
    assert!(data.contains("first-42") && data.contains("second-42"), "{data}");
    let list: Value = serde_json::from_str(&t.list()).unwrap();
    assert_eq!(list["sessions"][0]["id"], 1);
    assert_eq!(list["sessions"][0]["running"], true);

    // ^C interrupts the foreground program; the shell lives on.
    t.send(&json!({"session": 1, "text": "sleep 60\n"})).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    t.send(&json!({"session": 1, "keys": ["C-c"]})).unwrap();
    t.send(&json!({"session": 1, "text": "echo after-$((1+1))\n"})).unwrap();
    assert!(read_until(&t, 1, "after-2").contains("after-2"));

    let out = t.close(&json!({"session": 1})).unwrap();
    assert!(out.contains("session 1 closed"), "{out}");
    assert!(
        t.read(&json!({"session": 1}))
            .unwrap_err()
            .contains("no terminal session 1")
    );
    let ev = events.lock().unwrap().clone();
    let states: Vec<&str> = ev
        .iter()
        .filter(|(t, _)| t == session::TOPIC_SESSION)
        .filter_map(|(_, d)| d["state"].as_str())
        .collect();
    assert_eq!(states.first(), Some(&"started"));
    assert_eq!(states.last(), Some(&"closed"));
    let streamed: String = ev
        .iter()
        .filter(|(t, _)| t == session::TOPIC_OUTPUT)
        .filter_map(|(_, d)| d["data"].as_str())
        .collect();
    assert!(
        streamed.contains("first-42") && streamed.contains("second-42"),
        "the output was published: {streamed:?}"
    );
    // Published chunks are contiguous: each offset continues the last.
    let mut at = 0;
    for (_, d) in ev.iter().filter(|(t, _)| t == session::TOPIC_OUTPUT) {
        assert_eq!(d["offset"].as_u64().unwrap(), at, "{d}");
        at += d["data"].as_str().unwrap().len() as u64;
    }
}

#[test]
fn closing_kills_the_jobs_the_shell_started() {
    let d = tempfile::tempdir().unwrap();
    let (t, _) = tools_with(json!({}));
    t.create(&json!({}), &call(d.path())).unwrap();
    // The typed line does not contain `bg=`, only its output does.
    t.send(&json!({"session": 1, "text": "sleep 600 & echo \"b\"\"g=$! .\"\n"}))
        .unwrap();
    let out = read_until(&t, 1, " .\n");
    let pid: u32 = out
        .rsplit("bg=")
        .next()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    let shell = t.terminals.get(1).unwrap().pid;
    assert!(pty::session_members(shell).contains(&pid), "the job is in the session");
    t.close(&json!({"session": 1})).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pty::session_members(shell).contains(&pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !pty::session_members(shell).contains(&pid),
        "the background job was killed"
    );
}

#[test]
fn programs_limits_and_hostile_input() {
    let d = tempfile::tempdir().unwrap();
    let (t, _) = tools_with(json!({"max_sessions": 2, "scrollback_bytes": 4096}));
    let c = call(d.path());
    // A program that ends: its exit is reported, sending to it is refused.
    t.create(
        &json!({"argv": ["sh", "-c", "printf 'a\\033[31mred\\033[0m\\n'; exit 3"]}),
        &c,
    )
    .unwrap();
    let out = t.read(&json!({"session": 1, "timeout_ms": 10000})).unwrap();
    let out = if out.contains("exited") {
        out
    } else {
        t.read(&json!({"session": 1, "timeout_ms": 10000})).unwrap()
    };
    assert!(out.contains("exited with code 3"), "{out}");
    let raw = t
        .read(&json!({"session": 1, "offset": 0, "ansi": true, "timeout_ms": 1}))
        .unwrap();
    assert!(raw.contains("\x1b[31mred"), "ansi kept on request: {raw:?}");
    assert!(
        t.send(&json!({"session": 1, "text": "x"}))
            .unwrap_err()
            .contains("has ended")
    );
    // The scrollback keeps the newest bytes and says what was lost.
    t.create(
        &json!({"command": "head -c 20000 /dev/zero | tr '\\0' y; echo; echo END"}),
        &c,
    )
    .unwrap();
    let out = t
        .read(&json!({"session": 2, "until": "END", "timeout_ms": 10000}))
        .unwrap();
    assert!(out.contains("older bytes were already dropped"), "{}", &out[..200]);
    assert!(out.len() < 6000, "{}", out.len());
    // The session cap.
    let err = t.create(&json!({}), &c).unwrap_err();
    assert!(
        err.contains("plugin.terminal.max_sessions") && err.contains("terminal_close"),
        "{err}"
    );
    t.close(&json!({"session": 1})).unwrap();
    t.close(&json!({"session": 2})).unwrap();
    // Sandbox and deny list, as for cmd_run.
    let err = t.create(&json!({"cwd": "/etc"}), &c).unwrap_err();
    assert!(err.contains("outside"), "{err}");
    let err = t.create(&json!({"cwd": "../.."}), &c).unwrap_err();
    assert!(err.contains("`..`"), "{err}");
    assert!(t.create(&json!({}), &Call::new(9)).unwrap_err().contains("no sandbox"));
    let err = t.create(&json!({"argv": ["sudo", "-i"]}), &c).unwrap_err();
    assert!(err.contains("`sudo` is on the deny list"), "{err}");
    t.create(&json!({}), &c).unwrap();
    let err = t.send(&json!({"session": 3, "text": "echo x; reboot\n"})).unwrap_err();
    assert!(err.contains("`reboot` is on the deny list"), "{err}");
    assert!(
        t.send(&json!({"session": 3, "keys": ["Hyper"]}))
            .unwrap_err()
            .contains("unknown key")
    );
    assert!(t.send(&json!({"session": 3})).unwrap_err().contains("give `text`"));
    assert!(t.send(&json!({"text": "x"})).unwrap_err().contains("`session`"));
    let big = "x".repeat(MAX_SEND + 1);
    assert!(
        t.send(&json!({"session": 3, "text": big}))
            .unwrap_err()
            .contains("over")
    );
    // Binary output does not break a read.
    t.send(&json!({"session": 3, "text": "printf '\\377\\376\\000ok-bin\\n'\n"}))
        .unwrap();
    assert!(read_until(&t, 3, "ok-bin").contains("ok-bin"));
    t.terminals.close_all("test over");
    assert_eq!(t.list(), r#"{"sessions":[]}"#);
}

#[test]
fn an_idle_session_is_closed() {
    let d = tempfile::tempdir().unwrap();
    let (t, events) = tools_with(json!({"idle_timeout_secs": 1}));
    t.create(&json!({"argv": ["sleep", "60"]}), &call(d.path())).unwrap();
    let closed = || {
        events
            .lock()
            .unwrap()
            .iter()
            .any(|(_, d)| d["state"] == "closed" && d["session"]["reason"].as_str().unwrap().contains("idle"))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !closed() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(closed(), "closed after being idle: {:?}", events.lock().unwrap());
    assert!(t.terminals.get(1).is_err(), "and gone from the list");
}

#[test]
fn keys_have_their_bytes() {
    assert_eq!(key_bytes("C-c").unwrap(), [3]);
    assert_eq!(key_bytes("c-D").unwrap(), [4]);
    assert_eq!(key_bytes("enter").unwrap(), b"\r");
    assert_eq!(key_bytes("Up").unwrap(), b"\x1b[A");
    assert!(key_bytes("C-").is_err() && key_bytes("C-1").is_err());
}
