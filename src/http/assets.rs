//! The WebUI dashboard: files of `static/`, embedded into the binary at build time.

use actix_web::{HttpRequest, HttpResponse, http::header};
use rust_embed::Embed;

#[derive(Embed)]
#[folder = "static/"]
struct Static;

/// The page runs only its own files: no inline script or handler, no remote image,
/// style or connection. The sanitiser (DOMPurify) already strips hostile markup from
/// replies; this is the second wall should it ever miss something.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn ok(path: &str) -> actix_web::HttpResponseBuilder {
    let mut r = HttpResponse::Ok();
    r.insert_header((header::CONTENT_TYPE, content_type(path)))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP));
    r
}

/// Whether the request accepts a gzip body (`Accept-Encoding: gzip`, not `q=0`).
fn accepts_gzip(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT_ENCODING)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|c| {
            let mut parts = c.split(';').map(str::trim);
            parts.next().is_some_and(|n| n.eq_ignore_ascii_case("gzip") || n == "*")
                && parts.all(|p| p.replace(' ', "") != "q=0")
        })
}

/// Serves `/` as `index.html` and any other embedded file by its path. A file stored
/// only gzip-compressed (`X.gz`, large vendored code: the binary carries it once, at
/// its compressed size) goes out as is with `Content-Encoding: gzip`, or decompressed
/// for the rare client that does not accept gzip.
/// One embedded page by its file name (the recovery page stands in for `/` when the
/// start failed).
pub fn page(path: &str) -> HttpResponse {
    match Static::get(path) {
        Some(file) => ok(path).body(file.data.into_owned()),
        None => HttpResponse::NotFound().json(super::error::ErrorBody {
            error: format!("no such page `/{path}`; the dashboard is at `/`"),
        }),
    }
}

pub async fn serve(req: HttpRequest) -> HttpResponse {
    let path = req.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    if let Some(file) = Static::get(path) {
        return ok(path).body(file.data.into_owned());
    }
    if let Some(file) = Static::get(&format!("{path}.gz")) {
        if accepts_gzip(&req) {
            return ok(path)
                .insert_header((header::CONTENT_ENCODING, "gzip"))
                .insert_header((header::VARY, "Accept-Encoding"))
                .body(file.data.into_owned());
        }
        let mut plain = Vec::new();
        if std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&file.data[..]), &mut plain).is_ok() {
            return ok(path).insert_header((header::VARY, "Accept-Encoding")).body(plain);
        }
        tracing::error!(%path, "the embedded gzip file is corrupt");
    }
    HttpResponse::NotFound().json(super::error::ErrorBody {
        error: format!("no such page `/{path}`; the dashboard is at `/`"),
    })
}
