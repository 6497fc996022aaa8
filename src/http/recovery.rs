//! Recovery mode (`homed --failback`): when the normal start fails — a damaged
//! database, an upgrade refused or failed, an invalid setting — the daemon does not
//! exit (a service manager would only start it into the same failure again and
//! again); it serves the WebUI's recovery page and these routes, with the owner
//! token as ever: what failed and the way out the error names, the backups, a restore
//! of one (put in place at the next start, like the Settings view's), and a restart.
//! Nothing else runs: no kernel, no plugin, no model call.

use actix_web::{HttpResponse, web};
use serde::Serialize;
use serde_json::json;

use super::{ApiError, ErrorBody};

/// Why the start failed, for the page.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// `prepare` (the data dir: lock, damage check, upgrade, settings) or `boot` (the
    /// kernel's modules).
    pub stage: &'static str,
    /// The error with its whole chain (it names the file and the way out).
    pub error: String,
}

/// What the recovery routes reach (also present in a normal run, where `failure` stays
/// empty and the routes say so).
#[derive(Debug, Default)]
pub struct RecoveryState {
    pub data_dir: std::path::PathBuf,
    pub failure: std::sync::OnceLock<Failure>,
}

/// Where backups are, read without starting anything: `core.backup.dir` from the
/// settings database when it can be read, `DATA/backups` otherwise.
fn backup_dir(data: &std::path::Path) -> std::path::PathBuf {
    let s = homeagent_actors::config::ConfigStore::peek(&data.join("config.db")).unwrap_or_default();
    crate::backup::actor::dir_of(data, &homeagent_actors::config::BackupConfig::read(&s))
}

#[utoipa::path(get, path = "/api/v1/recovery", tag = "daemon",
    responses((status = 200, description = "`{recovery, stage?, error?, backups: [{name, at_ms, bytes}]}`: whether the daemon runs in recovery mode (`homed --failback` after a failed start), what failed (the error names the file and the way out), and the backups a restore can put back")))]
pub async fn status(state: web::Data<RecoveryState>) -> HttpResponse {
    let failure = state.failure.get().cloned();
    let data = state.data_dir.clone();
    let backups = web::block(move || crate::backup::actor::list(&backup_dir(&data)))
        .await
        .unwrap_or_default();
    HttpResponse::Ok().json(json!({
        "recovery": failure.is_some(),
        "stage": failure.as_ref().map(|f| f.stage),
        "error": failure.as_ref().map(|f| f.error.clone()),
        "backups": backups,
    }))
}

#[utoipa::path(post, path = "/api/v1/recovery/backups/{name}/restore", tag = "daemon",
    params(("name" = String, Path, description = "A backup's name from GET /api/v1/recovery")),
    responses((status = 202, description = "`{restoring, message}`: checked and unpacked; the daemon exits (75) and its next start puts it in place, keeping what the data dir held in `backups/replaced-<ms>`"),
        (status = 400, description = "The archive is not a backup, is damaged or reaches outside the data dir; nothing changed", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "Not in recovery mode: use POST /api/v1/backups/{name}/restore", body = ErrorBody)))]
pub async fn restore(state: web::Data<RecoveryState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    if state.failure.get().is_none() {
        return Err(ApiError::conflict(
            "the daemon is not in recovery mode; restore from Settings → Backups (POST /api/v1/backups/{name}/restore)",
        ));
    }
    let name = name.into_inner();
    if crate::backup::schedule::taken_at(&name).is_none() {
        return Err(ApiError::not_found(format!(
            "no backup `{name}`; GET /api/v1/recovery lists them"
        )));
    }
    let data = state.data_dir.clone();
    let n = name.clone();
    web::block(move || {
        let file = backup_dir(&data).join(&n);
        if !file.is_file() {
            return Err(None);
        }
        // What the data dir holds now is kept (a damaged file is still evidence).
        crate::backup::staged::stage(&data, &file, true).map_err(Some)
    })
    .await
    .map_err(|e| ApiError::unavailable(e.to_string()))?
    .map_err(|e| match e {
        None => ApiError::not_found(format!("no backup `{name}`; GET /api/v1/recovery lists them")),
        Some(e) => ApiError::bad_request(format!("{e}; the data dir is unchanged")),
    })?;
    tracing::warn!(backup = %name, "recovery: a restore was staged; restarting to put it in place");
    let managed = crate::service::restart_soon();
    Ok(HttpResponse::Accepted().json(json!({
        "restoring": name,
        "message": if managed {
            "homed restarts now on the restored data"
        } else {
            "homed stops now; start it again and it starts on the restored data"
        },
    })))
}

/// `DATA/boot-failure`: the error of the last start whose kernel would not boot (a
/// `--failback` start that finds it serves the recovery page instead of trying the
/// same boot again); removed by a start that boots.
pub const BOOT_FAILURE_FILE: &str = "boot-failure";

#[utoipa::path(post, path = "/api/v1/recovery/retry", tag = "daemon",
    responses((status = 202, description = "`{restarting: true}`: the record of the failed boot is removed and the daemon exits (75); its next start tries the normal boot again")))]
pub async fn retry(state: web::Data<RecoveryState>) -> HttpResponse {
    let _ = std::fs::remove_file(state.data_dir.join(BOOT_FAILURE_FILE));
    tracing::info!("recovery: the owner asked to try the normal start again");
    let managed = crate::service::restart_soon();
    HttpResponse::Accepted().json(json!({"restarting": true, "service_manager": managed}))
}
