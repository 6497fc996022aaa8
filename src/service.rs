//! Running `homed` as a service: a systemd user unit (`homed service install`) and the
//! daemon's side of systemd's notify protocol.
//!
//! The unit is `Type=notify`: systemd counts the daemon as started when it says
//! `READY=1` (after it serves, not when the process exists), restarts it when it
//! crashes or when its watchdog goes unfed for `WatchdogSec` — the heartbeat actor,
//! which already proves the actor system alive by writing `DATA/heartbeat`, sends
//! `WATCHDOG=1` with each beat — and restarts it when it exits with
//! [`RESTART_EXIT_CODE`] (a restart the daemon asks for). Where there is no user
//! systemd (a container, another init), `install` prints the unit and says where it
//! would go.
//!
//! The notify protocol is one datagram to the socket named in `NOTIFY_SOCKET` (a path,
//! or `@name` in Linux's abstract namespace); nothing is sent when it is unset.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The exit status that asks the service manager for a restart (`EX_TEMPFAIL`).
pub const RESTART_EXIT_CODE: i32 = 75;

/// The unit's name.
pub const UNIT: &str = "homed.service";

/// The unit file for `exe` on `data`, listening on `listen`. `heartbeat` is the
/// daemon's heartbeat interval (the watchdog allows three missed beats, at least
/// 30 s); `shutdown` its graceful-stop budget.
pub fn unit(exe: &Path, data: &Path, listen: &str, heartbeat: Duration, shutdown: Duration) -> String {
    let watchdog = (heartbeat * 3).max(Duration::from_secs(30)).as_secs();
    let stop = shutdown.as_secs() + 5;
    let q = |p: &Path| {
        let s = p.display().to_string();
        if s.contains(char::is_whitespace) {
            format!("\"{s}\"")
        } else {
            s
        }
    };
    format!(
        "# Written by `homed service install`; `homed service uninstall` removes it.
[Unit]
Description=HomeAgent, a personal AI agent daemon
Documentation=file://{data}/
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={exe} --data {data} --listen {listen} --failback
Restart=on-failure
RestartSec=5s
# The daemon asks for a restart by exiting with this status.
RestartForceExitStatus={RESTART_EXIT_CODE}
# Fed by the daemon's heartbeat (core.daemon.heartbeat_interval): three missed beats.
WatchdogSec={watchdog}s
TimeoutStopSec={stop}s

[Install]
WantedBy=default.target
",
        exe = q(exe),
        data = q(data),
    )
}

/// Where the user unit goes: `$XDG_CONFIG_HOME/systemd/user/` or `~/.config/systemd/user/`.
pub fn unit_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("systemd/user").join(UNIT))
}

/// Whether a user systemd answers here (`systemctl --user` reaches a manager).
pub fn user_systemd() -> bool {
    std::process::Command::new("systemctl")
        .args(["--user", "show-environment"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn systemctl(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("systemctl")
        .arg("--user")
        .args(args)
        .output()
        .map_err(|e| format!("systemctl --user {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "systemctl --user {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `homed service install`: writes the unit and enables it (with a user systemd), or
/// answers the unit and where it would go. The answer is what to print.
pub fn install(unit_text: &str, print_only: bool) -> Result<String, String> {
    let path = unit_path().ok_or("neither XDG_CONFIG_HOME nor HOME is set: cannot tell where the unit goes")?;
    if print_only || !user_systemd() {
        return Ok(format!(
            "{unit_text}\n# No user systemd answers here (or --print was given): save the unit above as\n# {}\n# then run: systemctl --user daemon-reload && systemctl --user enable --now {UNIT}\n",
            path.display()
        ));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, unit_text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    systemctl(&["daemon-reload"])?;
    systemctl(&["enable", "--now", UNIT])?;
    Ok(format!(
        "installed {} and started it; `systemctl --user status {UNIT}` shows it, `journalctl --user -u {UNIT}` its log. To keep it running after you log out: loginctl enable-linger",
        path.display()
    ))
}

/// What `systemctl --user <verb> homed` prints (`active`, `enabled`, …), `None`
/// without a user systemd.
fn systemctl_word(verb: &str) -> Option<String> {
    let out = std::process::Command::new("systemctl")
        .args(["--user", verb, UNIT])
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|w| !w.is_empty())
}

/// The unit's part of `homed service status` (`daemon::status` adds the data dir's):
/// whether it is installed, and what the user systemd says of it — lines a person reads.
pub fn unit_status() -> Vec<String> {
    let mut lines = Vec::new();
    match unit_path() {
        Some(p) if p.exists() => lines.push(format!("unit: installed at {}", p.display())),
        Some(p) => lines.push(format!(
            "unit: not installed (homed service install writes {})",
            p.display()
        )),
        None => lines.push("unit: cannot tell (neither XDG_CONFIG_HOME nor HOME is set)".into()),
    }
    if user_systemd() {
        let active = systemctl_word("is-active").unwrap_or_else(|| "unknown".into());
        let enabled = systemctl_word("is-enabled").unwrap_or_else(|| "unknown".into());
        lines.push(format!(
            "service: {active}, {enabled} (journalctl --user -u {UNIT} shows its log)"
        ));
    } else {
        lines.push("service: no user systemd answers here".into());
    }
    lines
}

/// `homed service uninstall`: stops, disables and removes the unit.
pub fn uninstall() -> Result<String, String> {
    let path = unit_path().ok_or("neither XDG_CONFIG_HOME nor HOME is set")?;
    if !path.exists() {
        return Ok(format!("no unit at {}: nothing to remove", path.display()));
    }
    if user_systemd() {
        let _ = systemctl(&["disable", "--now", UNIT]);
    }
    std::fs::remove_file(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    if user_systemd() {
        let _ = systemctl(&["daemon-reload"]);
    }
    Ok(format!("removed {}", path.display()))
}

/// Asks for the restart a moment from now, so the HTTP answer that says so goes out
/// first (the stop closes the connection); answers whether a service manager will
/// start the daemon again.
pub fn restart_soon() -> bool {
    actix_web::rt::spawn(async {
        actix_web::rt::time::sleep(std::time::Duration::from_millis(200)).await;
        request_restart();
    });
    under_service_manager()
}

/// Set once a restart was asked for (`POST /api/v1/daemon/restart`).
static RESTART_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static RESTART: std::sync::LazyLock<tokio::sync::Notify> = std::sync::LazyLock::new(tokio::sync::Notify::new);

/// Asks the daemon to stop gracefully and exit with [`RESTART_EXIT_CODE`], which a
/// service manager (the unit's `RestartForceExitStatus`) answers by starting it again.
pub fn request_restart() {
    RESTART_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
    RESTART.notify_one();
}

/// Resolves once a restart was asked for.
pub async fn restart_requested() {
    RESTART.notified().await;
}

/// Whether the daemon stopped to be restarted.
pub fn restart_was_requested() -> bool {
    RESTART_ASKED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether a service manager that listens to us started this process.
pub fn under_service_manager() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Tells the service manager `state` (`READY=1`, `WATCHDOG=1`, `STOPPING=1`) when it
/// asked to be told (`NOTIFY_SOCKET`); silent otherwise. Errors are not the daemon's
/// problem: a manager that stopped listening restarts it anyway.
pub fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let target = target.to_string_lossy().into_owned();
    let sent = if let Some(name) = target.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
    } else {
        sock.send_to(state.as_bytes(), &target)
    };
    if let Err(e) = sent {
        tracing::debug!(%target, "could not notify the service manager: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_is_a_notify_service_with_a_watchdog_from_the_heartbeat() {
        let u = unit(
            Path::new("/opt/home agent/homed"),
            Path::new("/var/lib/homed"),
            "127.0.0.1:8080",
            Duration::from_secs(15),
            Duration::from_secs(10),
        );
        assert!(u.contains("Type=notify"), "{u}");
        assert!(
            u.contains("ExecStart=\"/opt/home agent/homed\" --data /var/lib/homed --listen 127.0.0.1:8080"),
            "{u}"
        );
        assert!(u.contains("WatchdogSec=45s") && u.contains("TimeoutStopSec=15s"), "{u}");
        assert!(
            u.contains("RestartForceExitStatus=75") && u.contains("Restart=on-failure"),
            "{u}"
        );
        let short = unit(
            Path::new("/h"),
            Path::new("/d"),
            ":8080",
            Duration::from_secs(2),
            Duration::from_secs(1),
        );
        assert!(short.contains("WatchdogSec=30s"), "{short}");
    }
}
