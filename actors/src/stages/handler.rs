//! Stage handlers: each registered handler runs in its own tracked actor.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::context::{Patch, Stage, StageContext};
use crate::host::{Handles, HostContext, KernelActor};

/// Which stage runs a handler sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every run of its stage.
    Global,
    /// For `before_toolcall` / `after_toolcall`: only the plugin's own tools. Other
    /// stages treat it as global.
    OwnTools,
}

/// A stage handler: reads a copy of the context, returns what it wants changed.
pub trait StageHandler: Send + Sync {
    fn run(&self, stage: Stage, ctx: StageContext) -> BoxFuture<'static, Result<Patch, String>>;
}

impl<F> StageHandler for F
where
    F: Fn(Stage, StageContext) -> BoxFuture<'static, Result<Patch, String>> + Send + Sync,
{
    fn run(&self, stage: Stage, ctx: StageContext) -> BoxFuture<'static, Result<Patch, String>> {
        self(stage, ctx)
    }
}

/// The actor around one handler. A panic (in the call or its future) ends the actor;
/// the stage host reports it, skips the handler for that run and starts it again.
pub struct HandlerActor {
    handler: Arc<dyn StageHandler>,
}

impl HandlerActor {
    pub fn new(handler: Arc<dyn StageHandler>) -> Self {
        Self { handler }
    }
}

impl KernelActor for HandlerActor {
    const KIND: &'static str = "stage-handler";
}

/// Run the handler on a copy of the context.
#[derive(Message)]
#[rtype(result = "Result<Patch, String>")]
pub struct RunHandler(pub Stage, pub StageContext);

impl Handles<RunHandler> for HandlerActor {
    type Reply = ResponseFuture<Result<Patch, String>>;
    fn handle(&mut self, RunHandler(stage, ctx): RunHandler, _: &mut HostContext<Self>) -> Self::Reply {
        Box::pin(self.handler.run(stage, ctx))
    }
}
