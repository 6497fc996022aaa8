//! Images through the real path: `POST /api/v1/messages` with attachments → checks →
//! media blocks in `memory.db` → the turn → the request the fake vendor receives
//! (OpenAI `image_url` data URLs), the vision fallback for a source that cannot see,
//! and media recall by a text query through the multimodal space.
//!
//! The multimodal space is remote (no registry ships CLIP weights; docs/DECISIONS.md
//! "Media vectors"), so its test double is a loopback embedder at the edge
//! ([`Embedder`]) speaking the Jina-style typed `/v1/embeddings`: it maps the two test
//! images and texts mentioning them to fixed vectors. The ranking, storage and prompt
//! assembly under test are the daemon's own.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use common::api::{daemon_with_vendor, get, post, put_settings, wait_for, wait_sources};
use common::{Daemon, vendor};
use serde_json::{Value, json};

/// A red 2x3 PNG ("the bike") and a blue 3x2 PNG ("the cat").
const RED: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAIAAAA2iEnWAAAAEElEQVR4nGM4IScHRAwoFABEDQYZFCZhYwAAAABJRU5ErkJggg==";
const BLUE: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAEElEQVR4nGOQkzsBQQxwFgA5CAYZ5O3E4gAAAABJRU5ErkJggg==";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn message(d: &Daemon, text: &str, attachments: Value) -> (u16, Value) {
    post(d, "/api/v1/messages", json!({"text": text, "attachments": attachments}))
}

/// Every image URL in a request body the vendor received.
fn image_urls(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["type"] == "image_url")
        .filter_map(|p| p["image_url"]["url"].as_str().map(str::to_owned))
        .collect()
}

fn all_text(body: &Value) -> String {
    body["messages"].to_string()
}

fn media(d: &Daemon) -> Value {
    get(d, "/api/v1/memory/media")
}

#[test]
fn a_png_attachment_reaches_the_vendor_as_an_image_url_data_url_and_is_one_block() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let (st, body) = message(
        &d,
        "what is in this picture?",
        json!([{"mime": "image/png", "data": RED}]),
    );
    assert_eq!(st, 200, "{body}");
    let sent = v.last.lock().unwrap().clone();
    assert_eq!(
        image_urls(&sent),
        vec![format!("data:image/png;base64,{RED}")],
        "the vendor gets the PNG as a data URL in OpenAI's image_url part"
    );
    // The user message is the text, the block's note, then the image.
    let user = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert_eq!(
        user["content"][0],
        json!({"type": "text", "text": "what is in this picture?"})
    );
    let blocks = media(&d);
    let list = blocks["blocks"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{blocks}");
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("blk_media_") && id.len() == 22, "{id}");
    assert_eq!(
        (list[0]["width"].as_u64(), list[0]["height"].as_u64()),
        (Some(2), Some(3))
    );
    assert!(user["content"][1]["text"].as_str().unwrap().contains(&id), "{user}");

    // The same image again (with other words): still one block, seen twice, and the
    // vendor got it again.
    let (st, body) = message(&d, "and now?", json!([{"mime": "image/png", "data": RED}]));
    assert_eq!(st, 200, "{body}");
    assert_eq!(image_urls(&v.last.lock().unwrap()).len(), 1);
    let blocks = media(&d);
    assert_eq!(blocks["blocks"].as_array().unwrap().len(), 1, "{blocks}");
    assert_eq!(blocks["blocks"][0]["seen_count"], 2);

    // The chat history (what the WebUI shows after a reload) names the image with
    // both inputs that carried it, and not with the replies.
    let hist = wait_for(&d, "/api/v1/chat/history", "both turns in the history", |h| {
        h["items"].as_array().is_some_and(|i| i.len() == 4)
    });
    let items = hist["items"].as_array().unwrap();
    for (i, it) in items.iter().enumerate() {
        let want = if it["role"] == "user" { json!([id]) } else { Value::Null };
        assert_eq!(it["media"], want, "item {i}: {it}");
    }

    // The bytes are served as stored, with their sniffed type; deleting the block
    // deletes them.
    let r = d
        .client()
        .get(d.url(&format!("/api/v1/memory/media/{id}/data")))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().unwrap().to_vec(), unb64(RED));
    let r = d
        .client()
        .delete(d.url(&format!("/api/v1/memory/media/{id}")))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = d
        .client()
        .get(d.url(&format!("/api/v1/memory/media/{id}/data")))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(media(&d)["blocks"].as_array().unwrap().is_empty());
}

#[test]
fn a_text_that_is_not_an_image_or_one_over_the_cap_gets_400_and_stores_nothing() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let before = get(&d, "/api/v1/memory/context");
    let (st, body) = message(
        &d,
        "look",
        json!([{"mime": "image/png", "data": b64(b"I am plain text pretending to be a PNG")}]),
    );
    assert_eq!(st, 400, "{body}");
    let err = body["error"].as_str().unwrap();
    assert!(err.contains("PNG, JPEG, GIF or WebP") && err.contains("text"), "{err}");

    put_settings(&d, json!({"core.input_processing.image.max_bytes": 1024}));
    let mut big = unb64(RED);
    big.extend(std::iter::repeat_n(0u8, 2000));
    let (st, body) = message(&d, "look", json!([{"mime": "image/png", "data": b64(&big)}]));
    assert_eq!(st, 400, "{body}");
    let err = body["error"].as_str().unwrap();
    assert!(
        err.contains("1024") && err.contains("core.input_processing.image.max_bytes"),
        "{err}"
    );

    // Also through the WebUI's multipart form.
    let boundary = "XhomeagentX";
    let mut form = Vec::new();
    form.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nlook\r\n").as_bytes(),
    );
    form.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n")
            .as_bytes(),
    );
    form.extend_from_slice(&big);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let r = d
        .client()
        .post(d.url("/api/v1/messages"))
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(form)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("core.input_processing.image.max_bytes"));

    // Nothing was stored: no block, no event, and the vendor was never called.
    assert!(media(&d)["blocks"].as_array().unwrap().is_empty());
    assert_eq!(get(&d, "/api/v1/memory/context"), before);
    assert_eq!(v.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn multipart_uploads_reach_the_vendor_like_json_ones() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let boundary = "XhomeagentX";
    let mut form = Vec::new();
    form.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\npasted\r\n").as_bytes(),
    );
    form.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"paste.png\"\r\nContent-Type: image/png\r\n\r\n")
            .as_bytes(),
    );
    form.extend_from_slice(&unb64(BLUE));
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let r = d
        .client()
        .post(d.url("/api/v1/messages"))
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(form)
        .timeout(Duration::from_secs(60))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text());
    assert_eq!(
        image_urls(&v.last.lock().unwrap()),
        vec![format!("data:image/png;base64,{BLUE}")]
    );
}

#[test]
fn a_source_without_vision_gets_a_description_or_the_note() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    // Only a blind source: the model is told an image arrived that it cannot see.
    put_settings(&d, json!({"core.llm.sources.fake.vision": false}));
    wait_for(&d, "/api/v1/llm/sources", "the source marked blind", |s| {
        s["sources"][0]["vision"] == false
    });
    let (st, body) = message(&d, "see this?", json!([{"mime": "image/png", "data": RED}]));
    assert_eq!(st, 200, "{body}");
    let sent = v.last.lock().unwrap().clone();
    assert!(image_urls(&sent).is_empty(), "no image reaches a blind source: {sent}");
    assert!(all_text(&sent).contains("cannot see images"), "{sent}");

    // A second source that sees: it describes the image first, the blind one (tried
    // first) gets the description.
    let mut eyes = vendor::source_settings("eyes", &v.url, 0);
    eyes["core.llm.sources.eyes.vision"] = json!(true);
    eyes["core.llm.sources.fake.priority"] = json!(10);
    put_settings(&d, eyes);
    wait_sources(&d, 2);
    let n = v.all.lock().unwrap().len();
    let (st, body) = message(&d, "and this one?", json!([{"mime": "image/png", "data": BLUE}]));
    assert_eq!(st, 200, "{body}");
    let reqs: Vec<Value> = v.all.lock().unwrap()[n..].to_vec();
    assert_eq!(reqs.len(), 2, "a describe call, then the turn: {reqs:?}");
    assert_eq!(image_urls(&reqs[0]), vec![format!("data:image/png;base64,{BLUE}")]);
    assert!(image_urls(&reqs[1]).is_empty());
    assert!(
        all_text(&reqs[1]).contains("described by a vision model"),
        "{}",
        reqs[1]
    );
}

/// The loopback multimodal embedder: the bike image and texts about a bike share a
/// direction, the cat's another.
struct Embedder {
    url: String,
    images: Arc<AtomicUsize>,
    texts: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct Seen(Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>);

async fn embed(seen: web::Data<Seen>, body: web::Json<Value>) -> HttpResponse {
    let data: Vec<Value> = body["input"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let v: [f32; 4] = if let Some(img) = item["image"].as_str() {
                seen.0.fetch_add(1, Ordering::SeqCst);
                match img {
                    RED => [1.0, 0.0, 0.0, 0.0],
                    BLUE => [0.0, 1.0, 0.0, 0.0],
                    _ => [0.0, 0.0, 0.0, 1.0],
                }
            } else {
                let t = item["text"].as_str().unwrap_or("").to_lowercase();
                seen.1.lock().unwrap().push(t.clone());
                if t.contains("bike") {
                    [0.9, 0.1, 0.3, 0.0]
                } else if t.contains("cat") {
                    [0.1, 0.9, 0.3, 0.0]
                } else {
                    [0.0, 0.0, 1.0, 0.0]
                }
            };
            json!({"index": i, "embedding": v})
        })
        .collect();
    HttpResponse::Ok().json(json!({"data": data}))
}

fn start_embedder() -> Embedder {
    let images = Arc::new(AtomicUsize::new(0));
    let texts = Arc::new(Mutex::new(Vec::new()));
    let seen = web::Data::new(Seen(images.clone(), texts.clone()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                App::new()
                    .app_data(seen.clone())
                    .app_data(web::JsonConfig::default().limit(64 << 20))
                    .route("/v1/embeddings", web::post().to(embed))
            })
            .workers(1)
            .disable_signals()
            .bind("127.0.0.1:0")
            .unwrap();
            tx.send(server.addrs()[0]).unwrap();
            server.run().await.unwrap();
        });
    });
    Embedder {
        url: format!("http://{}/v1", rx.recv().unwrap()),
        images,
        texts,
    }
}

#[test]
fn a_media_block_is_recalled_by_a_text_query_through_the_multimodal_space() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let e = start_embedder();
    put_settings(
        &d,
        json!({
            "core.memory.multimodal_space.provider": "remote",
            "core.memory.multimodal_space.base_url": e.url,
            "core.memory.multimodal_space.model": "clip-test",
        }),
    );
    for (text, img) in [("here is a photo", RED), ("and another one", BLUE)] {
        let (st, body) = message(&d, text, json!([{"mime": "image/png", "data": img}]));
        assert_eq!(st, 200, "{body}");
    }
    // Both blocks get their own vector in the space (in the background).
    let status = wait_for(&d, "/api/v1/memory/media", "both media blocks embedded", |m| {
        m["status"]["embedded"] == 2
    });
    let space = status["status"]["space"].as_str().unwrap();
    assert!(
        space.starts_with("mm-remote:") && space.ends_with("#clip-test/4"),
        "{space}"
    );
    assert!(e.images.load(Ordering::SeqCst) >= 2);
    let bike = status["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["width"] == 2)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A later text-only turn: the bike photo is recalled into the prompt as an image,
    // the cat is not.
    let (st, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "what colour was the photo of my bike?"}),
    );
    assert_eq!(st, 200, "{body}");
    let sent = v.last.lock().unwrap().clone();
    assert_eq!(
        image_urls(&sent),
        vec![format!("data:image/png;base64,{RED}")],
        "{sent}"
    );
    assert!(
        all_text(&sent).contains(&format!("Recalled from memory: image {bike}")),
        "{sent}"
    );
    assert!(
        e.texts.lock().unwrap().iter().any(|t| t.contains("photo of my bike")),
        "the query went through the multimodal space"
    );

    // A turn about nothing in particular recalls nothing.
    let (st, _) = post(&d, "/api/v1/messages", json!({"text": "good morning"}));
    assert_eq!(st, 200);
    assert!(image_urls(&v.last.lock().unwrap()).is_empty());

    // Another model is another space: every block is embedded again, in the background.
    let before = e.images.load(Ordering::SeqCst);
    put_settings(&d, json!({"core.memory.multimodal_space.model": "clip-test-2"}));
    wait_for(
        &d,
        "/api/v1/memory/media",
        "both blocks re-embedded in the new space",
        |m| {
            m["status"]["space"]
                .as_str()
                .is_some_and(|s| s.ends_with("#clip-test-2/4"))
                && m["status"]["embedded"] == 2
        },
    );
    assert!(
        e.images.load(Ordering::SeqCst) >= before + 2,
        "the images themselves were embedded again"
    );
}

#[test]
fn memory_commit_takes_media_digests_and_refuses_unknown_ones_writing_nothing() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    let (st, body) = message(&d, "my bike", json!([{"mime": "image/png", "data": RED}]));
    assert_eq!(st, 200, "{body}");
    let id = media(&d)["blocks"][0]["id"].as_str().unwrap().to_owned();

    let args =
        json!({"triples": [{"subject": "Ann", "relation": "owns", "object": "a red bike", "media_digests": [id]}]});
    let reply = common::api::ask(&d, &format!("call-tool memory_commit {args}"));
    assert!(reply.contains("linked 1 media"), "{reply}");
    let block = get(&d, &format!("/api/v1/memory/media/{id}"));
    assert_eq!(block["links"], json!(["sentence:Ann owns a red bike"]), "{block}");

    // An unknown digest refuses the whole call: nothing reaches the graph.
    let args = json!({"triples": [{"subject": "Zed", "relation": "owns", "object": "a boat", "media_digests": ["blk_media_ffffffffffff"]}]});
    let reply = common::api::ask(&d, &format!("call-tool memory_commit {args}"));
    assert!(reply.contains("blk_media_ffffffffffff"), "{reply}");
    let graph = get(&d, "/api/v1/memory/graph?q=Zed");
    assert!(!graph.to_string().contains("a boat"), "{graph}");
    // (The same query finds what the first call did write.)
    let graph = get(&d, "/api/v1/memory/graph?q=Ann");
    assert!(graph.to_string().contains("a red bike"), "{graph}");
}
