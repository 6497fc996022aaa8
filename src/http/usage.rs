//! `GET /api/v1/usage`: what the model calls cost, from the usage ledger
//! (`homeagent_actors::usage`), grouped by day, source, model, kind or principal.

use actix_web::{HttpResponse, web};
use homeagent_actors::usage::{GetUsage, GroupBy, Kind};
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// Query of `GET /api/v1/usage`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// First day (UTC, `YYYY-MM-DD`, inclusive); default: 30 days before `to`.
    pub from: Option<String>,
    /// Last day (UTC, `YYYY-MM-DD`, inclusive); default: today (the daemon's clock).
    pub to: Option<String>,
    /// `day` (default), `source`, `model`, `kind` or `principal`.
    #[param(value_type = Option<String>)]
    pub by: Option<GroupBy>,
    /// Only calls of this kind: `owner_turn`, `guest_turn`, `heartbeat`, `sub_agent`,
    /// `vision`, `selftest`.
    #[param(value_type = Option<String>)]
    pub kind: Option<Kind>,
}

const DAY_MS: i64 = 86_400_000;

/// Milliseconds at the start of the UTC day `YYYY-MM-DD` (through the clock's RFC 3339
/// parser, the `time` crate's).
fn day_start(day: &str) -> Result<i64, ApiError> {
    let bad = || ApiError::bad_request(format!("`{day}` is not a day: write it as YYYY-MM-DD, e.g. 2026-12-04"));
    if day.len() != 10 || day.contains(['T', 't', ' ']) {
        return Err(bad());
    }
    homeagent_actors::clock::parse_start(&format!("{day}T00:00:00Z")).map_err(|_| bad())
}

/// `YYYY-MM-DD` of the UTC day holding `ms`.
fn day_of(ms: i64) -> String {
    let (y, m, d) = homeagent_actors::memory::civil_from_days(ms.div_euclid(DAY_MS));
    format!("{y:04}-{m:02}-{d:02}")
}

#[utoipa::path(get, path = "/api/v1/usage", tag = "agent", params(UsageQuery),
    responses((status = 200, description = "`{from, to, by, rows: [{key, calls, input, output, cached, estimated_calls, cost_usd, unpriced_calls}], total}`: every model call that answered in the days asked, grouped; costs from `core.llm.prices` (calls of a model without a price are counted in `unpriced_calls`, not as free)"),
        (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn usage(state: web::Data<AppState>, q: web::Query<UsageQuery>) -> Result<HttpResponse, ApiError> {
    let ledger = state.usage.clone();
    let q = q.into_inner();
    let today = homeagent_actors::clock::now_ms().div_euclid(DAY_MS) * DAY_MS;
    let to = match &q.to {
        Some(d) => day_start(d)?,
        None => today,
    };
    let from = match &q.from {
        Some(d) => day_start(d)?,
        None => to - 30 * DAY_MS,
    };
    if from > to {
        return Err(ApiError::bad_request("`from` is after `to`"));
    }
    let by = q.by.unwrap_or_default();
    let (rows, total) = ledger
        .send(GetUsage {
            from_ms: from,
            to_ms: to + DAY_MS,
            by,
            kind: q.kind,
        })
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({
        "from": day_of(from), "to": day_of(to), "by": by, "rows": rows, "total": total,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc_midnights_and_back() {
        assert_eq!(day_start("1970-01-01").ok(), Some(0));
        assert_eq!(day_start("2024-02-29").ok(), Some(1_709_164_800_000));
        assert!(day_start("2026-13-01").is_err() && day_start("26-1-1").is_err());
        assert!(day_start("2026-12-04T00:00:00Z").is_err());
        assert_eq!(day_of(1_709_164_800_000 + 5), "2024-02-29");
    }
}
