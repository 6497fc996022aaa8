//! The bundled web plugin: `web_fetch` (a URL as readable text) and `web_search`
//! (through a SearXNG-compatible JSON endpoint, `plugin.web.search_url`). It runs as
//! `homed plugin web`.
//!
//! Guards: both tools declare network use, so the kernel refuses them while the
//! firewall's network switch (`core.security.sandbox.network`) is off, and the plugin
//! checks the switch again with the sandbox that came with the call. Every destination
//! is resolved once, checked against the daemon's own listen addresses (a tool must not
//! reach the daemon's API: SSRF), and the connection is pinned to the checked addresses
//! (a second DNS answer cannot differ: rebinding). Redirects are followed by hand, each
//! hop checked the same way. Only `http` and `https`. Other loopback and private
//! addresses are allowed on purpose: the owner's own services (a local SearXNG, a
//! home server) are what a personal agent fetches; the tool policy and the network
//! switch are the owner's controls for them.
//!
//! What comes back is text: HTML converted to plain text with link footnotes
//! (`html2text`), JSON pretty-printed, other `text/*` as it is, anything binary
//! refused; the download is capped (`max_bytes`) and the whole fetch is timed
//! (`timeout_secs`); the answer is capped again for the model's context.

use std::io::Read;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::OnceLock;
use std::time::Duration;

use homeagent_plugin_protocol::methods::ToolRegister;
use homeagent_plugin_protocol::sandbox::SandboxInfo;
use homeagent_plugin_protocol::sdk::{Call, Kernel, Plugin};
use homeagent_plugin_protocol::toolkit::{cap, looks_binary, str_arg, uint_arg};
use reqwest::Url;
use serde_json::{Value, json};

/// Default and largest download per fetch.
pub const DEFAULT_MAX_BYTES: u64 = 2 * 1024 * 1024;
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Default and largest time for a whole fetch (redirects included).
pub const DEFAULT_TIMEOUT_SECS: u64 = 20;
pub const MAX_TIMEOUT_SECS: u64 = 120;
/// Most text one answer carries (about 4k tokens: fits an 8k-token window).
pub const MAX_ANSWER: usize = 16 * 1024;
/// Redirects followed.
pub const MAX_REDIRECTS: usize = 5;
/// Column width of converted HTML.
const WIDTH: usize = 100;

/// How a body is turned into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Html,
    Json,
    Text,
}

/// The kind of a body from its `Content-Type` (sniffed when there is none), or why it
/// is refused.
pub fn classify(content_type: Option<&str>, body: &[u8]) -> Result<Kind, String> {
    let sample = &body[..body.len().min(4096)];
    let mime = content_type
        .map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default();
    let kind = match mime.as_str() {
        "" => {
            if looks_binary(sample) {
                return Err("the server sent binary data without a content type; web_fetch reads text only".into());
            }
            let head = String::from_utf8_lossy(sample).to_ascii_lowercase();
            if head.contains("<html") || head.contains("<!doctype html") {
                Kind::Html
            } else {
                Kind::Text
            }
        }
        "text/html" | "application/xhtml+xml" => Kind::Html,
        m if m == "application/json" || m.ends_with("+json") => Kind::Json,
        m if m.starts_with("text/")
            || m.ends_with("+xml")
            || [
                "application/xml",
                "application/javascript",
                "application/x-javascript",
                "application/yaml",
                "application/x-yaml",
                "application/toml",
            ]
            .contains(&m) =>
        {
            Kind::Text
        }
        m => {
            return Err(format!(
                "the content is `{m}`, not text; web_fetch reads HTML, JSON and text only (binary files are not fetched)"
            ));
        }
    };
    if kind != Kind::Html && looks_binary(sample) {
        return Err(format!(
            "the body is binary although it is labelled `{mime}`; not shown"
        ));
    }
    Ok(kind)
}

/// HTML as plain text with link footnotes, on a thread with a large stack (deeply
/// nested hostile markup must not overflow the tool thread's).
pub fn html_to_text(html: &[u8]) -> Result<String, String> {
    let html = html.to_vec();
    std::thread::Builder::new()
        .stack_size(64 * 1024 * 1024)
        .spawn(move || html2text::config::plain().string_from_read(&html[..], WIDTH))
        .map_err(|e| format!("cannot start the HTML converter: {e}"))?
        .join()
        .map_err(|_| "the HTML could not be converted".to_owned())?
        .map_err(|e| format!("the HTML could not be converted: {e}"))
}

/// The readable text of a body of `kind`.
pub fn to_text(kind: Kind, body: &[u8]) -> Result<String, String> {
    match kind {
        Kind::Html => html_to_text(body),
        Kind::Json => Ok(serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())),
        Kind::Text => Ok(String::from_utf8_lossy(body).into_owned()),
    }
}

/// A fetched response.
#[derive(Debug)]
pub struct Fetched {
    pub url: Url,
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// The body was longer than the download cap.
    pub cut: bool,
}

/// `url` resolved once; refused when not http(s) or when any address is the daemon's.
fn checked_addrs(sb: &SandboxInfo, url: &Url) -> Result<(String, Vec<SocketAddr>), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "`{}` URLs are not fetched; give an http:// or https:// URL",
            url.scheme()
        ));
    }
    let host = url.host_str().ok_or_else(|| format!("`{url}` has no host"))?.to_owned();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("`{url}` has no port"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (bare, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("`{host}` resolves to no address"));
    }
    for a in &addrs {
        sb.check_destination(*a).map_err(|e| e.to_string())?;
    }
    Ok((bare.to_owned(), addrs))
}

/// GETs `url` (redirects followed by hand, each checked), at most `max_bytes` of the
/// body, everything within `timeout`.
pub fn fetch(sb: &SandboxInfo, url: &str, max_bytes: u64, timeout: Duration) -> Result<Fetched, String> {
    sb.check_network().map_err(|e| e.to_string())?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut url = Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let deadline = std::time::Instant::now() + timeout;
    for _ in 0..=MAX_REDIRECTS {
        let (host, addrs) = checked_addrs(sb, &url)?;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(format!("no answer within {}s (timeout_secs)", timeout.as_secs()));
        }
        let client = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve_to_addrs(&host, &addrs)
            .no_proxy()
            .timeout(left)
            .user_agent(concat!("HomeAgent-web_fetch/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let resp = client.get(url.clone()).send().map_err(|e| {
            if e.is_timeout() {
                format!("no answer within {}s (timeout_secs)", timeout.as_secs())
            } else {
                format!("cannot fetch {url}: {e}")
            }
        })?;
        let status = resp.status();
        if status.is_redirection() {
            let loc = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| format!("{url} redirects ({status}) without a Location"))?;
            url = url.join(loc).map_err(|e| format!("bad redirect `{loc}`: {e}"))?;
            continue;
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|c| c.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        resp.take(max_bytes + 1).read_to_end(&mut body).map_err(|e| {
            if e.to_string().contains("timed out") {
                format!("the body did not arrive within {}s (timeout_secs)", timeout.as_secs())
            } else {
                format!("reading {url} failed: {e}")
            }
        })?;
        let cut = body.len() as u64 > max_bytes;
        body.truncate(max_bytes as usize);
        return Ok(Fetched {
            url,
            status: status.as_u16(),
            content_type,
            body,
            cut,
        });
    }
    Err(format!(
        "more than {MAX_REDIRECTS} redirects; fetch the final URL directly"
    ))
}

/// `web_fetch`.
pub fn web_fetch(args: &Value, sb: &SandboxInfo) -> Result<String, String> {
    let url = str_arg(args, "url")?;
    let max_bytes = uint_arg(args, "max_bytes", DEFAULT_MAX_BYTES, MAX_BYTES)?;
    let timeout = Duration::from_secs(uint_arg(args, "timeout_secs", DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS)?);
    let f = fetch(sb, url, max_bytes, timeout)?;
    let kind = classify(f.content_type.as_deref(), &f.body);
    if !(200..300).contains(&f.status) {
        let excerpt = kind
            .and_then(|k| to_text(k, &f.body))
            .map(|t| homeagent_plugin_protocol::toolkit::prefix(t.trim(), 500).to_owned())
            .unwrap_or_default();
        return Err(format!("HTTP {} from {}\n{excerpt}", f.status, f.url));
    }
    let text = to_text(kind?, &f.body)?;
    let mut out = format!(
        "URL: {}\nContent-Type: {}\n\n{}",
        f.url,
        f.content_type.as_deref().unwrap_or("(none)"),
        cap(text.trim(), MAX_ANSWER, "fetch a more specific page")
    );
    if f.cut {
        out.push_str(&format!(
            "\n[download stopped at {max_bytes} bytes (max_bytes); the page is longer]"
        ));
    }
    Ok(out)
}

/// The search request URL for a configured endpoint (a SearXNG base URL, or a URL
/// already ending in `/search`).
pub fn search_url(base: &str, query: &str) -> Result<Url, String> {
    let mut url = Url::parse(base.trim()).map_err(|e| format!("plugin.web.search_url `{base}` is not a URL: {e}"))?;
    if !url.path().trim_end_matches('/').ends_with("/search") {
        let path = format!("{}/search", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("format", "json");
    Ok(url)
}

/// The results of a SearXNG JSON answer as a numbered list.
pub fn format_results(query: &str, body: &Value, count: usize) -> String {
    let results = body["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        return format!("no results for `{query}`");
    }
    let mut out = Vec::new();
    for (i, r) in results.iter().take(count).enumerate() {
        let title = r["title"].as_str().unwrap_or("(untitled)").trim();
        let url = r["url"].as_str().unwrap_or("").trim();
        let content = r["content"].as_str().unwrap_or("").trim();
        let mut item = format!("{}. {title}\n   {url}", i + 1);
        if !content.is_empty() {
            item.push_str(&format!(
                "\n   {}",
                homeagent_plugin_protocol::toolkit::prefix(content, 400)
            ));
        }
        out.push(item);
    }
    out.join("\n")
}

/// `web_search` against the endpoint `base` (`None`: not configured).
pub fn web_search(args: &Value, sb: &SandboxInfo, base: Option<&str>) -> Result<String, String> {
    let query = str_arg(args, "query")?;
    let count = uint_arg(args, "count", 5, 20)? as usize;
    let base = base.filter(|b| !b.trim().is_empty()).ok_or(
        "web_search is not configured: the owner sets plugin.web.search_url to a SearXNG instance (e.g. http://127.0.0.1:8888) with the JSON format enabled; meanwhile use web_fetch on a known URL",
    )?;
    let url = search_url(base, query)?;
    let f = fetch(
        sb,
        url.as_str(),
        DEFAULT_MAX_BYTES,
        Duration::from_secs(DEFAULT_TIMEOUT_SECS),
    )?;
    if !(200..300).contains(&f.status) {
        return Err(format!(
            "the search endpoint answered HTTP {} (is format=json enabled in its settings?)",
            f.status
        ));
    }
    let body: Value = serde_json::from_slice(&f.body).map_err(|_| {
        "the search endpoint did not answer JSON; plugin.web.search_url must be SearXNG-compatible".to_owned()
    })?;
    Ok(format_results(query, &body, count))
}

static KERNEL: OnceLock<Kernel> = OnceLock::new();

fn tool(name: &str, description: &str, parameters: Value) -> ToolRegister {
    ToolRegister {
        name: name.into(),
        description: description.into(),
        parameters,
        parallel_safe: true,
        network: true,
        ..ToolRegister::default()
    }
    .with_keywords(keywords_of(name))
}

/// Words a person may use when they need each tool (`ToolRegister::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "web_search" => {
            "google, look up, online, internet, news, weather, latest, find out, current, today, \
             price, 搜索, 网上, 上网, 新闻, 天气, 查一下, 最新"
        }
        "web_fetch" => "url, link, website, site, page, download, http, https, article, 网页, 网站, 链接, 打开网页",
        _ => "",
    }
}

/// The tools, for `homed plugin web` and tests.
pub fn plugin() -> Plugin {
    Plugin::new("web")
        .tool_with_call(
            tool(
                "web_fetch",
                "Fetch an http(s) URL and read it as text: HTML is converted to plain text with numbered link \
                 footnotes, JSON is pretty-printed, other text is shown as is; images and other binary content are \
                 refused. Downloads at most `max_bytes` (default 2 MiB) within `timeout_secs` (default 20); the \
                 answer is cut at 16 KiB. Use web_search first when you do not know the URL.",
                json!({"type": "object", "properties": {
                    "url": {"type": "string", "description": "http:// or https:// URL"},
                    "max_bytes": {"type": "integer"},
                    "timeout_secs": {"type": "integer"}
                }, "required": ["url"]}),
            ),
            |args, call: &Call| web_fetch(&args, call.require_sandbox()?),
        )
        .tool_with_call(
            tool(
                "web_search",
                "Search the web: answers a numbered list of results (title, URL, snippet); then web_fetch a URL to \
                 read it. `count` results (default 5, max 20).",
                json!({"type": "object", "properties": {
                    "query": {"type": "string"},
                    "count": {"type": "integer"}
                }, "required": ["query"]}),
            ),
            |args, call: &Call| {
                let base = KERNEL
                    .get()
                    .and_then(|k| k.setting("search_url").ok())
                    .and_then(|v| v.as_str().map(str::to_owned));
                web_search(&args, call.require_sandbox()?, base.as_deref())
            },
        )
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    let result = plugin().run(|k| {
        let _ = KERNEL.set(k);
        eprintln!("web plugin ready");
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("web plugin: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_honoured() {
        assert_eq!(classify(Some("text/html; charset=utf-8"), b"<p>x</p>"), Ok(Kind::Html));
        assert_eq!(classify(Some("application/ld+json"), b"{}"), Ok(Kind::Json));
        assert_eq!(classify(Some("text/plain"), b"hi"), Ok(Kind::Text));
        assert_eq!(classify(None, b"<!DOCTYPE html><html>"), Ok(Kind::Html));
        assert!(
            classify(Some("image/png"), b"\x89PNG")
                .unwrap_err()
                .contains("not text")
        );
        assert!(classify(Some("text/plain"), b"a\x00b").unwrap_err().contains("binary"));
        assert!(classify(None, &[0xff, 0x00]).unwrap_err().contains("binary"));
    }

    #[test]
    fn html_becomes_readable_text_and_json_pretty() {
        let html = b"<html><head><title>T</title><script>var secret=1</script></head>\
            <body><h1>Hello</h1><p>A <a href=\"https://example.org/x\">link</a>.</p><ul><li>one</li></ul></body></html>";
        let t = to_text(Kind::Html, html).unwrap();
        assert!(
            t.contains("# Hello") && t.contains("[link][1]") && t.contains("https://example.org/x"),
            "{t}"
        );
        assert!(!t.contains("var secret"), "scripts are not text: {t}");
        let deep = format!("{}x{}", "<div>".repeat(3_000), "</div>".repeat(3_000));
        assert!(
            to_text(Kind::Html, deep.as_bytes()).is_ok(),
            "deep nesting does not crash"
        );
        assert_eq!(
            to_text(Kind::Json, br#"{"a":[1]}"#).unwrap(),
            "{\n  \"a\": [\n    1\n  ]\n}"
        );
    }

    #[test]
    fn search_urls_and_results() {
        let u = search_url("http://127.0.0.1:8888", "rust & actors").unwrap();
        assert_eq!(u.as_str(), "http://127.0.0.1:8888/search?q=rust+%26+actors&format=json");
        let u = search_url("http://h/searx/search", "q").unwrap();
        assert_eq!(u.path(), "/searx/search");
        let body = json!({"results": [{"title": "A", "url": "http://a", "content": "about a"}, {"title": "B", "url": "http://b"}]});
        assert_eq!(
            format_results("q", &body, 5),
            "1. A\n   http://a\n   about a\n2. B\n   http://b"
        );
        assert_eq!(format_results("q", &json!({"results": []}), 5), "no results for `q`");
    }

    #[test]
    fn refusals_before_any_connection() {
        let off = SandboxInfo::default();
        assert!(
            web_fetch(&json!({"url": "http://127.0.0.1:1/"}), &off)
                .unwrap_err()
                .contains("switched off")
        );
        let own = SandboxInfo {
            network: true,
            own_addrs: vec!["127.0.0.1:4999".parse().unwrap()],
            ..SandboxInfo::default()
        };
        let e = web_fetch(&json!({"url": "http://localhost:4999/api/v1/settings"}), &own).unwrap_err();
        assert!(e.contains("daemon's own address"), "{e}");
        assert!(
            web_fetch(&json!({"url": "file:///etc/passwd"}), &own)
                .unwrap_err()
                .contains("not fetched")
        );
        let e = web_search(&json!({"query": "x"}), &own, None).unwrap_err();
        assert!(e.contains("plugin.web.search_url"), "{e}");
    }
}
