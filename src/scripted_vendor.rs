//! A scripted OpenAI-compatible vendor on 127.0.0.1 for `homed eval locomo --live`:
//! it records the body of every chat request it receives and answers a short fixed
//! reply, streamed (SSE) or not, as the request asks. What the daemon sent is what the
//! evaluation measures.

use std::sync::Arc;

use actix_web::{App, HttpResponse, HttpServer, web};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// What the vendor answers every chat request.
pub const REPLY: &str = "ok";

/// A running vendor (stops with the actix system that started it).
pub struct ScriptedVendor {
    /// `http://127.0.0.1:<port>/v1`, the source's `base_url`.
    pub base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ScriptedVendor {
    /// Binds a free loopback port and serves on the current actix system.
    pub fn start() -> std::io::Result<Self> {
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let data = web::Data::new(requests.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                // Prompts of a large window are big: do not refuse them.
                .app_data(web::JsonConfig::default().limit(64 * 1024 * 1024))
                .route("/v1/chat/completions", web::post().to(chat))
        })
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")?;
        let base_url = format!("http://{}/v1", server.addrs()[0]);
        actix_web::rt::spawn(server.run());
        Ok(Self { base_url, requests })
    }

    /// How many chat requests arrived so far.
    pub fn count(&self) -> usize {
        self.requests.lock().len()
    }

    /// The requests that arrived after the first `from`.
    pub fn since(&self, from: usize) -> Vec<Value> {
        self.requests
            .lock()
            .get(from..)
            .map(<[Value]>::to_vec)
            .unwrap_or_default()
    }

    /// Forgets the recorded requests (between conversations).
    pub fn clear(&self) {
        self.requests.lock().clear();
    }
}

async fn chat(body: web::Json<Value>, requests: web::Data<Arc<Mutex<Vec<Value>>>>) -> HttpResponse {
    let stream = body["stream"].as_bool().unwrap_or(false);
    requests.lock().push(body.into_inner());
    let usage = json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
    if !stream {
        return HttpResponse::Ok().json(json!({
            "id": "chatcmpl-live", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}],
            "usage": usage,
        }));
    }
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": REPLY}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": usage}),
    ];
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    HttpResponse::Ok().content_type("text/event-stream").body(out)
}
