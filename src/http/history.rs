//! `GET /api/v1/chat/history`: the conversation as the chat panel shows it, paged
//! from the newest end.
//!
//! Read from the text log (`DATA/memory/text/*.jsonl`), not from the context window:
//! the window in memory.db is pruned by the distill heartbeat, while the text log keeps
//! every turn of every channel across restarts, so "scroll up to see what was said last
//! week" stays true. Each logged turn becomes two items (the input with its source, then
//! the reply). An item's id is its position in that sequence (turn index × 2, +1 for the
//! reply): stable while the log only grows, which is all the kernel does outside an
//! explicit purge (`PurgeText`/`ReplaceText`, after which a client simply reloads).

use std::path::PathBuf;

use actix_web::{HttpResponse, web};
use homeagent_actors::memory::textlog::{TextEvent, TextLog};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::error::ApiError;

/// Default page size.
pub const DEFAULT_LIMIT: usize = 50;
/// Largest page a client may ask for.
pub const MAX_LIMIT: usize = 500;

/// Query of `GET /api/v1/chat/history`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Only items with an id below this one (the `next_before` of the previous page);
    /// omitted: the newest items.
    pub before: Option<u64>,
    /// Items per page (default 50, at most 500).
    pub limit: Option<usize>,
    /// Only the turns whose words contain this text (either side, any case): the
    /// newest `limit` of them.
    pub q: Option<String>,
}

/// Who said an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One message of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct HistoryItem {
    /// Position in the whole history (oldest is 0); pass as `before` to page back.
    pub id: u64,
    /// Unix milliseconds of the turn.
    pub ts_ms: i64,
    pub role: Role,
    /// The channel or plugin the input came from (`webui`, `cli`, a plugin's name, ...).
    pub source: String,
    pub text: String,
    /// Tools the reply used (replies only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools_used: Vec<String>,
    /// The turn came from a history import, not a live conversation.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub imported: bool,
    /// `L1`..`L4`: the input was an interrupt (a timer reminder, an urgent message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The images the input carried, as media block ids (inputs only): their bytes are
    /// at `GET /api/v1/memory/media/{id}/data` while the block exists.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<String>,
}

/// Body of `GET /api/v1/chat/history`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryPage {
    /// Oldest first.
    pub items: Vec<HistoryItem>,
    /// The `before` of the next older page; absent at the start of the history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<u64>,
    /// Items in the whole history.
    pub total: u64,
}

/// Why a query is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HistoryError {
    #[error("limit must be between 1 and {MAX_LIMIT} (got {0}); omit it for {DEFAULT_LIMIT}")]
    Limit(usize),
}

/// The page of `events` (the text log in order) ending just before `before`.
/// A turn without a reply (none is logged today, but old logs may have one) yields
/// only its input.
pub fn page(events: &[TextEvent], before: Option<u64>, limit: Option<usize>) -> Result<HistoryPage, HistoryError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(HistoryError::Limit(limit));
    }
    let total = events.len() as u64 * 2;
    let end = before.map_or(total, |b| b.min(total));
    let start = end.saturating_sub(limit as u64);
    let mut items = Vec::with_capacity(limit);
    for id in start..end {
        let e = &events[(id / 2) as usize];
        let reply = id % 2 == 1;
        if reply && e.response.is_empty() {
            continue;
        }
        items.push(HistoryItem {
            id,
            ts_ms: e.ts,
            role: if reply { Role::Assistant } else { Role::User },
            source: if reply { "agent".into() } else { e.source.clone() },
            text: if reply { e.response.clone() } else { e.input.clone() },
            tools_used: if reply { e.tools_used.clone() } else { Vec::new() },
            imported: e.imported,
            level: if reply { None } else { e.level.clone() },
            media: if reply { Vec::new() } else { e.media.clone() },
        });
    }
    Ok(HistoryPage {
        items,
        next_before: (start > 0).then_some(start),
        total,
    })
}

/// The items of the turns whose input or reply contains `q` (case-insensitive), the
/// newest `limit` matches, oldest first; `total` counts every match.
pub fn search(events: &[TextEvent], q: &str, limit: Option<usize>) -> Result<HistoryPage, HistoryError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(HistoryError::Limit(limit));
    }
    let needle = q.trim().to_lowercase();
    let hits: Vec<u64> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            !needle.is_empty()
                && (e.input.to_lowercase().contains(&needle) || e.response.to_lowercase().contains(&needle))
        })
        .map(|(i, _)| i as u64)
        .collect();
    let total = hits.len() as u64 * 2;
    let mut items = Vec::new();
    for &turn in hits.iter().rev().take(limit.div_ceil(2)).rev() {
        let p = page(events, Some(turn * 2 + 2), Some(2))?;
        items.extend(p.items);
    }
    Ok(HistoryPage {
        items,
        next_before: None,
        total,
    })
}

/// One conversation of the list: a channel's turns on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Conversation {
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub source: String,
    pub turns: u64,
    /// The first item's id and the id after the last one: `GET /api/v1/chat/history?
    /// before=<to>&limit=<to - from>` shows it (items of other channels in between too).
    pub from: u64,
    pub to: u64,
    /// The first input's words (at most 80 characters).
    pub first: String,
    /// When its last turn was.
    pub last_ts_ms: i64,
}

/// The conversations of the log, newest first: consecutive days of one channel's
/// turns grouped by (UTC day, channel).
pub fn conversations(events: &[TextEvent], limit: usize) -> Vec<Conversation> {
    let mut out: Vec<Conversation> = Vec::new();
    let mut index: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let (y, m, d) = homeagent_actors::memory::civil_from_days(e.ts.div_euclid(86_400_000));
        let day = format!("{y:04}-{m:02}-{d:02}");
        let key = (day.clone(), e.source.clone());
        let id = i as u64 * 2;
        match index.get(&key) {
            Some(&k) => {
                let c = &mut out[k];
                c.turns += 1;
                c.to = id + 2;
                c.last_ts_ms = e.ts;
            }
            None => {
                index.insert(key, out.len());
                out.push(Conversation {
                    day,
                    source: e.source.clone(),
                    turns: 1,
                    from: id,
                    to: id + 2,
                    first: e.input.chars().take(80).collect(),
                    last_ts_ms: e.ts,
                });
            }
        }
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.last_ts_ms));
    out.truncate(limit);
    out
}

#[utoipa::path(get, path = "/api/v1/chat/conversations", tag = "agent",
    responses((status = 200, description = "`{\"conversations\": [...]}`: each channel's turns of each UTC day, newest first (at most 200)")))]
pub async fn list_conversations(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let dir: PathBuf = state.text_dir.clone();
    let events = web::block(move || TextLog::replay(&dir))
        .await
        .map_err(|e| ApiError::unavailable(format!("reading the text log failed ({e}); try again")))?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "conversations": conversations(&events, 200) })))
}

#[utoipa::path(get, path = "/api/v1/chat/history", tag = "agent", params(HistoryQuery),
    responses(
        (status = 200, description = "A page of the conversation (every channel), oldest first", body = HistoryPage),
        (status = 400, description = "limit out of range", body = super::error::ErrorBody),
    ))]
pub async fn history(state: web::Data<AppState>, q: web::Query<HistoryQuery>) -> Result<HttpResponse, ApiError> {
    let q = q.into_inner();
    let dir: PathBuf = state.text_dir.clone();
    // The log is read whole (files are rotated at 10 MB); off the async threads.
    let events = web::block(move || TextLog::replay(&dir))
        .await
        .map_err(|e| ApiError::unavailable(format!("reading the text log failed ({e}); try again")))?;
    let p = match q.q.as_deref() {
        Some(words) if !words.trim().is_empty() => search(&events, words, q.limit),
        _ => page(&events, q.before, q.limit),
    }
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(HttpResponse::Ok().json(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(n: i64, source: &str, response: &str) -> TextEvent {
        TextEvent {
            ts: n,
            source: source.into(),
            input: format!("in {n}"),
            response: response.into(),
            tools_used: vec![],
            imported: false,
            level: (source == "timer").then(|| "L3".to_owned()),
            media: Vec::new(),
        }
    }

    #[test]
    fn an_input_keeps_its_images_and_its_reply_has_none() {
        let mut e = ev(0, "webui", "a red bike");
        e.media = vec!["blk_media_0123456789ab".into()];
        let p = page(&[e], None, None).unwrap();
        assert_eq!(p.items[0].media, ["blk_media_0123456789ab"]);
        assert!(p.items[1].media.is_empty());
        let json = serde_json::to_value(&p.items[1]).unwrap();
        assert!(json.get("media").is_none(), "{json}");
    }

    #[test]
    fn an_interrupt_input_keeps_its_level_and_its_reply_has_none() {
        let p = page(&[ev(0, "timer", "noted")], None, None).unwrap();
        assert_eq!(p.items[0].level.as_deref(), Some("L3"));
        assert_eq!(p.items[1].level, None);
    }

    #[test]
    fn newest_page_first_then_older_pages_until_the_start() {
        let events: Vec<_> = (0..5).map(|n| ev(n, "webui", &format!("out {n}"))).collect();
        let p = page(&events, None, Some(4)).unwrap();
        assert_eq!(p.total, 10);
        assert_eq!(p.items.iter().map(|i| i.id).collect::<Vec<_>>(), [6, 7, 8, 9]);
        assert_eq!(p.items[0].text, "in 3");
        assert_eq!(p.items[1].role, Role::Assistant);
        assert_eq!(p.items[1].text, "out 3");
        assert_eq!(p.next_before, Some(6));
        let p = page(&events, Some(6), Some(4)).unwrap();
        assert_eq!(p.items.iter().map(|i| i.id).collect::<Vec<_>>(), [2, 3, 4, 5]);
        let p = page(&events, Some(2), Some(4)).unwrap();
        assert_eq!(p.items.iter().map(|i| i.id).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(p.next_before, None);
    }

    #[test]
    fn source_is_kept_and_missing_replies_are_skipped() {
        let events = vec![ev(1, "cli", ""), ev(2, "telegram", "hi")];
        let p = page(&events, None, None).unwrap();
        assert_eq!(p.items.len(), 3);
        assert_eq!(p.items[0].source, "cli");
        assert_eq!(p.items[1].source, "telegram");
        assert_eq!(p.items[2].source, "agent");
    }

    #[test]
    fn hostile_cursors_and_limits_are_bounded() {
        let events = vec![ev(1, "webui", "a")];
        assert_eq!(page(&events, None, Some(0)).unwrap_err(), HistoryError::Limit(0));
        assert!(page(&events, None, Some(MAX_LIMIT + 1)).is_err());
        assert_eq!(page(&events, Some(u64::MAX), None).unwrap().items.len(), 2);
        assert!(page(&[], Some(0), None).unwrap().items.is_empty());
    }

    #[test]
    fn search_finds_either_side_newest_first_and_conversations_group_by_day_and_channel() {
        let day = 86_400_000;
        let mut log = vec![
            ev(1, "webui", "the Paris trip"),
            ev(2, "cli", "ok"),
            ev(day + 3, "webui", "paris again"),
        ];
        log[1].input = "PARIS by train?".into();
        let found = search(&log, "paris", Some(2)).unwrap();
        assert_eq!(found.total, 6, "three turns match");
        assert_eq!(
            found.items.iter().map(|i| i.id).collect::<Vec<_>>(),
            vec![4, 5],
            "the newest match"
        );
        assert!(search(&log, "  ", None).unwrap().items.is_empty());
        let c = conversations(&log, 10);
        assert_eq!(
            c.iter()
                .map(|c| (c.day.as_str(), c.source.as_str(), c.turns, c.from, c.to))
                .collect::<Vec<_>>(),
            vec![
                ("1970-01-02", "webui", 1, 4, 6),
                ("1970-01-01", "cli", 1, 2, 4),
                ("1970-01-01", "webui", 1, 0, 2)
            ]
        );
    }
}
