//! The bundled terminal plugin (the seed's agentcli): the model owns interactive
//! terminals — a shell or any program on a real PTY — that outlive a turn. It runs as
//! `homed plugin terminal`.
//!
//! * `terminal_create` starts a session (default: an interactive bash without rc
//!   files) with its working directory inside the sandbox roots (checked by the kernel
//!   and again here, as for `cmd_run`);
//! * `terminal_send` types text and named keys (`Enter`, `C-c`, `Up`, ...);
//! * `terminal_read` answers the output since the last read, waiting for it to settle
//!   or for a given text, capped, as plain text (escape sequences applied and dropped)
//!   or raw;
//! * `terminal_close` kills the session's processes; `terminal_list` shows them.
//!
//! Output and lifecycle are published as kernel events (`events.publish`, topics
//! `terminal.output` and `terminal.session`): the WebUI's terminal panel draws them
//! live. Guards: `terminal_*` is owner-only by default (`core.security.owner_only_tools`),
//! the deny list of `cmd_run` applies to the started command and to every text sent
//! (`plugin.terminal.deny`, default the same list), the environment is cleared like
//! `cmd_run`'s, and there are caps on sessions, scrollback and idle time
//! (`plugin.terminal.max_sessions`, `.scrollback_bytes`, `.idle_timeout_secs`).
//! Sessions end with the plugin: its exit closes them all, and a killed plugin's PTY
//! masters close, which hangs the shells up.
//!
//! What it is not: a confinement — like `cmd_run`, a session can do whatever the
//! daemon's user can.

pub mod pty;
pub mod session;
pub mod text;

use std::ffi::OsString;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use homeagent_cmd::{Cmd, KEPT_ENV, denied, deny_list, resolve_cwd};
use homeagent_plugin_protocol::PluginRequest;
use homeagent_plugin_protocol::methods::{self, PathArg, ToolRegister};
use homeagent_plugin_protocol::sandbox::Access;
use homeagent_plugin_protocol::sdk::{Call, Kernel, Plugin};
use homeagent_plugin_protocol::toolkit::{bool_arg, opt_str, uint_arg};
use serde_json::{Value, json};

use session::{Chunk, Spec, Until};
pub use session::{Limits, Terminals};

/// Default and largest `max_bytes` of a read.
pub const DEFAULT_READ: u64 = 8 * 1024;
pub const MAX_READ: u64 = 64 * 1024;
/// Default and largest `timeout_ms` of a read.
pub const DEFAULT_WAIT_MS: u64 = 2000;
pub const MAX_WAIT_MS: u64 = 30_000;
/// A read without `until` returns once output stopped for this long.
const QUIET: Duration = Duration::from_millis(150);
/// Largest `text` of one send.
pub const MAX_SEND: usize = 64 * 1024;

/// The keys `terminal_send` knows by name (besides `C-a`..`C-z`).
const KEYS: &[(&str, &str)] = &[
    ("Enter", "\r"),
    ("Tab", "\t"),
    ("Esc", "\x1b"),
    ("Backspace", "\x7f"),
    ("Space", " "),
    ("Up", "\x1b[A"),
    ("Down", "\x1b[B"),
    ("Right", "\x1b[C"),
    ("Left", "\x1b[D"),
    ("Home", "\x1b[H"),
    ("End", "\x1b[F"),
    ("PageUp", "\x1b[5~"),
    ("PageDown", "\x1b[6~"),
    ("Delete", "\x1b[3~"),
];

/// The bytes of a named key.
pub fn key_bytes(name: &str) -> Result<Vec<u8>, String> {
    if let Some((_, b)) = KEYS.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
        return Ok(b.as_bytes().to_vec());
    }
    if let Some(c) = name.strip_prefix("C-").or_else(|| name.strip_prefix("c-"))
        && let [c] = c.as_bytes()
        && c.is_ascii_alphabetic()
    {
        return Ok(vec![c.to_ascii_lowercase() - b'a' + 1]);
    }
    let names: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
    Err(format!(
        "unknown key `{name}`; keys: {}, C-a..C-z (C-c interrupts, C-d ends input)",
        names.join(", ")
    ))
}

/// The program a session without `argv`/`command` runs, and extra environment.
fn default_shell() -> (Vec<String>, Vec<(String, OsString)>) {
    if std::path::Path::new("/bin/bash").exists() {
        let argv = ["/bin/bash", "--noprofile", "--norc", "-i"];
        (
            argv.map(str::to_owned).to_vec(),
            vec![("PS1".into(), OsString::from("\\w $ "))],
        )
    } else {
        (vec!["/bin/sh".into(), "-i".into()], vec![("PS1".into(), "$ ".into())])
    }
}

/// The plugin's state: the sessions and how to read settings.
pub struct Tools {
    pub terminals: Arc<Terminals>,
    settings: Arc<dyn Fn(&str) -> Value + Send + Sync>,
}

fn session_arg(args: &Value) -> Result<u32, String> {
    uint_arg(args, "session", 0, u32::MAX as u64)
        .ok()
        .filter(|n| *n > 0)
        .map(|n| n as u32)
        .ok_or_else(|| "`session` (the number terminal_create answered) is required".to_owned())
}

impl Tools {
    /// Sessions publishing to `sink`, settings read through `settings` (short keys).
    pub fn new(sink: session::Sink, settings: Arc<dyn Fn(&str) -> Value + Send + Sync>) -> Self {
        Self {
            terminals: Terminals::new(sink),
            settings,
        }
    }

    fn limits(&self) -> Limits {
        let d = Limits::default();
        let n = |k: &str, def: u64| (self.settings)(k).as_u64().filter(|n| *n > 0).unwrap_or(def);
        Limits {
            max_sessions: n("max_sessions", d.max_sessions as u64) as usize,
            scrollback: n("scrollback_bytes", d.scrollback as u64).max(4096) as usize,
            idle: Duration::from_secs(n("idle_timeout_secs", d.idle.as_secs())),
        }
    }

    fn deny(&self) -> Vec<String> {
        deny_list(&(self.settings)("deny"))
    }

    fn check_denied(&self, cmd: &Cmd, what: &str) -> Result<(), String> {
        match denied(cmd, &self.deny()) {
            Some(word) => Err(format!(
                "`{word}` is on the deny list of the terminal (plugin.terminal.deny); {what} was not sent — do it another way or ask the owner"
            )),
            None => Ok(()),
        }
    }

    /// `terminal_create`.
    pub fn create(&self, args: &Value, call: &Call) -> Result<String, String> {
        let sb = call.require_sandbox()?;
        let (argv, mut env) = if args.get("argv").is_some_and(|v| !v.is_null()) || opt_str(args, "command").is_some() {
            let cmd = Cmd::from_args(args)?;
            self.check_denied(&cmd, "the session")?;
            let argv = match cmd {
                Cmd::Argv(a) => a,
                Cmd::Shell(line) => vec!["/bin/sh".into(), "-c".into(), line],
            };
            (argv, Vec::new())
        } else {
            default_shell()
        };
        let cwd = resolve_cwd(sb, opt_str(args, "cwd"))?;
        let rows = uint_arg(args, "rows", 30, 200)? as u16;
        let cols = uint_arg(args, "cols", 120, 500)? as u16;
        env.extend(
            KEPT_ENV
                .iter()
                .filter(|k| **k != "TERM")
                .filter_map(|k| std::env::var_os(k).map(|v| ((*k).to_owned(), v))),
        );
        env.push(("TERM".into(), "xterm-256color".into()));
        let s = self.terminals.create(
            Spec {
                argv,
                cwd,
                env,
                rows,
                cols,
                network: sb.network,
            },
            &self.limits(),
        )?;
        Ok(format!(
            "terminal session {} started: `{}` (pid {}) in {}, {rows} rows x {cols} columns. Type with terminal_send {{\"session\": {}, \"text\": \"ls\\n\"}}, read with terminal_read, end it with terminal_close.",
            s.id,
            s.command,
            s.pid,
            s.cwd.display(),
            s.id
        ))
    }

    /// `terminal_send`.
    pub fn send(&self, args: &Value) -> Result<String, String> {
        let s = self.terminals.get(session_arg(args)?)?;
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        if text.len() > MAX_SEND {
            return Err(format!(
                "`text` is over {MAX_SEND} bytes; write it to a file (files_write) and have the program read it"
            ));
        }
        let keys: Vec<&str> = match args.get("keys") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(Value::as_str)
                .collect::<Option<_>>()
                .ok_or("`keys` must be an array of key names such as [\"Enter\"] or [\"C-c\"]")?,
            Some(Value::String(k)) => vec![k.as_str()],
            Some(_) => return Err("`keys` must be an array of key names such as [\"Enter\"] or [\"C-c\"]".into()),
        };
        if text.is_empty() && keys.is_empty() {
            return Err("give `text` (typed as is; end a command with \\n) and/or `keys` (e.g. [\"C-c\"])".into());
        }
        self.check_denied(&Cmd::Shell(text.to_owned()), "the text")?;
        let mut bytes = text.as_bytes().to_vec();
        for k in &keys {
            bytes.extend(key_bytes(k)?);
        }
        if let Some(e) = s.exit() {
            return Err(format!(
                "session {} has ended ({e}); read its last output with terminal_read, then terminal_close it",
                s.id
            ));
        }
        let n = bytes.len();
        s.send(bytes)?;
        Ok(format!(
            "sent {n} bytes to session {}; read the output with terminal_read",
            s.id
        ))
    }

    /// `terminal_read`.
    pub fn read(&self, args: &Value) -> Result<String, String> {
        let s = self.terminals.get(session_arg(args)?)?;
        let max = uint_arg(args, "max_bytes", DEFAULT_READ, MAX_READ)? as usize;
        let timeout = Duration::from_millis(uint_arg(args, "timeout_ms", DEFAULT_WAIT_MS, MAX_WAIT_MS)?);
        let until = match opt_str(args, "until") {
            Some(t) => Until::Text(t.to_owned()),
            None => Until::Quiet(QUIET),
        };
        let from = match args.get("offset") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or("`offset` must be a byte offset (a whole number)")?),
        };
        let ansi = bool_arg(args, "ansi");
        let chunk = s.read(from, max, &until, timeout);
        if opt_str(args, "format") == Some("json") {
            return Ok(json!({
                "session": s.id, "status": s.status(), "offset": chunk.offset, "next": chunk.next(),
                "dropped": chunk.dropped, "more": chunk.more,
                "data": String::from_utf8_lossy(&chunk.data),
            })
            .to_string());
        }
        Ok(render(&s.status(), s.id, &chunk, ansi, &until))
    }

    /// `terminal_close`.
    pub fn close(&self, args: &Value) -> Result<String, String> {
        let s = self.terminals.close(session_arg(args)?, "closed by terminal_close")?;
        let info = s.info();
        Ok(format!(
            "terminal session {} closed ({}); its processes were killed. {} bytes of output were never read.",
            s.id,
            s.status(),
            info["unread"]
        ))
    }

    /// `terminal_list`.
    pub fn list(&self) -> String {
        let list: Vec<Value> = self.terminals.list().iter().map(|s| s.info()).collect();
        json!({ "sessions": list }).to_string()
    }
}

fn render(status: &str, id: u32, c: &Chunk, ansi: bool, until: &Until) -> String {
    let mut head = format!("session {id} ({status}): ");
    if c.data.is_empty() {
        head.push_str("no new output");
        if let Until::Text(t) = until {
            head.push_str(&format!(
                " containing `{t}` yet (raise timeout_ms, or check what it is doing)"
            ));
        }
    } else {
        head.push_str(&format!("{} bytes", c.data.len()));
    }
    if c.dropped > 0 {
        head.push_str(&format!(
            "; {} older bytes were already dropped from the scrollback (plugin.terminal.scrollback_bytes)",
            c.dropped
        ));
    }
    if c.more > 0 {
        head.push_str(&format!(
            "; {} more bytes follow: read again (or raise max_bytes)",
            c.more
        ));
    }
    let body = if ansi {
        String::from_utf8_lossy(&c.data).into_owned()
    } else {
        text::plain(&c.data)
    };
    format!("{head}\n{body}")
}

fn parameters_of(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

/// The tool declarations.
pub fn registrations() -> Vec<ToolRegister> {
    let session = json!({"type": "integer", "description": "the session number terminal_create answered"});
    vec![
        ToolRegister {
            name: "terminal_create".into(),
            description: "Start an interactive terminal session on a real PTY that stays open across turns (use cmd_run for one-off \
                commands). Default: an interactive bash; or give `argv` (a program and its arguments) or `command` (a shell line, \
                e.g. \"python3\" or \"top\"). `cwd` must be inside the sandbox roots (default: the work directory). Answers the \
                session number for terminal_send / terminal_read / terminal_close. Sessions are capped in number and close after \
                a long idle time."
                .into(),
            parameters: parameters_of(
                json!({
                    "argv": {"type": "array", "items": {"type": "string"}},
                    "command": {"type": "string"},
                    "cwd": {"type": "string", "description": "working directory (default: the work directory)"},
                    "rows": {"type": "integer", "description": "default 30"},
                    "cols": {"type": "integer", "description": "default 120"}
                }),
                &[],
            ),
            paths: vec![PathArg::new("cwd", Access::Read)],
            ..ToolRegister::default()
        },
        ToolRegister {
            name: "terminal_send".into(),
            description: "Type into a terminal session: `text` is sent as is (end a shell command with \\n), then `keys` by name: \
                Enter, Tab, Esc, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, C-a..C-z (C-c interrupts, \
                C-d ends input). Read the effect with terminal_read."
                .into(),
            parameters: parameters_of(
                json!({"session": session, "text": {"type": "string"}, "keys": {"type": "array", "items": {"type": "string"}}}),
                &["session"],
            ),
            parallel_safe: true,
            ..ToolRegister::default()
        },
        ToolRegister {
            name: "terminal_read".into(),
            description: format!(
                "Read a terminal session's output since your last read. It waits up to `timeout_ms` (default {DEFAULT_WAIT_MS}, \
                 max {MAX_WAIT_MS}) for output to arrive and settle, or, with `until`, for the output to contain that text (e.g. \
                 the prompt or a word the command prints). At most `max_bytes` (default {DEFAULT_READ}, max {MAX_READ}) per read; \
                 it says when more follows. Escape sequences are applied and removed unless `ansi` is true. `offset` re-reads \
                 from an earlier byte offset without moving your position; `format: \"json\"` answers {{data, offset, next, ...}}."
            ),
            parameters: parameters_of(
                json!({
                    "session": session, "until": {"type": "string"}, "timeout_ms": {"type": "integer"},
                    "max_bytes": {"type": "integer"}, "ansi": {"type": "boolean"}, "offset": {"type": "integer"},
                    "format": {"type": "string", "enum": ["text", "json"]}
                }),
                &["session"],
            ),
            parallel_safe: true,
            ..ToolRegister::default()
        },
        ToolRegister {
            name: "terminal_close".into(),
            description: "End a terminal session: its program and everything it started in the session are killed.".into(),
            parameters: parameters_of(json!({ "session": session }), &["session"]),
            ..ToolRegister::default()
        },
        ToolRegister {
            name: "terminal_list".into(),
            description: "List the open terminal sessions (number, command, cwd, status, bytes of output, unread bytes).".into(),
            parameters: parameters_of(json!({}), &[]),
            parallel_safe: true,
            ..ToolRegister::default()
        },
    ]
    .into_iter()
    .map(|r| {
        let words = keywords_of(&r.name);
        r.with_keywords(words)
    })
    .collect()
}

/// Words a person may use when they need each tool (`ToolRegister::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "terminal_create" => {
            "open, start, interactive, shell, session, console, repl, ssh, htop, top, vim, \
             python shell, 终端, 交互, 打开, 控制台"
        }
        "terminal_send" => "type, press, keys, key, ctrl, enter, input, send, run in, 输入, 按键, 按下",
        "terminal_read" => "output, screen, showing, shows, see, display, printed, result, 输出, 屏幕, 显示",
        "terminal_close" => "close, exit, quit, kill, end, 关闭, 退出, 结束",
        "terminal_list" => "sessions, open terminals, running, 会话",
        _ => "",
    }
}

static KERNEL: OnceLock<Kernel> = OnceLock::new();

/// The plugin with its tools over `tools`.
pub fn plugin(tools: Arc<Tools>) -> Plugin {
    let mut p = Plugin::new("terminal");
    for reg in registrations() {
        let t = tools.clone();
        let name = reg.name.clone();
        p = p.tool_with_call(reg, move |args, call| match name.as_str() {
            "terminal_create" => t.create(&args, call),
            "terminal_send" => t.send(&args),
            "terminal_read" => t.read(&args),
            "terminal_close" => t.close(&args),
            _ => Ok(t.list()),
        });
    }
    p
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    let sink: session::Sink = Arc::new(|topic, data| {
        if let Some(k) = KERNEL.get()
            && let Err(e) = k.request(PluginRequest::EventsPublish(methods::EventsPublish {
                topic: topic.to_owned(),
                data,
            }))
        {
            eprintln!("terminal: cannot publish {topic}: {e}");
        }
    });
    let settings = Arc::new(|key: &str| KERNEL.get().and_then(|k| k.setting(key).ok()).unwrap_or(Value::Null));
    let tools = Arc::new(Tools::new(sink, settings));
    let result = plugin(tools.clone()).run(|k| {
        let _ = KERNEL.set(k);
        eprintln!("terminal plugin ready");
    });
    tools.terminals.close_all("the terminal plugin stopped");
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("terminal plugin: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests;
