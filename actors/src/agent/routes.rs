//! Which agent takes a channel's queued input (spec §6.2: a resident's assigned input
//! channels are routed to it). The main intake looks each input's channel up here just
//! before it hands the input to a scheduler; nothing else changes on the way — the
//! input is admitted, masked and (when durable) stored by the main intake first, so an
//! acknowledged input survives a crash in the inbox whichever agent runs it, and a
//! resident's end gives its channels back to the main agent.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use super::scheduler::SchedulerActor;
use crate::addr::TAddr;

/// A channel that cannot be assigned, and why (each says what to do).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error(
        "channel `{channel}` is assigned to resident `{owner}` already; destroy or reclaim it first, or pick another channel"
    )]
    Taken { channel: String, owner: String },
    #[error(
        "channel `{0}` cannot be assigned: `kernel`, `cli`, `_consolidation_` and the sub-agents' own `child/…`/`sub/…` channels stay with the kernel"
    )]
    Reserved(String),
}

#[derive(Clone)]
struct Route {
    owner: String,
    scheduler: TAddr<SchedulerActor>,
}

/// The channel → resident table (cheap to clone; shared by the main intake and the
/// residents' control plane).
#[derive(Clone, Default)]
pub struct ChannelRoutes(Arc<RwLock<HashMap<String, Route>>>);

/// Whether `channel` may be given to a resident.
pub fn assignable(channel: &str) -> bool {
    let c = channel.trim();
    !c.is_empty()
        && !matches!(c, "kernel" | "cli" | super::input::CONSOLIDATION_CHANNEL)
        && !c.starts_with("child/")
        && !c.starts_with("sub/")
}

impl ChannelRoutes {
    /// Whether `owner` could be given every one of `channels` (checked before anything
    /// of a new resident is started; [`Self::assign`] checks again).
    pub fn check(&self, owner: &str, channels: &[String]) -> Result<(), RouteError> {
        Self::free(&self.0.read(), owner, channels)
    }

    fn free(map: &HashMap<String, Route>, owner: &str, channels: &[String]) -> Result<(), RouteError> {
        for c in channels {
            if !assignable(c) {
                return Err(RouteError::Reserved(c.clone()));
            }
            if let Some(r) = map.get(c)
                && r.owner != owner
            {
                return Err(RouteError::Taken {
                    channel: c.clone(),
                    owner: r.owner.clone(),
                });
            }
        }
        Ok(())
    }

    /// Gives every one of `channels` to `owner` (all or none).
    pub fn assign(
        &self,
        owner: &str,
        channels: &[String],
        scheduler: &TAddr<SchedulerActor>,
    ) -> Result<(), RouteError> {
        let mut map = self.0.write();
        Self::free(&map, owner, channels)?;
        for c in channels {
            map.insert(
                c.clone(),
                Route {
                    owner: owner.to_owned(),
                    scheduler: scheduler.clone(),
                },
            );
        }
        Ok(())
    }

    /// Takes every channel of `owner` back (its end); answers them.
    pub fn release(&self, owner: &str) -> Vec<String> {
        let mut map = self.0.write();
        let mine: Vec<String> = map
            .iter()
            .filter(|(_, r)| r.owner == owner)
            .map(|(c, _)| c.clone())
            .collect();
        for c in &mine {
            map.remove(c);
        }
        mine
    }

    /// The scheduler of the resident that owns `channel`, if one does.
    pub fn scheduler_for(&self, channel: &str) -> Option<TAddr<SchedulerActor>> {
        let map = self.0.read();
        if map.is_empty() {
            return None;
        }
        map.get(channel).map(|r| r.scheduler.clone())
    }

    /// The channels `owner` holds, sorted.
    pub fn channels_of(&self, owner: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .0
            .read()
            .iter()
            .filter(|(_, r)| r.owner == owner)
            .map(|(c, _)| c.clone())
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_and_sub_agent_channels_stay_with_the_kernel() {
        for ok in ["qq:private:42", "webchat", "telegram/123"] {
            assert!(assignable(ok), "{ok}");
        }
        for bad in ["", " ", "kernel", "cli", "_consolidation_", "child/x", "sub/x"] {
            assert!(!assignable(bad), "{bad:?}");
        }
    }
}
