//! Command-line interface of `homed`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// HomeAgent daemon: a long-running personal AI agent built as an actor-system microkernel.
#[derive(Debug, Parser)]
#[command(name = "homed", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Where the daemon keeps its state and where it listens. Global: `homed --data D token`
/// and `homed token --data D` mean the same (a subcommand's own help shows these flags,
/// and a person types them after it).
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Data directory (created if missing): settings, memory, plugins, logs.
    #[arg(long, global = true, default_value = "./data", env = "HOMED_DATA")]
    pub data: PathBuf,
    /// HTTP listen address for the API and the dashboard.
    #[arg(long, global = true, default_value = "127.0.0.1:8080", env = "HOMED_LISTEN")]
    pub listen: SocketAddr,
    /// Unix socket for the `waiter` CLI client [default: DATA/cli.sock].
    #[arg(long, global = true, env = "HOMED_SOCKET")]
    pub socket: Option<PathBuf>,
    /// For evaluations and tests: run on a virtual clock starting at TIME (`now`, RFC 3339
    /// or Unix seconds). Heartbeats then run only when `POST /api/v1/clock/advance` moves
    /// the clock past their due times; every timestamp the kernel writes follows it.
    #[arg(long, global = true, value_name = "TIME", env = "HOMED_VIRTUAL_CLOCK")]
    pub virtual_clock: Option<String>,
    /// When the start fails (a damaged database, a refused upgrade, an invalid setting,
    /// a module that would not start), serve the WebUI's recovery page — what failed,
    /// and a backup to restore — instead of exiting. The service unit runs with it.
    #[arg(long, global = true, env = "HOMED_FAILBACK", value_parser = clap::builder::BoolishValueParser::new())]
    pub failback: bool,
}

impl Cli {
    /// Parses the command line; the second value says whether the listen address was
    /// given (`--listen` or `HOMED_LISTEN`) rather than defaulted.
    pub fn parse_noting_listen() -> (Self, bool) {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches = Self::command().get_matches();
        let given = !matches!(
            matches.value_source("listen"),
            None | Some(clap::parser::ValueSource::DefaultValue)
        );
        let cli = Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        (cli, given)
    }
}

impl RunArgs {
    /// The CLI socket path, defaulting into the data directory.
    pub fn socket_path(&self) -> PathBuf {
        self.socket.clone().unwrap_or_else(|| self.data.join("cli.sock"))
    }

    /// Where the client subcommands (`plugin install`, `memory import`, `selftest`)
    /// reach the daemon: the listen address when it was given; otherwise the one the
    /// daemon on this data dir named in `DATA/http-address` (so a daemon started on
    /// another port, or on port 0, is found without repeating `--listen`); otherwise
    /// the default. An all-interfaces address is reached on loopback.
    pub fn daemon_address(&self, listen_given: bool) -> SocketAddr {
        let named = || {
            std::fs::read_to_string(self.data.join(crate::address::ADDRESS_FILE))
                .ok()?
                .trim()
                .parse::<SocketAddr>()
                .ok()
        };
        let addr = if listen_given {
            self.listen
        } else {
            named().unwrap_or(self.listen)
        };
        crate::address::local_address(addr)
    }
}

/// What `homed service` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceAction {
    /// Write the unit and start it (or print it where no user systemd answers).
    Install,
    /// Stop, disable and remove the unit.
    Uninstall,
    /// Whether the unit is installed and running, whether a daemon holds this data
    /// dir, and what its last start left (a failed boot, a restore waiting).
    Status,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon (the default when no subcommand is given).
    Run,
    /// `homed plugin install FILE`: install a `.hmap` package into the running daemon
    /// (the one at --listen, or else the one DATA/http-address names); it starts at once.
    /// `homed plugin pack DIR [-o FILE]`: build a checked `.hmap` package from a plugin
    /// directory (default output `./NAME-VERSION.hmap`). (`homed plugin timer|mcp|files|cmd|web` runs a bundled
    /// plugin on stdin/stdout: what the daemon starts, not for humans.)
    Plugin {
        /// `install`, `pack`, or the bundled plugin to run: `timer`, `mcp`, `files`, `cmd` or `web`.
        name: String,
        /// The package, for `install`; the plugin directory, for `pack`.
        file: Option<PathBuf>,
        /// For `pack`: where to write the package [default: ./NAME-VERSION.hmap].
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// `homed backup FILE [--data DIR]`: the whole data dir as one archive (databases
    /// copied consistently, also while the daemon runs).
    Backup {
        /// The archive to write (a zip).
        file: std::path::PathBuf,
    },
    /// `homed restore FILE --data NEW`: unpack a backup into a new or empty data dir,
    /// checked before it is used.
    Restore {
        /// The archive `homed backup` wrote.
        file: std::path::PathBuf,
    },
    /// `homed service install|uninstall [--print]`: run homed as a systemd user service
    /// (a `Type=notify` unit with a watchdog fed by the heartbeat), or print the unit.
    Service {
        /// install or uninstall.
        action: ServiceAction,
        /// Print the unit instead of installing it.
        #[arg(long)]
        print: bool,
    },
    /// `homed rollback [--data DIR]`: put the newest snapshot back (the one taken before
    /// the last upgrade, in DATA/snapshots); the daemon must be stopped.
    Rollback,
    /// `homed token [--data DIR]`: print the owner API token (created at first start in
    /// DATA/api-token); `--rotate` replaces it (clients and browsers must sign in again).
    Token {
        /// Replace the token with a new one.
        #[arg(long)]
        rotate: bool,
    },
    /// `homed memory import FILE`: import a history into the running daemon's memory
    /// (the one at --listen, or else the one DATA/http-address names, with the owner
    /// token from --data).
    Memory {
        #[command(subcommand)]
        what: MemoryCommand,
    },
    /// Evaluate memory: retrieval alone (no LLM), or with `--live` what reaches the
    /// model's prompt on a real daemon.
    Eval {
        #[command(subcommand)]
        what: EvalCommand,
    },
    /// `homed selftest [--data DIR] [--listen ADDR]`: check each LLM source (a real
    /// minimal call), the embedder, every database and every plugin of the daemon at
    /// --listen (or else the one DATA/http-address names); one line per part and a verdict. Exits 1 when something is broken.
    Selftest,
    /// Measure the runtime (prints ratios against a baseline measured in the same run).
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Turn-level evidence recall@k on LoCoMo-format conversations (a JSON array of
    /// {sample_id, conversation, qa}), per retriever and question category.
    Locomo {
        /// The LoCoMo JSON file.
        file: PathBuf,
        /// Cut-offs of recall@k.
        #[arg(long, value_delimiter = ',', default_values_t = [5usize, 10, 20])]
        k: Vec<usize>,
        /// Retrievers to compare (default: all four).
        #[arg(long, value_delimiter = ',', value_parser = ["tfidf", "bm25", "embed", "hybrid"])]
        retriever: Vec<String>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Embed with a remote `/v1/embeddings` server at this base URL (e.g. a local
        /// multilingual model, see the README) instead of the ONNX MiniLM.
        #[arg(long)]
        embed_url: Option<String>,
        /// The `model` field sent to that server.
        #[arg(long, default_value = "")]
        embed_model: String,
        /// Measure on a live daemon instead: import each conversation through
        /// `POST /api/v1/memory/import`, ask its questions through `POST /api/v1/messages`
        /// and count the evidence in the requests a built-in scripted vendor receives.
        #[arg(long)]
        live: bool,
        /// With --live: the LLM source's `context_window`.
        #[arg(long, default_value_t = 8192, requires = "live")]
        window: u64,
        /// With --live: only the first K conversations.
        #[arg(long, requires = "live")]
        limit_conversations: Option<usize>,
        /// With --live: also live each conversation through time on a virtual clock
        /// (sessions imported at their dates, every heartbeat run as its interval says,
        /// then --months more) and ask the questions at the end, beside the fresh import.
        #[arg(long, requires = "live")]
        lifecycle: bool,
        /// With --lifecycle: simulated months after the last session.
        #[arg(long, default_value_t = 12, requires = "lifecycle")]
        months: u32,
        /// With --live: write every question whose evidence did not all reach the
        /// prompt (what was missing, what memory was sent) to FILE, one JSON a line.
        #[arg(long, requires = "live")]
        misses: Option<PathBuf>,
        /// With --live: recall by BM25 alone (`core.memory.embedder = tfidf` on the
        /// daemons), as on a machine without the ONNX model.
        #[arg(long, requires = "live")]
        no_dense: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Import a history: NDJSON (one `{"time", "speaker", "text"}` object a line, time
    /// in RFC 3339 or unix seconds) or a LoCoMo JSON file. Lines imported before are
    /// skipped; a bad line imports nothing and names its line number and field.
    Import {
        /// The history file.
        file: PathBuf,
        /// How the file is written [default: locomo when it is a JSON array, else ndjson].
        #[arg(long, value_enum)]
        format: Option<crate::import::Format>,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Messages per second through a tracked address vs a raw actix `Addr`.
    Mailbox {
        /// Messages per round.
        #[arg(long, default_value_t = 200_000)]
        messages: u64,
        /// Rounds per variant (the best and the median are reported).
        #[arg(long, default_value_t = 5)]
        rounds: u32,
    },
    /// Kernel overhead per turn: POST /api/v1/messages → reply on a real daemon, minus
    /// the bare round trip to the same fake vendor, both measured in this run.
    Turn {
        /// Measured turns (after 50 warm-up turns).
        #[arg(long, default_value_t = 1000)]
        turns: u32,
        /// Run the daemon on this data directory (kept) instead of a fresh temporary
        /// one, e.g. to measure with some plugins removed. (Not `--data`: that global
        /// flag always has a value, and the benchmark must not run in the owner's data.)
        #[arg(long, value_name = "DIR")]
        keep_data: Option<std::path::PathBuf>,
        /// Import this many synthetic remembered turns first (through
        /// `POST /api/v1/memory/import`), to measure the overhead with a long memory.
        #[arg(long, default_value_t = 0)]
        remembered: usize,
        /// Each measured input is this text and the turn's number ("turn 7" by
        /// default). A question naming a speaker of the remembered turns — "What did
        /// Alex say about" — measures recall's ranking of a person's own words.
        #[arg(long, default_value = "turn")]
        ask: String,
    },
    /// Memory tier latency: context prune and document lookup (BM25 and hybrid) at the
    /// given sizes, against a window copy and an indexed document fetch in the same run.
    Memory {
        /// Event and document counts to build.
        #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000])]
        sizes: Vec<usize>,
        /// Measured queries per operation and size.
        #[arg(long, default_value_t = 20)]
        queries: usize,
    },
    /// A tool call through the bundled MCP bridge to a real MCP server offering `echo`
    /// (e.g. `homed bench mcp -- tests/mcp/node_modules/.bin/mcp-server-everything stdio`).
    Mcp {
        /// Measured calls (after 50 warm-up calls).
        #[arg(long, default_value_t = 2000)]
        calls: u32,
        /// The server's command and arguments.
        #[arg(trailing_var_arg = true, required = true)]
        server: Vec<String>,
    },
    /// Tool-call round trip through the kernel's tool path: in-process vs the bundled
    /// subprocess (timer) and Lua (units) plugins, then SIGKILL → tools back.
    Plugin {
        /// Measured calls per tool (after 100 warm-up calls).
        #[arg(long, default_value_t = 5000)]
        calls: usize,
        /// SIGKILLs of the timer plugin to time (at most 3: a 4th quarantines it).
        #[arg(long, default_value_t = 3)]
        kills: u32,
    },
    /// The media memory: image ingest (time, memory per image) beside a plain file
    /// write, and recall latency over the multimodal index at the given sizes.
    Media {
        /// Block counts to build for the recall latency.
        #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 10_000])]
        sizes: Vec<usize>,
        /// Measured queries per size.
        #[arg(long, default_value_t = 50)]
        queries: usize,
        /// Images ingested.
        #[arg(long, default_value_t = 200)]
        images: usize,
        /// Size of each ingested image, KiB.
        #[arg(long, default_value_t = 256)]
        image_kib: usize,
    },
    /// What the kernel's confinement costs (rules per plugin, the closed-port layer,
    /// a short program started confined) beside the unconfined baseline.
    Confine {
        /// Measured starts per variant.
        #[arg(long, default_value_t = 200)]
        runs: usize,
    },
    /// Tool-call round trip through the agent's tool runner (firewall included) for
    /// the bundled capabilities (files, cmd, web, seq) beside the in-process baseline.
    Tools {
        /// Measured calls per tool (cmd_run: a tenth, at least 5).
        #[arg(long, default_value_t = 2000)]
        calls: usize,
    },
    /// Resident sub-agents: creation (time, RSS), idle residents (RSS, CPU), and a
    /// parent → resident → parent round trip beside a plain turn, in one run.
    Residents {
        /// Idle residents to create.
        #[arg(long, default_value_t = 10)]
        residents: usize,
        /// Measured round trips (and plain turns).
        #[arg(long, default_value_t = 200)]
        trips: usize,
        /// Seconds of the quiet window the idle CPU is measured over.
        #[arg(long, default_value_t = 5)]
        idle_secs: u64,
    },
    /// The token counter beside tiktoken-rs' `CoreBPE` on the same ranks: build time,
    /// resident memory, counting speed on prose, code and Chinese, and equal counts.
    Tokens {
        /// Timed rounds per text and counter (the best is reported).
        #[arg(long, default_value_t = 20)]
        rounds: u32,
    },
    /// Graph tier latency (recall at depth 2, entity names found in a sentence) on
    /// on-disk graphs of the given sizes, against an indexed name lookup in the same file.
    Graph {
        /// Entity counts to build (each entity gets two relations).
        #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000])]
        sizes: Vec<usize>,
        /// Measured queries per operation and size.
        #[arg(long, default_value_t = 300)]
        queries: usize,
    },
}
