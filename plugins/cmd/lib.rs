//! The bundled cmd plugin: `cmd_run` runs a command (an argv array, no shell) or a
//! shell line (`sh -c`) and answers its exit code and output. It runs as
//! `homed plugin cmd`.
//!
//! Guards, in order: the kernel's tool policy and principal (`cmd_*` is owner-only by
//! default), the sandbox check of `cwd` (kernel and here; default: the work directory),
//! the deny list (`plugin.cmd.deny`, command names matched on every command position of
//! a shell line), a timeout that kills the whole process group (also when the kernel
//! cancels the call), and caps on stdout/stderr with a marker. The command runs with a
//! cleared environment (only `PATH`, `HOME`, `LANG`, `LC_ALL`, `USER`, `TMPDIR`, `TERM`
//! pass), so the daemon's own environment (API keys set there) never reaches it.
//!
//! What it is not: a confinement. A command the policy lets run can read or write
//! whatever the daemon's user can, and the deny list is a guard against mistakes, not
//! against a determined shell line (`$(printf su)do` is not recognised). Keep `cmd_*`
//! owner-only, or deny it (`core.security.tool_deny`).

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use homeagent_plugin_protocol::methods::{PathArg, ToolRegister};
use homeagent_plugin_protocol::sandbox::{Access, SandboxInfo};
use homeagent_plugin_protocol::sdk::{Call, Kernel, Plugin};
use homeagent_plugin_protocol::toolkit::{opt_str, uint_arg};
use serde_json::{Value, json};

/// The deny list while `plugin.cmd.deny` is unset (an empty string turns it off).
pub const DEFAULT_DENY: &str = "sudo, su, doas, pkexec, shutdown, reboot, poweroff, halt, mkfs, fdisk, dd, passwd";
/// Default and largest `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Most bytes kept of stdout and of stderr each (together about 8k tokens at worst).
pub const MAX_OUTPUT: usize = 16 * 1024;
/// Largest `stdin`.
pub const MAX_STDIN: usize = 1024 * 1024;
/// Environment variables the command inherits; everything else is cleared (the
/// terminal plugin keeps the same ones).
pub const KEPT_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "USER", "TMPDIR", "TERM"];
/// Commands that run the next word as a command.
const WRAPPERS: &[&str] = &[
    "env", "exec", "nice", "nohup", "time", "command", "builtin", "xargs", "stdbuf", "timeout", "setsid", "chroot",
];
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "fish"];

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cmd {
    Argv(Vec<String>),
    Shell(String),
}

impl Cmd {
    /// From `argv` (an array of strings) or `command` (a shell line); exactly one.
    pub fn from_args(args: &Value) -> Result<Self, String> {
        match (args.get("argv"), opt_str(args, "command")) {
            (Some(Value::Array(a)), None) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Cmd::Argv)
                .ok_or_else(|| "`argv` must be an array of strings".to_owned()),
            (None | Some(Value::Null), Some(line)) => Ok(Cmd::Shell(line.to_owned())),
            (Some(_), Some(_)) => Err("give either `argv` or `command`, not both".into()),
            _ => {
                Err("`argv` (an array of strings, run without a shell) or `command` (a shell line) is required".into())
            }
        }
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The words in command position of a shell line: the first word of every part
/// separated by `;`, `&`, `|`, newlines, `(`, `)`, `` ` `` and `$(`, after variable
/// assignments and through wrappers such as `env` or `nohup`. Quotes and backslashes
/// are dropped from words (`"su"do` is `sudo`).
pub fn command_words(line: &str) -> Vec<String> {
    line.split([';', '&', '|', '\n', '(', ')', '`', '{', '}'])
        .flat_map(|part| {
            let words = part.trim_start_matches('$').split_whitespace().map(|raw| {
                raw.chars()
                    .filter(|c| !matches!(c, '"' | '\'' | '\\'))
                    .collect::<String>()
            });
            command_positions(words)
        })
        .collect()
}

/// The command names among `words` (one simple command): the first word that is not
/// an assignment or an option, and after a wrapper (or a wrapper's number, as in
/// `timeout 5`) the next one too.
fn command_positions(words: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    for word in words {
        if word.is_empty() || (word.contains('=') && !word.starts_with('=')) || word.starts_with('-') {
            continue; // an assignment (FOO=1) or a wrapper's option
        }
        let digits = word.chars().all(|c| c.is_ascii_digit());
        let name = basename(&word).to_owned();
        let wrapper = WRAPPERS.contains(&name.as_str());
        if !digits {
            out.push(name);
        }
        if !wrapper && !digits {
            break;
        }
    }
    out
}

/// The deny-list entry `cmd` hits, if any (`argv[0]`, wrappers, and `sh -c LINE`).
pub fn denied(cmd: &Cmd, deny: &[String]) -> Option<String> {
    let words = match cmd {
        Cmd::Shell(line) => command_words(line),
        Cmd::Argv(argv) => {
            let mut w = command_positions(argv.iter().cloned());
            if let Some(i) = argv.iter().position(|a| a == "-c")
                && SHELLS.contains(&basename(&argv[0]))
                && let Some(script) = argv.get(i + 1)
            {
                w.extend(command_words(script));
            }
            w
        }
    };
    words.into_iter().find(|w| deny.iter().any(|d| d == w))
}

/// The deny list from the setting's value (`Null`: the default).
pub fn deny_list(setting: &Value) -> Vec<String> {
    let list = match setting {
        Value::String(s) => s.as_str(),
        Value::Array(a) => {
            return a
                .iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        _ => DEFAULT_DENY,
    };
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Kept output of one stream: the first [`MAX_OUTPUT`] bytes and the total count.
#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    total: usize,
}

fn capture(mut r: impl Read + Send + 'static, into: Arc<Mutex<Captured>>, done: mpsc::Sender<()>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut c = into.lock().expect("capture lock");
                    c.total += n;
                    let room = (MAX_OUTPUT + 1).saturating_sub(c.kept.len());
                    c.kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        let _ = done.send(());
    });
}

fn shown(c: &Captured) -> String {
    let text = String::from_utf8_lossy(&c.kept);
    if c.total <= MAX_OUTPUT {
        return text.into_owned();
    }
    let kept = homeagent_plugin_protocol::toolkit::prefix(&text, MAX_OUTPUT);
    format!(
        "{kept}\n[truncated: {} of {} bytes shown; redirect to a file and read parts of it]",
        kept.len(),
        c.total
    )
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Exit(i32),
    Signal(i32),
    TimedOut(Duration),
    Cancelled,
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    pub end: End,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The text the model reads; `Err` unless the command exited 0.
    pub fn answer(&self) -> Result<String, String> {
        let head = match &self.end {
            End::Exit(c) => format!("exit code: {c}"),
            End::Signal(s) => format!("killed by signal {s}"),
            End::TimedOut(d) => format!(
                "timed out after {}s: its process group was killed (raise timeout_secs, max {MAX_TIMEOUT_SECS}, or run it in the background writing to a file)",
                d.as_secs()
            ),
            End::Cancelled => "cancelled by the kernel: its process group was killed".to_owned(),
        };
        let mut out = format!("{head}\n--- stdout ---\n{}", self.stdout);
        if !self.stderr.is_empty() {
            out.push_str(&format!("\n--- stderr ---\n{}", self.stderr));
        }
        if self.end == End::Exit(0) { Ok(out) } else { Err(out) }
    }
}

fn kill_group(pgid: u32) {
    // SAFETY: signalling the process group this plugin created for the command.
    unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
}

/// Runs `cmd` in `cwd` (already checked) for at most `timeout`, killing its process
/// group on timeout or when `call` is cancelled.
/// `network` false (the sandbox's switch) runs it without any network.
pub fn execute(
    cmd: &Cmd,
    cwd: &Path,
    timeout: Duration,
    stdin: Option<&str>,
    network: bool,
    call: &Call,
) -> Result<Run, String> {
    let mut c = match cmd {
        Cmd::Argv(argv) => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
        Cmd::Shell(line) => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(line);
            c
        }
    };
    c.current_dir(cwd)
        .env_clear()
        .envs(KEPT_ENV.iter().filter_map(|k| std::env::var_os(k).map(|v| (*k, v))))
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // CPU, file size, processes and descriptors bounded; without `network`, none.
    let limits = homeagent_confine::Limits::for_command(timeout);
    // SAFETY: system calls only between fork and exec.
    unsafe {
        c.pre_exec(move || {
            limits.apply()?;
            if !network {
                homeagent_confine::isolate_network()?;
            }
            Ok(())
        });
    }
    let mut child = c.spawn().map_err(|e| match cmd {
        Cmd::Argv(argv) => format!("cannot run `{}`: {e} (is it installed and on PATH?)", argv[0]),
        Cmd::Shell(_) => format!("cannot start /bin/sh: {e}"),
    })?;
    let pid = child.id();
    let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = cancelled.clone();
    call.on_cancel(move || {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        kill_group(pid);
    });
    if let (Some(input), Some(mut w)) = (stdin, child.stdin.take()) {
        let input = input.to_owned();
        std::thread::spawn(move || {
            let _ = w.write_all(input.as_bytes());
        });
    }
    let (out, err) = (
        Arc::new(Mutex::new(Captured::default())),
        Arc::new(Mutex::new(Captured::default())),
    );
    let (done_tx, done_rx) = mpsc::channel();
    capture(child.stdout.take().expect("piped"), out.clone(), done_tx.clone());
    capture(child.stderr.take().expect("piped"), err.clone(), done_tx);
    let (exit_tx, exit_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });
    let end = match exit_rx.recv_timeout(timeout) {
        Ok(status) => {
            let status = status.map_err(|e| format!("waiting for the command failed: {e}"))?;
            // The shell may be gone while children it left hold the pipes: end them.
            kill_group(pid);
            match (status.code(), status.signal()) {
                _ if cancelled.load(std::sync::atomic::Ordering::SeqCst) => End::Cancelled,
                (Some(c), _) => End::Exit(c),
                (None, Some(s)) => End::Signal(s),
                _ => End::Exit(-1),
            }
        }
        Err(_) => {
            kill_group(pid);
            let _ = exit_rx.recv_timeout(Duration::from_secs(5));
            End::TimedOut(timeout)
        }
    };
    // The readers end when the pipes close; a process that left the group may hold
    // them open, so do not wait for it forever.
    for _ in 0..2 {
        let _ = done_rx.recv_timeout(Duration::from_secs(2));
    }
    let (stdout, stderr) = (shown(&out.lock().expect("lock")), shown(&err.lock().expect("lock")));
    Ok(Run { end, stdout, stderr })
}

static KERNEL: OnceLock<Kernel> = OnceLock::new();

/// The working directory a command runs in: `cwd` checked against the sandbox (the
/// kernel checked it too), or the work directory; it must be a directory.
pub fn resolve_cwd(sb: &SandboxInfo, cwd: Option<&str>) -> Result<PathBuf, String> {
    let cwd: PathBuf = match cwd {
        Some(c) => sb.check(Path::new(c), Access::Read),
        None => sb
            .workdir()
            .ok_or(homeagent_plugin_protocol::sandbox::SandboxError::NoRoots("write"))
            .and_then(|w| sb.check(w, Access::Read)),
    }
    .map_err(|e| e.to_string())?;
    if !cwd.is_dir() {
        return Err(format!("`cwd` {} is not a directory", cwd.display()));
    }
    Ok(cwd)
}

/// `cmd_run` with the deny list given.
pub fn run_tool(args: &Value, call: &Call, deny: &[String]) -> Result<String, String> {
    let sb: &SandboxInfo = call.require_sandbox()?;
    let cmd = Cmd::from_args(args)?;
    if let Some(word) = denied(&cmd, deny) {
        return Err(format!(
            "`{word}` is on the deny list of cmd_run (plugin.cmd.deny); do it another way or ask the owner to run it"
        ));
    }
    let cwd = resolve_cwd(sb, opt_str(args, "cwd"))?;
    let timeout = Duration::from_secs(uint_arg(args, "timeout_secs", DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS)?);
    let stdin = opt_str(args, "stdin");
    if stdin.is_some_and(|s| s.len() > MAX_STDIN) {
        return Err(format!(
            "`stdin` is over {MAX_STDIN} bytes; write it to a file and redirect from it"
        ));
    }
    execute(&cmd, &cwd, timeout, stdin, sb.network, call)?.answer()
}

/// The tool, for `homed plugin cmd` and tests.
pub fn plugin() -> Plugin {
    let reg = ToolRegister {
        name: "cmd_run".into(),
        description: format!(
            "Run a program and get its exit code, stdout and stderr. Give `argv` (an array: program and arguments, \
             no shell) or `command` (a shell line for pipes and redirections, run by /bin/sh -c). It runs in `cwd` \
             (inside the sandbox roots; default the work directory) with a minimal environment; it is killed after \
             `timeout_secs` (default {DEFAULT_TIMEOUT_SECS}, max {MAX_TIMEOUT_SECS}). stdout and stderr are cut at \
             {} KiB each. A non-zero exit is reported as an error with the output. Commands on the owner's deny \
             list are refused. Prefer files_* for reading and writing files.",
            MAX_OUTPUT / 1024
        ),
        parameters: json!({"type": "object", "properties": {
            "argv": {"type": "array", "items": {"type": "string"}, "description": "program and arguments, e.g. [\"ls\", \"-la\"]"},
            "command": {"type": "string", "description": "a shell line, e.g. \"ls | wc -l\""},
            "cwd": {"type": "string", "description": "working directory (default: the work directory)"},
            "timeout_secs": {"type": "integer"},
            "stdin": {"type": "string", "description": "text fed to the program's standard input"}
        }}),
        paths: vec![PathArg::new("cwd", Access::Read)],
        ..ToolRegister::default()
    }
    .with_keywords(
        "command, shell, execute, script, program, install, installed, version, check, compress, archive, \
         zip, tar, unzip, disk, space, df, du, ps, uptime, process, git, python, pip, npm, make, build, \
         命令, 运行, 执行, 脚本, 安装, 版本, 压缩",
    );
    Plugin::new("cmd").tool_with_call(reg, |args, call| {
        let setting = KERNEL.get().and_then(|k| k.setting("deny").ok()).unwrap_or(Value::Null);
        run_tool(&args, call, &deny_list(&setting))
    })
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    let result = plugin().run(|k| {
        let _ = KERNEL.set(k);
        eprintln!("cmd plugin ready");
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cmd plugin: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(dir: &Path) -> Call {
        Call::new(1).with_sandbox(SandboxInfo {
            write_roots: vec![dir.canonicalize().unwrap()],
            ..SandboxInfo::default()
        })
    }

    #[test]
    fn command_positions_are_found_through_wrappers_and_quotes() {
        assert_eq!(
            command_words("ls -la | grep x && FOO=1 sudo rm -rf /"),
            ["ls", "grep", "sudo"]
        );
        assert_eq!(command_words("env -i nohup /usr/bin/su root"), ["env", "nohup", "su"]);
        assert_eq!(
            command_words("echo $(\"su\"do id); `reboot`"),
            ["echo", "sudo", "reboot"]
        );
        let deny = deny_list(&Value::Null);
        assert_eq!(
            denied(&Cmd::Shell("echo hi; sudo id".into()), &deny).as_deref(),
            Some("sudo")
        );
        assert_eq!(
            denied(&Cmd::Argv(vec!["/usr/bin/sudo".into(), "id".into()]), &deny).as_deref(),
            Some("sudo")
        );
        assert_eq!(
            denied(&Cmd::Argv(vec!["bash".into(), "-c".into(), "reboot now".into()]), &deny).as_deref(),
            Some("reboot")
        );
        assert_eq!(
            denied(&Cmd::Argv(vec!["echo".into(), "sudo".into()]), &deny),
            None,
            "an argument is not a command"
        );
        assert_eq!(
            deny_list(&json!("")),
            Vec::<String>::new(),
            "an empty setting turns it off"
        );
        assert_eq!(deny_list(&json!(["rm", " "])), ["rm"]);
    }

    #[test]
    fn runs_report_exit_codes_output_and_caps() {
        let d = tempfile::tempdir().unwrap();
        let c = call(d.path());
        let ok = run_tool(&json!({"argv": ["echo", "hello"]}), &c, &[]).unwrap();
        assert_eq!(ok, "exit code: 0\n--- stdout ---\nhello\n");
        let err = run_tool(&json!({"command": "echo out; echo err >&2; exit 3"}), &c, &[]).unwrap_err();
        assert_eq!(err, "exit code: 3\n--- stdout ---\nout\n\n--- stderr ---\nerr\n");
        let pwd = run_tool(&json!({"command": "pwd"}), &c, &[]).unwrap();
        assert!(
            pwd.contains(d.path().canonicalize().unwrap().to_str().unwrap()),
            "{pwd}"
        );
        let big = run_tool(&json!({"command": "head -c 100000 /dev/zero | tr '\\0' x"}), &c, &[]).unwrap();
        assert!(
            big.contains(&format!("[truncated: {MAX_OUTPUT} of 100000 bytes shown")),
            "{}",
            big.len()
        );
        let fed = run_tool(&json!({"argv": ["cat"], "stdin": "piped"}), &c, &[]).unwrap();
        assert!(fed.ends_with("piped"), "{fed}");
        let env = run_tool(&json!({"command": "echo ${HOMEAGENT_SECRET:-clean}"}), &c, &[]).unwrap();
        assert!(env.contains("clean"));
        assert!(
            run_tool(&json!({"argv": ["no-such-program-xyz"]}), &c, &[])
                .unwrap_err()
                .contains("cannot run")
        );
        assert!(
            run_tool(&json!({"cwd": "/etc", "argv": ["ls"]}), &c, &[])
                .unwrap_err()
                .contains("outside")
        );
        assert!(run_tool(&json!({}), &c, &[]).unwrap_err().contains("is required"));
        assert!(
            run_tool(&json!({"argv": ["ls"]}), &Call::new(2), &[])
                .unwrap_err()
                .contains("no sandbox")
        );
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let c = call(d.path());
        let marker = d.path().join("survived");
        let line = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let t0 = std::time::Instant::now();
        let err = run_tool(&json!({"command": line, "timeout_secs": 1}), &c, &[]).unwrap_err();
        assert!(err.starts_with("timed out after 1s"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(20), "the run ended");
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the background child was killed with the group");
    }

    #[test]
    fn a_cancel_kills_the_command() {
        let d = tempfile::tempdir().unwrap();
        let c = call(d.path());
        let c2 = c.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            c2.cancel();
        });
        let err = run_tool(&json!({"argv": ["sleep", "30"]}), &c, &[]).unwrap_err();
        assert!(err.starts_with("cancelled by the kernel"), "{err}");
    }
}
