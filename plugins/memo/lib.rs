//! The bundled memo plugin: notes with tags and optional reminders. It runs as
//! `homed plugin memo`.
//!
//! Tools: `memo_add`, `memo_list`, `memo_search`, `memo_update`, `memo_done`,
//! `memo_delete`. The notes live in SQLite, `memo.db` in the plugin's own data
//! directory (`DATA/plugin_data/memo`, the one place its confinement lets it write;
//! see `store`). When a note's reminder comes, the plugin raises an L3 interrupt with
//! the note, as the timer plugin does; a reminder that came while the daemon was down
//! is delivered when the plugin starts again.
//!
//! The page reads the notes through the plugin's named APIs (`POST
//! /api/v1/plugins/memo/api/<name>`, under the daemon's API auth): `list` (with a
//! search), `done` and `delete`.
//!
//! "Now" is the kernel's clock ([`Clock`]): notes are stamped with it and reminders
//! come due by it, so on a daemon with `--virtual-clock` a reminder fires when an
//! advance of the clock reaches it (the advance stops at its moment and answers only
//! after the reminder was injected and recorded).

pub mod store;
pub mod when;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use homeagent_i18n::{Lang, Msg};
use homeagent_plugin_protocol::methods::ToolRegister;
use homeagent_plugin_protocol::sdk::{Alarm, Clock, Kernel, Plugin};
use homeagent_plugin_protocol::toolkit::{bool_arg, cap, opt_str, prefix, str_arg, uint_arg};
use serde_json::{Value, json};

use store::{Filter, Note, Store, clean_tags};
use when::Zone;

/// Longest note text accepted.
pub const MAX_TEXT: usize = 8 * 1024;
/// Most notes one listing shows (the default is [`DEFAULT_LIMIT`]).
pub const MAX_LIMIT: u64 = 200;
pub const DEFAULT_LIMIT: u64 = 20;
/// Most bytes of a listing the model gets.
const MAX_OUTPUT: usize = 16 * 1024;
/// Wait (on the kernel's clock) before trying again a reminder the kernel refused.
const RETRY: Duration = Duration::from_secs(30);

type R = Result<String, String>;
/// One of the page's APIs.
type ApiFn = fn(&Memo, &Value) -> Result<Value, String>;

/// The plugin's state: the store, the kernel's clock, and the reminder loop's wait.
pub struct Memo {
    store: Mutex<Store>,
    clock: Clock,
    /// The reminder loop waits on it for the next due note; a change pokes it.
    alarm: Alarm,
    zone: Zone,
}

impl Memo {
    pub fn new(store: Store, zone: Zone, clock: Clock) -> Self {
        Self {
            store: Mutex::new(store),
            alarm: clock.alarm(),
            clock,
            zone,
        }
    }

    /// Unix milliseconds now on the kernel's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the reminder loop to look again (a reminder was set, moved or dropped).
    fn poke(&self) {
        self.alarm.poke();
    }

    /// Waits [`RETRY`] on the kernel's clock, or until [`Self::poke`].
    fn retry_later(&self) {
        self.alarm
            .wait_until(Some(self.clock.now_ms() + RETRY.as_millis() as i64));
    }

    /// One line of a listing.
    fn line(&self, n: &Note, now: i64) -> String {
        let mut s = format!("#{} {}", n.id, n.text.replace('\n', " / "));
        if !n.tags.is_empty() {
            s.push_str(&format!(" [tags: {}]", n.tags.join(", ")));
        }
        if let Some(done) = n.done_ms {
            s.push_str(&format!(" · done {}", self.zone.format(done)));
        } else if let Some(at) = n.remind_at_ms {
            match n.reminded_ms {
                Some(_) => s.push_str(&format!(" · reminded at {}", self.zone.format(at))),
                None => s.push_str(&format!(
                    " · reminder {} ({})",
                    self.zone.format(at),
                    when::until(now, at)
                )),
            }
        }
        s
    }

    fn listing(&self, f: &Filter<'_>, limit: usize, now: i64) -> R {
        let (notes, total) = self.store().list(f, limit)?;
        if notes.is_empty() {
            return Ok(match (f.query.trim(), f.tag) {
                ("", None) => "no notes".into(),
                ("", Some(t)) => format!("no notes tagged `{t}`"),
                (q, _) => format!("no notes match `{q}`"),
            });
        }
        let mut out = if total > notes.len() {
            format!("{total} notes, the first {} shown:\n", notes.len())
        } else {
            format!("{total} note{}:\n", if total == 1 { "" } else { "s" })
        };
        out.push_str(&notes.iter().map(|n| self.line(n, now)).collect::<Vec<_>>().join("\n"));
        Ok(cap(&out, MAX_OUTPUT, "narrow it with memo_search or a smaller limit"))
    }
}

/// A note's number: `3`, `"3"` or `"#3"`.
fn id_arg(args: &Value) -> Result<i64, String> {
    let v = match args.get("id") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().trim_start_matches('#').parse().ok(),
        _ => None,
    };
    v.filter(|n| *n > 0)
        .ok_or_else(|| "`id` (a note's number, see memo_list) is required".to_owned())
}

/// `tags`: a list of strings or one string of comma-separated tags.
fn tags_arg(args: &Value) -> Option<Vec<String>> {
    match args.get("tags")? {
        Value::Array(a) => Some(clean_tags(a.iter().filter_map(Value::as_str))),
        Value::String(s) => Some(clean_tags(s.split([',', '，', '、', ';']))),
        _ => None,
    }
}

fn text_arg(args: &Value, required: bool) -> Result<Option<String>, String> {
    let text = if required {
        Some(str_arg(args, "text").map_err(|_| "`text` is required: what to note".to_owned())?)
    } else {
        opt_str(args, "text")
    };
    match text.map(str::trim) {
        Some("") if required => Err("`text` is required: what to note".into()),
        Some(t) if t.len() > MAX_TEXT => Err(format!(
            "the note is {} bytes; at most {MAX_TEXT} are kept (save long texts with doc_commit or files_write)",
            t.len()
        )),
        Some(t) => Ok(Some(t.to_owned())),
        None => Ok(None),
    }
}

/// `remind_at`: absent → `None`; `none`/`off`/empty → `Some(None)` (no reminder).
fn remind_arg(args: &Value, now: i64, zone: Zone) -> Result<Option<Option<i64>>, String> {
    match args.get("remind_at") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if ["", "none", "off", "no", "cancel"].contains(&s.trim().to_lowercase().as_str()) => {
            Ok(Some(None))
        }
        Some(Value::String(s)) => when::parse(s, now, zone).map(|t| Some(Some(t))),
        Some(other) => Err(format!(
            "`remind_at` must be a string like \"10m\" or \"2026-05-08 18:30\", not {other}"
        )),
    }
}

fn reminder_said(m: &Memo, n: &Note, now: i64) -> String {
    match n.remind_at_ms {
        Some(at) => format!("; reminder at {} ({})", m.zone.format(at), when::until(now, at)),
        None => String::new(),
    }
}

/// `memo_add`.
pub fn add(m: &Memo, args: &Value, now: i64) -> R {
    let text = text_arg(args, true)?.unwrap_or_default();
    let tags = tags_arg(args).unwrap_or_default();
    let at = remind_arg(args, now, m.zone)?.flatten();
    let n = m.store().add(&text, &tags, at, now)?;
    if at.is_some() {
        m.poke();
    }
    let tags = if n.tags.is_empty() {
        String::new()
    } else {
        format!(" (tags: {})", n.tags.join(", "))
    };
    Ok(format!("note #{} saved{tags}{}", n.id, reminder_said(m, &n, now)))
}

fn limit_arg(args: &Value) -> Result<usize, String> {
    Ok(uint_arg(args, "limit", DEFAULT_LIMIT, MAX_LIMIT)? as usize)
}

/// `memo_list`.
pub fn list(m: &Memo, args: &Value, now: i64) -> R {
    let f = Filter {
        query: "",
        tag: opt_str(args, "tag").map(|t| t.trim_start_matches('#')),
        include_done: bool_arg(args, "include_done"),
    };
    m.listing(&f, limit_arg(args)?, now)
}

/// `memo_search`.
pub fn search(m: &Memo, args: &Value, now: i64) -> R {
    let query = str_arg(args, "query").map_err(|_| "`query` is required: words to look for".to_owned())?;
    let f = Filter {
        query,
        tag: None,
        include_done: bool_arg(args, "include_done"),
    };
    m.listing(&f, limit_arg(args)?, now)
}

fn missing(id: i64) -> String {
    format!("there is no note #{id}; memo_list shows them")
}

/// `memo_update`.
pub fn update(m: &Memo, args: &Value, now: i64) -> R {
    let id = id_arg(args)?;
    let text = text_arg(args, false)?;
    let tags = tags_arg(args);
    let at = remind_arg(args, now, m.zone)?;
    if text.is_none() && tags.is_none() && at.is_none() {
        return Err("give at least one of `text`, `tags` or `remind_at` to change".into());
    }
    let n = m
        .store()
        .update(id, text.as_deref(), tags.as_deref(), at, now)?
        .ok_or_else(|| missing(id))?;
    if at.is_some() {
        m.poke();
    }
    let what = if at == Some(None) { "; reminder removed" } else { "" };
    Ok(format!("note #{id} updated{what}: {}", m.line(&n, now)))
}

/// `memo_done`.
pub fn done(m: &Memo, args: &Value, now: i64) -> R {
    let id = id_arg(args)?;
    let n = m.store().done(id, now)?.ok_or_else(|| missing(id))?;
    m.poke();
    let cancelled = if n.remind_at_ms.is_some() && n.reminded_ms.is_none() {
        "; its reminder is cancelled"
    } else {
        ""
    };
    Ok(format!("note #{id} marked done{cancelled}"))
}

/// `memo_delete`.
pub fn delete(m: &Memo, args: &Value) -> R {
    let id = id_arg(args)?;
    if !m.store().delete(id)? {
        return Err(missing(id));
    }
    m.poke();
    Ok(format!("note #{id} deleted"))
}

/// The page's `list` API: `{query?, tag?, include_done?, limit?}` →
/// `{notes: [note], total, now_ms}`.
pub fn api_list(m: &Memo, body: &Value) -> Result<Value, String> {
    let f = Filter {
        query: opt_str(body, "query").unwrap_or(""),
        tag: opt_str(body, "tag"),
        include_done: bool_arg(body, "include_done"),
    };
    let limit = uint_arg(body, "limit", 100, 1000)? as usize;
    let (notes, total) = m.store().list(&f, limit)?;
    Ok(json!({
        "notes": notes.iter().map(Note::to_json).collect::<Vec<_>>(),
        "total": total,
        "now_ms": m.now_ms(),
    }))
}

/// The page's `done` API: `{id}` → `{note}`.
pub fn api_done(m: &Memo, body: &Value) -> Result<Value, String> {
    let id = id_arg(body)?;
    let n = m.store().done(id, m.now_ms())?.ok_or_else(|| missing(id))?;
    m.poke();
    Ok(json!({ "note": n.to_json() }))
}

/// The page's `delete` API: `{id}` → `{deleted: true}`.
pub fn api_delete(m: &Memo, body: &Value) -> Result<Value, String> {
    delete(m, body).map(|_| json!({ "deleted": true }))
}

/// The interrupt a due note raises, in the kernel's language (asked when it fires).
fn reminder_text(kernel: &Kernel, n: &Note) -> String {
    let lang = kernel
        .language()
        .ok()
        .and_then(|code| Lang::parse(&code))
        .unwrap_or_default();
    let mut text = prefix(&n.text, 2000).to_owned();
    if !n.tags.is_empty() {
        text.push_str(&format!(" [{}]", n.tags.join(", ")));
    }
    Msg::MemoReminder {
        id: n.id as u64,
        text: &text,
    }
    .render(lang)
}

/// Delivers each reminder when the kernel's clock reaches it, oldest first, until the
/// process ends. A reminder the kernel refuses is tried again after [`RETRY`].
fn remind_loop(m: &Memo, kernel: &Kernel) {
    loop {
        let next = match m.store().next_due() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("memo: {e}");
                m.retry_later();
                continue;
            }
        };
        let Some(n) = next else {
            m.alarm.wait_until(None);
            continue;
        };
        let reached = m.clock.reached_ms();
        let at = n.remind_at_ms.unwrap_or(reached);
        if at > reached {
            m.alarm.wait_until(Some(at));
            continue;
        }
        match kernel.inject_interrupt(&reminder_text(kernel, &n), "L3") {
            Ok(_) => {
                eprintln!("memo: note #{} reminded", n.id);
                if let Err(e) = m.store().mark_reminded(n.id, at, m.now_ms()) {
                    eprintln!("memo: {e}");
                    m.retry_later();
                }
            }
            Err(e) => {
                eprintln!("memo: the kernel refused the reminder of note #{}: {e}", n.id);
                m.retry_later();
            }
        }
    }
}

fn tool(name: &str, description: &str, parameters: Value) -> ToolRegister {
    ToolRegister {
        name: name.into(),
        description: description.into(),
        parameters,
        parallel_safe: !matches!(name, "memo_add" | "memo_update" | "memo_done" | "memo_delete"),
        no_memory: matches!(name, "memo_list" | "memo_search"),
        ..ToolRegister::default()
    }
    .with_keywords(keywords_of(name))
}

/// Words a person may use when they need each tool (`ToolRegister::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "memo_add" => {
            "note, memo, jot, jot down, write down, note down, todo, to-do, don't forget, \
             笔记, 备忘, 备忘录, 记下, 记一下, 待办, 别忘了"
        }
        "memo_list" => "notes, memos, my notes, todo list, 笔记, 备忘, 备忘录, 待办, 清单",
        "memo_search" => "find note, search notes, what did I note, 搜索笔记, 找备忘, 记过",
        "memo_update" => "change note, edit note, reschedule, postpone, 修改笔记, 改备忘, 推迟提醒",
        "memo_done" => "mark done, tick off, check off, finished note, 完成, 做完了, 勾掉",
        "memo_delete" => "delete note, remove note, forget note, 删除笔记, 删掉备忘",
        _ => "",
    }
}

const REMIND_AT: &str = "when to remind: a delay (10m, 1h30m, 2d), a clock time (18:30) or a date and time (2026-05-08 18:30, local time unless an offset like +08:00 is given)";

fn tools() -> Vec<ToolRegister> {
    let tags =
        json!({"type": "array", "items": {"type": "string"}, "description": "optional tags, e.g. [\"shopping\"]"});
    let include_done = json!({"type": "boolean", "description": "include notes marked done"});
    let limit = json!({"type": "integer", "description": "most notes to show (default 20, at most 200)"});
    vec![
        tool(
            "memo_add",
            "Save a note (text, optional tags), optionally with a reminder: when `remind_at` comes you receive an interrupt with the note. `remind_at`: a delay (`10m`, `1h30m`, `2d`), a clock time (`18:30`) or a date and time (`2026-05-08 18:30`, local time unless an offset like `+08:00` is given).",
            json!({"type": "object", "properties": {
                "text": {"type": "string", "description": "the note"},
                "tags": tags,
                "remind_at": {"type": "string", "description": REMIND_AT}
            }, "required": ["text"]}),
        ),
        tool(
            "memo_list",
            "List the notes, newest first: open ones only unless `include_done`; only those tagged `tag` if given.",
            json!({"type": "object", "properties": {
                "tag": {"type": "string"}, "include_done": include_done, "limit": limit
            }}),
        ),
        tool(
            "memo_search",
            "Find notes whose text or tags contain every word of `query` (case-insensitive; Chinese needs no spaces).",
            json!({"type": "object", "properties": {
                "query": {"type": "string"}, "include_done": include_done, "limit": limit
            }, "required": ["query"]}),
        ),
        tool(
            "memo_update",
            "Change a note by its number (see memo_list): new `text`, `tags` (replacing the old ones) or `remind_at` (`none` removes the reminder; a new time sets it again).",
            json!({"type": "object", "properties": {
                "id": {"type": "integer"},
                "text": {"type": "string"},
                "tags": tags,
                "remind_at": {"type": "string", "description": REMIND_AT}
            }, "required": ["id"]}),
        ),
        tool(
            "memo_done",
            "Mark a note done by its number; a reminder still pending is cancelled. Done notes stay findable with `include_done`.",
            json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
        ),
        tool(
            "memo_delete",
            "Delete a note by its number, for good.",
            json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
        ),
    ]
}

/// Where the notes live: the plugin's data directory the kernel names
/// (`HOMEAGENT_PLUGIN_DATA`), else `HOME` (the same directory under the kernel).
fn data_dir() -> PathBuf {
    std::env::var_os("HOMEAGENT_PLUGIN_DATA")
        .or_else(|| std::env::var_os("HOME"))
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    let dir = data_dir();
    let store = match Store::open(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("memo plugin: {e}");
            return 1;
        }
    };
    let clock = Clock::default();
    let memo = Arc::new(Memo::new(store, Zone::Local, clock.clone()));
    let mut plugin = Plugin::new("memo").clock(&clock);
    for reg in tools() {
        let m = memo.clone();
        let name = reg.name.clone();
        plugin = plugin.tool(reg, move |args| {
            let now = m.now_ms();
            match name.as_str() {
                "memo_add" => add(&m, &args, now),
                "memo_list" => list(&m, &args, now),
                "memo_search" => search(&m, &args, now),
                "memo_update" => update(&m, &args, now),
                "memo_done" => done(&m, &args, now),
                _ => delete(&m, &args),
            }
        });
    }
    let apis: [(&str, ApiFn); 3] = [("list", api_list), ("done", api_done), ("delete", api_delete)];
    for (name, f) in apis {
        let m = memo.clone();
        plugin = plugin.api(name, move |body| f(&m, &body));
    }
    let result = plugin.run(move |kernel| {
        eprintln!("memo plugin ready ({})", dir.join("memo.db").display());
        std::thread::spawn(move || remind_loop(&memo, &kernel));
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memo plugin: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CST: Zone = Zone::Fixed(8 * 3600);
    /// 2026-05-08 10:00 +08:00.
    const NOW: i64 = 1_778_205_600_000;

    fn memo() -> Memo {
        Memo::new(Store::in_memory(), CST, Clock::default())
    }

    #[test]
    fn add_list_search_update_done_delete() {
        let m = memo();
        assert_eq!(
            add(
                &m,
                &json!({"text": "买牛奶", "tags": "购物, 家里", "remind_at": "18:30"}),
                NOW
            )
            .unwrap(),
            "note #1 saved (tags: 购物, 家里); reminder at 2026-05-08 18:30 (in 8h 30m)"
        );
        assert_eq!(
            add(&m, &json!({"text": "Call Alice", "tags": ["#work"]}), NOW).unwrap(),
            "note #2 saved (tags: work)"
        );
        assert!(add(&m, &json!({"text": "  "}), NOW).unwrap_err().contains("`text`"));
        assert!(
            add(&m, &json!({"text": "x", "remind_at": "someday"}), NOW)
                .unwrap_err()
                .contains("not a time")
        );
        let all = list(&m, &json!({}), NOW).unwrap();
        assert_eq!(
            all,
            "2 notes:\n#2 Call Alice [tags: work]\n#1 买牛奶 [tags: 购物, 家里] · reminder 2026-05-08 18:30 (in 8h 30m)"
        );
        assert_eq!(
            search(&m, &json!({"query": "牛奶"}), NOW).unwrap().lines().count(),
            2,
            "header and one note"
        );
        assert_eq!(
            search(&m, &json!({"query": "alice"}), NOW).unwrap(),
            "1 note:\n#2 Call Alice [tags: work]"
        );
        assert_eq!(
            search(&m, &json!({"query": "nothing"}), NOW).unwrap(),
            "no notes match `nothing`"
        );
        assert_eq!(list(&m, &json!({"tag": "WORK"}), NOW).unwrap().lines().count(), 2);
        assert!(
            list(&m, &json!({"limit": 1}), NOW)
                .unwrap()
                .starts_with("2 notes, the first 1 shown:")
        );

        let u = update(&m, &json!({"id": "#1", "remind_at": "none"}), NOW + 1).unwrap();
        assert_eq!(u, "note #1 updated; reminder removed: #1 买牛奶 [tags: 购物, 家里]");
        let u = update(&m, &json!({"id": 1, "remind_at": "2h"}), NOW).unwrap();
        assert_eq!(
            u,
            "note #1 updated: #1 买牛奶 [tags: 购物, 家里] · reminder 2026-05-08 12:00 (in 2h 0m)"
        );
        assert!(update(&m, &json!({"id": 1}), NOW).unwrap_err().contains("at least one"));
        assert!(
            update(&m, &json!({"id": 9, "text": "x"}), NOW)
                .unwrap_err()
                .contains("no note #9")
        );

        assert_eq!(
            done(&m, &json!({"id": 1}), NOW).unwrap(),
            "note #1 marked done; its reminder is cancelled"
        );
        assert_eq!(
            list(&m, &json!({}), NOW).unwrap(),
            "1 note:\n#2 Call Alice [tags: work]"
        );
        assert!(
            list(&m, &json!({"include_done": true}), NOW)
                .unwrap()
                .contains("#1 买牛奶 [tags: 购物, 家里] · done 2026-05-08 10:00")
        );
        assert!(m.store().next_due().unwrap().is_none());
        assert_eq!(delete(&m, &json!({"id": 2})).unwrap(), "note #2 deleted");
        assert!(delete(&m, &json!({"id": 2})).unwrap_err().contains("no note #2"));
        assert!(delete(&m, &json!({})).unwrap_err().contains("`id`"));
    }

    #[test]
    fn the_page_api_lists_searches_and_acts() {
        let m = memo();
        add(&m, &json!({"text": "周末去爬山", "tags": ["计划"]}), NOW).unwrap();
        add(&m, &json!({"text": "Buy MILK"}), NOW).unwrap();
        let v = api_list(&m, &json!({"query": "milk"})).unwrap();
        assert_eq!(
            (v["total"].as_u64(), v["notes"][0]["text"].as_str()),
            (Some(1), Some("Buy MILK"))
        );
        let v = api_list(&m, &Value::Null).unwrap();
        assert_eq!(v["total"], 2);
        assert_eq!(
            api_list(&m, &json!({"query": "爬山"})).unwrap()["notes"][0]["tags"],
            json!(["计划"])
        );
        assert!(api_done(&m, &json!({"id": 1})).unwrap()["note"]["done_ms"].is_i64());
        assert_eq!(api_list(&m, &json!({})).unwrap()["total"], 1);
        assert_eq!(api_list(&m, &json!({"include_done": true})).unwrap()["total"], 2);
        assert_eq!(api_delete(&m, &json!({"id": 2})).unwrap(), json!({"deleted": true}));
        assert!(api_delete(&m, &json!({"id": 2})).is_err());
    }

    #[test]
    fn every_tool_has_its_keywords_and_a_schema() {
        for t in tools() {
            assert!(!t.keywords.is_empty(), "{}", t.name);
            assert_eq!(t.parameters["type"], "object", "{}", t.name);
        }
    }
}
