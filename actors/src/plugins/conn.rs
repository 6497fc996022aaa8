//! The kernel's end of one plugin's stdio connection: request/response correlation
//! and the writer queue. Shared by the plugin's actor and the tool handlers it
//! registers, so tool calls do not queue behind the actor's mailbox.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use homeagent_plugin_protocol::KernelRequest;
use homeagent_plugin_protocol::frame::{Frame, Request, Response, RpcError, encode};
use homeagent_plugin_protocol::methods::{self, ToolCancel};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// Lines of stderr kept for error messages and the API.
pub const STDERR_TAIL: usize = 40;

/// The connection.
pub struct Conn {
    plugin: String,
    /// The writer queue; taken (closing the plugin's stdin) when the connection ends.
    tx: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next: AtomicU64,
    closed: AtomicBool,
    /// `tool.invoke` calls waiting for the plugin's answer (see `services::io`: a sync
    /// injection while one runs would wait on itself).
    tools_in_flight: AtomicUsize,
    /// The plugin's last stderr lines (its logs).
    pub stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Conn {
    pub fn new(plugin: &str, tx: mpsc::UnboundedSender<Vec<u8>>, stderr: Arc<Mutex<VecDeque<String>>>) -> Self {
        Self {
            plugin: plugin.to_owned(),
            tx: Mutex::new(Some(tx)),
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            tools_in_flight: AtomicUsize::new(0),
            stderr,
        }
    }

    /// The last stderr lines, joined (for error messages).
    pub fn stderr_tail(&self, lines: usize) -> String {
        let s = self.stderr.lock();
        let n = s.len().saturating_sub(lines);
        s.iter().skip(n).cloned().collect::<Vec<_>>().join(" | ")
    }

    fn send_frame(&self, frame: &Frame) -> Result<(), String> {
        let bytes = encode(frame).map_err(|e| e.to_string())?;
        let tx = self.tx.lock();
        let tx = tx
            .as_ref()
            .ok_or_else(|| format!("plugin `{}` is not running", self.plugin))?;
        tx.send(bytes)
            .map_err(|_| format!("plugin `{}` is not running", self.plugin))
    }

    /// The plugin's tool calls running now.
    pub fn tools_in_flight(&self) -> usize {
        self.tools_in_flight.load(Ordering::SeqCst)
    }

    /// Sends a typed call; resolves with the result, or an error that names the plugin.
    pub async fn request(&self, req: KernelRequest) -> Result<Value, String> {
        let (method, params) = req.into_message();
        self.call(method, params).await
    }

    /// Sends a typed notification (no answer).
    pub fn notify_typed(&self, req: KernelRequest) {
        let (method, params) = req.into_message();
        self.notify(method, params)
    }

    /// Calls `method`; resolves with the result, or an error that names the plugin.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(format!(
                "plugin `{}` is not running; it is being restarted",
                self.plugin
            ));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id, tx);
        if let Err(e) = self.send_frame(&Frame::Request(Request {
            id,
            method: method.to_owned(),
            params,
        })) {
            self.pending.lock().remove(&id);
            return Err(e);
        }
        // Dropped before the answer (tool timeout, stopped turn): forget the id and, for
        // a tool call, tell the plugin so it can stop the work.
        let tool = method == methods::TOOL_INVOKE;
        if tool {
            self.tools_in_flight.fetch_add(1, Ordering::SeqCst);
        }
        let _in_flight = InFlight(tool.then_some(&self.tools_in_flight));
        let guard = Abandon { conn: self, id, tool };
        let answer = rx.await;
        std::mem::forget(guard);
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!("plugin `{}`: {}", self.plugin, e.message)),
            Err(_) => Err(format!("plugin `{}` went away before answering", self.plugin)),
        }
    }

    /// Sends a notification (no answer).
    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.send_frame(&Frame::Request(Request {
            id: 0,
            method: method.to_owned(),
            params,
        }));
    }

    /// Answers a request of the plugin (nothing for notifications).
    pub fn respond(&self, id: u64, result: Result<Value, RpcError>) {
        if id == 0 {
            return;
        }
        let (result, error) = match result {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        let _ = self.send_frame(&Frame::Response(Response { id, result, error }));
    }

    /// A response of the plugin arrived.
    pub fn complete(&self, r: Response) {
        let Some(tx) = self.pending.lock().remove(&r.id) else {
            tracing::warn!(plugin = %self.plugin, id = r.id, "response to an unknown request id; ignored");
            return;
        };
        let result = match (r.result, r.error) {
            (_, Some(e)) => Err(e),
            (Some(v), None) => Ok(v),
            (None, None) => Ok(Value::Null),
        };
        let _ = tx.send(result);
    }

    /// Closes the writer queue: the plugin's stdin closes once queued frames are out.
    pub fn close(&self) {
        self.tx.lock().take();
    }

    /// The process is gone: every call still waiting fails at once with `reason`.
    pub fn fail_all(&self, reason: &str) {
        self.closed.store(true, Ordering::SeqCst);
        self.close();
        let pending: Vec<_> = self.pending.lock().drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(RpcError {
                code: RpcError::GONE,
                message: reason.to_owned(),
            }));
        }
    }
}

/// Counts a tool call out when it ends, answered or abandoned.
struct InFlight<'a>(Option<&'a AtomicUsize>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            n.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Armed while a call waits for its answer; dropping it means the caller gave up.
struct Abandon<'a> {
    conn: &'a Conn,
    id: u64,
    tool: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.conn.pending.lock().remove(&self.id).is_some() && self.tool {
            tracing::debug!(plugin = %self.conn.plugin, id = self.id, "tool call abandoned; cancelling it");
            self.conn
                .notify_typed(KernelRequest::ToolCancel(ToolCancel { id: self.id }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homeagent_plugin_protocol::frame::decode;
    use serde_json::json;

    fn next(rx: &mut mpsc::UnboundedReceiver<Vec<u8>>) -> Request {
        let bytes = rx.try_recv().expect("a frame");
        match decode(&bytes[..bytes.len() - 1]).unwrap() {
            Frame::Request(r) => r,
            other => panic!("not a request: {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_abandoned_tool_call_is_cancelled_at_the_plugin() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let conn = Conn::new("p", tx, Arc::default());
        let r = tokio::time::timeout(
            std::time::Duration::from_millis(10),
            conn.call(methods::TOOL_INVOKE, json!({"name": "t", "args": {}})),
        )
        .await;
        assert!(r.is_err(), "timed out");
        let invoke = next(&mut rx);
        assert_eq!(invoke.method, methods::TOOL_INVOKE);
        let cancel = next(&mut rx);
        assert_eq!((cancel.id, cancel.method.as_str()), (0, methods::TOOL_CANCEL));
        assert_eq!(cancel.params, json!({"id": invoke.id}));
        assert!(conn.pending.lock().is_empty(), "the id is forgotten");

        // An answered call sends nothing more; other methods are never cancelled.
        let c = Arc::new(conn);
        let c2 = c.clone();
        let answered = tokio::spawn(async move { c2.call(methods::TOOL_INVOKE, json!({})).await });
        tokio::task::yield_now().await;
        let id = loop {
            if let Ok(b) = rx.try_recv() {
                break match decode(&b[..b.len() - 1]).unwrap() {
                    Frame::Request(r) => r.id,
                    _ => unreachable!(),
                };
            }
            tokio::task::yield_now().await;
        };
        c.complete(Response {
            id,
            result: Some(json!({"text": "ok"})),
            error: None,
        });
        assert_eq!(answered.await.unwrap().unwrap(), json!({"text": "ok"}));
        let _ = tokio::time::timeout(std::time::Duration::from_millis(5), c.call("handshake", json!({}))).await;
        assert_eq!(next(&mut rx).method, "handshake");
        assert!(rx.try_recv().is_err(), "no tool.cancel for a non-tool call");
    }
}
