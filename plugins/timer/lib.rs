//! The bundled timer plugin, built with the Rust SDK. It runs as `homed plugin timer`
//! (so it is always there with the daemon) or as the standalone `homeagent-timer`.
//!
//! Tools: `timer_set` (one-shot or repeating), `timer_list`, `timer_cancel`. When a
//! timer fires, the plugin raises an L3 interrupt so the agent reacts even while busy
//! with queued work.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use homeagent_i18n::{Lang, Msg};
use homeagent_plugin_protocol::methods::ToolRegister;
use homeagent_plugin_protocol::sdk::{Kernel, Plugin};
use serde_json::{Value, json};

struct Timer {
    message: String,
    every: Option<Duration>,
    next: Instant,
    cancelled: Arc<AtomicBool>,
}

#[derive(Default)]
struct Timers {
    next_id: AtomicU64,
    all: Mutex<BTreeMap<u64, Timer>>,
}

/// Parses `90s`, `5m`, `1h30m`, `2d`, `250ms`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let bad = || format!("`{s}` is not a duration; write it like 30s, 5m, 1h30m or 2d");
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "ms" => n / 1000.0,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            "d" => n * 86_400.0,
            _ => return Err(bad()),
        };
        total += Duration::from_secs_f64(secs);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else if s > 0 {
        format!("{s}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty())
}

static KERNEL: OnceLock<Kernel> = OnceLock::new();

/// The reminder a fired timer raises, in the kernel's language (asked when it fires, so
/// a change of `core.agent.language` applies to running timers too; English when the
/// kernel cannot be asked).
fn reminder(id: u64, message: &str) -> String {
    let lang = KERNEL
        .get()
        .and_then(|k| k.language().ok())
        .and_then(|code| Lang::parse(&code))
        .unwrap_or_default();
    Msg::Reminder { id, message }.render(lang)
}

fn set(timers: &Arc<Timers>, args: Value) -> Result<String, String> {
    let after = parse_duration(arg(&args, "after").ok_or("`after` is required, e.g. \"10m\"")?)?;
    let message = arg(&args, "message")
        .ok_or("`message` is required: what to remind of")?
        .to_owned();
    let every = arg(&args, "repeat_every").map(parse_duration).transpose()?;
    if every.is_some_and(|e| e < Duration::from_secs(1)) {
        return Err("`repeat_every` must be at least 1s".into());
    }
    let id = timers.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let cancelled = Arc::new(AtomicBool::new(false));
    timers.all.lock().unwrap().insert(
        id,
        Timer {
            message: message.clone(),
            every,
            next: Instant::now() + after,
            cancelled: cancelled.clone(),
        },
    );
    let t = timers.clone();
    std::thread::spawn(move || {
        let mut wait = after;
        loop {
            // Sleep in short steps so a cancel takes effect promptly.
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if cancelled.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep((until - Instant::now()).min(Duration::from_millis(200)));
            }
            if cancelled.load(Ordering::Relaxed) {
                return;
            }
            eprintln!("timer #{id} fired: {message}");
            if let Some(k) = KERNEL.get()
                && let Err(e) = k.inject_interrupt(&reminder(id, &message), "L3")
            {
                eprintln!("timer #{id}: the kernel refused the reminder: {e}");
            }
            match every {
                Some(e) => {
                    wait = e;
                    if let Some(tm) = t.all.lock().unwrap().get_mut(&id) {
                        tm.next = Instant::now() + e;
                    }
                }
                None => {
                    t.all.lock().unwrap().remove(&id);
                    return;
                }
            }
        }
    });
    Ok(match every {
        Some(e) => format!(
            "timer #{id} set: first reminder in {}, then every {}",
            human(after),
            human(e)
        ),
        None => format!("timer #{id} set: reminder in {}", human(after)),
    })
}

fn list(timers: &Timers) -> String {
    let all = timers.all.lock().unwrap();
    if all.is_empty() {
        return "no timers".into();
    }
    let now = Instant::now();
    all.iter()
        .map(|(id, t)| {
            let left = human(t.next.saturating_duration_since(now));
            match t.every {
                Some(e) => format!("#{id} in {left}, every {}: {}", human(e), t.message),
                None => format!("#{id} in {left}: {}", t.message),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn cancel(timers: &Timers, args: Value) -> Result<String, String> {
    let id = args
        .get("id")
        .and_then(Value::as_u64)
        .ok_or("`id` (a number from timer_list) is required")?;
    match timers.all.lock().unwrap().remove(&id) {
        Some(t) => {
            t.cancelled.store(true, Ordering::Relaxed);
            Ok(format!("timer #{id} cancelled"))
        }
        None => Err(format!("there is no timer #{id}; timer_list shows the active ones")),
    }
}

fn tool(name: &str, description: &str, parameters: Value) -> ToolRegister {
    ToolRegister {
        name: name.into(),
        description: description.into(),
        parameters,
        parallel_safe: true,
        no_memory: true,
        ..ToolRegister::default()
    }
    .with_keywords(keywords_of(name))
}

/// Words a person may use when they need each tool (`ToolRegister::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "timer_set" => {
            "remind, reminder, alarm, later, minutes, hours, tomorrow, wake, schedule, every day, \
             countdown, in an hour, 提醒, 闹钟, 定时, 分钟后, 小时后, 稍后, 明天"
        }
        "timer_list" => "reminders, timers, alarms, scheduled, pending, upcoming, 提醒, 定时器, 闹钟",
        "timer_cancel" => "cancel, stop, remove, delete, call off, 取消, 删除提醒",
        _ => "",
    }
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    let timers = Arc::new(Timers::default());
    let (t1, t2, t3) = (timers.clone(), timers.clone(), timers.clone());
    let result = Plugin::new("timer")
        .tool(
            tool(
                "timer_set",
                "Set a reminder: after a delay (and optionally repeating), you receive an interrupt with the message.",
                json!({"type": "object", "properties": {
                    "after": {"type": "string", "description": "delay, e.g. 30s, 10m, 1h30m, 2d"},
                    "message": {"type": "string", "description": "what to remind of"},
                    "repeat_every": {"type": "string", "description": "optional repeat interval, e.g. 1h"}
                }, "required": ["after", "message"]}),
            ),
            move |args| set(&t1, args),
        )
        .tool(
            tool(
                "timer_list",
                "List the active timers.",
                json!({"type": "object", "properties": {}}),
            ),
            move |_| Ok(list(&t2)),
        )
        .tool(
            tool(
                "timer_cancel",
                "Cancel a timer by its number (see timer_list).",
                json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            ),
            move |args| cancel(&t3, args),
        )
        .run(|kernel| {
            let _ = KERNEL.set(kernel);
            eprintln!("timer plugin ready");
        });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("timer plugin: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(human(Duration::from_secs(3600)), "1h");
    }

    #[test]
    fn set_list_cancel() {
        let t = Arc::new(Timers::default());
        let msg = set(&t, json!({"after": "1h", "message": "tea", "repeat_every": "1d"})).unwrap();
        assert_eq!(msg, "timer #1 set: first reminder in 1h, then every 24h");
        assert!(list(&t).starts_with("#1 in "));
        assert!(
            set(&t, json!({"after": "soon", "message": "x"}))
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(set(&t, json!({"after": "1s"})).unwrap_err().contains("message"));
        assert_eq!(cancel(&t, json!({"id": 1})).unwrap(), "timer #1 cancelled");
        assert!(cancel(&t, json!({"id": 1})).is_err());
        assert_eq!(list(&t), "no timers");
    }
}
