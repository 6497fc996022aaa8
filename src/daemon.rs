//! The daemon's life: group 0 set-up, the boot graph, the HTTP server, and the
//! graceful shutdown on SIGINT/SIGTERM.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{App, HttpServer, web};
use anyhow::{Context as _, bail};
use homeagent_actors::bus::{DaemonPhase, Event};
use homeagent_actors::config::{ConfigStore, DaemonConfig, Settings, keys};
use homeagent_actors::{Exit, Shutdown};

use crate::address::{ADDRESS_FILE, local_address, write_address};
use crate::cli::RunArgs;
use crate::http::{self, AppState};
use crate::kernel::{self, BootSettings, KernelState};
use crate::lockfile::DataLock;

/// Sub-directories created at start so later subsystems can rely on them.
const DATA_SUBDIRS: &[&str] = &["log", "memory", "plugins", "knowledge"];

/// Sets up logging: `RUST_LOG` wins; otherwise `info`. Colours only when stderr is a
/// terminal (a log file or a pipe gets plain text). The same lines also go to the
/// in-memory ring behind `GET /api/v1/logs`.
pub fn init_logging() {
    use std::io::IsTerminal as _;
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, reload};
    let from_env = EnvFilter::try_from_default_env().ok();
    let explicit = from_env.is_some();
    let (filter, handle) = reload::Layer::new(from_env.unwrap_or_else(|| log_filter("info")));
    let ring = std::sync::Arc::new(crate::logring::LogRing::new(crate::logring::CAPACITY));
    // The log (stderr and the ring) under the level filter; the turn traces
    // (`homeagent_actors::trace`) under their own, to the exporter alone.
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .and_then(crate::logring::RingLayer(ring.clone()))
        .with_filter(filter);
    let traces = crate::telemetry::layer().with_filter(
        tracing_subscriber::filter::Targets::new().with_target(homeagent_actors::trace::TARGET, tracing::Level::TRACE),
    );
    let ok = tracing_subscriber::registry().with(traces).with(log).try_init().is_ok();
    if ok {
        let reload: LogReload = Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()));
        let _ = LOG_FILTER.set((reload, explicit));
        let _ = LOG_RING.set(ring);
    }
}

/// The log's filter for a level: the turn traces' spans are not log lines.
fn log_filter(level: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::new(format!("{level},{}=off", homeagent_actors::trace::TARGET))
}

/// The ring of recent log lines, once [`init_logging`] installed it.
static LOG_RING: std::sync::OnceLock<std::sync::Arc<crate::logring::LogRing>> = std::sync::OnceLock::new();

/// The live log filter, and whether `RUST_LOG` chose it (then it wins over the setting).
type LogReload = Box<dyn Fn(tracing_subscriber::EnvFilter) -> Result<(), String> + Send + Sync>;
static LOG_FILTER: std::sync::OnceLock<(LogReload, bool)> = std::sync::OnceLock::new();

/// Applies `core.daemon.log_level` (at start and whenever it changes), unless the
/// operator chose a filter with `RUST_LOG`.
pub fn apply_log_level(level: &str) {
    let Some((handle, explicit)) = LOG_FILTER.get() else {
        return;
    };
    if *explicit {
        tracing::debug!(
            level,
            key = keys::DAEMON_LOG_LEVEL.name(),
            "log level setting ignored: RUST_LOG is set"
        );
        return;
    }
    match handle(log_filter(level)) {
        Ok(()) => tracing::info!(level, "log level set ({})", keys::DAEMON_LOG_LEVEL.name()),
        Err(e) => tracing::warn!("cannot change the log level to {level}: {e}"),
    }
}

/// Applies `core.telemetry.otlp_endpoint` (at start and whenever it changes); a bad
/// value is logged with what to do and leaves the traces off.
fn apply_otlp_endpoint(endpoint: &str) {
    let endpoint = endpoint.trim();
    let checked = if endpoint.is_empty() || endpoint.starts_with("http://") {
        crate::telemetry::apply(endpoint)
    } else {
        Err(format!(
            "`{endpoint}` is not a plain http:// address; point {} at a local OpenTelemetry Collector (e.g. http://127.0.0.1:4318), which can forward to a TLS one",
            keys::TELEMETRY_OTLP_ENDPOINT.name()
        ))
    };
    if let Err(e) = checked {
        tracing::warn!("turn traces stay off: {e}");
        let _ = crate::telemetry::apply("");
    }
}

/// Everything the daemon writes is for its owner only: files and directories created
/// from now on get no group or other bits (umask 077, inherited by plugin processes),
/// and what an older version left readable is tightened once at start (owner bits kept,
/// so plugin binaries stay executable). Links are not followed.
pub fn make_private(data: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    // SAFETY: umask only changes this process's file-creation mask; it cannot fail.
    unsafe { libc::umask(0o077) };
    let mut fixed = 0usize;
    let mut stack = vec![data.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            if std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7700)).is_ok() {
                fixed += 1;
            } else {
                tracing::warn!(path = %path.display(), "cannot make it private (chmod go-rwx)");
            }
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            // node_modules-sized trees inside plugins are walked too: bounded by the data dir.
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    if fixed > 0 {
        tracing::info!(fixed, data = %data.display(), "made the data directory's files private to their owner");
    }
}

/// Group 0: serial set-up whose order is a side-effect order (not data dependencies).
fn prepare(args: &RunArgs) -> anyhow::Result<(DataLock, BootSettings, Settings)> {
    std::fs::create_dir_all(&args.data).with_context(|| {
        format!(
            "cannot create the data directory {}; pick another with --data",
            args.data.display()
        )
    })?;
    let lock = DataLock::acquire(&args.data)?;
    for sub in DATA_SUBDIRS {
        let dir = args.data.join(sub);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // A restore the WebUI staged (checked then) goes in place before anything else.
    crate::backup::staged::finish(&args.data).context("cannot finish the restore asked for from the WebUI")?;
    make_private(&args.data);
    // Before anything opens them: a damaged database, or one that held data and is
    // gone, stops the start here with the file and the way out (`integrity`).
    crate::integrity::check_data_dir(&args.data)?;
    // Before any database is opened (each migrates itself when opened): a newer data
    // dir is refused, an older one is snapshotted and migrated here, all or nothing.
    let upgraded = crate::upgrade::prepare(&args.data)?;
    if !upgraded.migrated.is_empty() {
        tracing::warn!(
            migrated = ?upgraded.migrated,
            snapshot = %upgraded.snapshot.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            "the data directory was upgraded; `homed rollback` puts the snapshot back"
        );
    }
    if upgraded.pruned > 0 {
        tracing::info!(
            pruned = upgraded.pruned,
            "old upgrade snapshots removed (the newest are kept)"
        );
    }
    // A plugin install killed mid-unpack left its staging folder: nothing else will.
    for (path, bytes) in homeagent_actors::plugins::package::clean_staging(&args.data.join("plugins")) {
        tracing::info!(path = %path.display(), bytes, "removed a plugin install's leftover staging folder");
    }
    let mut store = ConfigStore::open(&args.data.join("config.db"), &args.data)
        .context("cannot open the settings database; is the disk full or the file corrupt?")?;
    let seeded = store.seed_defaults().context("cannot seed default settings")?;
    // The address is `--listen`'s (or HOMED_LISTEN's), not a stored choice: the setting
    // records it at each start, so the settings page never shows another one.
    let listen = homeagent_actors::config::keys::WEBUI_LISTEN_ADDR.name();
    store
        .set(listen, serde_json::json!(args.listen.to_string()))
        .with_context(|| format!("cannot record {listen}; is the disk full?"))?;
    let settings = store
        .snapshot()
        .context("cannot read the settings database; is the disk full or the file corrupt?")?;
    apply_log_level(&DaemonConfig::read(&settings).log_level);
    apply_otlp_endpoint(&settings.get(keys::TELEMETRY_OTLP_ENDPOINT));
    if seeded > 0 {
        tracing::info!(seeded, "default settings written");
    }
    let boot = BootSettings::read(&settings)
        .context("a core setting is invalid; fix it with PUT /api/v1/settings or delete config.db")?;
    Ok((lock, boot, settings))
}

/// Runs the daemon until SIGINT/SIGTERM (or a fatal kernel failure).
/// Group 0 and the boot graph: the data dir (locked), settings, and every kernel
/// module started. The daemon serves HTTP on top; `homed bench plugin` uses it bare.
pub async fn boot(args: &RunArgs) -> anyhow::Result<(DataLock, Arc<KernelState>)> {
    let args = with_absolute_data(args.clone());
    let (lock, boot, _) = prepare(&args)?;
    Ok((lock, boot_kernel(&args, boot).await?))
}

/// `args` with its data dir made absolute (plugins and the CLI socket get paths that
/// do not depend on the working directory).
/// The systemd unit for this binary on `args`' data dir and address, with the data
/// dir's heartbeat interval and shutdown budget (read without opening it for writing;
/// the defaults when it has none yet).
pub fn service_unit(args: &RunArgs) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("cannot tell where this homed binary is")?;
    let args = with_absolute_data(args.clone());
    let s = ConfigStore::peek(&args.data.join("config.db")).unwrap_or_default();
    let d = DaemonConfig::read(&s);
    Ok(crate::service::unit(
        &exe,
        &args.data,
        &args.listen.to_string(),
        d.heartbeat_interval,
        d.shutdown_timeout,
    ))
}

fn with_absolute_data(args: RunArgs) -> RunArgs {
    RunArgs {
        data: std::path::absolute(&args.data).unwrap_or_else(|_| args.data.clone()),
        ..args
    }
}

/// The boot graph on a prepared data dir (`args.data` absolute).
async fn boot_kernel(args: &RunArgs, boot: BootSettings) -> anyhow::Result<Arc<KernelState>> {
    let graph = kernel::graph()?;
    for line in graph.topology().lines() {
        tracing::info!("boot {line}");
    }
    let socket = args.socket.clone().unwrap_or_else(|| args.data.join("cli.sock"));
    let state = Arc::new(KernelState::new(args.data.clone(), boot, socket));
    let report = graph.run(&state).await.context("kernel boot failed")?;
    tracing::debug!(?report, "boot report");
    Ok(state)
}

/// [`boot`] on a fresh temporary data dir named after `name`, without HTTP (the
/// benchmarks that drive the kernel directly); the directory is the third value.
pub async fn boot_temporary(name: &str) -> anyhow::Result<(DataLock, Arc<KernelState>, std::path::PathBuf)> {
    let data = std::env::temp_dir().join(format!("homed-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let args = RunArgs {
        data: data.clone(),
        listen: "127.0.0.1:0".parse()?,
        socket: Some(data.join("cli.sock")),
        virtual_clock: None,
        failback: false,
    };
    let (lock, state) = boot(&args).await?;
    Ok((lock, state, data))
}

/// `core.daemon.allowed_hosts` (comma-separated) as lower-case names without ports.
fn parse_hosts(v: &str) -> Vec<String> {
    v.split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect()
}

/// Binds the HTTP socket as actix-web's own `bind` would (address reuse, a backlog of
/// 1024), so the address is known before anything else starts.
fn listen(addr: std::net::SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let cannot = || format!("cannot listen on {addr}; is another program using it? pick another with --listen");
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).with_context(cannot)?;
    socket.set_reuse_address(true).with_context(cannot)?;
    socket.bind(&addr.into()).with_context(cannot)?;
    socket.listen(1024).with_context(cannot)?;
    Ok(socket.into())
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    // The socket first: `--listen …:0` becomes the port the kernel picked, and every
    // later step (the recorded setting, the gate, the logs, DATA/http-address) sees it.
    let listener = listen(args.listen)?;
    let args = RunArgs {
        listen: listener.local_addr().context("cannot read the bound HTTP address")?,
        ..with_absolute_data(args)
    };
    // A virtual clock is set before anything reads the time.
    if let Some(at) = &args.virtual_clock {
        let at = homeagent_actors::clock::parse_start(at).map_err(|e| anyhow::anyhow!("--virtual-clock: {e}"))?;
        homeagent_actors::clock::start_virtual(at);
        tracing::warn!(
            start_ms = at,
            "running on a virtual clock: heartbeats run only when POST /api/v1/clock/advance moves it"
        );
    }
    // Scripts (Lua plugins, adapters) may not call this daemon's own API: declared
    // before any plugin starts.
    homeagent_actors::llm::adapter::forbid_own_address(args.listen);
    let data_dir = args.data.clone();
    // A `--failback` start after a boot that failed goes straight to the recovery page
    // (the seed's failback boot): the same boot would only fail again.
    if args.failback
        && let Ok(error) = std::fs::read_to_string(data_dir.join(http::recovery::BOOT_FAILURE_FILE))
    {
        let error = anyhow::anyhow!("{}", error.trim());
        return recover(&args, listener, "boot", error).await;
    }
    let (_lock, boot, settings) = match prepare(&args) {
        Ok(p) => p,
        Err(e) if args.failback => return recover(&args, listener, "prepare", e).await,
        Err(e) => return Err(e),
    };
    let shutdown_timeout = boot.shutdown_timeout;
    // The owner token: created at first start, required by every route but /healthz.
    let (token, _) = crate::auth::ensure_token(&data_dir)?;
    // Masked like a secret wherever text leaves the kernel (the model, the vendor, the
    // logs API, memory, events): a token that reached the model would let a prompt
    // injection drive the owner's API.
    homeagent_actors::firewall::declare_kernel_secret("owner-token", &token);
    let gate = Arc::new(http::guard::Gate {
        owner: crate::auth::Owner::new(&data_dir)?,
        listen: args.listen,
        allowed_hosts: parking_lot::RwLock::new(parse_hosts(&DaemonConfig::read(&settings).allowed_hosts)),
    });
    if !args.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %args.listen,
            "LISTENING BEYOND LOOPBACK: anyone who can reach {} can try to use this daemon; every request needs the owner token (DATA/api-token), and plain HTTP shows it to the network — put a TLS proxy in front",
            args.listen
        );
    }

    // HTTP first: `/healthz` answers while the kernel boots, and every other route
    // waits for the boot (`http::ready`), so nothing heavy is on the path to it.
    let readiness = web::Data::new(http::ready::Readiness::default());
    let gate_data = web::Data::new(gate.clone());
    let ready_data = readiness.clone();
    let recovery_data = web::Data::new(http::recovery::RecoveryState {
        data_dir: data_dir.clone(),
        failure: Default::default(),
    });
    let server = http_server(
        listener,
        ready_data,
        gate_data,
        recovery_data,
        shutdown_timeout,
        args.listen,
    )?;
    let server_handle = server.handle();
    let server_task = actix_web::rt::spawn(server);
    tracing::info!(
        listen = %args.listen,
        listening_ms = t0.elapsed().as_millis() as u64,
        "listening; the kernel boots behind /healthz (GET /readyz says when it is done)"
    );
    write_address(&data_dir, args.listen)?;

    let state = match boot_kernel(&args, boot).await {
        Ok(state) => state,
        Err(e) => {
            server_handle.stop(false).await;
            if args.failback {
                // Modules that did start run in this process: the recovery page is
                // served by the next start, which boots nothing (the unit restarts it).
                let record = data_dir.join(http::recovery::BOOT_FAILURE_FILE);
                if let Err(w) = std::fs::write(&record, format!("{e:#}")) {
                    tracing::error!("cannot record the failed boot in {}: {w}", record.display());
                }
            }
            return Err(e);
        }
    };
    // This start booted: a failed one before it is history.
    let _ = std::fs::remove_file(data_dir.join(http::recovery::BOOT_FAILURE_FILE));
    // `core.daemon.log_level` changes apply at once (the logger lives in this shell).
    let mut settings_events = state.bus.subscribe_settings();
    let gate_live = gate;
    actix_rt::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match settings_events.recv().await {
                Ok(ev) => match ev.changed_setting() {
                    Some((key, value)) if keys::DAEMON_LOG_LEVEL.is(key) => {
                        if let Some(level) = keys::DAEMON_LOG_LEVEL.decode(value) {
                            apply_log_level(&level);
                        }
                    }
                    Some((key, value)) if keys::TELEMETRY_OTLP_ENDPOINT.is(key) => {
                        apply_otlp_endpoint(&keys::TELEMETRY_OTLP_ENDPOINT.decode(value).unwrap_or_default());
                    }
                    Some((key, value)) if keys::DAEMON_ALLOWED_HOSTS.is(key) => {
                        let hosts = parse_hosts(&keys::DAEMON_ALLOWED_HOSTS.decode(value).unwrap_or_default());
                        tracing::info!(?hosts, "allowed hosts changed");
                        *gate_live.allowed_hosts.write() = hosts;
                    }
                    _ => {}
                },
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
    });
    readiness.set(app_state(&state)?);
    // Every tier opened: what each database holds now is what the next start expects.
    if let Err(e) = crate::integrity::write_manifest(&data_dir) {
        tracing::warn!("{e}");
    }
    let login = format!("http://{}/login?token={token}", local_address(args.listen));
    tracing::info!(
        listen = %args.listen,
        data = %data_dir.display(),
        actors = state.registry.len(),
        startup_ms = t0.elapsed().as_millis() as u64,
        "homed ready: open {login}",
    );
    // The one line a person needs, alone on stdout (the log goes to stderr): it is
    // the first thing they see however much the start logged.
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", homeagent_actors::i18n::Msg::Ready { url: &login }.text());
        let _ = out.flush();
    }
    state.bus.publish(Event::Daemon {
        phase: DaemonPhase::Ready,
    });
    // A service manager that started us (Type=notify) learns we serve.
    crate::service::notify("READY=1");

    let mut root_exit = state.root_exit.lock().take().context("root supervisor missing")?;
    let fatal = tokio::select! {
        signal = wait_for_signal() => {
            tracing::info!("{signal} received: shutting down (at most {shutdown_timeout:?})");
            None
        }
        exit = &mut root_exit => Some(exit.unwrap_or(Exit::Panic("root supervisor vanished".into()))),
        () = crate::service::restart_requested() => {
            tracing::info!("restart requested: shutting down (at most {shutdown_timeout:?}), then exiting with {} for the service manager", crate::service::RESTART_EXIT_CODE);
            None
        }
    };

    state.bus.publish(Event::Daemon {
        phase: DaemonPhase::Stopping,
    });
    crate::service::notify("STOPPING=1");
    server_handle.stop(true).await;
    let _ = server_task.await;
    if fatal.is_none() {
        if let Some(root) = state.root.get().ok().and_then(|r| r.addr().raw()) {
            root.do_send(Shutdown);
        }
        match tokio::time::timeout(shutdown_timeout + Duration::from_secs(1), root_exit).await {
            Ok(_) => tracing::info!("all actors stopped"),
            Err(_) => tracing::warn!("some actors did not stop within {shutdown_timeout:?}; exiting anyway"),
        }
    }
    state.blocking.stop();
    state.llm_thread.stop();
    // The last turns' traces go out before the process does (the exporter's own thread
    // may block on a slow collector: bounded by its timeout).
    tokio::task::spawn_blocking(crate::telemetry::shutdown).await.ok();
    if let Some(exit) = fatal {
        bail!(
            "the kernel's root supervisor exited ({exit}); see the log above for the failing actor, then restart homed"
        );
    }
    Ok(())
}

/// `homed service status`: the unit ([`crate::service::unit_status`]), whether a
/// daemon holds `data`, and what its last start left (a failed boot, a restore waiting).
pub fn status(data: &std::path::Path) -> String {
    let mut lines = crate::service::unit_status();
    lines.push(if DataLock::acquire(data).is_err() {
        let addr = std::fs::read_to_string(data.join(ADDRESS_FILE)).unwrap_or_default();
        format!("daemon: running on {} (http://{})", data.display(), addr.trim())
    } else {
        format!("daemon: not running on {}", data.display())
    });
    if let Ok(e) = std::fs::read_to_string(data.join(http::recovery::BOOT_FAILURE_FILE)) {
        lines.push(format!(
            "last boot failed: {} (a --failback start serves the recovery page)",
            e.trim()
        ));
    }
    if crate::backup::staged::pending(data) {
        lines.push("a restore waits for the next start".into());
    }
    lines.join("\n")
}

/// The HTTP server on `listener`: every request passes the slow-body guard, the owner
/// gate and the boot gate (which also keeps recovery mode to its routes), then the
/// routes. One worker: the handlers only talk to actors.
fn http_server(
    listener: std::net::TcpListener,
    readiness: web::Data<http::ready::Readiness>,
    gate: web::Data<Arc<http::guard::Gate>>,
    recovery: web::Data<http::recovery::RecoveryState>,
    shutdown_timeout: Duration,
    listen: std::net::SocketAddr,
) -> anyhow::Result<actix_web::dev::Server> {
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(readiness.clone())
            .app_data(gate.clone())
            .app_data(recovery.clone())
            .wrap(actix_web::middleware::from_fn(http::ready::wait_for_boot))
            .wrap(actix_web::middleware::from_fn(http::guard::gate))
            .wrap(actix_web::middleware::from_fn(http::slow::body_idle_timeout))
            .configure(http::configure)
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(shutdown_timeout.as_secs().max(1))
    .listen(listener)
    .with_context(|| format!("cannot serve HTTP on {listen}"))?
    .run())
}

/// Recovery mode (`--failback` after a failed start): the data dir locked, nothing of
/// the kernel started, the WebUI's recovery page and routes served with the owner
/// token until a signal or a restart the page asks for (a restore, a new try).
async fn recover(
    args: &RunArgs,
    listener: std::net::TcpListener,
    stage: &'static str,
    err: anyhow::Error,
) -> anyhow::Result<()> {
    // Another daemon on this data dir (the lock is held): that is no failed start.
    let Ok(_lock) = DataLock::acquire(&args.data) else {
        return Err(err);
    };
    let error = format!("{err:#}");
    tracing::error!(stage, "the start failed: {error}");
    tracing::warn!("--failback: serving the recovery page instead of exiting");
    let data_dir = args.data.clone();
    let (token, _) =
        crate::auth::ensure_token(&data_dir).map_err(|e| err.context(format!("and no recovery page: {e}")))?;
    homeagent_actors::firewall::declare_kernel_secret("owner-token", &token);
    let peeked = ConfigStore::peek(&data_dir.join("config.db")).unwrap_or_default();
    let gate = Arc::new(http::guard::Gate {
        owner: crate::auth::Owner::new(&data_dir)?,
        listen: args.listen,
        allowed_hosts: parking_lot::RwLock::new(parse_hosts(&DaemonConfig::read(&peeked).allowed_hosts)),
    });
    let readiness = web::Data::new(http::ready::Readiness::<AppState>::default());
    readiness.set_recovery();
    let recovery = web::Data::new(http::recovery::RecoveryState {
        data_dir: data_dir.clone(),
        failure: std::sync::OnceLock::from(http::recovery::Failure { stage, error }),
    });
    let server = http_server(
        listener,
        readiness,
        web::Data::new(gate),
        recovery,
        Duration::from_secs(5),
        args.listen,
    )?;
    let handle = server.handle();
    let task = actix_web::rt::spawn(server);
    write_address(&data_dir, args.listen)?;
    let login = format!("http://{}/login?token={token}", local_address(args.listen));
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{}",
            homeagent_actors::i18n::Msg::RecoveryReady { url: &login }.text()
        );
        let _ = out.flush();
    }
    // Started, in a way: a service manager must not restart us into the same failure.
    crate::service::notify("READY=1\nSTATUS=recovery mode: the start failed; open the WebUI");
    tokio::select! {
        signal = wait_for_signal() => tracing::info!("{signal} received: leaving recovery mode"),
        () = crate::service::restart_requested() => tracing::info!("restart requested from the recovery page"),
    }
    crate::service::notify("STOPPING=1");
    handle.stop(true).await;
    let _ = task.await;
    Ok(())
}

/// What the HTTP handlers reach, out of the modules' typed handles.
fn app_state(state: &KernelState) -> anyhow::Result<AppState> {
    let boot_bug = "the boot graph finished without it; this is a kernel bug, please report it";
    let memory = state.memory.get().context(boot_bug)?;
    let agent = state.agent.get().context(boot_bug)?;
    let plugins = state.plugins.get().context(boot_bug)?.set.clone();
    let backups = state.backups.get().context(boot_bug)?.clone();
    Ok(AppState {
        registry: state.registry.clone(),
        bus: state.bus.clone(),
        config: state.config.get().context(boot_bug)?.clone(),
        llm: state.llm.get().context(boot_bug)?.clone(),
        llm_sources: state.llm_sources.clone(),
        usage: state.usage.get().context(boot_bug)?.clone(),
        metrics: {
            let m = crate::metrics::Counted::default();
            m.observe(&state.bus);
            m
        },
        agent: agent.agent.clone(),
        plugins: plugins.clone(),
        beats: {
            let mut beats = homeagent_actors::memory::start::clock_beats(memory, &agent.maintenance);
            // The subprocess plugins' timers and reminders, told the time first.
            beats.follow(
                "plugins",
                homeagent_actors::plugins::clock::follower(move || plugins.clock_followers()),
            );
            // Last at a moment: a backup holds what the memory heartbeats just did.
            beats.add(
                "backup",
                homeagent_actors::memory::lifecycle::heartbeat::due_fn(backups.addr.clone()),
            );
            beats
        },
        backups,
        distill: memory.distill.clone(),
        graph: memory.graph.clone(),
        rules: memory.rules.clone(),
        maintenance: agent.maintenance.clone(),
        maintenance_policy: agent.maintenance_policy.clone(),
        media: memory.media.clone(),
        embed_status: memory.embedder.status.clone(),
        embed_install: Default::default(),
        importer: homeagent_actors::memory::context::importer::Importer {
            context: memory.context.clone(),
            textlog: memory.textlog.clone(),
            distiller: Some(memory.rules.0.clone()),
            config: state.config.get().context(boot_bug)?.clone(),
            bus: state.bus.clone(),
        },
        text_dir: state.data_dir.join("memory").join("text"),
        data_dir: state.data_dir.clone(),
        logs: LOG_RING.get().cloned(),
    })
}

async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop homed with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
