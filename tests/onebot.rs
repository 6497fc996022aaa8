//! The QQ bridge against a OneBot v11 server written here (NapCat's side of the
//! forward WebSocket: bearer-token handshake, the real event JSON, action answers
//! matched by `echo`): the owner's private message is answered, a guest cannot call
//! an owner-only tool, a group @-mention is answered in the group, the model sends a
//! proactive message through `output_send__qq`, and a dropped connection is
//! re-established.

mod common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::Daemon;
use common::api::{ask, put_settings, wait_for};
use serde_json::{Value, json};
use tungstenite::Message;

const SELF_ID: i64 = 999;
const OWNER: i64 = 10001;
const GUEST: i64 = 20002;
const TOKEN: &str = "onebot-test-token";

/// A OneBot v11 implementation on 127.0.0.1, one client at a time.
struct Server {
    url: String,
    /// Every action received (`{"action", "params", "echo"}`).
    actions: Arc<Mutex<Vec<Value>>>,
    /// Handshakes accepted.
    connections: Arc<AtomicUsize>,
    /// Events for the connected client.
    events: Arc<Mutex<Option<mpsc::Sender<Value>>>>,
    /// Set: the current connection is dropped.
    drop_now: Arc<AtomicBool>,
}

fn server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let s = Server {
        url,
        actions: Arc::default(),
        connections: Arc::default(),
        events: Arc::default(),
        drop_now: Arc::default(),
    };
    let (actions, connections, events, drop_now) = (
        s.actions.clone(),
        s.connections.clone(),
        s.events.clone(),
        s.drop_now.clone(),
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            // The callback's error type is tungstenite's (an HTTP response).
            #[allow(clippy::result_large_err)]
            let check = |req: &tungstenite::handshake::server::Request, resp| {
                let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok());
                if auth == Some(&format!("Bearer {TOKEN}")) {
                    Ok(resp)
                } else {
                    Err(tungstenite::http::Response::builder()
                        .status(401)
                        .body(Some("access token mismatch".to_owned()))
                        .unwrap())
                }
            };
            let Ok(mut ws) = tungstenite::accept_hdr(stream, check) else {
                continue;
            };
            connections.fetch_add(1, Ordering::SeqCst);
            ws.get_ref().set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            let (tx, rx) = mpsc::channel::<Value>();
            *events.lock().unwrap() = Some(tx);
            // The lifecycle event NapCat sends first.
            let hello = json!({"time": 1, "self_id": SELF_ID, "post_type": "meta_event", "meta_event_type": "lifecycle", "sub_type": "connect"});
            let _ = ws.send(Message::text(hello.to_string()));
            let mut id = 100;
            loop {
                if drop_now.swap(false, Ordering::SeqCst) {
                    drop(ws);
                    break;
                }
                while let Ok(ev) = rx.try_recv() {
                    let _ = ws.send(Message::text(ev.to_string()));
                }
                match ws.read() {
                    Ok(Message::Text(t)) => {
                        let a: Value = serde_json::from_str(t.as_str()).unwrap();
                        id += 1;
                        let answer =
                            json!({"status": "ok", "retcode": 0, "data": {"message_id": id}, "echo": a["echo"]});
                        actions.lock().unwrap().push(a);
                        let _ = ws.send(Message::text(answer.to_string()));
                    }
                    Ok(_) => {}
                    Err(tungstenite::Error::Io(e))
                        if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            *events.lock().unwrap() = None;
        }
    });
    s
}

impl Server {
    fn push(&self, ev: Value) {
        self.events
            .lock()
            .unwrap()
            .as_ref()
            .expect("a client is connected")
            .send(ev)
            .unwrap();
    }

    /// The first action matching `f`, waited for (60 s).
    fn wait_action(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if let Some(a) = self.actions.lock().unwrap().iter().find(|a| f(a)) {
                return a.clone();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no action {what}; got {:?}", self.actions.lock().unwrap());
    }

    fn wait_connections(&self, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.connections.load(Ordering::SeqCst) < n || self.events.lock().unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "the bridge did not connect ({n})");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A private message event as NapCat sends it (array message format).
fn private(from: i64, text: &str) -> Value {
    json!({"self_id": SELF_ID, "user_id": from, "time": 1_700_000_000, "message_id": 1, "message_seq": 1, "real_id": 1,
        "message_type": "private", "sender": {"user_id": from, "nickname": "someone", "card": ""},
        "raw_message": text, "font": 14, "sub_type": "friend",
        "message": [{"type": "text", "data": {"text": text}}], "message_format": "array", "post_type": "message"})
}

fn sent_to(a: &Value, action: &str, key: &str, id: i64, text: &str) -> bool {
    a["action"] == action && a["params"][key] == id && a["params"]["message"].as_str().is_some_and(|m| m.contains(text))
}

fn onebot_running(d: &Daemon) {
    wait_for(d, "/api/v1/plugins", "the onebot plugin running", |p| {
        p["plugins"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|x| x["name"] == "onebot" && x["state"] == "running"))
    });
}

#[test]
fn the_owner_is_answered_a_guest_is_refused_and_the_bridge_reconnects() {
    let (_dir, data, d, _v) = common::api::daemon_with_plugins(&[], &["cmd"]);
    let s = server();
    onebot_running(&d);

    // A wrong token: refused at the handshake, the bridge says why and retries.
    put_settings(
        &d,
        json!({"plugin.onebot.url": s.url, "plugin.onebot.access_token": "wrong", "plugin.onebot.owner_id": OWNER}),
    );
    wait_for(&d, "/api/v1/plugins", "the refusal in the bridge's log", |p| {
        p.to_string().contains("refused the connection: HTTP 401")
    });
    assert_eq!(s.connections.load(Ordering::SeqCst), 0);
    let masked = common::api::get(&d, "/api/v1/settings");
    assert_eq!(masked["settings"]["plugin.onebot.access_token"], "********", "{masked}");
    // The right one: connected at once (a settings change does not wait out the backoff).
    put_settings(&d, json!({"plugin.onebot.access_token": TOKEN}));
    s.wait_connections(1);

    // The owner's private message: answered in the same chat.
    s.push(private(OWNER, "hello from qq"));
    let a = s.wait_action("the reply to the owner", |a| {
        sent_to(a, "send_private_msg", "user_id", OWNER, "echo: hello from qq")
    });
    assert!(a["echo"].as_str().is_some_and(|e| !e.is_empty()), "{a}");

    // A guest asks for an owner-only tool: the firewall refuses it, nothing runs, and
    // the guest gets the answer the model made of the refusal.
    let marker = data.join("workspace/guest-was-here");
    s.push(private(
        GUEST,
        r#"call-tool cmd_run {"argv": ["touch", "guest-was-here"]}"#,
    ));
    wait_for(&d, "/api/v1/security", "the guest refused cmd_run", |sec| {
        sec["decisions"].as_array().is_some_and(|ds| {
            ds.iter().any(|x| {
                x["gate"] == "principal"
                    && x["tool"] == "cmd_run"
                    && x["reason"].as_str().unwrap_or("").contains("onebot.guest")
            })
        })
    });
    s.wait_action("the answer to the guest", |a| {
        sent_to(a, "send_private_msg", "user_id", GUEST, "reserved for the owner")
    });
    assert!(!marker.exists(), "the guest's command did not run");

    // Groups: only an @-mention is answered, in the group.
    s.push(json!({"self_id": SELF_ID, "post_type": "message", "message_type": "group", "sub_type": "normal", "group_id": 777,
        "user_id": GUEST, "message": "just chatting", "raw_message": "just chatting", "message_format": "string",
        "sender": {"user_id": GUEST, "nickname": "g", "role": "member"}}));
    s.push(json!({"self_id": SELF_ID, "post_type": "message", "message_type": "group", "sub_type": "normal", "group_id": 777,
        "user_id": GUEST, "message": [{"type": "at", "data": {"qq": SELF_ID.to_string()}}, {"type": "text", "data": {"text": " hi group"}}],
        "raw_message": "[CQ:at,qq=999] hi group", "message_format": "array",
        "sender": {"user_id": GUEST, "nickname": "g", "role": "member"}}));
    s.wait_action("the answer in the group", |a| {
        sent_to(a, "send_group_msg", "group_id", 777, "echo: hi group")
    });
    assert!(
        !s.actions
            .lock()
            .unwrap()
            .iter()
            .any(|a| a.to_string().contains("just chatting")),
        "a message without a mention is not answered"
    );

    // A proactive message from the model through the output channel.
    let reply = ask(
        &d,
        r#"call-tool output_send__qq {"payload": "ping from the agent", "meta": "{\"group_id\": 555}"}"#,
    );
    assert!(reply.starts_with("tool said: sent to QQ group:555"), "{reply}");
    s.wait_action("the proactive message", |a| {
        sent_to(a, "send_group_msg", "group_id", 555, "ping from the agent")
    });

    // The server drops the connection: the bridge comes back and works.
    s.drop_now.store(true, Ordering::SeqCst);
    s.wait_connections(2);
    s.push(private(OWNER, "still there?"));
    s.wait_action("the reply after reconnecting", |a| {
        sent_to(a, "send_private_msg", "user_id", OWNER, "echo: still there?")
    });
}

/// The first column of every row `sql` selects, as text.
fn texts(db: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut st = db.prepare(sql).unwrap();
    st.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A group message from "Alice" @-mentioning the bot, as NapCat sends it.
fn group_mention(group: i64, from: i64, nickname: &str, text: &str) -> Value {
    json!({"self_id": SELF_ID, "post_type": "message", "message_type": "group", "sub_type": "normal", "group_id": group,
        "user_id": from, "message": [{"type": "at", "data": {"qq": SELF_ID.to_string()}}, {"type": "text", "data": {"text": format!(" {text}")}}],
        "raw_message": format!("[CQ:at,qq={SELF_ID}] {text}"), "message_format": "array",
        "sender": {"user_id": from, "nickname": nickname, "card": "", "role": "member"}})
}

/// Issue 33 item 6: the bridge declares its input channel with a cleaner. The model
/// reads who wrote in the group (`[QQ group 777 · Alice (20002)] …`); what memory
/// keeps — the context window, the documents and their passages (which the vectors
/// and the search index are computed from) and the facts — is `Alice: …`, never the
/// header; the raw text log keeps the message as it arrived.
#[test]
fn a_chat_bridges_header_reaches_the_model_but_not_memory() {
    let (_dir, data, d, v) = common::api::daemon_with_plugins(&[], &["cmd"]);
    let s = server();
    onebot_running(&d);
    put_settings(
        &d,
        json!({"plugin.onebot.url": s.url, "plugin.onebot.access_token": TOKEN, "plugin.onebot.owner_id": OWNER}),
    );
    s.wait_connections(1);
    // Few events in the window, so the distill heartbeat archives them into documents.
    put_settings(&d, json!({"core.agent.max_context_size": 1}));
    let said = [
        "the ferry to Tromsø leaves at nine",
        "bring the blue tent",
        "Ingrid cooks on Saturday",
        "the cabin key is under the mat",
        "we meet at the harbour",
        "Anna brings the kayak",
        "the weather looks fine",
    ];
    for (i, text) in said.iter().enumerate() {
        s.push(group_mention(777, GUEST, "Alice", text));
        s.wait_action(&format!("the answer to message {i}"), |a| {
            sent_to(a, "send_group_msg", "group_id", 777, &format!("echo: {text}"))
        });
    }
    // The model read who wrote.
    let last = v.last.lock().unwrap().to_string();
    assert!(
        last.contains("[QQ group 777 · Alice (20002)] the weather looks fine"),
        "{last}"
    );

    let (status, body) = common::api::post(&d, "/api/v1/heartbeats/distill/run", json!({}));
    assert_eq!(status, 200, "{body}");
    let open = |file: &str| {
        let db = rusqlite::Connection::open(data.join(file)).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        db
    };
    let db = open("memory/memory.db");
    let passages = texts(&db, "SELECT text FROM passages");
    assert!(
        passages
            .iter()
            .any(|p| p.contains("Alice: the ferry to Tromsø leaves at nine")),
        "the first messages went into the document store, cleaned: {passages:?}\n{}",
        d.log_text()
    );
    let events = texts(&db, "SELECT input FROM context_events");
    assert!(
        events.iter().any(|e| e == "Alice: the weather looks fine"),
        "{events:?}"
    );
    // Nowhere in memory: not the window, not a document, not a passage, not a
    // keyword, not a fact of the graph.
    for file in ["memory/memory.db", "memory/graph.db"] {
        let db = open(file);
        let tables = texts(
            &db,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        );
        for table in &tables {
            for col in texts(&db, &format!("SELECT name FROM pragma_table_info('{table}')")) {
                let n: i64 = db
                    .query_row(
                        &format!(
                            "SELECT COUNT(*) FROM \"{table}\" WHERE typeof(\"{col}\") = 'text' AND (\"{col}\" LIKE '%QQ group%' OR \"{col}\" LIKE '%(20002)%')"
                        ),
                        [],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert_eq!(n, 0, "the header is in {file}: {table}.{col}");
            }
        }
    }
    // The raw record keeps the message as it arrived.
    let log: String = std::fs::read_dir(data.join("memory/text"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        log.contains("[QQ group 777 · Alice (20002)] bring the blue tent"),
        "{log}"
    );
}
