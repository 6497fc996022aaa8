//! Running a vendor adapter: one Lua 5.4 state per adapter instance (mlua).
//!
//! An adapter is a Lua chunk returning a table (see `lua/README.md` for the contract).
//! The VM gets a small, deterministic standard library (`json`, `log`, hashing and
//! base64) and limits: an instruction budget per call and a memory cap, so a runaway
//! script fails its request instead of hanging the provider.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use mlua::{Function, HookTriggers, Lua, LuaOptions, LuaSerdeExt, StdLib, Table, Value as LuaValue, VmState};
use sha2::{Digest, Sha256};

use super::types::{CompletionRequest, CompletionResponse, StreamChunk};

/// Instructions one adapter call may execute (counted in steps of [`HOOK_STEP`]).
const INSTRUCTION_BUDGET: u64 = 50_000_000;
const HOOK_STEP: u32 = 10_000;
/// Memory one adapter state may use.
const MEMORY_LIMIT: usize = 64 * 1024 * 1024;
/// Added to a call's step counter when its budget is spent: from then on every hook
/// tick and every `pcall`/`xpcall` return raises again, so no `pcall` loop can swallow
/// the abort. Resetting the counter to 0 (the next call) clears it.
const ABORTED: u64 = 1 << 62;

/// The most work (steps of Lua's pattern matcher, estimated as `len^quantifiers`) one
/// `string.find/match/gmatch/gsub` may be asked for. The matcher is C code the
/// instruction hook never interrupts, so a catastrophic pattern is refused up front.
const PATTERN_WORK: f64 = 1e10;

/// How a vendor frames its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Server-Sent Events: `data: <payload>` lines, `[DONE]` at the end.
    Sse,
    /// One JSON object per line (Ollama).
    Ndjson,
}

/// What went wrong inside an adapter.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("adapter `{adapter}` failed to load: {message}; fix the script or remove the override in DATA/adapters")]
    Load { adapter: String, message: String },
    #[error("adapter `{adapter}`: `{function}` failed: {message}")]
    Call {
        adapter: String,
        function: String,
        message: String,
    },
    #[error("adapter `{adapter}`: `{function}` returned JSON that does not match the unified shape: {message}")]
    Shape {
        adapter: String,
        function: String,
        message: String,
    },
}

/// Inputs of `build_headers(meta)`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HeaderMeta<'a> {
    pub url: &'a str,
    pub method: &'a str,
    pub body: &'a str,
    pub api_key: &'a str,
    pub timestamp: u64,
    pub source: SourceName<'a>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SourceName<'a> {
    pub name: &'a str,
}

/// A loaded adapter.
pub struct Adapter {
    name: String,
    lua: Lua,
    module: Table,
    /// Instructions used by the current call (in hook steps).
    used: Arc<AtomicU64>,
    pub endpoint: String,
    pub stream_format: StreamFormat,
    /// How the vendor marks the end of a stream, for the error of a stream cut off
    /// before it (`end_marker` in the script; by default `finish_reason or [DONE]` for
    /// SSE and a `"done": true` line for NDJSON).
    pub end_marker: String,
    /// The converted tool list of the last distinct tool list (see `tools_cache`).
    tools_cache: parking_lot::Mutex<Option<super::tools_cache::Entry>>,
    /// The converted tools one by one, to assemble lists never converted whole.
    per_tool: parking_lot::Mutex<super::tools_cache::PerTool>,
    /// Whether long texts may pass this adapter as markers (`opaque`): `None` until the
    /// first marked call has been compared with the full conversion.
    texts_opaque: parking_lot::Mutex<Option<bool>>,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn install_stdlib(lua: &Lua, adapter: &str) -> mlua::Result<()> {
    let g = lua.globals();
    let json = lua.create_table()?;
    // Built on the Lua stack directly (`lua_json`): mlua's serde bridge spent nearly half
    // of a turn's kernel CPU on these two.
    json.set(
        "encode",
        lua.create_function(|lua, v: LuaValue| super::lua_json::encode(lua, v))?,
    )?;
    json.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| super::lua_json::decode(lua, &s.as_bytes()))?,
    )?;
    json.set("null", lua.null())?;
    json.set(
        "array",
        lua.create_function(|lua, ()| {
            let t = lua.create_table()?;
            t.set_metatable(Some(lua.array_metatable()))?;
            Ok(t)
        })?,
    )?;
    g.set("json", json)?;
    let name = adapter.to_owned();
    g.set(
        "log",
        lua.create_function(move |_, (level, msg): (String, String)| {
            match level.as_str() {
                "error" => tracing::error!(adapter = %name, "{msg}"),
                "warn" => tracing::warn!(adapter = %name, "{msg}"),
                "info" => tracing::info!(adapter = %name, "{msg}"),
                _ => tracing::debug!(adapter = %name, "{msg}"),
            }
            Ok(())
        })?,
    )?;
    g.set(
        "sha256_hex",
        lua.create_function(|_, s: mlua::String| Ok(hex(&Sha256::digest(&*s.as_bytes()))))?,
    )?;
    g.set(
        "hmac_sha256_hex",
        lua.create_function(|_, (k, m): (mlua::String, mlua::String)| {
            let mut mac = Hmac::<Sha256>::new_from_slice(&k.as_bytes()).map_err(mlua::Error::external)?;
            mac.update(&m.as_bytes());
            Ok(hex(&mac.finalize().into_bytes()))
        })?,
    )?;
    g.set(
        "base64_encode",
        lua.create_function(|_, s: mlua::String| Ok(base64::engine::general_purpose::STANDARD.encode(&*s.as_bytes())))?,
    )?;
    g.set(
        "tohex",
        lua.create_function(|_, s: mlua::String| Ok(hex(&s.as_bytes())))?,
    )?;
    // require(name): the shared modules of `lua/lib/` (each loaded once per state).
    // There is no package library: adapters cannot load anything else.
    let loaded = lua.create_table()?;
    g.set(
        "require",
        lua.create_function(move |lua, name: String| {
            if let Some(v) = loaded.get::<Option<LuaValue>>(name.as_str())? {
                return Ok(v);
            }
            let src = super::bundled::lib(&name).ok_or_else(|| {
                mlua::Error::runtime(format!(
                    "module `{name}` not found; adapters may require only the bundled modules of lua/lib"
                ))
            })?;
            let v: LuaValue = lua.load(src).set_name(format!("@lib/{name}.lua")).eval()?;
            loaded.set(name.as_str(), v.clone())?;
            Ok(v)
        })?,
    )?;
    // http_get(url) / http_post(url, body): for adapters that must fetch a token or a
    // signature first. They answer a JSON string `{url, status, body}` or `{url, error}`
    // and never raise; 30 s timeout. Only usable from calls made with `call_async`.
    g.set(
        "http_get",
        lua.create_async_function(|_, url: String| async move { Ok(http(url, None).await) })?,
    )?;
    g.set(
        "http_post",
        lua.create_async_function(|_, (url, body): (String, String)| async move { Ok(http(url, Some(body)).await) })?,
    )?;
    Ok(())
}

/// The daemon's own listen addresses: scripts' HTTP helpers must not reach them (a
/// plugin would otherwise drive the owner's API — settings, installs — from inside).
static OWN_ADDRS: parking_lot::RwLock<Vec<std::net::SocketAddr>> = parking_lot::RwLock::new(Vec::new());

/// Declares an address the daemon serves on; `http_get`/`http_post` refuse it.
pub fn forbid_own_address(addr: std::net::SocketAddr) {
    OWN_ADDRS.write().push(addr);
}

/// The addresses declared with [`forbid_own_address`] (the firewall hands them to
/// sandboxed network tools, which must refuse them too).
pub fn own_addresses() -> Vec<std::net::SocketAddr> {
    OWN_ADDRS.read().clone()
}

/// Whether `to` is one of the daemon's own addresses: the same port on the same IP, or
/// on any local address when the daemon listens on all of them (`0.0.0.0`, `::`).
fn is_own(to: std::net::SocketAddr) -> bool {
    // `::ffff:127.0.0.1` is 127.0.0.1.
    let ip = to.ip().to_canonical();
    OWN_ADDRS.read().iter().any(|own| {
        let own_ip = own.ip().to_canonical();
        own.port() == to.port()
            && (own_ip == ip
                || ((own_ip.is_unspecified() || own_ip.is_loopback()) && (ip.is_loopback() || ip.is_unspecified())))
    })
}

/// Resolves the URL's host once, refuses the daemon's own address, and pins the
/// connection to the checked addresses (a second lookup could answer differently:
/// DNS rebinding).
async fn checked_client(url: &str) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("bad URL `{url}`: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("URL `{url}` has no host"))?
        .to_owned();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| format!("URL `{url}` has no port"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((bare.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
        .collect();
    if addrs.iter().any(|a| is_own(*a)) {
        tracing::warn!(%url, "a script's HTTP call to the daemon's own API was refused");
        return Err(format!(
            "`{url}` is the daemon's own address; scripts may not call the daemon's API"
        ));
    }
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .resolve_to_addrs(&bare, &addrs)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// One HTTP call for the Lua built-ins.
async fn http(url: String, body: Option<String>) -> String {
    let client = match checked_client(&url).await {
        Ok(c) => c,
        Err(e) => return serde_json::json!({"url": url, "error": e}).to_string(),
    };
    let req = match body {
        Some(b) => client.post(&url).header("content-type", "application/json").body(b),
        None => client.get(&url),
    };
    let result = async {
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok::<_, reqwest::Error>((status, text))
    }
    .await;
    match result {
        Ok((status, text)) => serde_json::json!({"url": url, "status": status, "body": text}).to_string(),
        Err(e) => serde_json::json!({"url": url, "error": e.to_string()}).to_string(),
    }
}

/// Removes what the base and string libraries offer beyond computation: files
/// (`loadfile`, `dofile`), bytecode (`string.dump`, binary chunks through `load` — a
/// crafted binary chunk can break out of the VM) and `print` (the daemon's stdout is not
/// the script's). `load` keeps working for text chunks, always in the sandbox's own
/// environment unless the script passes one explicitly.
fn close_escapes(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    for name in ["loadfile", "dofile", "print"] {
        g.set(name, LuaValue::Nil)?;
    }
    let string: Table = g.get("string")?;
    string.set("dump", LuaValue::Nil)?;
    let load: Function = g.get("load")?;
    let env = g.clone();
    g.set(
        "load",
        lua.create_function(
            move |_, (chunk, name, mode, chosen): (LuaValue, LuaValue, Option<String>, LuaValue)| {
                if mode.as_deref().is_some_and(|m| m != "t") {
                    return Err(mlua::Error::runtime(
                        "load: only text chunks are allowed in the sandbox (mode \"t\")",
                    ));
                }
                let env = if chosen.is_nil() {
                    LuaValue::Table(env.clone())
                } else {
                    chosen
                };
                load.call::<mlua::MultiValue>((chunk, name, "t", env))
            },
        )?,
    )?;
    Ok(())
}

/// A fresh Lua 5.4 state for untrusted scripts (adapters, Lua plugins): only the
/// string/table/math/utf8 libraries (no io, os, package or debug), the built-ins
/// (`json`, `log`, hashing, base64, `require` of bundled modules, `http_get`/`http_post`),
/// a memory cap, and an instruction budget. Reset the returned counter to 0 before each
/// call: the budget is per call.
pub fn sandbox(name: &str) -> mlua::Result<(Lua, Arc<AtomicU64>)> {
    let lua = Lua::new_with(
        StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8,
        LuaOptions::default(),
    )?;
    lua.set_memory_limit(MEMORY_LIMIT)?;
    close_escapes(&lua)?;
    install_stdlib(&lua, name)?;
    let used = Arc::new(AtomicU64::new(0));
    let counter = used.clone();
    lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_STEP), move |_, _| {
        let steps = counter.fetch_add(1, Ordering::Relaxed);
        if steps >= ABORTED || steps * u64::from(HOOK_STEP) > INSTRUCTION_BUDGET {
            counter.fetch_or(ABORTED, Ordering::Relaxed);
            return Err(budget_error());
        }
        Ok(VmState::Continue)
    })?;
    uncatchable_abort(&lua, &used)?;
    used.store(0, Ordering::Relaxed);
    Ok((lua, used))
}

/// Marks the call running under `counter` (a [`sandbox`]'s) aborted: it raises at its
/// next instruction tick, which comes as soon as a C function it is inside returns.
/// How an abandoned Lua plugin's thread is told to stop.
pub fn abort(counter: &AtomicU64) {
    counter.fetch_or(ABORTED, Ordering::Relaxed);
}

fn budget_error() -> mlua::Error {
    mlua::Error::runtime("instruction budget exhausted (runaway loop?)")
}

/// `pcall` and `xpcall` that pass an aborted call's error on instead of returning it:
/// `while true do pcall(spin) end` ends with the first abort. Written in Lua around the
/// originals so a data API can still yield through them (a Rust `pcall` is a C
/// boundary a coroutine cannot yield across).
fn uncatchable_abort(lua: &Lua, used: &Arc<AtomicU64>) -> mlua::Result<()> {
    let counter = used.clone();
    let check = lua.create_function(move |_, rest: mlua::MultiValue| {
        if counter.load(Ordering::Relaxed) >= ABORTED {
            return Err(budget_error());
        }
        Ok(rest)
    })?;
    let g = lua.globals();
    let (p, x): (Function, Function) = lua
        .load(
            r#"local check, pcall, xpcall = ...
            return function(...) return check(pcall(...)) end,
                   function(...) return check(xpcall(...)) end"#,
        )
        .set_name("=sandbox")
        .call((check, g.get::<Function>("pcall")?, g.get::<Function>("xpcall")?))?;
    g.set("pcall", p)?;
    g.set("xpcall", x)?;
    Ok(())
}

/// The estimated worst-case work of matching `pattern` against `len` bytes: each
/// single-character repetition (`*`, `+`, `-`) can backtrack over the whole subject,
/// each `?` doubles the tries, and an unanchored search may start at every position
/// (Lua patterns have no nested repetition, so this bounds them:
/// `len^(reps + unanchored) * 2^optional`).
/// Escapes (`%*`) and sets (`[a-z]`) are skipped. Conservative by design: a search
/// with one repetition over more than ~100 KB is refused, even where the real matcher
/// would be fast; a plugin splits such text first.
fn pattern_work(pattern: &[u8], len: usize) -> f64 {
    let anchored = pattern.first() == Some(&b'^');
    let (mut reps, mut optional) = (0i32, 0i32);
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'%' => i += 1,
            b'[' => {
                // A set: `]` right after `[` or `[^` is a member, not the end.
                i += 1;
                if pattern.get(i) == Some(&b'^') {
                    i += 1;
                }
                if pattern.get(i) == Some(&b']') {
                    i += 1;
                }
                while i < pattern.len() && pattern[i] != b']' {
                    if pattern[i] == b'%' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            // `.*` or `.-` with nothing after it but captures and `$` cannot fail, so
            // it never backtracks: linear, not a factor.
            b'*' | b'-'
                if i > 0 && pattern[i - 1] == b'.' && pattern[i + 1..].iter().all(|c| matches!(c, b')' | b'$')) => {}
            b'*' | b'+' | b'-' if i > 0 => reps += 1,
            b'?' if i > 0 => optional += 1,
            _ => {}
        }
        i += 1;
    }
    let n = (len.max(2)) as f64;
    let starts = if anchored { 0 } else { 1 };
    n.powi(reps + starts) * 2f64.powi(optional)
}

/// Wraps the pattern functions of `string` so a pattern whose worst case is over
/// `PATTERN_WORK` on this subject is refused with an error saying what to do. For
/// Lua plugins (third-party code); the adapters are the owner's and parse whole
/// responses with patterns this estimate would refuse.
pub fn guard_patterns(lua: &Lua) -> mlua::Result<()> {
    let string: Table = lua.globals().get("string")?;
    for name in ["find", "match", "gmatch", "gsub"] {
        let original: Function = string.get(name)?;
        let guarded = lua.create_function(move |_, args: mlua::MultiValue| {
            let subject = args.front().and_then(|v| v.as_string()).map(|s| s.as_bytes().len());
            let pattern = args.get(1).and_then(|v| v.as_string()).map(|s| s.as_bytes().to_vec());
            let plain = name == "find" && args.get(3).is_some_and(|v| v.as_boolean() == Some(true));
            if let (Some(len), Some(pattern), false) = (subject, pattern, plain)
                && pattern_work(&pattern, len) > PATTERN_WORK
            {
                return Err(mlua::Error::runtime(format!(
                    "string.{name}: this pattern could take minutes on {len} bytes (too many repetitions for a subject this long); simplify the pattern or match a shorter piece"
                )));
            }
            original.call::<mlua::MultiValue>(args)
        })?;
        string.set(name, guarded)?;
    }
    Ok(())
}

impl Adapter {
    /// Compiles `source` (a chunk returning the adapter table) into a fresh Lua state.
    pub fn load(name: &str, source: &str) -> Result<Self, AdapterError> {
        let load_err = |e: mlua::Error| AdapterError::Load {
            adapter: name.to_owned(),
            message: e.to_string(),
        };
        let (lua, used) = sandbox(name).map_err(load_err)?;
        used.store(0, Ordering::Relaxed);
        let module: Table = lua
            .load(source)
            .set_name(format!("@{name}.lua"))
            .eval()
            .map_err(load_err)?;
        if module
            .get::<Option<Function>>("transform_request")
            .map_err(load_err)?
            .is_none()
        {
            return Err(AdapterError::Load {
                adapter: name.to_owned(),
                message: "the returned table has no `transform_request` function".into(),
            });
        }
        let endpoint = module
            .get::<Option<String>>("endpoint")
            .map_err(load_err)?
            .unwrap_or_else(|| "/chat/completions".into());
        let stream_format = match module
            .get::<Option<String>>("stream_format")
            .map_err(load_err)?
            .as_deref()
        {
            Some("ndjson") => StreamFormat::Ndjson,
            _ => StreamFormat::Sse,
        };
        let end_marker = module
            .get::<Option<String>>("end_marker")
            .map_err(load_err)?
            .unwrap_or_else(|| match stream_format {
                StreamFormat::Sse => "finish_reason or [DONE]".into(),
                StreamFormat::Ndjson => "a \"done\": true line".into(),
            });
        Ok(Self {
            name: name.to_owned(),
            lua,
            module,
            used,
            endpoint,
            stream_format,
            end_marker,
            tools_cache: parking_lot::Mutex::new(None),
            per_tool: Default::default(),
            texts_opaque: parking_lot::Mutex::new(None),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn has(&self, function: &str) -> bool {
        matches!(self.module.get::<LuaValue>(function), Ok(LuaValue::Function(_)))
    }

    fn function(&self, function: &str) -> Result<Function, AdapterError> {
        self.used.store(0, Ordering::Relaxed); // a fresh instruction budget per call
        self.module.get(function).map_err(|e| self.call_error(function, e))
    }

    fn call_error(&self, function: &str, e: mlua::Error) -> AdapterError {
        AdapterError::Call {
            adapter: self.name.clone(),
            function: function.to_owned(),
            message: e.to_string(),
        }
    }

    fn call<A: mlua::IntoLuaMulti, R: mlua::FromLuaMulti>(&self, function: &str, args: A) -> Result<R, AdapterError> {
        self.function(function)?
            .call(args)
            .map_err(|e| self.call_error(function, e))
    }

    async fn call_async<A: mlua::IntoLuaMulti, R: mlua::FromLuaMulti>(
        &self,
        function: &str,
        args: A,
    ) -> Result<R, AdapterError> {
        self.function(function)?
            .call_async(args)
            .await
            .map_err(|e| self.call_error(function, e))
    }

    /// Like [`transform_request`](Self::transform_request), allowing the script to use
    /// `http_get` / `http_post` (the provider uses this one).
    pub async fn transform_request_async(&self, req: &CompletionRequest) -> Result<String, AdapterError> {
        let input = serde_json::to_string(req).expect("requests serialise");
        self.call_async("transform_request", input).await
    }

    /// [`transform_request_async`](Self::transform_request_async) with the tool list's
    /// conversion cached per list (`tools_cache`): the adapter sees placeholder tools and
    /// the converted real ones are spliced in. `req.tools` is swapped for placeholders
    /// during the call and restored. Any doubt (a list the adapter renames or merges, an
    /// unexpected output) takes the full path.
    pub async fn transform_request_cached(&self, req: &mut CompletionRequest) -> Result<String, AdapterError> {
        use super::opaque;
        if *self.texts_opaque.lock() == Some(false) {
            return self.transform_tools_cached(req).await;
        }
        let taken = opaque::take(req);
        if taken.is_empty() {
            return self.transform_tools_cached(req).await;
        }
        let marked = self.transform_tools_cached(req).await;
        let filled = marked.ok().and_then(|out| opaque::fill(&out, &taken));
        let learned = *self.texts_opaque.lock();
        match (filled, learned) {
            (Some(body), Some(true)) => {
                opaque::restore_owned(req, taken);
                Ok(body)
            }
            (filled, _) => {
                // Not learned yet, or the markers did not all come back: the full path,
                // and (the first time) a verdict on whether this adapter moves texts only.
                opaque::restore(req, &taken);
                let full = self.transform_tools_cached(req).await?;
                if learned.is_none() {
                    let same = filled.as_deref().is_some_and(|b| {
                        serde_json::from_str::<serde_json::Value>(b).ok()
                            == serde_json::from_str::<serde_json::Value>(&full).ok()
                    });
                    tracing::debug!(adapter = %self.name, opaque = same, "long texts through the adapter as markers");
                    *self.texts_opaque.lock() = Some(same);
                }
                Ok(full)
            }
        }
    }

    /// The request converted with the tool list's conversion cached (see
    /// [`Self::transform_request_cached`]).
    async fn transform_tools_cached(&self, req: &mut CompletionRequest) -> Result<String, AdapterError> {
        use super::tools_cache as tc;
        let n = req.tools.len();
        if n < tc::MIN_TOOLS {
            return self.transform_request_async(req).await;
        }
        let cached = {
            let mut slot = self.tools_cache.lock();
            match slot.as_mut() {
                Some(e) if std::sync::Arc::ptr_eq(&e.list, &req.tools) => Some(e.clone()),
                _ => None,
            }
        };
        let (key, cached, keys) = match cached {
            Some(e) => (e.key, Some(e), Vec::new()),
            None => {
                // Another `Arc`: a new list, or the same tools rebuilt (hash to tell).
                let keys: Vec<u64> = req.tools.iter().map(tc::tool_key).collect();
                let key = tc::list_key(&keys);
                let mut slot = self.tools_cache.lock();
                let same = slot.as_mut().filter(|e| e.key == key).map(|e| {
                    e.list = req.tools.clone();
                    e.clone()
                });
                (key, same, keys)
            }
        };
        // A list never converted whole, all of whose tools were: assembled from them once
        // this adapter's assembly is trusted; otherwise kept to settle that trust below.
        let mut assembled = None;
        let cached = match cached {
            Some(e) => Some(e),
            // An adapter found not to convert tools one by one: nothing to assemble.
            None if self.per_tool.lock().trust() == Some(false) => None,
            None => {
                let per = self.per_tool.lock();
                assembled = per.assemble(&keys);
                match &assembled {
                    Some(splice) if per.trust() == Some(true) => {
                        let entry = tc::Entry {
                            key,
                            list: req.tools.clone(),
                            placeholders: per.placeholders(n),
                            splice: Some(splice.clone()),
                        };
                        tracing::debug!(adapter = %self.name, tools = n, "tool list assembled from converted tools");
                        *self.tools_cache.lock() = Some(entry.clone());
                        Some(entry)
                    }
                    _ => None,
                }
            }
        };
        match cached {
            Some(tc::Entry {
                splice: Some((path, real)),
                placeholders,
                ..
            }) => {
                let slot = placeholders.len();
                let tools = std::mem::replace(&mut req.tools, placeholders);
                let out = self.transform_request_async(req).await;
                req.tools = tools;
                let spliced = out.ok().and_then(|out| tc::splice(&out, &path, slot, &real));
                match spliced {
                    Some(body) => Ok(body),
                    None => self.transform_request_async(req).await,
                }
            }
            Some(_) => self.transform_request_async(req).await,
            None => {
                let full = self.transform_request_async(req).await?;
                let placeholders = std::sync::Arc::new(tc::placeholders(n));
                let tools = std::mem::replace(&mut req.tools, placeholders.clone());
                let with_placeholders = self.transform_request_async(req).await;
                let mut entry = match (
                    serde_json::from_str::<serde_json::Value>(&full),
                    with_placeholders.map(|p| serde_json::from_str::<serde_json::Value>(&p)),
                ) {
                    (Ok(f), Ok(Ok(p))) => {
                        let mut entry = tc::learn(key, n, &f, &p);
                        // One placeholder instead of n: each call then converts one tiny
                        // tool, not dozens — if the spliced body is exactly the full one.
                        if let Some((path, real)) = entry.splice.clone() {
                            let one = std::sync::Arc::new(tc::placeholders(1));
                            req.tools = one.clone();
                            let out = self.transform_request_async(req).await.ok();
                            let same = out
                                .and_then(|o| tc::splice(&o, &path, 1, &real))
                                .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
                                .is_some_and(|b| b == f);
                            if same {
                                entry.placeholders = one;
                            }
                        }
                        entry
                    }
                    _ => tc::Entry {
                        key,
                        list: tools.clone(),
                        placeholders,
                        splice: None,
                    },
                };
                entry.list = tools.clone();
                req.tools = tools;
                self.per_tool.lock().record(&keys, &entry, assembled);
                tracing::debug!(
                    adapter = %self.name,
                    tools = n,
                    separable = entry.splice.is_some(),
                    "tool list converted and cached"
                );
                *self.tools_cache.lock() = Some(entry);
                Ok(full)
            }
        }
    }

    /// Calls a `string -> string` function of the adapter (also used by golden tests).
    pub fn call_str(&self, function: &str, input: &str) -> Result<String, AdapterError> {
        self.call(function, input.to_owned())
    }

    fn shape<T: serde::de::DeserializeOwned>(&self, function: &str, out: &str) -> Result<T, AdapterError> {
        serde_json::from_str(out).map_err(|e| AdapterError::Shape {
            adapter: self.name.clone(),
            function: function.to_owned(),
            message: e.to_string(),
        })
    }

    /// Unified request → the vendor's request body.
    pub fn transform_request(&self, req: &CompletionRequest) -> Result<String, AdapterError> {
        let input = serde_json::to_string(req).expect("requests serialise");
        self.call_str("transform_request", &input)
    }

    /// The vendor's response body → unified response.
    pub fn transform_response(&self, body: &str) -> Result<CompletionResponse, AdapterError> {
        let out = self.call_str("transform_response", body)?;
        self.shape("transform_response", &out)
    }

    /// One stream payload (an SSE `data:` payload or an NDJSON line) → a unified chunk,
    /// `None` when it carries nothing (keep-alives, pings).
    pub fn transform_stream_chunk(&self, payload: &str) -> Result<Option<StreamChunk>, AdapterError> {
        let out = self.call_str("transform_stream_chunk", payload)?;
        if out.trim().is_empty() {
            return Ok(None);
        }
        self.shape("transform_stream_chunk", &out).map(Some)
    }

    /// The request URL: `build_url(base, model, stream)` when the adapter has it, else
    /// the base URL (without a trailing `/`) plus the adapter's endpoint.
    pub fn url(&self, base_url: &str, model: &str, stream: bool) -> Result<String, AdapterError> {
        if self.has("build_url") {
            return self.call("build_url", (base_url.to_owned(), model.to_owned(), stream));
        }
        Ok(format!("{}{}", base_url.trim_end_matches('/'), self.endpoint))
    }

    /// Request headers: `build_headers(meta)` or the static `headers` table, plus
    /// `Authorization: Bearer <key>` unless the adapter set its own auth header.
    pub fn headers(&self, meta: &HeaderMeta<'_>) -> Result<Vec<(String, String)>, AdapterError> {
        let table: Option<Table> = if self.has("build_headers") {
            let m = self.lua.to_value(meta).map_err(|e| AdapterError::Call {
                adapter: self.name.clone(),
                function: "build_headers".into(),
                message: e.to_string(),
            })?;
            self.call("build_headers", m)?
        } else {
            self.module.get("headers").ok()
        };
        let mut headers = Vec::new();
        if let Some(t) = table {
            for pair in t.pairs::<String, String>() {
                let (k, v) = pair.map_err(|e| AdapterError::Call {
                    adapter: self.name.clone(),
                    function: "headers".into(),
                    message: format!("headers must map strings to strings: {e}"),
                })?;
                headers.push((k, v));
            }
        }
        headers.sort();
        let has_auth = headers.iter().any(|(k, _)| {
            let k = k.to_ascii_lowercase();
            k == "authorization" || k == "x-api-key" || k == "x-goog-api-key" || k == "api-key"
        });
        if !has_auth && !meta.api_key.is_empty() {
            headers.push(("Authorization".into(), format!("Bearer {}", meta.api_key)));
        }
        Ok(headers)
    }

    /// A vendor error rendered by the adapter's `transform_error`, if it has one.
    pub fn transform_error(&self, status: u16, body: &str) -> Option<String> {
        if !self.has("transform_error") {
            return None;
        }
        self.call::<_, String>("transform_error", (status, body.to_owned()))
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use serde_json::json;

    const ECHO: &str = r#"
        return {
          name = "echo", endpoint = "/v1/chat",
          headers = { ["X-Test"] = "1" },
          transform_request = function(s)
            local r = json.decode(s)
            r.disable_thinking = nil
            r.empty = json.array()
            r.none = json.null
            r.sig = hmac_sha256_hex("key", "The quick brown fox jumps over the lazy dog")
            r.sha = sha256_hex("abc")
            r.b64 = base64_encode("hi")
            return json.encode(r)
          end,
          transform_response = function(s)
            local v = json.decode(s)
            return json.encode({ content = v.text, finish_reason = "stop",
              usage = { prompt_tokens = 1, completion_tokens = 2, total_tokens = 3 }, tool_calls = json.array() })
          end,
          transform_stream_chunk = function(s)
            if s == "ping" then return "" end
            return json.encode({ content = s, done = false })
          end,
        }
    "#;

    fn req() -> CompletionRequest {
        serde_json::from_value(json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.7, "max_tokens": 10, "stream": false, "disable_thinking": true
        }))
        .unwrap()
    }

    #[test]
    fn vm_builtins_and_transforms() {
        let a = Adapter::load("echo", ECHO).unwrap();
        let body: Value = serde_json::from_str(&a.transform_request(&req()).unwrap()).unwrap();
        assert!(body.get("disable_thinking").is_none());
        assert_eq!(body["empty"], json!([]));
        assert_eq!(body["none"], Value::Null);
        assert_eq!(body["temperature"], json!(0.7));
        assert_eq!(body["max_tokens"], json!(10), "integers stay integers");
        assert_eq!(
            body["sig"],
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
        assert_eq!(
            body["sha"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(body["b64"], "aGk=");
        let r = a.transform_response(r#"{"text":"hello"}"#).unwrap();
        assert_eq!((r.content.as_str(), r.usage.total_tokens), ("hello", 3));
        assert_eq!(a.transform_stream_chunk("ping").unwrap(), None);
        assert_eq!(a.transform_stream_chunk("abc").unwrap().unwrap().content, "abc");
        assert_eq!(a.url("http://x/", "m", false).unwrap(), "http://x/v1/chat");
    }

    #[test]
    fn headers_add_bearer_unless_the_adapter_authenticates() {
        let a = Adapter::load("echo", ECHO).unwrap();
        let meta = HeaderMeta {
            url: "u",
            method: "POST",
            body: "",
            api_key: "sk",
            timestamp: 0,
            source: SourceName { name: "s" },
        };
        let h = a.headers(&meta).unwrap();
        assert!(h.contains(&("X-Test".into(), "1".into())));
        assert!(h.contains(&("Authorization".into(), "Bearer sk".into())));
        let own = Adapter::load(
            "own",
            r#"return { transform_request = function(s) return s end,
                        build_headers = function(m) return { ["x-api-key"] = m.api_key .. "!" } end }"#,
        )
        .unwrap();
        assert_eq!(
            own.headers(&meta).unwrap(),
            vec![("x-api-key".to_string(), "sk!".to_string())]
        );
    }

    #[test]
    fn broken_and_runaway_scripts_fail_cleanly() {
        assert!(matches!(Adapter::load("x", "return {"), Err(AdapterError::Load { .. })));
        assert!(
            Adapter::load("x", "return {}")
                .unwrap_err()
                .to_string()
                .contains("transform_request")
        );
        let spin = Adapter::load(
            "spin",
            "return { transform_request = function(s) while true do end end }",
        )
        .unwrap();
        let err = spin.transform_request(&req()).unwrap_err().to_string();
        assert!(err.contains("instruction budget"), "{err}");
        // The state is still usable afterwards: the budget is per call.
        let hog = Adapter::load(
            "hog",
            r#"return { transform_request = function(s) local t = {} for i = 1, 1e9 do t[i] = string.rep("x", 1000) end end }"#,
        )
        .unwrap();
        assert!(hog.transform_request(&req()).is_err(), "memory cap or budget stops it");
        let no_io = Adapter::load(
            "io",
            "return { transform_request = function(s) return io.open('/etc/passwd') end }",
        )
        .unwrap();
        assert!(no_io.transform_request(&req()).is_err(), "no io library");
    }

    /// `pcall` catches ordinary errors, never the abort; a catastrophic pattern is
    /// refused before the C matcher (which no hook interrupts) starts.
    #[test]
    fn pcall_cannot_swallow_the_abort_and_catastrophic_patterns_are_refused() {
        let (lua, used) = sandbox("hostile").unwrap();
        guard_patterns(&lua).unwrap();
        let run = |src: &str| {
            used.store(0, Ordering::Relaxed);
            lua.load(src).eval::<LuaValue>().map_err(|e| e.to_string())
        };
        let ok = run("local ok, e = pcall(error, 'boom'); return tostring(ok) .. ' ' .. e").unwrap();
        assert_eq!(ok.as_string().unwrap().to_str().unwrap(), "false boom");
        for spin in [
            "while true do pcall(function() while true do end end) end",
            "while true do xpcall(function() while true do end end, function(e) return e end) end",
            "for i = 1, 1e12 do pcall(function() for j = 1, 100 do end end) end",
        ] {
            let err = run(spin).unwrap_err();
            assert!(err.contains("instruction budget"), "{spin}: {err}");
        }
        // The next call starts with a fresh budget.
        assert_eq!(run("return 1 + 1").unwrap().as_integer(), Some(2));
        let err = run(r#"return string.find(string.rep("a", 40), string.rep("a*", 40) .. "b")"#).unwrap_err();
        assert!(err.contains("simplify the pattern"), "{err}");
        let err = run(r#"return string.find(string.rep(" ", 1000000), "%s+x")"#).unwrap_err();
        assert!(err.contains("simplify the pattern"), "{err}");
        // Everyday patterns and plain finds still work.
        let v = run(r#"return (string.gsub("  a  b  ", "^%s*(.-)%s*$", "%1"))"#).unwrap();
        assert_eq!(v.as_string().unwrap().to_str().unwrap(), "a  b");
        let v = run(r#"return string.find(string.rep("a", 1000000) .. "*+", "*+", 1, true)"#).unwrap();
        assert_eq!(v.as_integer(), Some(1_000_001));
        let v = run(r#"local n = 0 for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do n = n + 1 end return n"#)
            .unwrap();
        assert_eq!(v.as_integer(), Some(2));
        // A 4 MB data URL split by the adapters' own pattern: anchored, linear.
        let v = run(r#"local u = "data:image/png;base64," .. string.rep("A", 4000000) return #select(2, u:match("^data:([^;,]+);base64,(.*)$"))"#).unwrap();
        assert_eq!(v.as_integer(), Some(4_000_000));
    }

    /// Every route to a file, a process or bytecode named by the security review is
    /// closed; text `load` still works inside the sandbox.
    #[test]
    fn the_sandbox_has_no_file_process_or_bytecode_escapes() {
        let secret = std::env::temp_dir().join(format!("lua-secret-{}", std::process::id()));
        std::fs::write(&secret, "return 'LEAKED'").unwrap();
        let path = secret.display().to_string().replace('\\', "/");
        // Each body returns "ESCAPED" only if its route worked; otherwise it raises, and
        // the error names why (a nil global, or load's own refusal of a binary chunk).
        let escapes = [
            (format!("return loadfile('{path}')()"), "loadfile"),
            (format!("return dofile('{path}')"), "dofile"),
            ("return string.dump(function() return 1 end)".to_owned(), "dump"),
            (
                "local f = load(string.char(27) .. 'LuaT', 'x', 'b') return 'ESCAPED'".to_owned(),
                "only text chunks",
            ),
            (
                "local f, e = load(string.char(27) .. 'LuaT', 'x') if f then return 'ESCAPED' end error(e)".to_owned(),
                "binary chunk",
            ),
            (format!("return require('{path}')"), "not found"),
            ("return os.execute('true')".to_owned(), "os"),
            ("return io.popen('id'):read('a')".to_owned(), "io"),
            ("return package.loadlib('libc.so.6', 'system')".to_owned(), "package"),
            ("return debug.getregistry()".to_owned(), "debug"),
            ("print('to stdout') return 'ESCAPED'".to_owned(), "print"),
        ];
        for (body, why) in &escapes {
            let src = format!("return {{ transform_request = function(s) {body} end }}");
            let a = Adapter::load("escape", &src).unwrap();
            let err = match a.transform_request(&req()) {
                Ok(out) => panic!("`{body}` must fail, got {out}"),
                Err(e) => e.to_string(),
            };
            assert!(err.contains(why) && !err.contains("LEAKED"), "`{body}`: {err}");
        }
        // Text chunks still load, and see the sandbox's globals (json), not the host's.
        let a = Adapter::load(
            "text",
            r#"return { transform_request = function(s) local f = assert(load("return json.encode({ok = true})")) return f() end }"#,
        )
        .unwrap();
        assert_eq!(a.transform_request(&req()).unwrap(), r#"{"ok":true}"#);
        let _ = std::fs::remove_file(&secret);
    }

    #[test]
    fn wrong_shapes_are_reported() {
        let a = Adapter::load(
            "bad",
            r#"return { transform_request = function(s) return s end,
            transform_response = function(s) return '{"content": 5}' end }"#,
        )
        .unwrap();
        assert!(matches!(a.transform_response("{}"), Err(AdapterError::Shape { .. })));
    }
}

#[cfg(test)]
mod http_tests {
    use super::*;
    use serde_json::Value;

    /// `http_get` against a tiny server on loopback (std only), through `call_async`.
    #[tokio::test(flavor = "current_thread")]
    async fn http_builtins_reach_loopback_and_report_errors() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\ntoken");
            }
        });
        let src = format!(
            r#"return {{ transform_request = function(s)
                local r = json.decode(http_get("http://127.0.0.1:{port}/token"))
                local dead = json.decode(http_post("http://127.0.0.1:9/x", "{{}}"))
                return json.encode({{ status = r.status, body = r.body, dead = dead.error ~= nil }})
            end }}"#
        );
        let a = Adapter::load("net", &src).unwrap();
        let req: CompletionRequest = serde_json::from_value(serde_json::json!({
            "model": "m", "messages": [], "temperature": 0.7, "max_tokens": 1, "stream": false, "disable_thinking": false
        }))
        .unwrap();
        let out: Value = serde_json::from_str(&a.transform_request_async(&req).await.unwrap()).unwrap();
        assert_eq!(out, serde_json::json!({"status": 200, "body": "token", "dead": true}));

        // The daemon's own address is refused under every name for it, before any
        // connection is made (nothing listens there in this test).
        let own = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let own_port = own.local_addr().unwrap().port();
        forbid_own_address(format!("127.0.0.1:{own_port}").parse().unwrap());
        for host in ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"] {
            let src = format!(
                r#"return {{ transform_request = function(s)
                    return http_get("http://{host}:{own_port}/api/v1/settings")
                end }}"#
            );
            let a = Adapter::load("own", &src).unwrap();
            let out: Value = serde_json::from_str(&a.transform_request_async(&req).await.unwrap()).unwrap();
            let err = out["error"].as_str().unwrap_or_default();
            assert!(err.contains("daemon's own address"), "{host}: {out}");
        }
    }
}

#[cfg(test)]
mod tools_cache_tests {
    use super::*;
    use crate::llm::types::{Message, ToolDef, ToolFunction};

    fn request(tools: usize) -> CompletionRequest {
        CompletionRequest {
            model: "m".into(),
            messages: vec![Message::text("system", "be brief"), Message::text("user", "hi")],
            temperature: 0.7,
            max_tokens: 100,
            stream: true,
            tools: (0..tools)
                .map(|i| ToolDef {
                    kind: "function".into(),
                    function: ToolFunction {
                        name: format!("tool_{i}"),
                        description: format!("does thing {i}"),
                        parameters: serde_json::json!({"type": "object", "properties": {
                            "query": {"type": "string", "description": "what"},
                            "n": {"type": "integer"}}, "required": ["query"]}),
                    },
                })
                .collect::<Vec<_>>()
                .into(),
            tool_choice: Some(serde_json::json!("auto")),
            disable_thinking: true,
            extra_body: Default::default(),
        }
    }

    /// For every bundled adapter, the cached path (placeholders + splice) gives the same
    /// body as converting the whole request, on the learning call and on later ones.
    #[tokio::test(flavor = "current_thread")]
    async fn cached_tool_conversion_equals_the_full_conversion_for_every_bundled_adapter() {
        for name in crate::llm::bundled::names() {
            let a = Adapter::load(name, crate::llm::bundled::bundled(name).unwrap()).unwrap();
            let mut req = request(6);
            let full: serde_json::Value =
                serde_json::from_str(&a.transform_request_async(&req).await.unwrap()).unwrap();
            for round in 0..3 {
                let out = a.transform_request_cached(&mut req).await.unwrap();
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                assert_eq!(v, full, "{name}, call {round}");
                assert_eq!(req.tools.len(), 6, "the real tools are back in the request");
                assert_eq!(req.tools[0].function.name, "tool_0");
            }
            // Another message, same tools: still equal to the full conversion.
            req.messages.push(Message::text("user", "and now?"));
            let full: serde_json::Value =
                serde_json::from_str(&a.transform_request_async(&req).await.unwrap()).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(&a.transform_request_cached(&mut req).await.unwrap()).unwrap();
            assert_eq!(v, full, "{name} after a new message");
            // The same tools in another shared list (a rebuilt registry): found by hash.
            req.tools = std::sync::Arc::new(req.tools.as_ref().clone());
            let v: serde_json::Value =
                serde_json::from_str(&a.transform_request_cached(&mut req).await.unwrap()).unwrap();
            assert_eq!(v, full, "{name} with the same tools rebuilt");
            // A changed tool list is learned anew.
            std::sync::Arc::make_mut(&mut req.tools).pop();
            let full: serde_json::Value =
                serde_json::from_str(&a.transform_request_async(&req).await.unwrap()).unwrap();
            for _ in 0..2 {
                let v: serde_json::Value =
                    serde_json::from_str(&a.transform_request_cached(&mut req).await.unwrap()).unwrap();
                assert_eq!(v, full, "{name} with 5 tools");
            }
            let (separable, slot) = a
                .tools_cache
                .lock()
                .as_ref()
                .map_or((false, 0), |e| (e.splice.is_some(), e.placeholders.len()));
            eprintln!("{name}: tool list separable = {separable}, placeholders per call = {slot}");
            assert!(
                separable && slot == 1,
                "{name}: the bundled adapters take the one-placeholder path"
            );
        }
    }

    /// Converts `req` on the cached path and checks it equals the full conversion.
    async fn cached_equals_full(a: &Adapter, req: &mut CompletionRequest, what: &str) {
        let full: serde_json::Value = serde_json::from_str(&a.transform_request_async(req).await.unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&a.transform_request_cached(req).await.unwrap()).unwrap();
        assert_eq!(v, full, "{what}");
    }

    /// Tool subsets that change from call to call (a small window offers the input's
    /// tools): once an assembled list was seen to equal the adapter's own conversion,
    /// a list of tools all converted before is assembled, not learned, and still
    /// equals the full conversion — for every bundled adapter.
    #[tokio::test(flavor = "current_thread")]
    async fn tool_subsets_are_assembled_from_converted_tools_once_trusted() {
        for name in crate::llm::bundled::names() {
            let a = Adapter::load(name, crate::llm::bundled::bundled(name).unwrap()).unwrap();
            let all = request(8);
            let subset = |keep: &dyn Fn(usize) -> bool| {
                let mut r = request(0);
                r.tools = std::sync::Arc::new(
                    all.tools
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| keep(*i))
                        .map(|(_, t)| t.clone())
                        .collect(),
                );
                r
            };
            cached_equals_full(&a, &mut subset(&|_| true), &format!("{name}: all")).await;
            assert_eq!(a.per_tool.lock().trust(), None, "{name}: nothing compared yet");
            // Seen tools only: assembled, compared with the learned list, trusted.
            cached_equals_full(&a, &mut subset(&|i| i != 7), &format!("{name}: first seven")).await;
            assert!(
                a.per_tool.lock().trust() == Some(true),
                "{name}: assembly equal to the adapter's own"
            );
            // From now on lists of seen tools are assembled: a subset in another order
            // of choice, and back and forth between two subsets.
            let even = |i: usize| i.is_multiple_of(2);
            let late = |i: usize| i > 2;
            for (round, keep) in [&even as &dyn Fn(usize) -> bool, &late, &even].into_iter().enumerate() {
                let mut r = subset(keep);
                let before = a.per_tool.lock().known();
                cached_equals_full(&a, &mut r, &format!("{name}: subset {round}")).await;
                assert_eq!(a.per_tool.lock().known(), before, "{name}: assembled, not learned");
            }
            // A tool never seen: learned whole (and remembered).
            let mut r = subset(&|i| i < 5);
            Arc::make_mut(&mut r.tools)[0].function.description = "changed".into();
            cached_equals_full(&a, &mut r, &format!("{name}: a changed tool")).await;
            cached_equals_full(&a, &mut subset(&|i| i < 5), &format!("{name}: back")).await;
        }
    }

    /// An adapter whose conversion of a tool depends on its place in the list fails the
    /// trust check and keeps learning whole lists: every body still equals the full one.
    #[tokio::test(flavor = "current_thread")]
    async fn an_adapter_that_numbers_its_tools_is_never_assembled() {
        let numbering = r#"
            return {
              name = "numbering", endpoint = "/v1/chat",
              transform_request = function(s)
                local r = json.decode(s)
                for i, t in ipairs(r.tools or {}) do
                  t["function"].description = tostring(i) .. ": " .. t["function"].description
                end
                return json.encode(r)
              end,
            }
        "#;
        let a = Adapter::load("numbering", numbering).unwrap();
        let all = request(6);
        let mut first = request(0);
        first.tools = all.tools.clone();
        cached_equals_full(&a, &mut first, "all").await;
        for skip in [0, 3, 0, 5] {
            let mut r = request(0);
            r.tools = Arc::new(
                all.tools
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skip)
                    .map(|(_, t)| t.clone())
                    .collect(),
            );
            cached_equals_full(&a, &mut r, &format!("without tool {skip}")).await;
        }
        assert_eq!(a.per_tool.lock().trust(), Some(false));
    }

    /// For every bundled adapter, long texts passed as markers give the same body as the
    /// full conversion — system, user and assistant texts, with quotes, newlines and
    /// non-ASCII — and every bundled adapter is found to move texts only (the fast path
    /// is really taken).
    #[tokio::test(flavor = "current_thread")]
    async fn long_texts_as_markers_equal_the_full_conversion_for_every_bundled_adapter() {
        let long = |tag: &str| format!("{tag}: \"quoted\"\n\ttabbed \\ 中文 émoji 🙂 {}", "word ".repeat(200));
        for name in crate::llm::bundled::names() {
            let a = Adapter::load(name, crate::llm::bundled::bundled(name).unwrap()).unwrap();
            let mut req = request(6);
            req.messages = vec![
                Message::text("system", long("system")),
                Message::text("system", long("second system")),
                Message::text("user", long("user")),
                Message::text("assistant", long("assistant")),
                Message::text("user", "short question?"),
            ];
            let full: serde_json::Value =
                serde_json::from_str(&a.transform_request_async(&req).await.unwrap()).unwrap();
            for round in 0..3 {
                let v: serde_json::Value =
                    serde_json::from_str(&a.transform_request_cached(&mut req).await.unwrap()).unwrap();
                assert_eq!(v, full, "{name}, call {round}");
                assert_eq!(
                    req.messages[2].content,
                    serde_json::Value::String(long("user")),
                    "texts restored"
                );
            }
            assert_eq!(*a.texts_opaque.lock(), Some(true), "{name} moves texts only");
        }
    }
}
