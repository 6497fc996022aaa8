//! Each test confines a real `/bin/sh` and asks the kernel whether it holds.

use std::os::unix::process::CommandExt;
use std::process::Command;

use super::*;

/// Runs `script` under `c` and returns (exit code, stdout+stderr).
fn run(c: &Confinement, script: &str) -> (i32, String) {
    run_with(c, script, false)
}

/// [`run`], off the network too when `offline` (as `cmd_run` with the switch off).
fn run_with(c: &Confinement, script: &str, offline: bool) -> (i32, String) {
    let prepared = c.prepare(Support::probe()).expect("prepare");
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script).env_clear().env("PATH", "/usr/bin:/bin");
    // SAFETY: `apply` and `isolate_network` only make system calls.
    unsafe {
        cmd.pre_exec(move || {
            prepared.apply()?;
            if offline {
                isolate_network()?;
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("run sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn supported() -> bool {
    let s = Support::probe();
    if !s.complete() {
        eprintln!("skipped: this kernel lacks {:?}", s.missing());
    }
    s.complete()
}

fn base(dir: &Path) -> Confinement {
    Confinement {
        read: system_read_roots(),
        write: vec![dir.join("work")],
        devices: system_devices(),
        ..Confinement::default()
    }
}

#[test]
fn carve_cuts_the_forbidden_path_out_of_a_root() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap();
    for d in ["a/data/x", "a/other", "b"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let forbidden = vec![root.join("a/data")];
    assert_eq!(carve(&root, &forbidden), vec![root.join("a/other"), root.join("b")]);
    assert_eq!(carve(&root.join("b"), &forbidden), vec![root.join("b")]);
    assert!(carve(&root.join("a/data/x"), &forbidden).is_empty());
}

#[test]
fn only_granted_paths_are_readable_and_writable() {
    if !supported() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    std::fs::write(dir.join("secret"), "s3cret").unwrap();
    let c = base(&dir);
    let (code, out) = run(&c, &format!("cat {}/secret", dir.display()));
    assert_ne!(code, 0, "read outside the grants: {out}");
    assert!(!out.contains("s3cret"));
    let (code, out) = run(&c, &format!("echo hi > {0}/work/f && cat {0}/work/f", dir.display()));
    assert_eq!((code, out.trim()), (0, "hi"));
    let (code, _) = run(&c, &format!("echo x > {}/planted", dir.display()));
    assert_ne!(code, 0, "write outside the grants");
}

#[test]
fn a_root_that_contains_a_forbidden_path_is_carved() {
    if !supported() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("data/workspace")).unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("data/api-token"), "tok").unwrap();
    std::fs::write(dir.join("docs/a"), "doc").unwrap();
    let mut c = base(&dir);
    c.read.push(dir.clone());
    c.write = vec![dir.join("data/workspace")];
    c.forbidden = vec![dir.join("data")];
    c.exempt = vec![dir.join("data/workspace")];
    let (code, out) = run(&c, &format!("cat {}/data/api-token", dir.display()));
    assert_ne!(code, 0, "{out}");
    // Naming the forbidden path itself (or anything in it) grants nothing.
    c.read.push(dir.join("data"));
    let (code, out) = run(&c, &format!("cat {}/data/api-token", dir.display()));
    assert_ne!(code, 0, "{out}");
    let (code, out) = run(&c, &format!("cat {}/docs/a", dir.display()));
    assert_eq!((code, out.trim()), (0, "doc"));
    let (code, _) = run(&c, &format!("touch {}/data/workspace/new", dir.display()));
    assert_eq!(code, 0, "an exempt grant inside the forbidden path is kept");
}

#[test]
fn the_parents_environment_and_signals_are_out_of_reach() {
    if !supported() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("work")).unwrap();
    let me = std::process::id();
    let (code, out) = run(&base(t.path()), &format!("cat /proc/{me}/environ"));
    assert_ne!(code, 0, "read the parent's environment: {out}");
    // Signal 0 only asks whether a signal could be sent.
    let (code, _) = run(&base(t.path()), &format!("kill -0 {me}"));
    assert_ne!(code, 0, "could signal a process outside the confinement");
    let (code, _) = run(&base(t.path()), "sleep 5 & kill $!");
    assert_eq!(code, 0, "its own children stay reachable");
}

#[test]
fn the_closed_port_refuses_and_no_network_refuses_all() {
    if !supported() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("work")).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = |l: &std::net::TcpListener| l.local_addr().unwrap().port();
    // bash's /dev/tcp would be simplest, but /bin/sh may be dash: python3 is on every
    // machine this project builds on.
    let connect =
        |p: u16| format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {p}), timeout=2)'");
    let mut c = base(t.path());
    c.closed_port = Some(ClosedPort::new(port(&closed), Support::probe()).unwrap());
    let (code, out) = run(&c, &connect(port(&closed)));
    assert_ne!(code, 0, "connected to the closed port: {out}");
    let (code, out) = run(&c, &connect(port(&open)));
    assert_eq!(code, 0, "another port: {out}");
    let (code, _) = run_with(&c, &connect(port(&open)), true);
    assert_ne!(code, 0, "no network still connected");
}

#[test]
fn capabilities_are_gone_even_for_root() {
    if !supported() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("work")).unwrap();
    let (code, out) = run(&base(t.path()), "grep -E '^Cap(Eff|Bnd)' /proc/self/status");
    assert_eq!(code, 0, "{out}");
    for line in out.lines() {
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
}

#[test]
fn a_confined_process_is_recognised() {
    if !supported() {
        return;
    }
    assert!(!is_confined(std::process::id()), "the test itself is not confined");
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("work")).unwrap();
    let prepared = base(t.path()).prepare(Support::probe()).unwrap();
    let mut cmd = Command::new("/bin/sleep");
    cmd.arg("5");
    // SAFETY: `apply` only makes system calls.
    unsafe {
        cmd.pre_exec(move || prepared.apply());
    }
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(is_confined(child.id()));
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn limits_bound_a_commands_cpu_and_file_size() {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("ulimit -t; ulimit -f; head -c 2000000 /dev/zero > /dev/null && echo small-ok");
    let limits = Limits {
        cpu_secs: Some(7),
        file_bytes: Some(1 << 20),
        ..Limits::default()
    };
    // SAFETY: `apply` only makes system calls.
    unsafe {
        cmd.pre_exec(move || limits.apply());
    }
    let out = String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "7", "{out}");
    assert_eq!(lines[1], "2048", "1 MiB in 512-byte blocks: {out}");
    assert_eq!(lines[2], "small-ok", "writing to /dev/null is not a file size: {out}");
    let t = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!("head -c 3000000 /dev/zero > {}/big", t.path().display()));
    unsafe {
        cmd.pre_exec(move || limits.apply());
    }
    assert!(!cmd.status().unwrap().success(), "a file over the limit was written");
    assert!(std::fs::metadata(t.path().join("big")).unwrap().len() <= 1 << 20);
}

#[test]
fn limits_bound_a_commands_memory() {
    // python3 allocates 300 MB under a 100 MiB data limit: a MemoryError, not the
    // machine's memory.
    let script = "import sys\ntry:\n    b = bytearray(300 * 1024 * 1024)\n    print('allocated')\nexcept MemoryError:\n    print('refused')";
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script);
    let limits = Limits {
        data_bytes: Some(100 << 20),
        ..Limits::default()
    };
    // SAFETY: `apply` only makes system calls.
    unsafe {
        cmd.pre_exec(move || limits.apply());
    }
    let out = String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned();
    assert_eq!(out.trim(), "refused", "{out}");
    assert_eq!(
        Limits::for_command(std::time::Duration::from_secs(1)).data_bytes,
        Some(4 << 30)
    );
}
