//! `GET /metrics`, black box: parsed by a Prometheus text parser, counting the turns
//! the daemon really ran, behind the owner's token.

mod common;

use common::api::{daemon_with_vendor, post};
use serde_json::json;

#[test]
fn metrics_parse_as_prometheus_text_and_count_the_turns() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    for i in 0..2 {
        let (status, body) = post(&d, "/api/v1/messages", json!({"text": format!("metric me {i}")}));
        assert_eq!(status, 200, "{body}");
    }
    let anonymous = reqwest::blocking::Client::new().get(d.url("/metrics")).send().unwrap();
    assert_eq!(anonymous.status().as_u16(), 401, "metrics are the owner's");

    let read = || {
        let r = d.client().get(d.url("/metrics")).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let text = r.text().unwrap();
        let lines: Vec<std::io::Result<String>> = text.lines().map(|l| Ok(l.to_owned())).collect();
        let scrape = prometheus_parse::Scrape::parse(lines.into_iter()).expect("Prometheus text");
        (text, scrape)
    };
    let value = |s: &prometheus_parse::Scrape, name: &str, label: (&str, &str)| -> Option<f64> {
        s.samples
            .iter()
            .find(|x| x.metric == name && x.labels.get(label.0) == Some(label.1))
            .map(|x| match x.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    };
    // The turn counter follows the bus: give the second turn's end a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (text, scrape) = loop {
        let (text, scrape) = read();
        if value(&scrape, "homed_turns_total", ("outcome", "done")).is_some_and(|v| v >= 2.0) {
            break (text, scrape);
        }
        assert!(std::time::Instant::now() < deadline, "two turns not counted:\n{text}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        value(&scrape, "homed_llm_calls_total", ("kind", "owner_turn")).is_some_and(|v| v >= 2.0),
        "{text}"
    );
    assert!(
        value(&scrape, "homed_llm_input_tokens_total", ("kind", "owner_turn")).is_some_and(|v| v >= 20.0),
        "{text}"
    );
    assert!(
        value(&scrape, "homed_actor_mailbox_depth", ("actor", "kernel/llm")).is_some(),
        "{text}"
    );
    assert!(
        value(&scrape, "homed_queue_length", ("queue", "ready")).is_some(),
        "{text}"
    );
    assert!(
        text.contains("homed_turn_duration_seconds_bucket"),
        "the latency histogram is exported:\n{text}"
    );
    // Each turn's recall is timed: two turns, two observations.
    let recalls = text
        .lines()
        .find_map(|l| l.strip_prefix("homed_recall_duration_seconds_count "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(recalls.is_some_and(|n| n >= 2.0), "recall latency counted:\n{text}");
}
