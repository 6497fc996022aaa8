//! `/api/v1/backups`: the WebUI's backups — the list, "Back up now", a download, and
//! a restore (staged, put in place at the next start: `backup::staged`).

use actix_web::{HttpResponse, web};
use homeagent_actors::config::{BackupConfig, ReadSettings};
use serde_json::json;

use super::{ApiError, AppState, ErrorBody};
use crate::backup::actor::{TakeError, TakeNow, dir_of, list};

async fn config(state: &AppState) -> Result<BackupConfig, ApiError> {
    let s = state
        .config
        .send(ReadSettings)
        .await?
        .map_err(super::error::config_error)?;
    Ok(BackupConfig::read(&s))
}

/// A backup's name from a path: only names the backup actor writes (no path can be
/// smuggled in: `homeagent-<stamp>.zip`, checked character by character).
fn checked_name(name: &str) -> Result<&str, ApiError> {
    crate::backup::schedule::taken_at(name)
        .map(|_| name)
        .ok_or_else(|| ApiError::not_found(format!("no backup `{name}`; GET /api/v1/backups lists them")))
}

fn take_error(e: TakeError) -> ApiError {
    match e {
        TakeError::Busy => ApiError::conflict(e.to_string()),
        TakeError::Failed(_) => ApiError::new(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[utoipa::path(get, path = "/api/v1/backups", tag = "daemon",
    responses((status = 200, description = "`{dir, interval, keep, running, last, restore_pending, backups: [{name, at_ms, bytes}]}`: the backups newest first, the schedule (`keep` 0 = no scheduled backups), the last attempt (`{at_ms, trigger, name?, error?}`) and whether a restore waits for the next start"),
        (status = 503, body = ErrorBody)))]
pub async fn list_backups(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let h = &state.backups;
    let cfg = config(&state).await?;
    let dir = dir_of(&state.data_dir, &cfg);
    let d = dir.clone();
    let backups = web::block(move || list(&d))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({
        "dir": dir.display().to_string(),
        "interval": homeagent_actors::config::format_duration(cfg.interval),
        "keep": cfg.keep,
        "running": h.status.running.load(std::sync::atomic::Ordering::SeqCst),
        "last": *h.status.last.lock(),
        "restore_pending": crate::backup::staged::pending(&state.data_dir),
        "backups": backups,
    })))
}

#[utoipa::path(post, path = "/api/v1/backups", tag = "daemon",
    responses((status = 200, description = "`{backup: {name, at_ms, bytes}}`: a backup of the whole data dir, taken now while the daemon runs (the oldest beyond `core.backup.keep` are removed)"),
        (status = 409, description = "A backup is being written already", body = ErrorBody),
        (status = 500, description = "It could not be written (the message says where and why)", body = ErrorBody)))]
pub async fn take(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let b = state.backups.addr.send(TakeNow).await?.map_err(take_error)?;
    Ok(HttpResponse::Ok().json(json!({ "backup": b })))
}

#[utoipa::path(get, path = "/api/v1/backups/{name}", tag = "daemon",
    params(("name" = String, Path, description = "A backup's name from GET /api/v1/backups")),
    responses((status = 200, description = "The archive (application/zip): restore it anywhere with `homed restore FILE --data NEW`"),
        (status = 404, body = ErrorBody)))]
pub async fn download(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let name = checked_name(&name)?.to_owned();
    let path = dir_of(&state.data_dir, &config(&state).await?).join(&name);
    let missing = || ApiError::not_found(format!("no backup `{name}`; GET /api/v1/backups lists them"));
    let file = web::block(move || std::fs::File::open(path))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?
        .map_err(|_| missing())?;
    let len = file.metadata().map(|m| m.len()).ok();
    // Streamed in chunks read on the blocking pool: a backup of years of memory is
    // never held in memory whole.
    let chunks = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let read = web::block(move || {
            let mut buf = vec![0u8; 256 * 1024];
            let n = std::io::Read::read(&mut file, &mut buf)?;
            buf.truncate(n);
            Ok::<_, std::io::Error>((file, buf))
        })
        .await;
        match read {
            Ok(Ok((_, buf))) if buf.is_empty() => None,
            Ok(Ok((file, buf))) => Some((Ok::<_, actix_web::Error>(web::Bytes::from(buf)), Some(file))),
            Ok(Err(e)) => Some((Err(actix_web::error::ErrorInternalServerError(e)), None)),
            Err(e) => Some((Err(actix_web::error::ErrorInternalServerError(e)), None)),
        }
    });
    let mut r = HttpResponse::Ok();
    r.content_type("application/zip")
        .insert_header(("Content-Disposition", format!("attachment; filename=\"{name}\"")))
        .insert_header(("Cache-Control", "no-store"));
    if let Some(len) = len {
        r.no_chunking(len);
    }
    Ok(r.streaming(chunks))
}

#[utoipa::path(post, path = "/api/v1/backups/{name}/restore", tag = "daemon",
    params(("name" = String, Path, description = "A backup's name from GET /api/v1/backups")),
    responses((status = 202, description = "`{restoring, undo, message}`: a backup of the data as it is now was taken first (`undo`, restorable the same way), the chosen one was checked and unpacked, and the daemon restarts to put it in place"),
        (status = 400, description = "The archive is not a backup, is damaged or reaches outside the data dir; nothing changed", body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn restore(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let name = checked_name(&name)?.to_owned();
    let file = dir_of(&state.data_dir, &config(&state).await?).join(&name);
    if !file.is_file() {
        return Err(ApiError::not_found(format!(
            "no backup `{name}`; GET /api/v1/backups lists them"
        )));
    }
    // The way back first: the data as it is now, in the same list.
    let undo = state.backups.addr.send(TakeNow).await?.map_err(take_error)?;
    let data = state.data_dir.clone();
    web::block(move || crate::backup::staged::stage(&data, &file, false))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?
        .map_err(|e| ApiError::bad_request(format!("{e}; the data dir is unchanged")))?;
    tracing::warn!(backup = %name, undo = %undo.name, "a restore was staged from the WebUI; restarting to put it in place");
    let managed = crate::service::restart_soon();
    Ok(HttpResponse::Accepted().json(json!({
        "restoring": name,
        "undo": undo.name,
        "service_manager": managed,
        "message": if managed {
            "homed restarts now and starts on the restored data"
        } else {
            "homed stops now; start it again and it starts on the restored data (no service manager restarts it)"
        },
    })))
}
