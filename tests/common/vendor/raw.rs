//! A vendor double that speaks HTTP/1.x as exact bytes over a raw `TcpListener`, so a
//! test chooses the response framing (Content-Length, chunked, close-delimited,
//! HTTP/1.0) and the failure (a stream cut off before its end marker, a vendor that
//! never answers, one that stalls mid-stream) — things a real HTTP server framework
//! will not produce on purpose.
//!
//! It answers the OpenAI Chat Completions wire format: a JSON completion, or SSE when
//! the request says `"stream": true`. The answer is always `"<label> answered"`, split
//! over two content deltas, so a test can tell which vendor produced a reply.
//!
//! Only `std` and `serde_json`: it is shared by the daemon's black-box tests
//! (`tests/common/vendor.rs`) and the kernel's actor tests (`actors/tests/llm_*.rs`).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `HTTP/1.1` with `Content-Length`.
    Length,
    /// `HTTP/1.1` with `Transfer-Encoding: chunked`, one chunk per SSE event.
    Chunked,
    /// `HTTP/1.1` with neither header and `Connection: close`: the body ends when the
    /// server closes the connection (RFC 9112 §6.3, rule 8).
    Close,
    /// An `HTTP/1.0` response without `Content-Length`: also ended by the close.
    Http10,
}

/// What the vendor does with the next requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A complete answer in this framing.
    Answer(Framing),
    /// The headers and the first content event (or the first half of the JSON), then
    /// the connection is closed: no finish chunk, no `[DONE]`, and for `Length` /
    /// `Chunked` a body shorter than announced.
    Cut(Framing),
    /// The headers and the first content event, then silence with the connection
    /// held open.
    Stall(Framing),
    /// Accepts the connection and never answers (nor reads the request, nor a TLS hello).
    Hang,
    /// HTTP 500 with a JSON error.
    Fail,
    /// The headers at once, then the answer one byte every [`DRIP_GAP`]: always
    /// "sending", never getting anywhere.
    Drip(Framing),
    /// HTTP 429 with `Retry-After: <seconds>`.
    RateLimited(u64),
}

/// The gap between two bytes of [`Mode::Drip`].
pub const DRIP_GAP: Duration = Duration::from_millis(200);

/// A running raw vendor. It lives until the test process ends.
pub struct RawVendor {
    /// The base URL for the OpenAI adapter (`http://127.0.0.1:<port>/v1`).
    pub url: String,
    /// Requests received (any mode).
    pub calls: Arc<AtomicUsize>,
    mode: Arc<Mutex<Mode>>,
    label: String,
}

impl RawVendor {
    /// Switches what the following requests get.
    pub fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The text every complete answer carries.
    pub fn reply(&self) -> String {
        reply_text(&self.label)
    }
}

fn reply_text(label: &str) -> String {
    format!("{label} answered")
}

/// Starts a raw vendor answering `"<label> answered"` in `mode`.
pub fn start(label: &str, mode: Mode) -> RawVendor {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mode = Arc::new(Mutex::new(mode));
    let (c, m, l) = (calls.clone(), mode.clone(), label.to_owned());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (c, m, l) = (c.clone(), m.clone(), l.clone());
            std::thread::spawn(move || serve(conn, &c, &m, &l));
        }
    });
    RawVendor {
        url: format!("http://{addr}/v1"),
        calls,
        mode,
        label: label.to_owned(),
    }
}

/// Reads one request (headers and a `Content-Length` body); `None` at EOF.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<Value> {
    let mut len = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if first {
            first = false;
            if !line.starts_with("POST ") {
                return None;
            }
        }
        let t = line.trim_end();
        if t.is_empty() {
            break;
        }
        if let Some((k, v)) = t.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn serve(conn: TcpStream, calls: &AtomicUsize, mode: &Mutex<Mode>, label: &str) {
    if *mode.lock().unwrap() == Mode::Hang {
        // Accept and never answer (not even a TLS handshake): the request is not read.
        calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(600));
        drop(conn);
        return;
    }
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    // Keep-alive: one connection may carry several requests (Length / Chunked).
    while let Some(req) = read_request(&mut r) {
        calls.fetch_add(1, Ordering::SeqCst);
        let mode = *mode.lock().unwrap();
        let stream = req["stream"].as_bool().unwrap_or(false);
        let keep_alive = respond(&mut w, mode, stream, label);
        if !keep_alive {
            return; // dropping both halves closes the connection
        }
    }
}

/// The SSE events of a complete streamed answer (the last one is `[DONE]`).
fn sse_events(text: &str) -> Vec<String> {
    let mid = text.len() / 2;
    let (a, b) = text.split_at(mid);
    let chunks = [
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": a}, "finish_reason": null}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": b}, "finish_reason": null}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
    ];
    let mut out: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn json_body(text: &str) -> String {
    json!({
        "id": "chatcmpl-raw", "object": "chat.completion", "created": 1, "model": "raw",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

/// Writes one response; returns whether the connection stays open for another request.
fn respond(w: &mut TcpStream, mode: Mode, stream: bool, label: &str) -> bool {
    let text = reply_text(label);
    let (framing, pieces, cut, stall) = match mode {
        Mode::Hang => {
            // Never answer; hold the connection until the client gives up.
            std::thread::sleep(Duration::from_secs(600));
            return false;
        }
        Mode::Fail => {
            let body = json!({"error": {"message": "raw vendor scripted failure"}}).to_string();
            let head = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = w.write_all(head.as_bytes());
            let _ = w.write_all(body.as_bytes());
            return true;
        }
        Mode::RateLimited(secs) => {
            let body = json!({"error": {"message": "rate limited: slow down", "type": "rate_limit_error"}}).to_string();
            let head = format!(
                "HTTP/1.1 429 Too Many Requests\r\nRetry-After: {secs}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = w.write_all(head.as_bytes());
            let _ = w.write_all(body.as_bytes());
            return true;
        }
        Mode::Drip(f) => {
            let content_type = if stream {
                "text/event-stream"
            } else {
                "application/json"
            };
            let mut head = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n");
            if f == Framing::Chunked {
                head.push_str("Transfer-Encoding: chunked\r\n");
            } else {
                head.push_str("Connection: close\r\n");
            }
            head.push_str("\r\n");
            if w.write_all(head.as_bytes()).is_err() {
                return false;
            }
            let _ = w.flush();
            for b in full_pieces(&text, stream).concat().bytes() {
                std::thread::sleep(DRIP_GAP);
                let ok = if f == Framing::Chunked {
                    w.write_all(format!("1\r\n{}\r\n", b as char).as_bytes())
                } else {
                    w.write_all(&[b])
                };
                if ok.is_err() || w.flush().is_err() {
                    return false;
                }
            }
            return false;
        }
        Mode::Answer(f) => (f, full_pieces(&text, stream), false, false),
        Mode::Cut(f) => (f, full_pieces(&text, stream), true, false),
        Mode::Stall(f) => (f, full_pieces(&text, stream), false, true),
    };
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let full_len: usize = pieces.iter().map(String::len).sum();
    // A cut or stalled answer sends only its first piece (a stream's first content
    // event; the first half of a JSON body).
    let sent: Vec<String> = if cut || stall {
        if stream {
            pieces[..1].to_vec()
        } else {
            let j = &pieces[0];
            vec![j[..j.len() / 2].to_owned()]
        }
    } else {
        pieces
    };
    let status_line = if framing == Framing::Http10 {
        "HTTP/1.0 200 OK"
    } else {
        "HTTP/1.1 200 OK"
    };
    let mut head = format!("{status_line}\r\nContent-Type: {content_type}\r\n");
    match framing {
        Framing::Length => head.push_str(&format!("Content-Length: {full_len}\r\n")),
        Framing::Chunked => head.push_str("Transfer-Encoding: chunked\r\n"),
        Framing::Close => head.push_str("Connection: close\r\n"),
        Framing::Http10 => {}
    }
    head.push_str("\r\n");
    if w.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let _ = w.flush();
    for p in &sent {
        let ok = match framing {
            Framing::Chunked => w.write_all(format!("{:x}\r\n{p}\r\n", p.len()).as_bytes()),
            _ => w.write_all(p.as_bytes()),
        };
        if ok.is_err() {
            return false;
        }
        let _ = w.flush();
        // Separate writes so a streaming client sees the events arrive one by one.
        std::thread::sleep(Duration::from_millis(5));
    }
    if stall {
        std::thread::sleep(Duration::from_secs(600));
        return false;
    }
    if cut {
        return false;
    }
    match framing {
        Framing::Chunked => {
            let _ = w.write_all(b"0\r\n\r\n");
            let _ = w.flush();
            true
        }
        Framing::Length => true,
        Framing::Close | Framing::Http10 => false,
    }
}

fn full_pieces(text: &str, stream: bool) -> Vec<String> {
    if stream {
        sse_events(text)
    } else {
        vec![json_body(text)]
    }
}
