//! Per-turn recall through the user's path: HTTP → turn → the request the (fake) vendor
//! receives. A fact said once, long pruned out of the context window, must be in the
//! prompt when asked about; with a small context window every request fits it and the
//! memory stays within its budget (counted with the daemon's own tokenizer).

mod common;

use common::api::{daemon_with_vendor, get, post, put_settings};
use common::{Daemon, vendor};
use homeagent_actors::agent::budget::Budget;
use homeagent_actors::llm::tokens;
use serde_json::{Value, json};

/// Unrelated small talk, varied so no two messages are alike.
fn chatter(i: usize) -> String {
    const TOPICS: [&str; 10] = [
        "the weather in Lisbon was mild and sunny",
        "I finished reading a novel about sailors",
        "the train to work was late again",
        "we cooked a lentil soup with cumin",
        "my laptop needed a new battery",
        "the football match ended in a draw",
        "I planted tomatoes on the balcony",
        "the museum had an exhibition on maps",
        "I practised the piano for an hour",
        "the bakery sold out of croissants",
    ];
    format!("Note {i}: {} (day {}).", TOPICS[i % TOPICS.len()], i / TOPICS.len() + 1)
}

fn say(d: &Daemon, text: &str) -> Value {
    let (status, body) = post(d, "/api/v1/messages", json!({"text": text}));
    assert_eq!(status, 200, "{body}\n{}", d.log_text());
    body
}

/// Archives the window down to `core.agent.max_context_size` now (the distill
/// heartbeat's round, which otherwise runs every 30 min).
fn distill(d: &Daemon) -> u64 {
    let (status, body) = post(d, "/api/v1/heartbeats/distill/run", json!({}));
    assert_eq!(status, 200, "{body}");
    body["archived"].as_u64().unwrap_or(0)
}

/// The text of every message of the last request the vendor received.
fn last_request(v: &vendor::Vendor) -> Value {
    v.last.lock().unwrap().clone()
}

fn message_texts(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The names of the tools a request offers.
fn offered_tools(req: &Value) -> Vec<&str> {
    req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect()
}

/// A request's size in o200k tokens: each message with its framing, and the schemas.
fn request_tokens(req: &Value) -> usize {
    let msgs: usize = message_texts(req).iter().map(|(_, t)| tokens::count(t) + 4).sum();
    msgs + tokens::count(&req["tools"].to_string())
}

#[test]
fn a_fact_said_once_is_recalled_after_eighty_unrelated_messages() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    // The window of an unknown model: the budget is tight and the tools a subset.
    put_settings(
        &d,
        json!({"core.agent.max_context_size": 10, "core.llm.sources.fake.context_window": 8192}),
    );
    say(&d, "My sister adopted a greyhound called Biscuit.");
    let mut archived = 0;
    for i in 0..80 {
        say(&d, &chatter(i));
        if i % 20 == 19 {
            archived += distill(&d);
        }
    }
    assert!(archived > 100, "pruning happened: {archived} events archived");
    let context = get(&d, "/api/v1/memory/context");
    assert!(
        !context.to_string().contains("greyhound"),
        "the fact left the context window: {context}"
    );

    let reply = say(&d, "What dog did my sister adopt?");
    assert!(reply["reply"].as_str().unwrap().starts_with("echo:"), "{reply}");
    let req = last_request(&v);
    let msgs = message_texts(&req);
    let memory = msgs
        .iter()
        .find(|(role, text)| role == "system" && text.contains("[Relevant memory]"))
        .unwrap_or_else(|| panic!("no recalled memory in the request: {msgs:#?}"));
    let lines: Vec<&str> = memory.1.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("http: My sister adopted a greyhound called Biscuit."))
        .unwrap_or_else(|| panic!("the fact is not in the prompt:\n{}", memory.1));
    // With its absolute date (the heading of its day) and who said it (the user,
    // through the `http` channel).
    let day = lines[..at]
        .iter()
        .rev()
        .find(|l| l.len() == 12 && l.starts_with('[') && l.ends_with(']'))
        .unwrap_or_else(|| panic!("no day heading above the fact:\n{}", memory.1));
    let b = day.as_bytes();
    assert!(
        b[5] == b'-' && b[8] == b'-' && b[1..5].iter().all(u8::is_ascii_digit),
        "{day}"
    );
    assert_eq!(msgs.last().unwrap().1, "What dog did my sister adopt?");
}

#[test]
fn with_an_8k_window_every_request_fits_and_memory_stays_within_its_budget() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    const WINDOW: usize = 8192;
    put_settings(
        &d,
        json!({
            "core.llm.sources.fake.context_window": WINDOW,
            "core.agent.max_context_size": 12,
        }),
    );
    // Long messages, so that neither the memory nor the timeline could take everything.
    let filler = "The committee discussed the quarterly figures, the new office, the travel policy and the hiring plan at length. ";
    let mut worst = (0usize, 0usize);
    for i in 0..60 {
        let text = if i % 7 == 3 {
            format!("Question {i}: what did we say about the travel policy and the hiring plan?")
        } else {
            format!("Minutes {i}: {}", filler.repeat(1 + i % 4))
        };
        say(&d, &text);
        if i % 15 == 14 {
            distill(&d);
        }
        let req = last_request(&v);
        let msgs = message_texts(&req);
        let tools = tokens::count(&req["tools"].to_string());
        let all: usize = msgs.iter().map(|(_, t)| tokens::count(t) + 4).sum::<usize>() + tools;
        assert!(all <= WINDOW, "request {i} has {all} tokens > {WINDOW}");
        // The fixed part: system prompt, source context and the input (the tool schemas
        // come out of the timeline's share).
        let memory_msg = msgs
            .iter()
            .find(|(r, t)| r == "system" && t.contains("[Conversation timeline]"));
        let fixed: usize = msgs
            .iter()
            .filter(|(r, t)| {
                !(r == "system" && (t.contains("[Conversation timeline]") || t.contains("[Relevant memory]")))
            })
            .map(|(_, t)| tokens::count(t) + 4)
            .sum::<usize>();
        let budget = Budget::with_tools(WINDOW, fixed, tools);
        if let Some((_, m)) = memory_msg {
            let (relevant, timeline) = match m.split_once("[Conversation timeline]") {
                Some((r, t)) => (r, t),
                None => ("", m.as_str()),
            };
            let (rt, tt) = (tokens::count(relevant), tokens::count(timeline));
            assert!(
                rt <= budget.memory,
                "request {i}: memory {rt} > {}:\n{m}",
                budget.memory
            );
            assert!(tt <= budget.tail + 8, "request {i}: timeline {tt} > {}", budget.tail);
            assert!(
                all <= budget.target + 64,
                "request {i}: {all} tokens past the target {}",
                budget.target
            );
            worst = (worst.0.max(rt), worst.1.max(all));
        }
    }
    assert!(worst.0 > 0, "memory was recalled at all");
    eprintln!(
        "worst memory block {} tokens, worst request {} tokens",
        worst.0, worst.1
    );
}

/// At the conservative 8k window the bundled tools' schemas alone would fill the
/// prompt's target: the request offers a subset (by relevance to the input, plus the
/// always-offered ones) and lists the rest in a catalogue; `get_plugin_tools` brings an
/// owner's tools into the next step of the same turn; recalled memory keeps its share.
#[test]
fn at_an_8k_window_the_tools_leave_memory_its_share_and_the_rest_are_one_call_away() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    const WINDOW: usize = 8192;
    put_settings(
        &d,
        json!({"core.llm.sources.fake.context_window": WINDOW, "core.agent.max_context_size": 10}),
    );
    // Every bundled plugin has registered its tools (the terminal's among the last).
    let registered = |name: &str| {
        get(&d, "/api/v1/plugins")["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == name && p["tools"].as_u64().unwrap_or(0) > 0)
    };
    for _ in 0..200 {
        if ["files", "terminal", "cmd", "web", "timer"]
            .iter()
            .all(|p| registered(p))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    say(&d, "My sister adopted a greyhound called Biscuit.");
    for i in 0..30 {
        say(&d, &chatter(i));
    }
    distill(&d);

    let req = {
        say(&d, "What dog did my sister adopt? Please also read the file notes.txt");
        last_request(&v)
    };
    let msgs = message_texts(&req);
    let offered = offered_tools(&req);
    let system = &msgs[0].1;
    assert!(system.contains("# More tools"), "a catalogue of the rest: {system}");
    for (want, why) in [
        ("files_read", "relevant to the input"),
        ("get_plugin_tools", "always"),
        ("memory_recall", "always"),
    ] {
        assert!(offered.contains(&want), "{want} ({why}) offered: {offered:?}");
    }
    // A deferred owner, as the catalogue names it: `- <owner>: <tool>, <tool> — <what>`.
    let catalogue = system.split("# More tools").nth(1).unwrap();
    let (owner, deferred): (String, Vec<String>) = catalogue
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| {
            let (owner, rest) = l.split_once(": ")?;
            let names = rest.split(" — ").next()?;
            Some((
                owner.to_owned(),
                names.split(", ").map(str::to_owned).collect::<Vec<_>>(),
            ))
        })
        .find(|(o, _)| o != "channels" && !o.starts_with("builtin"))
        .unwrap_or_else(|| panic!("a plugin's tools deferred: {catalogue}"));
    for n in &deferred {
        assert!(
            !offered.contains(&n.as_str()),
            "{n} is deferred, not offered: {offered:?}"
        );
    }
    let all = request_tokens(&req);
    assert!(all <= WINDOW, "{all} tokens > {WINDOW}");
    let memory = msgs
        .iter()
        .find(|(r, t)| r == "system" && t.contains("[Relevant memory]"))
        .unwrap_or_else(|| panic!("no recalled memory at 8k with {} tools offered", offered.len()));
    assert!(memory.1.contains("greyhound called Biscuit"), "{}", memory.1);

    // The model asks for that owner's tools; the next step of the same turn offers them.
    let call = format!(r#"call-tool get_plugin_tools {{"plugin":"{owner}"}}"#);
    let body = say(&d, &call);
    assert!(body["reply"].as_str().unwrap().contains(&deferred[0]), "{body}");
    let req = last_request(&v);
    let offered = offered_tools(&req);
    for n in &deferred {
        assert!(
            offered.contains(&n.as_str()),
            "{owner}'s {n} offered after get_plugin_tools: {offered:?}"
        );
    }
    let all = request_tokens(&req);
    assert!(all <= WINDOW, "after the expansion: {all} tokens > {WINDOW}");
    eprintln!(
        "offered {} tools after the expansion, request {all} tokens",
        offered.len()
    );
}
