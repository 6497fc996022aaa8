//! Where the microseconds of a subprocess plugin's tool-call round trip go, measured
//! layer by layer with the same frames the kernel sends (`tool.invoke` of a tool with
//! no arguments and its `ToolResult`), each layer a separate child process of this
//! program talking over stdin/stdout pipes:
//!
//! 1. `pipe`: a fixed line each way, no JSON — two pipe writes and two wake-ups;
//! 2. `json`: the protocol's codec on both sides (`frame::encode`/`decode`, the
//!    `ToolInvoke`/`ToolResult` params), answered on the reading thread;
//! 3. `json+thread`: the same, answered from a thread spawned per call (what the SDK
//!    does, so a slow tool never blocks the read loop);
//! 4. `sdk`: the real SDK (`sdk::Plugin` with one tool) after a real handshake (its
//!    tool calls run on reused worker threads, `sdk::Workers`);
//!
//! plus the codec alone, in process (encode + decode of both frames).
//!
//! The kernel's own share (actix: the tool handler's future, the connection's
//! writer task, the reader task's dispatch, the oneshot back) is what
//! `homed bench plugin` adds on top of layer 4.
//!
//! Run: `cargo run --release -p homeagent-plugin-protocol --example rtt_breakdown [calls]`

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use homeagent_plugin_protocol::frame::{Frame, Request, Response, decode, encode};
use homeagent_plugin_protocol::methods::{self, ToolInvoke, ToolRegister, ToolResult};
use homeagent_plugin_protocol::{PROTOCOL_VERSION, handshake, sdk};
use serde_json::{Value, json};

const RAW_REQ: &[u8] = br#"{"id":7,"method":"tool.invoke","params":{"name":"noop","args":{}}}"#;
const RAW_RESP: &[u8] = br#"{"id":7,"result":{"text":"ok"}}"#;

fn invoke_frame(id: u64) -> Frame {
    Frame::Request(Request {
        id,
        method: methods::TOOL_INVOKE.into(),
        params: serde_json::to_value(ToolInvoke {
            name: "noop".into(),
            args: json!({}),
        })
        .unwrap(),
    })
}

fn answer(req: Request) -> Vec<u8> {
    let inv: ToolInvoke = serde_json::from_value(req.params).unwrap();
    assert_eq!(inv.name, "noop");
    let resp = Response::ok(req.id, serde_json::to_value(ToolResult { text: "ok".into() }).unwrap());
    encode(&Frame::Response(resp)).unwrap()
}

/// The child side of layers 1–4.
fn child(mode: &str) {
    if mode == "sdk" {
        let reg = ToolRegister {
            name: "noop".into(),
            description: "does nothing".into(),
            parameters: json!({"type": "object"}),
            ..ToolRegister::default()
        };
        sdk::Plugin::new("rtt")
            .tool(reg, |_| Ok("ok".into()))
            .run(|_| {})
            .unwrap();
        return;
    }
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        match mode {
            "pipe" => {
                let mut o = out.lock().unwrap();
                o.write_all(RAW_RESP).unwrap();
                o.write_all(b"\n").unwrap();
                o.flush().unwrap();
            }
            "json" | "json+thread" => {
                let Frame::Request(req) = decode(line.as_bytes()).unwrap() else {
                    panic!("a request")
                };
                let send = move |out: &std::sync::Mutex<std::io::Stdout>, req: Request| {
                    let bytes = answer(req); // newline included
                    let mut o = out.lock().unwrap();
                    o.write_all(&bytes).unwrap();
                    o.flush().unwrap();
                };
                if mode == "json" {
                    send(&out, req);
                } else {
                    let out = out.clone();
                    std::thread::spawn(move || send(&out, req));
                }
            }
            other => panic!("unknown mode {other}"),
        }
    }
}

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (p(0.5), p(0.99))
}

/// Drives one child through `calls` round trips (after 200 warm-up); µs each.
fn layer(mode: &str, calls: usize) -> Vec<f64> {
    let exe = std::env::current_exe().unwrap();
    let mut c = Command::new(exe)
        .args(["child", mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let mut stdout = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    let mut read_response = |stdout: &mut BufReader<_>, stdin: &mut std::process::ChildStdin| -> Response {
        loop {
            line.clear();
            stdout.read_line(&mut line).unwrap();
            match decode(line.trim_end().as_bytes()).unwrap() {
                Frame::Response(r) => return r,
                // The SDK registers its tool: answer like the kernel.
                Frame::Request(r) if r.id != 0 => {
                    let ok = encode(&Frame::Response(Response::ok(r.id, json!({"ok": true})))).unwrap();
                    stdin.write_all(&ok).unwrap();
                    stdin.flush().unwrap();
                }
                Frame::Request(_) => {}
            }
        }
    };
    if mode == "sdk" {
        let hs = Frame::Request(Request {
            id: 1,
            method: handshake::METHOD.into(),
            params: serde_json::to_value(handshake::HandshakeParams {
                protocol: PROTOCOL_VERSION,
                core_version: "bench".into(),
                plugin_name: "rtt".into(),
                clock: None,
            })
            .unwrap(),
        });
        stdin.write_all(&encode(&hs).unwrap()).unwrap();
        stdin.flush().unwrap();
        let r = read_response(&mut stdout, &mut stdin);
        assert_eq!(r.id, 1, "the handshake's answer");
    }
    let mut out = Vec::with_capacity(calls);
    let mut raw = String::new();
    for i in 0..calls + 200 {
        let id = 10 + i as u64;
        let t = Instant::now();
        if mode == "pipe" {
            stdin.write_all(RAW_REQ).unwrap();
            stdin.write_all(b"\n").unwrap();
            stdin.flush().unwrap();
            raw.clear();
            stdout.read_line(&mut raw).unwrap();
        } else {
            let bytes = encode(&invoke_frame(id)).unwrap();
            stdin.write_all(&bytes).unwrap();
            stdin.flush().unwrap();
            let r = read_response(&mut stdout, &mut stdin);
            assert_eq!(r.id, id);
            let text: ToolResult = serde_json::from_value(r.result.unwrap_or(Value::Null)).unwrap();
            assert_eq!(text.text, "ok");
        }
        if i >= 200 {
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    drop(stdin);
    let _ = c.wait();
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        return child(&args[2]);
    }
    let calls: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    // The codec alone, in process: both frames encoded and decoded.
    let t = Instant::now();
    for i in 0..calls {
        let req = encode(&invoke_frame(i as u64)).unwrap();
        let Frame::Request(r) = decode(&req).unwrap() else {
            unreachable!()
        };
        let resp = answer(r);
        let Frame::Response(r) = decode(&resp).unwrap() else {
            unreachable!()
        };
        let _: ToolResult = serde_json::from_value(r.result.unwrap()).unwrap();
    }
    let codec = t.elapsed().as_secs_f64() * 1e6 / calls as f64;
    println!("subprocess tool-call round trip, layer by layer, {calls} calls each (after 200 warm-up), µs");
    println!("  codec alone (encode+decode of request and answer, in process)  mean {codec:>7.2}");
    let mut prev = 0.0;
    for (mode, what) in [
        ("pipe", "two pipe writes + two wake-ups, no JSON"),
        ("json", "+ the protocol's codec on both sides"),
        ("json+thread", "+ a thread spawned per call (as the SDK)"),
        ("sdk", "the real SDK plugin after a handshake (its worker pool)"),
    ] {
        let (p50, p99) = stats(layer(mode, calls));
        println!(
            "  {mode:<12} p50 {p50:>7.1}  p99 {p99:>7.1}  (p50 {:+.1} over the layer above)  {what}",
            if prev == 0.0 { 0.0 } else { p50 - prev }
        );
        prev = p50;
    }
}
