//! `waiter`: the terminal client of a running `homed` (NDJSON over its Unix socket).

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// Talk to a running homed from the terminal: `waiter`, or `echo text | waiter`.
#[derive(Debug, Parser)]
#[command(name = "waiter", version, about)]
struct Args {
    /// The daemon's CLI socket.
    #[arg(long, default_value = "./data/cli.sock", env = "HOMED_SOCKET")]
    socket: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stream = UnixStream::connect(&args.socket).with_context(|| {
        format!(
            "cannot connect to {}: is homed running with this data directory? (pass --socket PATH to pick another daemon)",
            args.socket.display()
        )
    })?;
    let mut writer = stream.try_clone()?;
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            match line {
                Ok(l) => println!("{l}"),
                Err(_) => break,
            }
        }
    });
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        writeln!(writer, "{}", serde_json::json!({ "text": line }))?;
    }
    if !interactive {
        let _ = writer.shutdown(std::net::Shutdown::Write);
    }
    let _ = reader.join();
    Ok(())
}
