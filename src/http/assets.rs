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
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Serves `/` as `index.html` and any other embedded file by its path.
pub async fn serve(req: HttpRequest) -> HttpResponse {
    let path = req.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    match Static::get(path) {
        Some(file) => HttpResponse::Ok()
            .insert_header((header::CONTENT_TYPE, content_type(path)))
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header(("X-Content-Type-Options", "nosniff"))
            .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
            .body(file.data.into_owned()),
        None => HttpResponse::NotFound().json(super::error::ErrorBody {
            error: format!("no such page `/{path}`; the dashboard is at `/`"),
        }),
    }
}
