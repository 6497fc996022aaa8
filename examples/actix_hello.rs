//! Baseline for `scripts/bench-start`: the bare actix-web hello-world, built with the
//! same dependency versions and profile as `homed`, so start-up time and idle memory
//! can be compared in one run.

use actix_web::{App, HttpServer, web};

fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".into());
    actix_rt::System::new().block_on(async move {
        HttpServer::new(|| App::new().route("/healthz", web::get().to(|| async { "ok" })))
            .workers(1)
            .bind(addr)?
            .run()
            .await
    })
}
