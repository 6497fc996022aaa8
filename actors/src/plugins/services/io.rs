//! The `io` family: a plugin starts a turn. `io.injectText` / `io.injectInterrupt`
//! queue or interrupt, `io.injectInputSync` queues and answers the agent's reply, and
//! the `io.injectMedia*` variants carry images. Shared by subprocess plugins (the call
//! decoded at the connection) and Lua plugins (`sdk.inject_*` builds the same
//! [`InjectText`]), so both get the same source naming, security profile and checks.
//!
//! Two steps: [`prepare`] decides everything that can be refused without waiting (the
//! principal, the images' types and sizes, the sync-inject trap below), so a refusal
//! is immediate and nothing is stored; [`Prepared::submit`] stores the images and hands
//! the input to the event loop or the intercept loop.
//!
//! **The sync-inject trap.** A queued input runs only after the running turn. A plugin
//! that injects-and-waits from inside one of its own tool calls would wait for a turn
//! that itself waits on that tool: both sit until the tool times out. So a sync
//! injection while any of the plugin's tool calls is in flight is refused at once
//! ([`IoError::WouldDeadlock`]), saying what to use instead.

use std::time::Duration;

use futures_util::future::BoxFuture;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{InjectMedia, InjectText};
use homeagent_plugin_protocol::{Manifest, PluginRequest as R};
use serde_json::{Value, json};

use crate::addr::TAddr;
use crate::agent::input::{Input, ReplyTo};
use crate::agent::intake::{EventLoop, Inject, InjectInterrupt, InterceptLoop};
use crate::memory::media::actor::{MediaHandle, StoreImages};
use crate::memory::media::check::{self, Attachment, Image};
use crate::memory::media::parts::MediaRef;

/// Longest a sync injection waits for the reply.
pub const SYNC_WAIT: Duration = Duration::from_secs(300);

/// Why an injection was refused.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error(
        "`{method}` cannot wait here: {tools} tool call(s) of plugin `{plugin}` are running, and the queued input \
         would run only after the turn that waits on them (both would sit until the tool times out); inject with \
         io.injectText instead (it answers the task id at once) and reply through an output channel or an event, \
         or call {method} from outside your tool calls"
    )]
    WouldDeadlock {
        method: &'static str,
        plugin: String,
        tools: usize,
    },
    #[error("this kernel has no media memory; send text with io.injectText")]
    NoMedia,
    #[error("{0}")]
    Refused(String),
    #[error("the agent is not running: {0}; retry once the daemon is up")]
    Gone(String),
    #[error("the task ended without a reply (it was stopped or skipped)")]
    NoReply,
    #[error("no reply within {secs} s; task {task} goes on", secs = SYNC_WAIT.as_secs())]
    Timeout { task: u64 },
}

impl From<IoError> for RpcError {
    fn from(e: IoError) -> Self {
        let code = match e {
            IoError::Gone(_) => RpcError::GONE,
            _ => RpcError::INVALID_PARAMS,
        };
        RpcError {
            code,
            message: e.to_string(),
        }
    }
}

/// Whether `req` is one of the injections.
pub fn serves(req: &R) -> bool {
    matches!(
        req,
        R::InjectText(_)
            | R::InjectInterrupt(_)
            | R::InjectInputSync(_)
            | R::InjectMedia(_)
            | R::InjectMediaSync(_)
            | R::InjectInterruptMedia(_)
    )
}

/// Where the input goes and whether the caller waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Queue,
    Interrupt,
    QueueAndWait,
}

/// An injection that passed every check, ready to submit.
pub struct Prepared {
    input: Input,
    route: Route,
    priority: Option<String>,
    images: Option<(MediaHandle, Vec<Image>)>,
}

/// The source an input injected by `plugin` is filed under: a plugin speaks for
/// itself, so a source outside its own name is put under it (`<plugin>/<source>`);
/// none means the plugin's name.
pub fn inject_source(plugin: &str, source: Option<&str>) -> String {
    match source.filter(|s| !s.is_empty()) {
        Some(s) if s.split('/').next() == Some(plugin) => s.to_owned(),
        Some(s) => format!("{plugin}/{s}"),
        None => plugin.to_owned(),
    }
}

/// What an injection needs of the kernel: the two loops inputs enter by and the media
/// memory for images — the parts of the plugin's `PluginDeps` this module reads, named
/// here so it does not import the process host that holds them.
pub struct Injector<'a> {
    pub event_loop: &'a TAddr<EventLoop>,
    pub intercept_loop: &'a TAddr<InterceptLoop>,
    pub media: Option<&'a MediaHandle>,
}

/// Checks an injection of the plugin of `manifest` (capability already checked).
/// `tools_in_flight`: the plugin's tool calls running now (see the module's trap).
/// Gives the call back when it is not an injection.
#[allow(clippy::result_large_err)]
pub fn prepare(
    deps: &Injector<'_>,
    manifest: &Manifest,
    req: R,
    tools_in_flight: usize,
) -> Result<Result<Prepared, IoError>, R> {
    let method = req.method();
    let (text, media, route) = match req {
        R::InjectText(t) => (t, None, Route::Queue),
        R::InjectInterrupt(t) => (t, None, Route::Interrupt),
        R::InjectInputSync(t) => (t, None, Route::QueueAndWait),
        R::InjectMedia(m) => split(m, Route::Queue),
        R::InjectMediaSync(m) => split(m, Route::QueueAndWait),
        R::InjectInterruptMedia(m) => split(m, Route::Interrupt),
        other => return Err(other),
    };
    Ok(prepare_input(
        deps,
        manifest,
        method,
        text,
        media,
        route,
        tools_in_flight,
    ))
}

fn split(m: InjectMedia, route: Route) -> (InjectText, Option<Vec<Attachment>>, Route) {
    let media = m
        .media
        .into_iter()
        .map(|i| Attachment {
            mime: i.mime,
            data: i.data,
        })
        .collect();
    (m.input, Some(media), route)
}

fn prepare_input(
    deps: &Injector<'_>,
    manifest: &Manifest,
    method: &'static str,
    p: InjectText,
    media: Option<Vec<Attachment>>,
    route: Route,
    tools_in_flight: usize,
) -> Result<Prepared, IoError> {
    let plugin = manifest.name.as_str();
    if route == Route::QueueAndWait && tools_in_flight > 0 {
        tracing::warn!(%plugin, method, tools_in_flight, "sync injection refused: it would wait on its own tool call");
        return Err(IoError::WouldDeadlock {
            method,
            plugin: plugin.to_owned(),
            tools: tools_in_flight,
        });
    }
    let principal =
        crate::firewall::Principal::for_plugin(plugin, &manifest.profiles, p.profile.as_deref()).map_err(|e| {
            tracing::warn!(%plugin, "injection refused: {e}");
            IoError::Refused(e.to_string())
        })?;
    // Before the images are stored (the intake checks again for the rest).
    crate::agent::input::Refusal::check_size(&p.text).map_err(|r| IoError::Refused(r.to_string()))?;
    let images = match media {
        None => None,
        Some(attachments) => {
            let handle = deps.media.cloned().ok_or(IoError::NoMedia)?;
            let images = check::check_all(&attachments, &handle.limits()).map_err(|e| {
                tracing::info!(%plugin, "media injection refused: {e}");
                IoError::Refused(e.to_string())
            })?;
            Some((handle, images))
        }
    };
    let source = inject_source(plugin, p.source.as_deref());
    let mut input = Input::text(&source, &p.text);
    input.principal = principal;
    input.no_memory = p.no_memory;
    if let Some(c) = p.channel.filter(|c| !c.is_empty()) {
        input.channel = c;
    }
    Ok(Prepared {
        input,
        route,
        priority: p.priority.filter(|p| !p.is_empty()),
        images,
    })
}

impl Prepared {
    /// Stores the images, hands the input over and (sync) waits for the reply:
    /// `{"task_id"}`, plus `"media"` with images, plus `"reply"` when waited for.
    pub fn submit(self, deps: &Injector<'_>) -> BoxFuture<'static, Result<Value, IoError>> {
        let (el, il) = (deps.event_loop.clone(), deps.intercept_loop.clone());
        let Prepared {
            mut input,
            route,
            priority,
            images,
        } = self;
        Box::pin(async move {
            let gone = |e: String| IoError::Gone(e);
            let mut ids: Option<Vec<String>> = None;
            if let Some((media, images)) = images {
                let stored = media
                    .addr
                    .send(StoreImages {
                        images,
                        source: input.source.clone(),
                    })
                    .await
                    .map_err(|e| gone(e.to_string()))?
                    .map_err(|e| IoError::Refused(e.to_string()))?;
                let refs: Vec<MediaRef> = stored.iter().map(|(m, _)| MediaRef::from(m)).collect();
                ids = Some(refs.iter().map(|r| r.id.clone()).collect());
                input.payload.media = refs;
            }
            let rx = (route == Route::QueueAndWait).then(|| {
                let (reply, rx) = ReplyTo::channel(&input.request_id);
                input.reply = reply;
                rx
            });
            let task = if route == Route::Interrupt {
                let msg = InjectInterrupt {
                    input,
                    priority: priority.map(Value::String),
                    stop: false,
                    clear_queue: false,
                };
                il.send(msg)
                    .await
                    .map_err(|e| gone(e.to_string()))?
                    .map_err(|e| IoError::Refused(e.to_string()))?
                    .unwrap_or(0)
            } else {
                el.send(Inject(input))
                    .await
                    .map_err(|e| gone(e.to_string()))?
                    .map_err(|e| IoError::Refused(e.to_string()))?
                    .task_id
                    .unwrap_or(0)
            };
            let mut out = json!({ "task_id": task });
            if let Some(ids) = ids {
                out["media"] = json!(ids);
            }
            let Some(rx) = rx else { return Ok(out) };
            match tokio::time::timeout(SYNC_WAIT, rx).await {
                Ok(Ok(r)) => match (r.skipped, r.error) {
                    (Some(why), _) => Err(IoError::Refused(why.to_string())),
                    (None, Some(e)) => Err(IoError::Refused(e)),
                    (None, None) => {
                        out["reply"] = json!(r.content);
                        Ok(out)
                    }
                },
                Ok(Err(_)) => Err(IoError::NoReply),
                Err(_) => Err(IoError::Timeout { task }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_sources_stay_under_the_plugin_name() {
        assert_eq!(inject_source("timer", None), "timer");
        assert_eq!(inject_source("timer", Some("")), "timer");
        assert_eq!(inject_source("timer", Some("timer/kitchen")), "timer/kitchen");
        assert_eq!(inject_source("timer", Some("http")), "timer/http");
        assert_eq!(inject_source("timer", Some("timerx")), "timer/timerx");
    }

    #[test]
    fn the_deadlock_refusal_says_what_to_do_instead() {
        let e = IoError::WouldDeadlock {
            method: "io.injectInputSync",
            plugin: "p".into(),
            tools: 1,
        };
        let rpc = RpcError::from(e);
        assert_eq!(rpc.code, RpcError::INVALID_PARAMS);
        assert!(rpc.message.contains("io.injectText instead"), "{}", rpc.message);
    }
}
