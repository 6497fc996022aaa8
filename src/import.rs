//! `homed memory import FILE [--format ndjson|locomo]`: sends a history to the running
//! daemon's `POST /api/v1/memory/import` with the owner token. A LoCoMo file (a JSON
//! array of conversations) is converted first: each session's turns at the session's
//! `session_N_date_time`, one second apart, said by the turn's `speaker`, with its
//! `dia_id` kept as the line's `id` (so evidence can be mapped back).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// How a history file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One `{"time", "speaker", "text"}` object a line (sent as it is).
    Ndjson,
    /// A LoCoMo JSON array of `{sample_id, conversation, qa}`.
    Locomo,
}

impl Format {
    /// The format of `bytes` when none is given: a JSON array is LoCoMo, anything
    /// else NDJSON.
    pub fn sniff(bytes: &[u8]) -> Self {
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => Self::Locomo,
            _ => Self::Ndjson,
        }
    }
}

/// One line of the import body, as this client writes it.
#[derive(Debug, Serialize)]
struct Line<'a> {
    /// Unix seconds.
    time: i64,
    speaker: &'a str,
    text: &'a str,
    source: &'a str,
    id: &'a str,
}

/// The import body of one LoCoMo conversation (`source` = `locomo:<sample_id>`).
pub fn locomo_ndjson(sample: &crate::eval::Sample) -> anyhow::Result<Vec<u8>> {
    turns_ndjson(sample, &crate::eval::turns(sample)?)
}

/// The import body of some of a LoCoMo conversation's turns (one session, say).
pub fn turns_ndjson(sample: &crate::eval::Sample, turns: &[crate::eval::Turn]) -> anyhow::Result<Vec<u8>> {
    let source = format!("locomo:{}", sample.sample_id);
    let mut out = Vec::new();
    for t in turns {
        if t.text.trim().is_empty() || t.speaker.trim().is_empty() {
            continue;
        }
        let line = Line {
            time: t.ts_ms.div_euclid(1000),
            speaker: &t.speaker,
            text: &t.text,
            source: &source,
            id: &t.dia_id,
        };
        serde_json::to_writer(&mut out, &line)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Reads a LoCoMo file.
pub fn read_locomo(file: &Path) -> anyhow::Result<Vec<crate::eval::Sample>> {
    let raw = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    parse_locomo(&raw, file)
}

fn parse_locomo(raw: &[u8], file: &Path) -> anyhow::Result<Vec<crate::eval::Sample>> {
    serde_json::from_slice(raw).with_context(|| {
        format!(
            "{} is not LoCoMo JSON (an array of {{sample_id, conversation, qa}}); pass --format ndjson for NDJSON",
            file.display()
        )
    })
}

/// The daemon's answer to an import.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub struct Imported {
    pub imported: usize,
    pub skipped: usize,
    #[serde(default)]
    pub archived: usize,
    #[serde(default)]
    pub facts: usize,
}

/// Sends one NDJSON body to `base` (`http://host:port`) with `token`. A request that
/// could not connect never reached the daemon and is retried (awc's pool now and then
/// reports a connection it dropped as "disconnected").
pub async fn post(client: &awc::Client, base: &str, token: &str, body: Vec<u8>) -> anyhow::Result<Imported> {
    let body = actix_web::web::Bytes::from(body);
    let mut attempt = 0;
    let mut resp = loop {
        let sent = client
            .post(format!("{base}/api/v1/memory/import"))
            .insert_header(("content-type", "application/x-ndjson"))
            .insert_header(("authorization", format!("Bearer {token}")))
            .send_body(body.clone())
            .await;
        match sent {
            Ok(r) => break r,
            Err(awc::error::SendRequestError::Connect(e)) if attempt < 3 => {
                attempt += 1;
                tracing::debug!("connecting to the daemon failed ({e}); retrying");
                actix_rt::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => bail!(
                "cannot reach the daemon at {base}: {e}; is homed running on this data dir (or pass its --listen)?"
            ),
        }
    };
    let bytes = resp
        .body()
        .limit(1024 * 1024)
        .await
        .map_err(|e| anyhow::anyhow!("unreadable answer from the daemon: {e}"))?;
    if !resp.status().is_success() {
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        bail!(
            "the daemon refused the import ({}): {}",
            resp.status(),
            v["error"].as_str().unwrap_or("no reason given")
        );
    }
    serde_json::from_slice(&bytes).context("the daemon's answer is not an import report")
}

/// Runs `homed memory import`: answers a one-line summary.
pub async fn run(listen: SocketAddr, data: &Path, file: &Path, format: Option<Format>) -> anyhow::Result<String> {
    let raw = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let format = format.unwrap_or_else(|| Format::sniff(&raw));
    let token = crate::auth::read_token(data).context("pass the daemon's --data directory")?;
    let base = format!("http://{listen}");
    // A long history takes a while to distil; the daemon answers when it is done.
    let client = awc::Client::builder().timeout(Duration::from_secs(3600)).finish();
    let bodies: Vec<(String, Vec<u8>)> = match format {
        Format::Ndjson => vec![(file.display().to_string(), raw)],
        Format::Locomo => {
            let samples = parse_locomo(&raw, file)?;
            samples
                .iter()
                .map(|s| Ok((format!("conversation {}", s.sample_id), locomo_ndjson(s)?)))
                .collect::<anyhow::Result<_>>()?
        }
    };
    let mut total = Imported::default();
    for (what, body) in bodies {
        let r = post(&client, &base, &token, body)
            .await
            .with_context(|| format!("importing {what}"))?;
        eprintln!("{what}: {} imported, {} skipped", r.imported, r.skipped);
        total.imported += r.imported;
        total.skipped += r.skipped;
        total.archived += r.archived;
        total.facts += r.facts;
    }
    Ok(format!(
        "imported {} turns ({} skipped as imported before); {} moved into documents, {} facts in the graph",
        total.imported, total.skipped, total.archived, total.facts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locomo_sessions_become_lines_one_second_apart() {
        let sample: crate::eval::Sample = serde_json::from_value(serde_json::json!({
            "sample_id": "s1",
            "conversation": {
                "speaker_a": "Caroline", "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
                    {"speaker": "Melanie", "dia_id": "D1:2", "text": "Hi!", "blip_caption": "a dog"}
                ]
            },
            "qa": []
        }))
        .unwrap();
        let body = locomo_ndjson(&sample).unwrap();
        let lines = homeagent_actors::memory::context::import::decode(&body, i64::MAX / 2).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].ts_ms, 1_683_554_160_000);
        assert_eq!(lines[1].ts_ms - lines[0].ts_ms, 1000);
        assert_eq!(lines[1].speaker, "Melanie");
        assert_eq!(lines[1].text, "Hi! [shares a photo: a dog]");
        assert_eq!(lines[1].id.as_deref(), Some("D1:2"));
        assert_eq!(lines[0].source.as_deref(), Some("locomo:s1"));
        assert_eq!(Format::sniff(b"  [{}]"), Format::Locomo);
        assert_eq!(Format::sniff(b"{\"time\": 1}"), Format::Ndjson);
    }
}
