//! Where a running daemon can be reached: `DATA/http-address`, which the daemon
//! writes once it has bound its socket, and the address a client on this machine uses.
//! Its own module because the daemon writes it and the client subcommands read it.

use anyhow::Context as _;

/// `DATA/http-address`: the address this daemon serves on, one line, replaced whole
/// (written to a temporary name, then renamed), so a script that started
/// `homed --listen 127.0.0.1:0` never reads half of it or another start's.
pub fn write_address(data: &std::path::Path, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let path = data.join(ADDRESS_FILE);
    let tmp = data.join(format!("{ADDRESS_FILE}.tmp"));
    std::fs::write(&tmp, format!("{addr}\n"))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("cannot write {}; is the disk full?", path.display()))
}

/// The file in the data dir that names the HTTP address (see [`write_address`]).
pub const ADDRESS_FILE: &str = "http-address";

/// Where a client on this machine reaches a daemon listening on `listen` (an
/// all-interfaces address → loopback of the same family): the login URL in the log and
/// the client subcommands (`RunArgs::daemon_address`).
pub fn local_address(listen: std::net::SocketAddr) -> std::net::SocketAddr {
    let loopback: std::net::IpAddr = match listen {
        _ if !listen.ip().is_unspecified() => return listen,
        std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    std::net::SocketAddr::new(loopback, listen.port())
}
