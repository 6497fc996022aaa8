//! `homed`: the HomeAgent daemon.

use homeagent::cli::{BenchCommand, Cli, Command, EvalCommand, MemoryCommand};

fn main() -> std::process::ExitCode {
    use homeagent_actors::i18n::{Lang, Msg, set_language};
    let (cli, listen_given) = Cli::parse_noting_listen();
    // The client subcommands speak their locale's language (LANG); the daemon sets
    // its own from core.agent.language once its settings are read.
    if !matches!(cli.command, None | Some(Command::Run)) {
        set_language(Lang::from_env());
    }
    // The client subcommands reach the running daemon here (see `daemon_address`).
    let daemon_at = cli.run.daemon_address(listen_given);
    if let Some(Command::Plugin { name, file, output }) = &cli.command {
        // A bundled plugin speaks the protocol on stdout: no logging setup, no runtime.
        return match (name.as_str(), file) {
            ("timer", _) => std::process::ExitCode::from(homeagent_timer::run() as u8),
            ("mcp", _) => std::process::ExitCode::from(homeagent_mcp::run() as u8),
            // The MCP bridge as a one-shot client of the server at URL (the conformance suite's client).
            ("mcp-client", Some(url)) => {
                std::process::ExitCode::from(homeagent_mcp::conformance::run(&url.to_string_lossy()) as u8)
            }
            ("files", _) => std::process::ExitCode::from(homeagent_files::run() as u8),
            ("cmd", _) => std::process::ExitCode::from(homeagent_cmd::run() as u8),
            ("web", _) => std::process::ExitCode::from(homeagent_web::run() as u8),
            ("terminal", _) => std::process::ExitCode::from(homeagent_terminal::run() as u8),
            ("onebot", _) => std::process::ExitCode::from(homeagent_onebot::run() as u8),
            ("memo", _) => std::process::ExitCode::from(homeagent_memo::run() as u8),
            ("install", Some(file)) => {
                let system = actix_rt::System::new();
                match system.block_on(homeagent::install::install_package(daemon_at, &cli.run.data, file)) {
                    Ok(summary) => {
                        println!("{summary}");
                        std::process::ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("homed: {e:#}");
                        std::process::ExitCode::FAILURE
                    }
                }
            }
            ("pack", Some(dir)) => match homeagent_actors::plugins::pack::pack_to(dir, output.as_deref()) {
                Ok((out, packed)) => {
                    let file = out.display().to_string();
                    println!(
                        "{}",
                        Msg::PluginPacked {
                            file: &file,
                            name: &packed.name,
                            version: &packed.version,
                            files: packed.files,
                            bytes: packed.bytes.len() as u64,
                            sha256: &packed.sha256,
                        }
                        .text()
                    );
                    std::process::ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "{}",
                        Msg::PluginPackRefused {
                            dir: &dir.display().to_string(),
                            why: &e.to_string()
                        }
                        .text()
                    );
                    std::process::ExitCode::FAILURE
                }
            },
            ("pack", None) => {
                eprintln!("{}", Msg::PluginPackUsage.text());
                std::process::ExitCode::FAILURE
            }
            ("install", None) => {
                eprintln!("{}", Msg::PluginInstallUsage.text());
                std::process::ExitCode::FAILURE
            }
            (other, _) => {
                eprintln!("{}", Msg::NoBundledPlugin { name: other }.text());
                std::process::ExitCode::FAILURE
            }
        };
    }
    // The one-shot subcommands: their answer on stdout, or `homed: <why>` and failure.
    let one_shot: Option<Result<String, String>> = match &cli.command {
        Some(Command::Backup { file }) => Some(
            homeagent::backup::backup(&cli.run.data, file)
                .map(|m| {
                    format!(
                        "wrote {}: {} files, {} databases copied consistently (homed {})",
                        file.display(),
                        m.files,
                        m.databases.len(),
                        m.homed
                    )
                })
                .map_err(|e| e.to_string()),
        ),
        Some(Command::Restore { file }) => Some(
            homeagent::backup::restore(file, &cli.run.data)
                .map(|m| {
                    format!(
                        "restored {} files into {} (written by homed {}); start homed with --data {}",
                        m.files,
                        cli.run.data.display(),
                        m.homed,
                        cli.run.data.display()
                    )
                })
                .map_err(|e| e.to_string()),
        ),
        Some(Command::Service { action, print }) => Some(match action {
            homeagent::cli::ServiceAction::Install => homeagent::daemon::service_unit(&cli.run)
                .map_err(|e| format!("{e:#}"))
                .and_then(|unit| homeagent::service::install(&unit, *print)),
            homeagent::cli::ServiceAction::Uninstall => homeagent::service::uninstall(),
            homeagent::cli::ServiceAction::Status => Ok(homeagent::daemon::status(&cli.run.data)),
        }),
        // Never under a running daemon: it holds the data dir's lock.
        Some(Command::Rollback) => Some(
            homeagent::lockfile::DataLock::acquire(&cli.run.data)
                .map_err(|e| e.to_string())
                .and_then(|_lock| homeagent::upgrade::rollback(&cli.run.data).map_err(|e| e.to_string())),
        ),
        Some(Command::Token { rotate }) => Some(
            if *rotate {
                homeagent::auth::rotate_token(&cli.run.data)
            } else {
                homeagent::auth::read_token(&cli.run.data)
            }
            .map_err(|e| e.to_string()),
        ),
        _ => None,
    };
    if let Some(result) = one_shot {
        return match result {
            Ok(text) => {
                println!("{text}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("homed: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Some(Command::Selftest) = &cli.command {
        // Quiet unless asked: the report is the output.
        if std::env::var_os("RUST_LOG").is_some() {
            homeagent::daemon::init_logging();
        }
        let system = actix_rt::System::new();
        return match system.block_on(homeagent::selftest::run(daemon_at, &cli.run.data)) {
            Ok(report) => {
                println!("{}", report.render());
                if report.ok() {
                    std::process::ExitCode::SUCCESS
                } else {
                    std::process::ExitCode::FAILURE
                }
            }
            Err(e) => {
                eprintln!(
                    "{}",
                    Msg::SelftestCouldNotRun {
                        error: &format!("{e:#}")
                    }
                    .text()
                );
                std::process::ExitCode::from(2)
            }
        };
    }
    homeagent::daemon::init_logging();
    let system = actix_rt::System::new();
    let result = match cli.command {
        None | Some(Command::Run) => {
            let r = system.block_on(homeagent::daemon::run(cli.run));
            if r.is_ok() && homeagent::service::restart_was_requested() {
                return std::process::ExitCode::from(homeagent::service::RESTART_EXIT_CODE as u8);
            }
            r
        }
        Some(Command::Bench {
            what: BenchCommand::Mailbox { messages, rounds },
        }) => system.block_on(homeagent::bench::mailbox(messages, rounds)),
        Some(Command::Bench {
            what:
                BenchCommand::Turn {
                    turns,
                    keep_data,
                    remembered,
                    ask,
                },
        }) => system.block_on(homeagent::bench::turn(turns, keep_data, remembered, ask)),
        Some(Command::Bench {
            what: BenchCommand::Tokens { rounds },
        }) => homeagent::bench_tokens::tokens(rounds),
        Some(Command::Bench {
            what: BenchCommand::Graph { sizes, queries },
        }) => homeagent::bench::graph(&sizes, queries),
        Some(Command::Bench {
            what: BenchCommand::Memory { sizes, queries },
        }) => homeagent::bench::memory(&sizes, queries),
        Some(Command::Bench {
            what: BenchCommand::Plugin { calls, kills },
        }) => system.block_on(homeagent::bench::plugin(calls, kills)),
        Some(Command::Bench {
            what:
                BenchCommand::Media {
                    sizes,
                    queries,
                    images,
                    image_kib,
                },
        }) => homeagent::bench_media::media(&sizes, queries, images, image_kib),
        Some(Command::Bench {
            what: BenchCommand::Tools { calls },
        }) => system.block_on(homeagent::bench_tools::tools(calls)),
        Some(Command::Bench {
            what: BenchCommand::Confine { runs },
        }) => homeagent::bench_confine::confine(runs),
        Some(Command::Bench {
            what:
                BenchCommand::Residents {
                    residents,
                    trips,
                    idle_secs,
                },
        }) => system.block_on(homeagent::bench_residents::residents(
            residents,
            trips,
            std::time::Duration::from_secs(idle_secs),
        )),
        Some(Command::Bench {
            what: BenchCommand::Mcp { calls, server },
        }) => homeagent::bench_mcp::mcp(&server, calls),
        Some(Command::Eval {
            what:
                EvalCommand::Locomo {
                    file,
                    json,
                    live: true,
                    window,
                    limit_conversations,
                    lifecycle,
                    months,
                    misses,
                    no_dense,
                    ..
                },
        }) => system.block_on(homeagent::eval_live::run(
            &file,
            homeagent::eval_live::LiveOptions {
                window,
                json,
                limit: limit_conversations,
                lifecycle_months: lifecycle.then_some(months),
                misses,
                dense: !no_dense,
            },
        )),
        Some(Command::Selftest) => unreachable!("answered above"),
        Some(Command::Memory {
            what: MemoryCommand::Import { file, format },
        }) => system
            .block_on(homeagent::import::run(daemon_at, &cli.run.data, &file, format))
            .map(|summary| println!("{summary}")),
        Some(Command::Eval {
            what:
                EvalCommand::Locomo {
                    file,
                    k,
                    retriever,
                    json,
                    embed_url,
                    embed_model,
                    live: false,
                    ..
                },
        }) => {
            use homeagent_actors::memory::index::retrieve::Retriever;
            let retrievers = if retriever.is_empty() {
                Retriever::ALL.to_vec()
            } else {
                retriever.iter().filter_map(|r| Retriever::parse(r)).collect()
            };
            homeagent::eval::locomo(
                &file,
                homeagent::eval::Options {
                    ks: k,
                    retrievers,
                    json,
                    embed_url,
                    embed_model,
                },
            )
        }
        Some(
            Command::Plugin { .. }
            | Command::Token { .. }
            | Command::Rollback
            | Command::Service { .. }
            | Command::Backup { .. }
            | Command::Restore { .. },
        ) => unreachable!("handled above"),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole cause chain on one line, without a backtrace.
            eprintln!("homed: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
