//! The bundled timer plugin, built with the Rust SDK. It runs as `homed plugin timer`
//! (so it is always there with the daemon) or as the standalone `homeagent-timer`.
//!
//! Tools: `timer_set` (one-shot or repeating), `timer_list`, `timer_cancel`. When a
//! timer fires, the plugin raises an L3 interrupt so the agent reacts even while busy
//! with queued work.
//!
//! Time is the kernel's ([`Clock`]): a timer is due at a kernel time, and one thread
//! waits for the next due one on an [`Alarm`]. On a daemon with `--virtual-clock`, a
//! timer fires when an advance of the clock reaches its moment (the advance stops there
//! and answers only after the reminder was injected); on the wall clock, when the time
//! comes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use homeagent_i18n::{Lang, Msg};
use homeagent_plugin_protocol::methods::ToolRegister;
use homeagent_plugin_protocol::sdk::{Alarm, Clock, Kernel, Plugin};
use serde_json::{Value, json};

struct Timer {
    message: String,
    /// Repeat interval (ms).
    every_ms: Option<i64>,
    /// When it fires next (kernel time, Unix ms).
    next_ms: i64,
}

/// The timers as a plain core: set, cancel, list, and what is due at a time. The shell
/// ([`State`]) reads the clock and wakes the thread that fires them.
#[derive(Default)]
struct Timers {
    last_id: u64,
    all: BTreeMap<u64, Timer>,
}

impl Timers {
    fn set(&mut self, now_ms: i64, after_ms: i64, message: &str, every_ms: Option<i64>) -> u64 {
        self.last_id += 1;
        let timer = Timer {
            message: message.to_owned(),
            every_ms,
            next_ms: now_ms + after_ms,
        };
        self.all.insert(self.last_id, timer);
        self.last_id
    }

    fn cancel(&mut self, id: u64) -> bool {
        self.all.remove(&id).is_some()
    }

    /// When the next timer fires.
    fn next_due(&self) -> Option<i64> {
        self.all.values().map(|t| t.next_ms).min()
    }

    /// The timers due by `now_ms`, in the order they fell due: a one-shot timer leaves,
    /// a repeating one is due again an interval after it was due (not after it fired,
    /// so it does not drift). A repeating timer many intervals late (a machine that
    /// slept) fires once and is then due an interval from now: one reminder, not a
    /// burst of stale ones.
    fn take_due(&mut self, now_ms: i64) -> Vec<(u64, String)> {
        let mut due: Vec<(i64, u64)> = self
            .all
            .iter()
            .filter(|(_, t)| t.next_ms <= now_ms)
            .map(|(id, t)| (t.next_ms, *id))
            .collect();
        due.sort_unstable();
        due.into_iter()
            .filter_map(|(_, id)| {
                let t = self.all.get_mut(&id)?;
                let message = t.message.clone();
                match t.every_ms {
                    Some(every) => {
                        t.next_ms += every;
                        if t.next_ms <= now_ms {
                            t.next_ms = now_ms + every;
                        }
                    }
                    None => {
                        self.all.remove(&id);
                    }
                }
                Some((id, message))
            })
            .collect()
    }

    fn list(&self, now_ms: i64) -> String {
        if self.all.is_empty() {
            return "no timers".into();
        }
        self.all
            .iter()
            .map(|(id, t)| {
                let left = human(Duration::from_millis((t.next_ms - now_ms).max(0) as u64));
                match t.every_ms {
                    Some(e) => format!("#{id} in {left}, every {}: {}", human(ms(e)), t.message),
                    None => format!("#{id} in {left}: {}", t.message),
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn ms(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
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

/// `timer_set` on the core at `now_ms`; answers what the model reads.
fn set_at(timers: &mut Timers, args: &Value, now_ms: i64) -> Result<String, String> {
    let after = parse_duration(arg(args, "after").ok_or("`after` is required, e.g. \"10m\"")?)?;
    let message = arg(args, "message").ok_or("`message` is required: what to remind of")?;
    let every = arg(args, "repeat_every").map(parse_duration).transpose()?;
    if every.is_some_and(|e| e < Duration::from_secs(1)) {
        return Err("`repeat_every` must be at least 1s".into());
    }
    let every_ms = every.map(|e| e.as_millis() as i64);
    let id = timers.set(now_ms, after.as_millis() as i64, message, every_ms);
    Ok(match every {
        Some(e) => format!(
            "timer #{id} set: first reminder in {}, then every {}",
            human(after),
            human(e)
        ),
        None => format!("timer #{id} set: reminder in {}", human(after)),
    })
}

/// `timer_cancel` on the core.
fn cancel_in(timers: &mut Timers, args: &Value) -> Result<String, String> {
    let id = args
        .get("id")
        .and_then(Value::as_u64)
        .ok_or("`id` (a number from timer_list) is required")?;
    if timers.cancel(id) {
        Ok(format!("timer #{id} cancelled"))
    } else {
        Err(format!("there is no timer #{id}; timer_list shows the active ones"))
    }
}

/// The plugin's state: the timers, the kernel's clock, and the firing thread's wait.
struct State {
    timers: Mutex<Timers>,
    clock: Clock,
    alarm: Alarm,
}

impl State {
    fn new(clock: Clock) -> Self {
        Self {
            timers: Mutex::default(),
            alarm: clock.alarm(),
            clock,
        }
    }

    fn timers(&self) -> MutexGuard<'_, Timers> {
        self.timers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, args: &Value) -> Result<String, String> {
        let said = set_at(&mut self.timers(), args, self.clock.now_ms())?;
        self.alarm.poke();
        Ok(said)
    }

    fn cancel(&self, args: &Value) -> Result<String, String> {
        let said = cancel_in(&mut self.timers(), args)?;
        self.alarm.poke();
        Ok(said)
    }

    fn list(&self) -> String {
        self.timers().list(self.clock.now_ms())
    }

    /// Fires each timer when the kernel's clock reaches it, until the process ends.
    fn fire_loop(&self, kernel: &Kernel) {
        loop {
            let due = self.timers().take_due(self.clock.reached_ms());
            for (id, message) in due {
                eprintln!("timer #{id} fired: {message}");
                if let Err(e) = kernel.inject_interrupt(&reminder(kernel, id, &message), "L3") {
                    eprintln!("timer #{id}: the kernel refused the reminder: {e}");
                }
            }
            let next = self.timers().next_due();
            self.alarm.wait_until(next);
        }
    }
}

/// The reminder a fired timer raises, in the kernel's language (asked when it fires, so
/// a change of `core.agent.language` applies to running timers too; English when the
/// kernel cannot be asked).
fn reminder(kernel: &Kernel, id: u64, message: &str) -> String {
    let lang = kernel
        .language()
        .ok()
        .and_then(|code| Lang::parse(&code))
        .unwrap_or_default();
    Msg::Reminder { id, message }.render(lang)
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
    let clock = Clock::default();
    let state = Arc::new(State::new(clock.clone()));
    let (t1, t2, t3) = (state.clone(), state.clone(), state.clone());
    let result = Plugin::new("timer")
        .clock(&clock)
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
            move |args| t1.set(&args),
        )
        .tool(
            tool(
                "timer_list",
                "List the active timers.",
                json!({"type": "object", "properties": {}}),
            ),
            move |_| Ok(t2.list()),
        )
        .tool(
            tool(
                "timer_cancel",
                "Cancel a timer by its number (see timer_list).",
                json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            ),
            move |args| t3.cancel(&args),
        )
        .run(move |kernel| {
            eprintln!("timer plugin ready");
            std::thread::spawn(move || state.fire_loop(&kernel));
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

    const NOW: i64 = 1_000_000_000_000;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn set_list_cancel() {
        let mut t = Timers::default();
        let args = json!({"after": "1h", "message": "tea", "repeat_every": "1d"});
        let msg = set_at(&mut t, &args, NOW).unwrap();
        assert_eq!(msg, "timer #1 set: first reminder in 1h, then every 24h");
        assert_eq!(t.list(NOW + 60_000), "#1 in 59m, every 24h: tea");
        assert!(
            set_at(&mut t, &json!({"after": "soon", "message": "x"}), NOW)
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(
            set_at(&mut t, &json!({"after": "1s"}), NOW)
                .unwrap_err()
                .contains("message")
        );
        assert_eq!(cancel_in(&mut t, &json!({"id": 1})).unwrap(), "timer #1 cancelled");
        assert!(cancel_in(&mut t, &json!({"id": 1})).is_err());
        assert_eq!(t.list(NOW), "no timers");
    }

    #[test]
    fn timers_fire_at_their_kernel_time_in_order_and_repeat_without_drift() {
        let mut t = Timers::default();
        set_at(&mut t, &json!({"after": "2h", "message": "tea"}), NOW).unwrap();
        set_at(
            &mut t,
            &json!({"after": "1h", "message": "stretch", "repeat_every": "1h"}),
            NOW,
        )
        .unwrap();
        assert_eq!(t.next_due(), Some(NOW + HOUR));
        assert!(t.take_due(NOW + HOUR - 1).is_empty(), "nothing before its time");
        assert_eq!(t.take_due(NOW + HOUR), [(2, "stretch".to_owned())]);
        assert_eq!(t.next_due(), Some(NOW + 2 * HOUR));
        // Both due at once: in the order they fell due, the one-shot leaves.
        assert_eq!(
            t.take_due(NOW + 2 * HOUR + 5),
            [(1, "tea".to_owned()), (2, "stretch".to_owned())]
        );
        assert_eq!(t.next_due(), Some(NOW + 3 * HOUR), "an interval after it was due");
        // Many intervals late: one reminder, then an interval from now.
        assert_eq!(t.take_due(NOW + 10 * HOUR).len(), 1);
        assert_eq!(t.next_due(), Some(NOW + 11 * HOUR));
        assert_eq!(t.list(NOW + 10 * HOUR), "#2 in 1h, every 1h: stretch");
    }
}
