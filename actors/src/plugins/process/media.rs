//! `io.injectMedia`, `io.injectMediaSync`, `io.injectInterruptMedia`: a plugin starts a
//! turn that carries images (a chat bridge's photo, a camera's snapshot).
//!
//! The images are checked exactly as the HTTP API's attachments are
//! (`memory::media::check`: the bytes decide the type, the size cap of
//! `core.input_processing.image.max_bytes`), all before anything is stored; then they
//! become media blocks and the input carries their ids, as an HTTP message does. The
//! capability is `io`, like the text injections.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{self, InjectMedia};
use serde_json::{Value, json};

use super::PluginProcess;
use crate::agent::input::{Input, ReplyTo};
use crate::agent::intake::{Inject, InjectInterrupt};
use crate::host::{Host, HostContext};
use crate::memory::media::actor::StoreImages;
use crate::memory::media::check::{self, Attachment, Limits};
use crate::memory::media::parts::{self, MediaRef};
use crate::plugins::conn::Conn;

/// Longest `io.injectMediaSync` waits for the reply.
const SYNC_WAIT: Duration = Duration::from_secs(300);

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message: message.into(),
    }
}

impl PluginProcess {
    pub(super) fn on_inject_media(
        &mut self,
        method: &str,
        id: u64,
        params: Value,
        conn: Arc<Conn>,
        ctx: &mut HostContext<Self>,
    ) {
        let p: InjectMedia = match serde_json::from_value(params) {
            Ok(p) => p,
            Err(e) => return conn.respond(id, Err(invalid(format!("invalid params for `{method}`: {e}")))),
        };
        let Some(media) = self.deps.services.media.clone() else {
            return conn.respond(
                id,
                Err(invalid("this kernel has no media memory; send text with io.injectText")),
            );
        };
        let principal = match crate::firewall::Principal::for_plugin(
            self.name(),
            &self.manifest.profiles,
            p.input.profile.as_deref(),
        ) {
            Ok(pr) => pr,
            Err(e) => return conn.respond(id, Err(invalid(e.to_string()))),
        };
        let attachments: Vec<Attachment> = p
            .media
            .iter()
            .map(|m| Attachment {
                mime: m.mime.clone(),
                data: m.data.clone(),
            })
            .collect();
        let Limits { max_bytes, max_count } = media.limits();
        let images = match check::check_all(&attachments, &Limits { max_bytes, max_count }) {
            Ok(i) => i,
            Err(e) => {
                tracing::info!(plugin = %self.name(), "media injection refused: {e}");
                return conn.respond(id, Err(invalid(e.to_string())));
            }
        };
        drop(attachments);
        let source = crate::plugins::services::inject_source(self.name(), p.input.source.as_deref());
        let mut input = Input::text(&source, &p.input.text);
        input.principal = principal;
        let (interrupt, sync) = (
            method == methods::IO_INJECT_INTERRUPT_MEDIA,
            method == methods::IO_INJECT_MEDIA_SYNC,
        );
        let rx = sync.then(|| {
            let (reply, rx) = ReplyTo::channel(&input.request_id);
            input.reply = reply;
            rx
        });
        let (el, il, priority) = (
            self.deps.event_loop.clone(),
            self.deps.intercept_loop.clone(),
            p.input.priority.clone(),
        );
        let fut = async move {
            let stored = media
                .addr
                .send(StoreImages {
                    images,
                    source: source.clone(),
                })
                .await
                .map_err(|e| e.to_string())??;
            let refs: Vec<MediaRef> = stored.iter().map(|(m, _)| MediaRef::from(m)).collect();
            let ids: Vec<String> = refs.iter().map(|r| r.id.clone()).collect();
            parts::to_payload(&mut input.payload, &refs);
            let task = if interrupt {
                let msg = InjectInterrupt {
                    input,
                    priority: priority.map(Value::String),
                    stop: false,
                };
                il.send(msg)
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?
                    .unwrap_or(0)
            } else {
                el.send(Inject(input))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?
                    .task_id
                    .unwrap_or(0)
            };
            let Some(rx) = rx else {
                return Ok(json!({"task_id": task, "media": ids}));
            };
            match tokio::time::timeout(SYNC_WAIT, rx).await {
                Ok(Ok(r)) => match (r.skipped, r.error) {
                    (Some(why), _) => Err(why.to_string()),
                    (None, Some(e)) => Err(e),
                    (None, None) => Ok(json!({"task_id": task, "reply": r.content, "media": ids})),
                },
                Ok(Err(_)) => Err("the task ended without a reply".to_owned()),
                Err(_) => Err(format!(
                    "no reply within {} s; task {task} goes on",
                    SYNC_WAIT.as_secs()
                )),
            }
        };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(
            move |res: Result<Value, String>, _, _| match res {
                Ok(v) => conn.respond(id, Ok(v)),
                Err(e) => conn.respond(id, Err(invalid(e))),
            },
        ));
    }
}
