//! A real `homed` process on loopback, for black-box tests.

#![allow(dead_code)]

pub mod api;
pub mod vendor;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub data: PathBuf,
    pub log: PathBuf,
}

/// A loopback web server answering every request with the one HTML page `body` (the
/// untrusted content a turn reads first); serves until the test process ends.
pub fn page_server(body: &'static str) -> String {
    use std::io::{BufRead as _, Write as _};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/page.html", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let mut conn = conn;
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A number no other start in this test process has had (log file names).
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// The port a just-spawned daemon names in `address`; panics with its log if it exits
/// first or never names one.
fn wait_address(child: &mut Child, address: &Path, log: &Path) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(address)
            && let Ok(addr) = text.trim().parse::<std::net::SocketAddr>()
        {
            return addr.port();
        }
        let log_text = || std::fs::read_to_string(log).unwrap_or_default();
        if let Some(status) = child.try_wait().unwrap() {
            panic!("homed exited ({status}) before listening; log:\n{}", log_text());
        }
        assert!(
            Instant::now() < deadline,
            "homed never named its address; log:\n{}",
            log_text()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Daemon {
    /// Starts homed on `data` and waits until `/readyz` says the kernel has booted.
    pub fn start(data: &Path) -> Self {
        Self::start_with(data, Some("info"))
    }

    /// Like [`Daemon::start`], with `RUST_LOG` set to `rust_log` or unset (`None`: the
    /// daemon's own `core.daemon.log_level` decides).
    pub fn start_with(data: &Path, rust_log: Option<&str>) -> Self {
        Self::start_env(data, rust_log, &[])
    }

    /// Like [`Daemon::start_with`], with extra environment variables for the daemon
    /// (`HOMEAGENT_FAULT` for the supervision tests).
    pub fn start_env(data: &Path, rust_log: Option<&str>, env: &[(&str, &str)]) -> Self {
        let d = Self::launch(data, rust_log, env);
        d.wait_healthy();
        d
    }

    /// homed on `data`, once it named the port it listens on.
    fn launch(data: &Path, rust_log: Option<&str>, env: &[(&str, &str)]) -> Self {
        // Port 0: the daemon binds a port the kernel picks and names it in
        // DATA/http-address, so two daemons of parallel tests can never race for one
        // "free" port (a race that once let one test talk to another test's daemon).
        let address = data.join("http-address");
        let _ = std::fs::remove_file(&address);
        let log = data.with_extension(format!("{}.log", unique()));
        let mut child = Self::spawn(data, &log, rust_log, env);
        let port = wait_address(&mut child, &address, &log);
        Self {
            child,
            port,
            data: data.to_owned(),
            log,
        }
    }

    /// homed `--failback` on `data` whose start is expected to fail: waits until it
    /// serves the recovery page (`/readyz` says `recovery`).
    pub fn start_recovering(data: &Path) -> Self {
        let d = Self::launch(data, Some("info"), &[("HOMED_FAILBACK", "1")]);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = reqwest::blocking::get(d.url("/readyz"))
                && r.json::<serde_json::Value>().is_ok_and(|v| v["status"] == "recovery")
            {
                return d;
            }
            assert!(
                Instant::now() < deadline,
                "homed did not serve the recovery page; log:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// homed on `data`, listening on a port the kernel picks (named in DATA/http-address).
    fn spawn(data: &Path, log: &Path, rust_log: Option<&str>, env: &[(&str, &str)]) -> Child {
        let log_file = std::fs::File::create(log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_homed"));
        cmd.args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
        match rust_log {
            Some(f) => cmd.env("RUST_LOG", f),
            None => cmd.env_remove("RUST_LOG"),
        };
        cmd.envs(env.iter().copied());
        cmd.stdout(Stdio::null()).stderr(log_file).spawn().expect("spawn homed")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The owner token the daemon created in its data dir (read anew each time, so a
    /// restart or a rotation is followed).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data.join("api-token"))
            .unwrap_or_else(|e| panic!("no api-token in {}: {e}", self.data.display()))
            .trim()
            .to_owned()
    }

    /// An HTTP client that sends the owner token, as every API client must.
    pub fn client(&self) -> reqwest::blocking::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", self.token()).parse().unwrap(),
        );
        reqwest::blocking::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::blocking::get(self.url("/readyz"))
                && r.status().is_success()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("homed did not become ready; log:\n{}", self.log_text());
    }

    /// SIGTERM and wait; returns the exit status.
    pub fn terminate(self) -> std::process::ExitStatus {
        unsafe_kill(self.child.id(), "TERM");
        self.exit_within(Duration::from_secs(15), "on SIGTERM")
    }

    /// Waits for the process to end on its own (a restart it was asked for); returns
    /// the exit status.
    pub fn wait_exit(self) -> std::process::ExitStatus {
        self.exit_within(Duration::from_secs(60), "")
    }

    fn exit_within(mut self, limit: Duration, why: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "homed did not stop {why}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL (no cleanup at all), then reap.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal with the `kill` command (no libc dependency in tests).
pub fn unsafe_kill(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status();
}
