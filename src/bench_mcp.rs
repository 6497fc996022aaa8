//! `homed bench mcp -- <server command> [args]`: a tool call through the MCP bridge.
//!
//! Runs the bundled bridge (`homed plugin mcp`) as the daemon would, with this process
//! playing the kernel's side of the plugin protocol: it hands the bridge one server
//! (`bench`) through `settings.get`, waits for `mcp__bench__echo` to be registered, then
//! times `tool.invoke` → the bridge → `tools/call` on the server → back. The same run
//! also times the plugin hop alone with a tool the bridge answers itself (a call to an
//! unknown tool, answered by the SDK without reaching the server).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use homeagent_plugin_protocol::frame::{Frame, Request, Response, decode, encode};
use homeagent_plugin_protocol::methods;
use serde_json::{Value, json};

struct Peer {
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    server: Value,
    tools: Vec<String>,
}

impl Peer {
    fn send(&mut self, f: &Frame) -> anyhow::Result<()> {
        self.stdin.write_all(&encode(f)?)?;
        Ok(self.stdin.flush()?)
    }

    /// Reads frames, answering the bridge's requests, until the response to `id`.
    fn until(&mut self, id: u64) -> anyhow::Result<Response> {
        loop {
            let line = self.lines.next().context("the bridge closed its stdout")??;
            match decode(line.as_bytes())? {
                Frame::Response(r) if r.id == id => return Ok(r),
                Frame::Response(_) => {}
                Frame::Request(r) => self.answer(r)?,
            }
        }
    }

    fn answer(&mut self, r: Request) -> anyhow::Result<()> {
        let result = match r.method.as_str() {
            methods::TOOL_REGISTER => {
                self.tools.push(r.params["name"].as_str().unwrap_or("").to_owned());
                json!({"ok": true})
            }
            methods::TOOL_UNREGISTER => {
                self.tools.retain(|t| r.params["name"] != t.as_str());
                json!({"ok": true})
            }
            methods::SETTINGS_GET => json!({"key": "servers", "value": {"bench": self.server}}),
            _ => json!({"ok": true}),
        };
        if r.id != 0 {
            self.send(&Frame::Response(Response {
                id: r.id,
                result: Some(result),
                error: None,
            }))?;
        }
        Ok(())
    }

    fn invoke(&mut self, id: u64, name: &str, args: Value) -> anyhow::Result<Response> {
        self.send(&Frame::Request(Request {
            id,
            method: methods::TOOL_INVOKE.into(),
            params: json!({"name": name, "args": args}),
        }))?;
        self.until(id)
    }
}

fn pct(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

pub fn mcp(server: &[String], calls: u32) -> anyhow::Result<()> {
    let (command, args) = server.split_first().context("give the MCP server's command after --")?;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["plugin", "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut peer = Peer {
        stdin: child.stdin.take().expect("piped"),
        lines: BufReader::new(child.stdout.take().expect("piped")).lines(),
        server: json!({"command": command, "args": args}),
        tools: Vec::new(),
    };
    let t0 = Instant::now();
    peer.send(&Frame::Request(Request {
        id: 1,
        method: methods::HANDSHAKE.into(),
        params: json!({"protocol": 1, "core_version": env!("CARGO_PKG_VERSION"), "plugin_name": "mcp"}),
    }))?;
    peer.until(1)?;
    // Poll with a cheap call until the echo tool is registered.
    let mut id = 10;
    while !peer.tools.iter().any(|t| t == "mcp__bench__echo") {
        if t0.elapsed() > Duration::from_secs(30) {
            bail!(
                "mcp__bench__echo was not registered within 30 s (tools: {:?})",
                peer.tools
            );
        }
        id += 1;
        peer.invoke(id, "nothing", json!({}))?;
        std::thread::sleep(Duration::from_millis(1));
    }
    let ready = t0.elapsed();
    let (mut bridged, mut hop) = (Vec::new(), Vec::new());
    for i in 0..calls + 50 {
        id += 1;
        let t = Instant::now();
        let r = peer.invoke(id, "mcp__bench__echo", json!({"message": format!("m{i}")}))?;
        let took = t.elapsed();
        let text = r.result.as_ref().and_then(|v| v["text"].as_str()).unwrap_or_default();
        if text != format!("Echo: m{i}") {
            bail!("unexpected answer: {r:?}");
        }
        id += 1;
        let t = Instant::now();
        peer.invoke(id, "nothing", json!({}))?;
        let took_hop = t.elapsed();
        if i >= 50 {
            bridged.push(took);
            hop.push(took_hop);
        }
    }
    println!(
        "bridge ready with {} tools {:?} after the handshake",
        peer.tools.len(),
        ready
    );
    println!(
        "tool.invoke → bridge → tools/call echo → back: p50 {:?}, p99 {:?} ({calls} calls)",
        pct(&mut bridged, 0.5),
        pct(&mut bridged, 0.99)
    );
    println!(
        "tool.invoke answered by the bridge itself:     p50 {:?}, p99 {:?}",
        pct(&mut hop, 0.5),
        pct(&mut hop, 0.99)
    );
    peer.send(&Frame::Request(Request {
        id: 0,
        method: methods::PLUGIN_STOP.into(),
        params: Value::Null,
    }))?;
    drop(peer);
    let _ = child.wait();
    Ok(())
}
