//! `waiter`: the terminal client of a running `homed` (its CLI socket).
//!
//! Interactive (`waiter`) or scripted (`echo "hello" | waiter`): every line is sent,
//! and its answer printed before the next line is read. Lines starting with `/` are
//! daemon commands (`/help` lists them).

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde_json::Value;

/// waiter: the terminal client of a running homed.
///
/// Every line read from the terminal (or from a pipe: `echo "hello" | waiter`) is sent
/// to the daemon over its CLI socket and answered before the next one is read. A line
/// is a message to the agent, unless it starts with `/`: then it is a daemon command
/// (`/help`, `/status`, `/settings [prefix]`, `/settings set <key> <value>`,
/// `/plugin list`), answered by the daemon itself; an unknown `/command` gets the list
/// of commands and is never sent to the agent. Exits non-zero when any answer was an
/// error.
#[derive(Debug, Parser)]
// No bare `about`: that would show the package's description, which is the daemon's;
// the doc comment above is waiter's own help.
#[command(name = "waiter", version)]
struct Args {
    /// The daemon's CLI socket.
    #[arg(long, default_value = "./data/cli.sock", env = "HOMED_SOCKET")]
    socket: PathBuf,
    /// The key, when the daemon sets `plugin.cli.api_key`.
    #[arg(long, env = "HOMED_CLI_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

/// Sends one line and reads its answer: `Ok(content)` or `Err(error)`. A message to
/// the agent streams first: each delta is printed as it comes, each tool call that
/// ends as a line on stderr; what the answer holds beyond the streamed text is printed
/// with the answer (`Ok` then carries only that rest).
fn exchange(
    stream: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    line: &str,
) -> std::io::Result<Result<String, String>> {
    writeln!(stream, "{line}")?;
    let mut streamed = String::new();
    let mut out = std::io::stdout();
    loop {
        let mut answer = String::new();
        if reader.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            ));
        }
        let v: Value = serde_json::from_str(&answer).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad answer from the daemon: {e}"),
            )
        })?;
        let text = |k: &str| v[k].as_str().unwrap_or("").to_owned();
        match v["type"].as_str() {
            Some("delta") => {
                let t = text("content");
                streamed.push_str(&t);
                write!(out, "{t}")?;
                out.flush()?;
            }
            Some("tool") => {
                if !streamed.is_empty() && !streamed.ends_with('\n') {
                    writeln!(out)?;
                    streamed.push('\n');
                }
                out.flush()?;
                eprintln!("  [{} · {}]", text("name"), text("status"));
            }
            Some("response") => {
                let content = text("content");
                return Ok(Ok(homeagent::turn_stream::remainder(&streamed, &content).to_owned()));
            }
            _ => {
                if !streamed.is_empty() {
                    writeln!(out)?;
                }
                return Ok(Err(if v["error"].is_string() {
                    text("error")
                } else {
                    "unknown error".to_owned()
                }));
            }
        }
    }
}

fn main() -> ExitCode {
    use homeagent_actors::i18n::{Lang, Msg, set_language};
    let args = Args::parse();
    // A command-line client speaks its locale's language (LANG), as Unix tools do.
    set_language(Lang::from_env());
    let mut stream = match UnixStream::connect(&args.socket) {
        Ok(s) => s,
        Err(e) => {
            let path = args.socket.display().to_string();
            eprintln!(
                "{}",
                Msg::WaiterNoDaemon {
                    path: &path,
                    error: &e.to_string()
                }
                .text()
            );
            return ExitCode::FAILURE;
        }
    };
    let mut reader = BufReader::new(stream.try_clone().expect("clone socket"));
    if let Some(key) = &args.api_key {
        match exchange(&mut stream, &mut reader, &format!("/auth {key}")) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                eprintln!("{}", Msg::WaiterBadKey { error: &e }.text());
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("{}", Msg::WaiterFailed { error: &e.to_string() }.text());
                return ExitCode::FAILURE;
            }
        }
    }
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    let mut failed = false;
    loop {
        if interactive {
            print!("> ");
            let _ = std::io::stdout().flush();
        }
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("{}", Msg::WaiterFailed { error: &e.to_string() }.text());
                return ExitCode::FAILURE;
            }
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match exchange(&mut stream, &mut reader, line) {
            Ok(Ok(content)) => println!("{content}"),
            Ok(Err(e)) => {
                eprintln!("{}", Msg::AnswerError { error: &e }.text());
                failed = true;
            }
            Err(e) => {
                eprintln!("{}", Msg::WaiterFailed { error: &e.to_string() }.text());
                return ExitCode::FAILURE;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
