//! Turn traces over OTLP/HTTP: a real daemon pointed (by one setting) at a local
//! receiver that decodes the protobuf the OpenTelemetry exporter sends, as a collector
//! would. A turn that recalls, calls the model twice and runs a tool arrives as one
//! trace: `turn` with `recall`, each `llm_call` (the source that answered, its tokens)
//! and the `tool_call` as its children. Clearing the setting stops the export.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::api::{daemon_with_vendor, post, put_settings};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

/// An OTLP/HTTP receiver on 127.0.0.1: each `POST /v1/traces` body decoded as an
/// `ExportTraceServiceRequest` (a body that does not decode fails the test).
fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got: Received = Arc::default();
    let g = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let g = g.clone();
            std::thread::spawn(move || serve(stream, &g));
        }
    });
    (url, got)
}

fn serve(stream: TcpStream, got: &Received) {
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line.split(' ').nth(1).unwrap_or("").to_owned();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).unwrap();
        assert_eq!(path, "/v1/traces", "the exporter posts to the traces path");
        let req = ExportTraceServiceRequest::decode(&body[..]).expect("an OTLP protobuf body");
        got.lock().unwrap().push(req);
        let _ = out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
    }
}

fn spans(got: &Received) -> Vec<Span> {
    got.lock()
        .unwrap()
        .iter()
        .flat_map(|r| r.resource_spans.iter())
        .flat_map(|r| r.scope_spans.iter())
        .flat_map(|s| s.spans.iter().cloned())
        .collect()
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| {
        a.value.as_ref().and_then(|v| match &v.value {
            Some(AnyValue::StringValue(s)) => Some(s.clone()),
            Some(AnyValue::IntValue(i)) => Some(i.to_string()),
            Some(AnyValue::BoolValue(b)) => Some(b.to_string()),
            _ => None,
        })
    })
}

#[test]
fn a_turn_arrives_at_the_collector_as_one_trace_of_recall_model_and_tool_calls() {
    let (url, got) = receiver();
    let (_dir, _data, d, _v) = daemon_with_vendor();
    put_settings(&d, json!({"core.telemetry.otlp_endpoint": url}));
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "call-tool knowledge_list {}"}));
    assert_eq!(status, 200, "{body}");

    let deadline = Instant::now() + Duration::from_secs(20);
    let (turn, children) = loop {
        let all = spans(&got);
        if let Some(turn) = all.iter().find(|s| s.name == "turn" && s.parent_span_id.is_empty()) {
            let children: Vec<Span> = all
                .iter()
                .filter(|s| s.trace_id == turn.trace_id && s.parent_span_id == turn.span_id)
                .cloned()
                .collect();
            if children.iter().any(|s| s.name == "tool_call")
                && children.iter().filter(|s| s.name == "llm_call").count() >= 2
            {
                break (turn.clone(), children);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no complete turn trace at the collector: {:?}\n{}",
            all.iter().map(|s| &s.name).collect::<Vec<_>>(),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let names: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"recall"), "{names:?}");
    let tool = children.iter().find(|s| s.name == "tool_call").unwrap();
    assert_eq!(attr(tool, "tool").as_deref(), Some("knowledge_list"));
    let llm = children.iter().find(|s| s.name == "llm_call").unwrap();
    assert_eq!(attr(llm, "source").as_deref(), Some("fake"), "{llm:?}");
    assert_eq!(attr(llm, "purpose").as_deref(), Some("owner_turn"), "{llm:?}");
    assert!(attr(llm, "input_tokens").is_some(), "{llm:?}");
    assert!(
        turn.end_time_unix_nano >= tool.end_time_unix_nano,
        "the turn spans its calls"
    );
    let service = got.lock().unwrap()[0].resource_spans[0]
        .resource
        .as_ref()
        .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name").cloned());
    assert!(format!("{service:?}").contains("homed"), "{service:?}");
    // Only the turn's spans leave: no log line, no other span of the daemon.
    let all = spans(&got);
    assert!(
        all.iter()
            .all(|s| ["turn", "recall", "llm_call", "tool_call"].contains(&s.name.as_str())),
        "{:?}",
        all.iter().map(|s| &s.name).collect::<Vec<_>>()
    );

    // Cleared: the next turn is not exported.
    put_settings(&d, json!({"core.telemetry.otlp_endpoint": ""}));
    std::thread::sleep(Duration::from_millis(300));
    let before = spans(&got).len();
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "not traced"}));
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        spans(&got).len(),
        before,
        "a turn was exported after the setting was cleared"
    );
}
