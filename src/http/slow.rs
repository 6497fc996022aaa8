//! A request body that stops arriving is ended: a client that declares a
//! `Content-Length` and sends less (or stalls mid-upload) gets `408` after
//! [`BODY_IDLE`] without a byte, instead of holding the connection (and, with one HTTP
//! worker, a share of the daemon) until it gives up.
//!
//! Why here: actix-web bounds the request *head* (`client_request_timeout`, 5 s by
//! default) but not the body; every extractor (JSON, multipart, the import's stream)
//! reads the payload, so one wrapper around it covers them all.

use std::time::Duration;

use actix_web::HttpMessage as _;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use futures_util::StreamExt as _;

/// Longest wait for the next chunk of a request body.
pub const BODY_IDLE: Duration = Duration::from_secs(10);

/// The error a stalled body ends with (recognised by [`is_stalled`]).
fn stalled() -> PayloadError {
    PayloadError::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "no byte of the request body for {} s (is Content-Length larger than the body?); send the whole body",
            BODY_IDLE.as_secs()
        ),
    ))
}

/// Whether a payload error is a stalled body.
pub fn is_stalled(e: &PayloadError) -> bool {
    matches!(e, PayloadError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
}

/// The middleware: the request's payload, each chunk awaited at most [`BODY_IDLE`].
pub async fn body_idle_timeout(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let inner = req.take_payload();
    let stream = futures_util::stream::unfold(Some(inner), |state| async move {
        let mut p = state?;
        match tokio::time::timeout(BODY_IDLE, p.next()).await {
            Ok(Some(item)) => Some((item, Some(p))),
            Ok(None) => None,
            Err(_) => Some((Err(stalled()), None)),
        }
    });
    // Fused: readers such as the multipart parser poll again after the end, which a
    // bare `unfold` answers with a panic.
    let boxed: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, PayloadError>>>> =
        Box::pin(stream.fuse());
    req.set_payload(Payload::from(boxed));
    next.call(req).await.map(ServiceResponse::map_into_boxed_body)
}
