//! Kernel services offered to plugins: the data methods of the protocol (graph
//! memory, documents, knowledge, text memory, social reads), output channel and stage
//! registration helpers, and event subscriptions. Shared by subprocess plugins
//! (`process.rs`, over the wire) and Lua plugins (`lua.rs`, as `sdk.*`), so both get
//! the same operations, results and capability checks.
//!
//! Capabilities are checked before a call reaches `KernelServices::data`: the caller
//! decodes the call and asks the manifest ([`Manifest::permits`]) first, which reads
//! the decoded call — so the namespace a settings call touches counts (own
//! `plugin.<name>.*` keys are free; core keys and other plugins' keys need
//! `settings_cross`). The settings methods then check the keys' shape.

use futures_util::future::BoxFuture;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{self as m, OutputRegister, StageRegister};
use homeagent_plugin_protocol::{Manifest, PluginRequest};
use serde_json::{Value, json};

use crate::addr::TAddr;
pub use crate::agent::channels::Deliver;
use crate::agent::channels::{Channel, Channels, caps};
use crate::bus::EventBus;
use crate::memory::context::actor::ContextActor;
use crate::memory::graph::actor::GraphActor;
use crate::memory::knowledge::KnowledgeActor;
use crate::memory::textlog::TextLogActor;
use crate::stages::{Scope, Stage, ToolSpec};

mod errors;
pub mod events;
pub mod io;
mod memory;
mod settings;

use crate::config::ConfigActor;
use crate::llm::provider::LlmActor;

/// Handles of the kernel services plugins may use (each optional: a kernel built
/// without a tier answers "unavailable").
#[derive(Clone, Default)]
pub struct KernelServices {
    pub bus: EventBus,
    pub channels: Channels,
    pub context: Option<TAddr<ContextActor>>,
    /// The document tier (`doc.*`).
    pub documents: Option<TAddr<crate::memory::documents::DocumentsActor>>,
    pub textlog: Option<TAddr<TextLogActor>>,
    pub graph: Option<TAddr<GraphActor>>,
    pub knowledge: Option<TAddr<KnowledgeActor>>,
    /// Settings (`settings.*`).
    pub config: Option<TAddr<ConfigActor>>,
    /// LLM sources (`llm.*`).
    pub llm: Option<TAddr<LlmActor>>,
    /// The media memory, where `io.injectMedia*` stores a plugin's images.
    pub media: Option<crate::memory::media::actor::MediaHandle>,
}

use errors::bad;

pub use events::EventSub;
pub use io::inject_source;

/// Whether `req` is served by [`KernelServices::call`] (the data and settings families).
pub fn is_service_call(req: &PluginRequest) -> bool {
    memory::serves(req) || settings::serves(req)
}

impl KernelServices {
    /// Runs a data or settings call for the plugin of `manifest` (capability of the
    /// method already checked); gives the call back when it is not one of these
    /// families. Subprocess plugins reach it with the call decoded at their
    /// connection, Lua plugins with the call their `sdk.*` function built.
    #[allow(clippy::result_large_err)]
    pub fn call(
        &self,
        manifest: &Manifest,
        req: PluginRequest,
    ) -> Result<BoxFuture<'static, Result<Value, RpcError>>, PluginRequest> {
        let (s, manifest) = (self.clone(), manifest.clone());
        if settings::serves(&req) {
            return Ok(Box::pin(async move { s.settings(&manifest, req).await }));
        }
        if memory::serves(&req) {
            return Ok(Box::pin(async move { s.memory(&manifest.name, req).await }));
        }
        Err(req)
    }

    /// Registers an output channel for `plugin`, delivered by `deliver`.
    pub fn register_output(&self, plugin: &str, reg: &OutputRegister, deliver: Deliver) -> Result<Value, RpcError> {
        let caps = parse_caps(reg.caps.as_ref()).map_err(|e| bad(m::OUTPUT_REGISTER, e))?;
        let channel = Channel {
            name: reg.name.clone(),
            description: if reg.description.is_empty() {
                format!("channel of the plugin `{plugin}`")
            } else {
                reg.description.clone()
            },
            caps,
            sync: false,
        };
        self.channels
            .register(plugin, channel, deliver)
            .map_err(|e| bad(m::OUTPUT_REGISTER, e))?;
        Ok(json!({"ok": true, "tool": format!("{}{}", crate::agent::channels::SEND_PREFIX, reg.name)}))
    }
}

/// Channel capabilities from names or the SDK's bit mask; default text.
pub fn parse_caps(v: Option<&Value>) -> Result<u8, String> {
    const NAMES: [(&str, u8); 5] = [
        ("text", caps::TEXT),
        ("file", caps::FILE),
        ("image", caps::IMAGE),
        ("audio", caps::AUDIO),
        ("structured", caps::STRUCTURED),
    ];
    match v {
        None | Some(Value::Null) => Ok(caps::TEXT),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(b) if (1..32).contains(&b) => Ok(b as u8),
            _ => Err(format!("`caps` bit mask {n} is out of range (1..31)")),
        },
        Some(Value::Array(a)) => {
            let mut bits = 0;
            for c in a {
                let name = c.as_str().unwrap_or_default();
                bits |= NAMES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, b)| *b)
                    .ok_or_else(|| format!("unknown capability `{c}`; use text, file, image, audio, structured"))?;
            }
            Ok(if bits == 0 { caps::TEXT } else { bits })
        }
        Some(other) => Err(format!("`caps` must be a list of names or a bit mask, not {other}")),
    }
}

/// The kernel's tool spec for a plugin's `tool.register` (subprocess and Lua alike);
/// a cleaner that does not compile refuses the registration.
pub fn tool_spec(plugin: &str, t: &m::ToolRegister) -> Result<ToolSpec, crate::agent::inputdef::DefError> {
    let parameters = if t.parameters.is_null() {
        json!({"type": "object", "properties": {}})
    } else {
        t.parameters.clone()
    };
    let mut spec = ToolSpec::new(&t.name, &t.description, parameters);
    spec.plugin = plugin.to_owned();
    spec.parallel_safe = t.parallel_safe;
    spec.no_memory = t.no_memory;
    spec.paths = t.paths.clone();
    spec.network = t.network;
    spec.keywords = t.keywords.clone();
    spec.cleaner = t
        .cleaner
        .as_ref()
        .map(crate::agent::inputdef::Cleaner::compile)
        .transpose()?
        .map(crate::agent::inputdef::Cleaner::into_fn);
    Ok(spec)
}

/// Declares one of `plugin`'s input channels (subprocess and Lua alike).
pub fn register_input(channels: &Channels, plugin: &str, reg: &m::InputRegister) -> Result<Value, RpcError> {
    let def = crate::agent::inputdef::InputDef::from_register(plugin, reg).map_err(|e| bad(m::INPUT_REGISTER, e))?;
    tracing::info!(
        plugin,
        channel = %def.name,
        no_memory = def.no_memory,
        cleaner = def.cleaner.is_some(),
        "input channel declared"
    );
    channels.register_input(def);
    Ok(json!({"channel": reg.name}))
}

/// A stage registration's stage and scope, with errors that list the valid values.
pub fn parse_stage(reg: &StageRegister) -> Result<(Stage, Scope), RpcError> {
    let stage = Stage::parse(&reg.stage).ok_or_else(|| {
        let all: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        bad(
            m::STAGE_REGISTER,
            format!("unknown stage `{}`; stages: {}", reg.stage, all.join(", ")),
        )
    })?;
    let scope = match reg.scope.as_deref() {
        None | Some("") | Some("global") => Scope::Global,
        Some("own_tools") => Scope::OwnTools,
        Some(other) => {
            return Err(bad(
                m::STAGE_REGISTER,
                format!("unknown scope `{other}`; use global or own_tools"),
            ));
        }
    };
    Ok((stage, scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_stages_parse_with_helpful_errors() {
        assert_eq!(parse_caps(None), Ok(caps::TEXT));
        assert_eq!(
            parse_caps(Some(&json!(["text", "image"]))),
            Ok(caps::TEXT | caps::IMAGE)
        );
        assert_eq!(parse_caps(Some(&json!(6))), Ok(caps::FILE | caps::IMAGE));
        assert!(
            parse_caps(Some(&json!(["smell"])))
                .unwrap_err()
                .contains("unknown capability")
        );
        assert!(parse_caps(Some(&json!(64))).is_err());
        let reg = |stage: &str, scope: Option<&str>| StageRegister {
            stage: stage.into(),
            scope: scope.map(Into::into),
        };
        assert_eq!(
            parse_stage(&reg("before_output", None)).unwrap(),
            (Stage::BeforeOutput, Scope::Global)
        );
        assert_eq!(
            parse_stage(&reg("after_toolcall", Some("own_tools"))).unwrap().1,
            Scope::OwnTools
        );
        assert!(
            parse_stage(&reg("later", None))
                .unwrap_err()
                .message
                .contains("on_input")
        );
        assert!(
            parse_stage(&reg("on_input", Some("mine")))
                .unwrap_err()
                .message
                .contains("own_tools")
        );
        let call = |m: &str, p: Value| PluginRequest::from_message(m, p).unwrap();
        assert!(is_service_call(&call("memory.recall", json!({"query": "x"}))));
        assert!(!is_service_call(&call("tool.register", json!({"name": "t"}))));
    }

    #[test]
    fn data_methods_need_their_tier() {
        let s = KernelServices::default();
        let sys = actix::System::new();
        let manifest: Manifest = serde_json::from_value(json!({"name": "p"})).unwrap();
        let call = |m: &str, p: Value| PluginRequest::from_message(m, p).unwrap();
        let err = sys
            .block_on(
                s.call(&manifest, call("memory.recall", json!({"query": "x"})))
                    .ok()
                    .unwrap(),
            )
            .unwrap_err();
        assert!(err.message.contains("not available"), "{}", err.message);
        let err = sys
            .block_on(
                s.call(&manifest, call("settings.get", json!({"key": "x"})))
                    .ok()
                    .unwrap(),
            )
            .unwrap_err();
        assert!(err.message.contains("not available"), "{}", err.message);
        assert!(s.call(&manifest, call("tool.register", json!({"name": "t"}))).is_err());
    }
}
