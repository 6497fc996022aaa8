//! `homed bench tools`: the round trip of one tool call through the agent's tool
//! runner (policy and principal, stages, alias fill, the sandbox guard, the tool,
//! masking and review) for each bundled capability, beside the in-process baseline and
//! the plain subprocess plugin measured in the same run on a kernel booted in this
//! process.

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use homeagent_actors::agent::tools_exec::ToolRunner;
use homeagent_actors::bus::ToolStatus;
use homeagent_actors::llm::ToolCall;
use serde_json::{Value, json};

/// A loopback page for `web_fetch` (one small HTML document per connection).
fn page_server() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/page.html", listener.local_addr()?);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(match conn.try_clone() {
                Ok(c) => c,
                Err(_) => continue,
            });
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let body = "<html><body><h1>Bench</h1><p>A page with a <a href=\"http://x/\">link</a>.</p></body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(url)
}

/// Runs the benchmark: `calls` measured calls per tool (a tenth of them, at least 5,
/// for `cmd_run`, which starts a process each time).
pub async fn tools(calls: usize) -> anyhow::Result<()> {
    use homeagent_actors::stages::GetTools;
    anyhow::ensure!(calls > 0, "--calls must be at least 1");
    let (_lock, state, data) = crate::daemon::boot_temporary("tools").await?;
    let stages = state.stages.get().cloned().context("no stage host")?;
    let wanted = [
        "knowledge_list",
        "timer_list",
        "files_read",
        "files_write",
        "cmd_run",
        "web_fetch",
        "seq_run",
        "terminal_list",
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut registry = stages.send(GetTools).await?;
    while !wanted.iter().all(|n| registry.get(n).is_some()) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the bundled plugins did not register their tools in 30 s"
        );
        actix_rt::time::sleep(Duration::from_millis(20)).await;
        registry = stages.send(GetTools).await?;
    }
    let runner = ToolRunner {
        stages,
        tools: registry,
        channels: homeagent_actors::agent::channels::Channels::builtin(),
        bus: state.bus.clone(),
        task_id: 1,
        source: "bench".into(),
        channel: "bench".into(),
        timeout: Duration::from_secs(60),
        firewall: state.firewall.clone(),
        principal: homeagent_actors::firewall::Principal::owner(),
        agent: String::new(),
        meta: serde_json::Value::Null,
        untrusted: Default::default(),
        span: tracing::Span::none(),
    };
    std::fs::write(data.join("workspace/bench.txt"), "one\ntwo\nthree\n")?;
    let url = page_server()?;
    let mut cases: Vec<(&str, &str, Value, usize)> = vec![
        ("in-process  knowledge_list", "knowledge_list", json!({}), calls),
        ("subprocess  timer_list", "timer_list", json!({}), calls),
        (
            "files       files_read",
            "files_read",
            json!({"path": "bench.txt"}),
            calls,
        ),
        (
            "files       files_write",
            "files_write",
            json!({"path": "out/w.txt", "content": "x"}),
            calls,
        ),
        (
            "cmd         cmd_run echo",
            "cmd_run",
            json!({"argv": ["echo", "hi"]}),
            (calls / 10).max(5),
        ),
        ("web         web_fetch", "web_fetch", json!({ "url": url }), calls),
        (
            "seq         2× files_read",
            "seq_run",
            json!({"steps": [{"tool": "files_read", "args": {"path": "bench.txt"}}, {"tool": "files_read", "args": {"path": "bench.txt"}}]}),
            calls,
        ),
    ];
    let session = terminal_session(&runner).await?;
    cases.push(("terminal    terminal_list", "terminal_list", json!({}), calls));
    cases.push((
        "terminal    terminal_read",
        "terminal_read",
        json!({"session": session, "timeout_ms": 1}),
        calls,
    ));
    println!("tool call round trip through the agent's tool runner (firewall included), µs; 20 warm-up calls each");
    let mut base = 0.0;
    for (label, name, args, n) in cases {
        let call = ToolCall {
            id: "bench".into(),
            name: name.into(),
            raw_arguments: args.to_string(),
            arguments: args,
        };
        let one = || async {
            let out = runner.run_batch(std::slice::from_ref(&call)).await;
            match out.first() {
                Some(o) if o.status == ToolStatus::Ok => Ok(()),
                Some(o) => Err(anyhow::anyhow!("{name} failed: {}", o.text)),
                None => Err(anyhow::anyhow!("{name}: no outcome")),
            }
        };
        for _ in 0..20 {
            one().await?;
        }
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            one().await?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        samples.sort_by(f64::total_cmp);
        let p = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        if base == 0.0 {
            base = p(0.5);
        }
        println!(
            "  {label}  n {n:>5}  p50 {:>9.1}  p99 {:>9.1}  (p50 x{:.1} in-process)",
            p(0.5),
            p(0.99),
            p(0.5) / base
        );
    }
    terminal_echo(&runner, &state.bus, session, (calls / 10).max(10)).await?;
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

/// One tool call's text, or its failure.
async fn run_one(runner: &ToolRunner, name: &str, args: Value) -> anyhow::Result<String> {
    // Each measured call is a turn of its own: a web_fetch before must not make the
    // next cmd_run wait for the owner's approval.
    runner.untrusted.lock().take();
    let call = ToolCall {
        id: "bench".into(),
        name: name.into(),
        raw_arguments: args.to_string(),
        arguments: args,
    };
    let out = runner.run_batch(std::slice::from_ref(&call)).await;
    match out.into_iter().next() {
        Some(o) if o.status == ToolStatus::Ok => Ok(o.text),
        Some(o) => Err(anyhow::anyhow!("{name} failed: {}", o.text)),
        None => Err(anyhow::anyhow!("{name}: no outcome")),
    }
}

/// A shell session of the terminal plugin for the terminal cases: its number.
async fn terminal_session(runner: &ToolRunner) -> anyhow::Result<u64> {
    let text = run_one(runner, "terminal_create", json!({})).await?;
    text.strip_prefix("terminal session ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("unexpected terminal_create answer: {text}"))
}

/// A terminal's echo latency, `n` times (after 5 warm-up rounds): `echo mark-$((i))`
/// typed (`terminal_send`) until its output `mark-i` is seen on the kernel bus (the
/// `terminal.output` event the WebUI panel draws), and `echo tool-$((i))` typed until a
/// `terminal_read` waiting with `until` answers it (what the model sees: two tool
/// round trips and the shell). A typed line never contains its mark, only the output.
async fn terminal_echo(
    runner: &ToolRunner,
    bus: &homeagent_actors::EventBus,
    session: u64,
    n: usize,
) -> anyhow::Result<()> {
    use homeagent_actors::bus::Event;
    let (mut by_tool, mut by_event) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n + 5 {
        // On the bus: typed, then the event that carries the echo.
        let mark = format!("mark-{i}\r\n");
        let mut rx = bus.subscribe();
        let t = Instant::now();
        let line = format!("echo mark-$(({i}))\n");
        run_one(runner, "terminal_send", json!({"session": session, "text": line})).await?;
        let seen = async {
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        if let Event::PluginEvent { topic, data, .. } = &ev.event
                            && topic == "terminal.output"
                            && data["data"].as_str().is_some_and(|d| d.contains(&mark))
                        {
                            return Ok(t.elapsed());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(e) => return Err(anyhow::anyhow!("the bus closed: {e}")),
                }
            }
        };
        let ev = tokio::time::timeout(Duration::from_secs(10), seen)
            .await
            .context("no terminal.output event with the echo within 10 s")??;
        // By the model: typed, then a read that waits for it.
        let mark = format!("tool-{i}");
        let t = Instant::now();
        let line = format!("echo tool-$(({i}))\n");
        run_one(runner, "terminal_send", json!({"session": session, "text": line})).await?;
        let text = run_one(
            runner,
            "terminal_read",
            json!({"session": session, "until": mark, "timeout_ms": 10000}),
        )
        .await?;
        let tool = t.elapsed();
        anyhow::ensure!(text.contains(&mark), "terminal_read did not see {mark}: {text}");
        if i >= 5 {
            by_event.push(ev.as_secs_f64() * 1e6);
            by_tool.push(tool.as_secs_f64() * 1e6);
        }
    }
    for (label, mut s) in [
        ("terminal    echo -> bus event", by_event),
        ("terminal    echo -> terminal_read", by_tool),
    ] {
        s.sort_by(f64::total_cmp);
        let p = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        println!("  {label}  n {n:>5}  p50 {:>9.1}  p99 {:>9.1}", p(0.5), p(0.99));
    }
    Ok(())
}
