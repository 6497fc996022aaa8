//! The OpenAI-compatible API (`/v1`) of a real daemon: its wire format byte by byte,
//! real token streaming (a token reaches the client while the vendor is still in the
//! middle of its answer), and the official `openai` Python SDK (pinned in
//! tests/openai/requirements.txt, installed by scripts/install-openai-sdk.sh) talking
//! to it, streamed and not.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::api::{daemon_with_vendor, put_settings, wait_sources};
use common::vendor::raw::{self, Framing, Mode};
use common::{Daemon, vendor};
use serde_json::{Value, json};

/// The `data:` payloads of an SSE body, in order.
fn data_lines(body: impl BufRead) -> Vec<String> {
    let mut out = Vec::new();
    for line in body.lines() {
        let line = line.unwrap();
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let data = line
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("not an SSE data line: {line:?}"));
        out.push(data.to_owned());
    }
    out
}

fn chat(d: &Daemon, body: Value) -> reqwest::blocking::Response {
    d.client()
        .post(d.url("/v1/chat/completions"))
        .timeout(Duration::from_secs(60))
        .json(&body)
        .send()
        .unwrap()
}

#[test]
fn the_wire_format_is_openais_and_the_agents_tool_calls_stay_inside() {
    let (_dir, _data, d, v) = daemon_with_vendor();

    // The owner token is the key; without it, OpenAI's error shape.
    let r = reqwest::blocking::get(d.url("/v1/models")).unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let body: Value = r.json().unwrap();
    assert_eq!(body["error"]["type"], "authentication_error", "{body}");
    assert_eq!(body["error"]["code"], "invalid_api_key", "{body}");
    let models: Value = d.client().get(d.url("/v1/models")).send().unwrap().json().unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "homeagent", "{models}");
    let r = d.client().get(d.url("/v1/models/gpt-4")).send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.json::<Value>().unwrap()["error"]["code"], "model_not_found");

    // Non-streamed: the last user message is the input, the rest is not replayed.
    let r = chat(
        &d,
        json!({"model": "anything", "temperature": 0.1, "messages": [
            {"role": "system", "content": "you are a pirate"},
            {"role": "user", "content": "an older question"},
            {"role": "assistant", "content": "an older answer"},
            {"role": "user", "content": "what is new?"}
        ]}),
    );
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"), "{body}");
    assert_eq!(body["model"], "homeagent");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: what is new?");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0, "{body}");
    let sent = v.last.lock().unwrap().to_string();
    assert!(sent.contains("what is new?"), "{sent}");
    assert!(
        !sent.contains("you are a pirate") && !sent.contains("an older answer"),
        "the client's system and assistant messages are not replayed: {sent}"
    );

    // Streamed: chat.completion.chunk events, the vendor's deltas one by one, [DONE].
    let r = chat(
        &d,
        json!({"model": "homeagent", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "user", "content": "stream it"}]}),
    );
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{:?}",
        r.headers()
    );
    let lines = data_lines(BufReader::new(r));
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"), "{lines:?}");
    let chunks: Vec<Value> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let id = chunks[0]["id"].clone();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        assert_eq!(c["id"], id, "one id per response");
        assert_eq!(c["model"], "homeagent");
    }
    let texts: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(texts.concat(), "echo: stream it");
    assert!(
        texts.len() >= 2,
        "the vendor's two deltas arrive as two chunks: {texts:?}"
    );
    let finish: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0]["choices"][0]["finish_reason"], "stop");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]), "the usage chunk comes last: {usage}");
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // The agent's own tool call: the client gets its answer, never its tool_calls.
    let r = chat(
        &d,
        json!({"model": "homeagent", "stream": true,
               "messages": [{"role": "user", "content": "call-tool memory_recall {\"query_intent\":\"nothing\"}"}]}),
    );
    let lines = data_lines(BufReader::new(r));
    let all = lines.join("\n");
    assert!(!all.contains("tool_calls"), "{all}");
    let text: String = lines
        .iter()
        .filter(|l| *l != "[DONE]")
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "tool said: No related memory found");
    let r = chat(
        &d,
        json!({"messages": [{"role": "user", "content": "call-tool memory_recall {\"query_intent\":\"again\"}"}]}),
    );
    let body: Value = r.json().unwrap();
    assert!(body["choices"][0]["message"].get("tool_calls").is_none(), "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "tool said: No related memory found"
    );

    // What the agent cannot honour: 400 naming the field, in OpenAI's shape.
    for (body, param) in [
        (json!({"messages": [{"role": "user", "content": "x"}], "n": 3}), "n"),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]}),
            "tools",
        ),
        (json!({"messages": [{"role": "assistant", "content": "x"}]}), "messages"),
    ] {
        let r = chat(&d, body.clone());
        assert_eq!(r.status().as_u16(), 400, "{body}");
        let e: Value = r.json().unwrap();
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(e["error"]["param"], param, "{e}");
    }
    // The gate and the parser answer in OpenAI's shape too.
    let r = d
        .client()
        .post(d.url("/v1/chat/completions"))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    assert!(r.json::<Value>().unwrap()["error"]["message"].is_string());
    let r = d
        .client()
        .post(d.url("/v1/chat/completions"))
        .json(&json!({"messages": 5}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(
        r.json::<Value>().unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid JSON")
    );
    let r = d.client().get(d.url("/v1/embeddings")).send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.json::<Value>().unwrap()["error"]["type"], "invalid_request_error");
    let r = d
        .client()
        .post(d.url("/v1/chat/completions"))
        .header("origin", "https://evil.example")
        .json(&json!({"messages": [{"role": "user", "content": "x"}]}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403, "a cross-site page cannot drive the agent");
}

/// A spent budget answers as OpenAI answers a spent quota: 429 `insufficient_quota`,
/// with the limit and when it resets; no vendor is called.
#[test]
fn a_spent_budget_is_a_429_insufficient_quota() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    common::api::put_settings(&d, json!({"core.llm.budget.daily_tokens": 1}));
    common::api::wait_for(&d, "/api/v1/llm/sources", "the budget applied", |s| {
        s["budget"]["daily_tokens"] == 1
    });
    let r = chat(
        &d,
        json!({"model": "homeagent", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r.status().as_u16(), 429);
    let body: Value = r.json().unwrap();
    assert_eq!(body["error"]["code"], "insufficient_quota", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("core.llm.budget.daily_tokens"),
        "{body}"
    );
    assert_eq!(v.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn a_token_reaches_the_client_while_the_vendor_is_still_answering() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    // The vendor sends its first delta and then stays silent with the connection open.
    let v = raw::start("stall", Mode::Stall(Framing::Chunked));
    let mut settings = vendor::source_settings("main", &v.url, 0);
    settings["core.llm.sources.main.idle_timeout"] = json!("1s");
    put_settings(&d, settings);
    wait_sources(&d, 1);
    let r = chat(
        &d,
        json!({"model": "homeagent", "stream": true, "messages": [{"role": "user", "content": "tell me"}]}),
    );
    assert_eq!(r.status().as_u16(), 200);
    let mut lines = BufReader::new(r).lines();
    let first_text = loop {
        let line = lines.next().expect("the stream ended before any text").unwrap();
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let c: Value = serde_json::from_str(data).unwrap();
        if let Some(t) = c["choices"][0]["delta"]["content"].as_str().filter(|t| !t.is_empty()) {
            break t.to_owned();
        }
    };
    // The vendor never sent the rest: this token came through the turn as it streamed.
    let full = v.reply();
    assert_eq!(first_text, full[..full.len() / 2]);
    // Its silence past the idle timeout fails the task: an error event, no [DONE].
    let rest: Vec<String> = lines.map(Result::unwrap).filter(|l| l.starts_with("data: ")).collect();
    let last = rest.last().expect("an error event ends the stream");
    let e: Value = serde_json::from_str(last.trim_start_matches("data: ")).unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains("idle"), "{e}");
    assert!(!rest.iter().any(|l| l == "data: [DONE]"), "{rest:?}");
}

/// The venv of scripts/install-openai-sdk.sh.
fn sdk_python() -> Option<PathBuf> {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".deps/openai-py/bin/python");
    py.exists().then_some(py)
}

#[test]
fn the_official_python_sdk_chats_with_the_agent_streamed_and_not() {
    let Some(python) = sdk_python() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the openai SDK is missing in CI: scripts/test must run scripts/install-openai-sdk.sh"
        );
        eprintln!("SKIPPED: run `bash scripts/install-openai-sdk.sh` for the OpenAI SDK test");
        return;
    };
    let (_dir, _data, d, v) = daemon_with_vendor();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openai/client.py");
    let out = Command::new(python)
        .arg(script)
        .arg(d.url("/v1"))
        .arg(d.token())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client.py failed:\n{stderr}\nlog:\n{}",
        d.log_text()
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let want_version =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openai/requirements.txt"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("openai==").map(str::to_owned))
            .unwrap();
    assert_eq!(r["sdk_version"], want_version.as_str(), "the pinned SDK: {r}");
    assert_eq!(r["models"], json!(["homeagent"]), "{r}");

    assert_eq!(r["plain"]["object"], "chat.completion", "{r}");
    assert_eq!(r["plain"]["model"], "homeagent");
    assert_eq!(r["plain"]["content"], "echo: hello from the python sdk");
    assert_eq!(r["plain"]["finish_reason"], "stop");
    assert!(r["plain"]["tool_calls"].is_null());
    assert!(r["plain"]["total_tokens"].as_u64().unwrap() > 0);

    assert_eq!(r["stream"]["text"], "echo: stream this please", "{r}");
    assert!(r["stream"]["chunks"].as_array().unwrap().len() >= 2, "{r}");
    assert_eq!(r["stream"]["finish_reason"], "stop");
    assert!(r["stream"]["total_tokens"].as_u64().unwrap() > 0, "{r}");

    assert_eq!(r["tool_stream"], "tool said: No related memory found", "{r}");
    assert!(r.get("leaked_tool_calls").is_none(), "{r}");

    assert_eq!(r["wrong_key"]["status"], 401, "{r}");
    assert!(
        r["wrong_key"]["message"].as_str().unwrap().contains("DATA/api-token"),
        "{r}"
    );
    assert_eq!(r["n2"]["status"], 400, "{r}");
    assert_eq!(r["n2"]["param"], "n", "{r}");

    // The vendor saw the SDK's user message as the agent's input, not its system one.
    let prompts = v.all.lock().unwrap().clone();
    let all = serde_json::to_string(&prompts).unwrap();
    assert!(all.contains("hello from the python sdk") && !all.contains("ignored by the agent"));
}

#[test]
fn the_official_js_sdk_chats_with_the_agent_streamed_and_not() {
    let js = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openai/js");
    if !js.join("node_modules/openai/package.json").exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the openai JS SDK is missing in CI: scripts/test must run scripts/install-openai-sdk.sh"
        );
        eprintln!("SKIPPED: run `bash scripts/install-openai-sdk.sh` for the OpenAI JS SDK test");
        return;
    }
    let (_dir, _data, d, _v) = daemon_with_vendor();
    let out = Command::new("node")
        .arg(js.join("client.mjs"))
        .arg(d.url("/v1"))
        .arg(d.token())
        .current_dir(&js)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .expect("node (Node >= 20) runs the JS SDK test");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client.mjs failed:\n{stderr}\nlog:\n{}",
        d.log_text()
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(r["models"], json!(["homeagent"]), "{r}");
    assert_eq!(r["plain"]["object"], "chat.completion", "{r}");
    assert_eq!(r["plain"]["content"], "echo: hello from the js sdk");
    assert_eq!(r["plain"]["finish_reason"], "stop");
    assert!(r["plain"]["tool_calls"].is_null());
    assert_eq!(r["stream"]["text"], "echo: stream from js", "{r}");
    assert!(r["stream"]["chunks"].as_array().unwrap().len() >= 2, "{r}");
    assert_eq!(r["stream"]["finish_reason"], "stop");
    assert!(r["stream"]["total_tokens"].as_u64().unwrap() > 0, "{r}");
    assert!(r.get("leaked_tool_calls").is_none(), "{r}");
    assert_eq!(r["wrong_key"]["status"], 401, "{r}");
    assert_eq!(r["wrong_key"]["name"], "AuthenticationError", "{r}");
}
