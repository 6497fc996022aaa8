//! `homeagent-mcp`: the MCP bridge plugin as a standalone executable.

fn main() {
    std::process::exit(homeagent_mcp::run());
}
