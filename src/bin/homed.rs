//! `homed`: the HomeAgent daemon.

use clap::Parser;
use homeagent::cli::{BenchCommand, Cli, Command};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    homeagent::daemon::init_logging();
    let system = actix_rt::System::new();
    let result = match cli.command {
        None | Some(Command::Run) => system.block_on(homeagent::daemon::run(cli.run)),
        Some(Command::Bench {
            what: BenchCommand::Mailbox { messages, rounds },
        }) => system.block_on(homeagent::bench::mailbox(messages, rounds)),
        Some(Command::Bench {
            what: BenchCommand::Turn { turns },
        }) => system.block_on(homeagent::bench::turn(turns)),
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
