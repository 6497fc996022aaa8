//! `homeagent-timer`: the timer plugin as a standalone executable.

fn main() {
    std::process::exit(homeagent_timer::run());
}
