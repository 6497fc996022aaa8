//! A program on a fresh pseudo-terminal: `openpt` → `grantpt` → `unlockpt` →
//! `ptsname`, the slave as the child's stdin/stdout/stderr, and in the child (between
//! fork and exec) `setsid` + `TIOCSCTTY`, so the program leads a session of its own
//! whose controlling terminal is the PTY. That is what makes job control, line editing
//! and `^C` work as in a real terminal — and what lets the plugin end everything the
//! session started (see [`kill_session`]).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// A started program and the PTY's master side (read: its output; write: its input).
pub struct Spawned {
    pub child: Child,
    pub master: File,
}

/// Starts `argv` on a new PTY of `rows` x `cols` in `cwd` with exactly `env`; without
/// `network`, in a private network namespace.
pub fn spawn(
    argv: &[String],
    cwd: &Path,
    env: &[(String, OsString)],
    rows: u16,
    cols: u16,
    network: bool,
) -> io::Result<Spawned> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    tcsetwinsize(
        &master,
        Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    // O_CLOEXEC is std's default: the slave reaches the child only as its stdio.
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(OsString::from_vec(name.into_bytes()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe system calls (unshare, setsid, ioctl) run between fork
    // and exec; stdin is already the slave there.
    unsafe {
        cmd.pre_exec(move || {
            if !network {
                homeagent_confine::isolate_network()?;
            }
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(BorrowedFd::borrow_raw(0))?;
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    Ok(Spawned {
        child,
        master: File::from(master),
    })
}

/// Every process whose session id is `sid` (from `/proc/<pid>/stat`, field 6), zombies
/// left out.
pub fn session_members(sid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid pgrp session ...`; comm may contain spaces.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.first() != Some(&"Z") && f.get(3).and_then(|s| s.parse::<u32>().ok()) == Some(sid)
        })
        .collect()
}

fn signal(pid: u32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// Ends the session led by `sid`: `SIGHUP` to its process group (an interactive
/// shell passes it on to its jobs, as when a terminal window closes), up to `grace`
/// for them to go, then `SIGKILL` to every process still in the session — jobs that
/// the shell put in process groups of their own included. A process that left the
/// session (`setsid`, a daemon) is not found; `nohup` alone does not escape.
pub fn kill_session(sid: u32, grace: Duration) {
    if let Some(p) = Pid::from_raw(sid as i32) {
        let _ = rustix::process::kill_process_group(p, Signal::HUP);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !session_members(sid).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in session_members(sid) {
        signal(pid, Signal::KILL);
    }
}
