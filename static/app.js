// HomeAgent dashboard: live supervision tree, plugins, chat with the agent, event log.
// Plain browser JS, no framework, no build step. Served by homed at /app.js.
//
// Data sources (same origin):
//   GET  /api/v1/actors                 -> {"actors":[...]}  (initial load + polling fallback)
//   GET  /api/v1/events                 -> SSE: `actors` snapshots + kernel events
//                                          (task, stream_delta, agent_output, tool_call, ...)
//   POST /api/v1/actors/{id}/restart    -> 200 {"id","restarts"} | 4xx {"error"}
//   GET  /api/v1/plugins                -> {"plugins":[...]}  (polled every 2 s)
//   POST /api/v1/plugins/{name}/restart -> 200 {"name","restarts"} | 404/409 {"error"}
//   POST /api/v1/messages               -> 200 {"task_id","reply","tools_used","usage"}
//                                          | 502 {"task_id","error"} | 503/4xx {"error"}
//   POST /api/v1/stop                   -> stops the current generation
//   GET  /api/v1/chat/history?before=&limit= -> {"items":[...],"next_before"?,"total"}
//
// Untrusted text (actor ids, last_exit, event payloads, chat text, plugin
// stderr) is only ever written with textContent / attributes, never innerHTML —
// except the agent's replies, which are Markdown: rendered by marked and then
// sanitised by DOMPurify (static/vendor/, see renderMarkdown) before they reach the DOM.
"use strict";

(function () {
  const API_ACTORS = "/api/v1/actors";
  const API_EVENTS = "/api/v1/events";
  const API_PLUGINS = "/api/v1/plugins";
  const API_MESSAGES = "/api/v1/messages";
  const API_STOP = "/api/v1/stop";
  const API_HISTORY = "/api/v1/chat/history";
  const HISTORY_PAGE = 50;       // items per history request
  const TOOL_TEXT_CAP = 20000;   // characters of a tool's arguments/result shown in its card
  const CHAT_CHANNEL = "webui";  // source and channel of messages sent from this page
  const PLUGINS_POLL_MS = 2000;
  const POLL_MS = 2000;          // polling fallback period
  const LOG_CAP = 200;           // max entries in the event log
  const STALE_MS = 5000;         // no snapshot for this long while "live" -> "stale"
  const SSE_REOPEN_MS = 5000;    // re-create a CLOSED EventSource after this long

  // Named SSE events we subscribe to (EventSource only delivers named events
  // to listeners registered for that exact name). Unnamed events arrive via
  // onmessage and are handled generically.
  const KNOWN_EVENTS = [
    "actors", "actor_exit", "actor_restart", "actor_started", "actor_stopped",
    "actor_stuck", "actor_failed", "supervisor_escalated", "setting_changed",
    "daemon", "error",
    // agent
    "task", "stream_delta", "agent_output", "tool_call", "agent_llm_chain",
    "output", "stage", "stage_handler_error", "lagged",
    "approval_requested", "approval_resolved", "task_waiting", "budget_reached",
  ];

  const $ = (sel) => document.querySelector(sel);
  const rowsEl = $("#actor-rows");
  const logEl = $("#event-log");
  const connEl = $("#conn");
  const connText = $("#conn-text");
  const bannerEl = $("#banner");
  const summaryEl = $("#summary");
  const countEl = $("#event-count");

  /** id -> <tr> */
  const rows = new Map();
  /** id -> latest actor object */
  let actors = new Map();
  /** performance.now() when the last snapshot arrived (for backoff countdowns) */
  let snapshotAt = 0;
  let lastSnapshotWall = 0;

  let es = null;
  let pollTimer = null;
  let mode = "connecting"; // live | stale | disconnected | polling | connecting

  // ---------------------------------------------------------------- helpers

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  /** An element whose text is the catalog's `key`, drawn again when the language
   *  changes (applyI18n reads data-i18n). */
  function elT(tag, cls, key) {
    const e = el(tag, cls, tx(key));
    e.dataset.i18n = key;
    return e;
  }

  function num(v) {
    const n = Number(v);
    return Number.isFinite(n) ? n : 0;
  }

  function fmtMs(v) {
    const ms = Math.max(0, Math.round(num(v)));
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
    const s = Math.floor(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  }

  function fmtTime(tsMs) {
    const d = new Date(Number.isFinite(Number(tsMs)) && tsMs ? Number(tsMs) : Date.now());
    const p = (n, w) => String(n).padStart(w || 2, "0");
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()) + "." + p(d.getMilliseconds(), 3);
  }

  function depthClass(q) {
    if (q <= 0) return "q0";
    if (q < 10) return "q1";
    if (q < 100) return "q10";
    return "q100";
  }

  // Percent-encode each path segment but keep the slashes: the daemon expects
  // the raw slash path, e.g. /api/v1/actors/kernel/config/restart.
  function restartUrl(id) {
    return API_ACTORS + "/" + String(id).split("/").map(encodeURIComponent).join("/") + "/restart";
  }

  // ---------------------------------------------------------------- connection status

  /** A text of the one catalog (static/i18n.js), in the daemon's language. */
  function tx(key, vars) {
    return window.HA ? window.HA.t(key, vars) : key;
  }

  /** The catalog's `HA.trOr` (a key it lacks shows as `fallback`). */
  function trOr(key, fallback) {
    return window.HA ? window.HA.trOr(key, fallback) : fallback;
  }

  /** The catalog's `HA.stateWord` (running, backoff, … in the page's language). */
  function stateWord(st) {
    return window.HA ? window.HA.stateWord(st) : st;
  }

  function setMode(m, detail) {
    mode = m;
    connEl.dataset.state = m;
    document.body.dataset.conn = m;
    const label = ["live", "stale", "connecting", "disconnected", "polling"].includes(m) ? tx("conn." + m) : m;
    connText.textContent = label;
    connEl.title = detail || tx("conn.title", { label });
    connEl.dataset.detail = detail || "";
    bannerEl.hidden = !(m === "disconnected");
    if (m === "disconnected") bannerEl.textContent = tx("conn.retrying") + (detail ? " (" + detail + ")" : "");
  }

  // ---------------------------------------------------------------- tree rendering

  // Depth-first order: roots (no parent, or parent unknown) in the order given,
  // each followed by its children in the order given.
  function treeOrder(list) {
    const byId = new Map();
    const children = new Map();
    for (const a of list) {
      if (!a || typeof a.id !== "string") continue;
      if (!byId.has(a.id)) byId.set(a.id, a);
    }
    const roots = [];
    for (const a of byId.values()) {
      const p = a.parent;
      if (p === null || p === undefined || p === "" || !byId.has(p) || p === a.id) {
        roots.push(a);
      } else {
        if (!children.has(p)) children.set(p, []);
        children.get(p).push(a);
      }
    }
    const out = [];
    const seen = new Set();
    const visit = (a, depth) => {
      if (seen.has(a.id)) return;
      seen.add(a.id);
      const kids = children.get(a.id) || [];
      out.push({ actor: a, depth, hasKids: kids.length > 0 });
      for (const c of kids) visit(c, depth + 1);
    };
    for (const r of roots) visit(r, 0);
    // Anything left over is part of a parent cycle: show it flat rather than hide it.
    for (const a of byId.values()) if (!seen.has(a.id)) visit(a, 0);
    return out;
  }

  function buildRow(id) {
    const tr = el("tr", "actor");
    tr.dataset.actorId = id;

    const tdId = el("td", "id");
    const wrap = el("span", "tree");
    const prefix = el("span", "id-prefix data");
    const leaf = el("span", "id-leaf data");
    wrap.append(prefix, leaf);
    tdId.append(wrap);

    const tdKind = el("td", "kind data");
    const tdState = el("td", "state");
    const badge = el("span", "badge");
    const extra = el("span", "state-extra");
    tdState.append(badge, extra);

    const tdQ = el("td", "queued");
    const qNum = el("span", "q-num");
    const bar = el("span", "bar");
    const fill = el("span", "fill");
    bar.append(fill);
    tdQ.append(qNum, bar);

    const tdHandled = el("td", "num handled");
    const tdOldest = el("td", "num oldest");
    const tdBusy = el("td", "num busy");
    const tdRestarts = el("td", "num restarts");
    const tdExit = el("td", "last-exit data");

    const tdAct = el("td", "actions");
    const btn = elT("button", "restart", "app.restart");
    btn.dataset.i18n = "app.restart";
    btn.type = "button";
    btn.addEventListener("click", () => restart(id, tr));
    const err = el("span", "restart-error");
    err.setAttribute("role", "alert");
    tdAct.append(btn, err);

    tr.append(tdId, tdKind, tdState, tdQ, tdHandled, tdOldest, tdBusy, tdRestarts, tdExit, tdAct);
    tr._cells = { prefix, leaf, wrap, tdKind, badge, extra, tdState, tdQ, qNum, fill, tdHandled, tdOldest, tdBusy, tdRestarts, tdExit, btn, err };
    return tr;
  }

  function setText(node, text) {
    const t = String(text);
    if (node.textContent !== t) node.textContent = t;
  }

  function updateRow(tr, a, depth, hasKids) {
    const c = tr._cells;
    const id = a.id;
    const cut = id.lastIndexOf("/");
    setText(c.prefix, cut >= 0 ? id.slice(0, cut + 1) : "");
    setText(c.leaf, cut >= 0 ? id.slice(cut + 1) : id);
    c.wrap.style.paddingLeft = (depth * 1.25) + "em";
    c.wrap.classList.toggle("has-kids", hasKids);
    c.wrap.classList.toggle("child", depth > 0);
    c.wrap.title = id;

    setText(c.tdKind, a.kind || "");

    const state = String(a.state || "unknown");
    const stuck = !!a.stuck;
    setText(c.badge, stuck ? stateWord(state) + " · " + stateWord("stuck") : stateWord(state));
    c.badge.className = "badge b-" + state.replace(/[^a-z0-9_-]/gi, "") + (stuck ? " b-stuck" : "");
    c.tdState.dataset.state = state;

    const q = Math.max(0, num(a.queued));
    setText(c.qNum, q);
    c.tdQ.dataset.depth = depthClass(q);
    c.fill.style.width = (q <= 0 ? 0 : Math.min(100, 8 + (Math.log10(q + 1) / 3) * 92)).toFixed(1) + "%";

    setText(c.tdHandled, num(a.handled));
    setText(c.tdOldest, num(a.oldest_queued_ms) > 0 ? fmtMs(a.oldest_queued_ms) : "—");
    c.tdOldest.title = num(a.oldest_queued_ms) + " ms";
    setText(c.tdBusy, num(a.busy_ms) > 0 ? fmtMs(a.busy_ms) : "—");
    c.tdBusy.title = num(a.busy_ms) + " ms";

    const prevRestarts = c.tdRestarts.textContent;
    const restarts = String(num(a.restarts));
    c.tdRestarts.dataset.n = restarts;
    if (prevRestarts !== restarts) {
      c.tdRestarts.textContent = restarts;
      if (prevRestarts !== "") flash(tr);
    }

    const exit = a.last_exit === null || a.last_exit === undefined ? "" : String(a.last_exit);
    setText(c.tdExit, exit);
    c.tdExit.title = exit;

    tr.dataset.state = state;
    tr.classList.toggle("is-stuck", stuck);
    tr.classList.toggle("is-backoff", state === "backoff");
    tr.classList.toggle("is-failed", state === "failed");
    tr.classList.toggle("is-stopped", state === "stopped");
    tr.classList.toggle("is-busy", state === "busy" && !stuck);
    tr._backoffMs = state === "backoff" ? num(a.backoff_ms) : 0;

    const restartable = !!a.restartable;
    c.btn.hidden = !restartable;
    if (!restartable && !tr._pending) c.btn.disabled = true;
    else if (!tr._pending) c.btn.disabled = false;
  }

  function flash(tr) {
    tr.classList.remove("flash");
    // restart the CSS animation
    void tr.offsetWidth;
    tr.classList.add("flash");
  }

  function tickCountdowns() {
    const elapsed = performance.now() - snapshotAt;
    for (const tr of rows.values()) {
      const c = tr._cells;
      if (tr._backoffMs > 0) {
        const left = Math.max(0, tr._backoffMs - elapsed);
        setText(c.extra, tx("app.retry_in", { s: (left / 1000).toFixed(1) }));
      } else if (c.extra.textContent) {
        c.extra.textContent = "";
      }
    }
    if (mode === "live" && lastSnapshotWall && Date.now() - lastSnapshotWall > STALE_MS) {
      setMode("stale", "no actors snapshot for " + Math.round((Date.now() - lastSnapshotWall) / 1000) + " s");
    }
  }

  function renderSummary(list) {
    const counts = {};
    let stuck = 0;
    for (const a of list) {
      counts[a.state] = (counts[a.state] || 0) + 1;
      if (a.stuck) stuck++;
    }
    const parts = [tx(list.length === 1 ? "app.actors_one" : "app.actors_n", { n: list.length })];
    for (const s of ["running", "busy", "starting", "backoff", "stopped", "failed"]) {
      if (counts[s]) parts.push(tx("app.count_state", { n: counts[s], state: stateWord(s) }));
    }
    if (stuck) parts.push(tx("app.count_state", { n: stuck, state: stateWord("stuck") }));
    summaryEl.textContent = parts.join(" · ");
    lastSummary = list;
  }
  let lastSummary = null;

  let lastActorsData = null;
  function applySnapshot(data) {
    const list = data && Array.isArray(data.actors) ? data.actors : null;
    if (!list) return;
    lastActorsData = data;
    snapshotAt = performance.now();
    lastSnapshotWall = Date.now();
    if (mode === "stale") setMode("live");

    const ordered = treeOrder(list);
    const next = new Map();
    const frag = [];
    for (const { actor, depth, hasKids } of ordered) {
      let tr = rows.get(actor.id);
      if (!tr) tr = buildRow(actor.id);
      updateRow(tr, actor, depth, hasKids);
      next.set(actor.id, tr);
      frag.push(tr);
    }
    // Drop rows for actors that disappeared.
    for (const [id, tr] of rows) if (!next.has(id)) tr.remove();
    const placeholder = rowsEl.querySelector("tr.placeholder");
    if (placeholder) placeholder.remove();
    // Put rows in tree order, moving only those out of place.
    let cursor = rowsEl.firstElementChild;
    for (const tr of frag) {
      if (tr === cursor) {
        cursor = cursor.nextElementSibling;
      } else {
        rowsEl.insertBefore(tr, cursor);
      }
    }
    if (frag.length === 0) {
      const ph = el("tr", "placeholder");
      const td = elT("td", null, "app.no_actors");
      td.colSpan = 10;
      ph.append(td);
      rowsEl.append(ph);
    }
    rows.clear();
    for (const [id, tr] of next) rows.set(id, tr);
    actors = new Map(list.map((a) => [a.id, a]));
    renderSummary(list);
    tickCountdowns();
  }

  // ---------------------------------------------------------------- restart

  async function restart(id, tr) {
    const c = tr._cells;
    if (tr._pending) return;
    tr._pending = true;
    c.btn.disabled = true;
    c.btn.textContent = "Restarting…";
    c.err.textContent = "";
    try {
      const res = await fetch(restartUrl(id), {
        method: "POST",
        headers: { "Accept": "application/json" },
        cache: "no-store",
      });
      let body = null;
      const text = await res.text();
      try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
      if (!res.ok) {
        const msg = body && typeof body.error === "string" ? body.error : (text || res.statusText || tx("app.request_failed"));
        c.err.textContent = (res.status >= 500 ? "HTTP " + res.status + ": " : "") + msg;
      } else if (mode === "polling") {
        // No SSE: refresh now instead of waiting for the next poll.
        refreshOnce();
      }
    } catch (e) {
      c.err.textContent = tx("app.network_error", { e: e && e.message ? e.message : e });
    } finally {
      tr._pending = false;
      c.btn.textContent = "Restart";
      const a = actors.get(id);
      c.btn.disabled = !(a && a.restartable);
    }
  }

  // ---------------------------------------------------------------- event log

  function logEvent(type, data) {
    let payload = data;
    if (typeof data === "string") {
      try { payload = JSON.parse(data); } catch (_) { payload = data; }
    }
    let ts = Date.now();
    let evType = type;
    let rest = payload;
    if (payload && typeof payload === "object" && !Array.isArray(payload)) {
      if (payload.ts_ms !== undefined) ts = num(payload.ts_ms) || ts;
      if ((type === "message" || !type) && typeof payload.type === "string") evType = payload.type;
      rest = {};
      for (const k of Object.keys(payload)) if (k !== "type" && k !== "ts_ms") rest[k] = payload[k];
    }
    if (!evType) evType = "message";

    // Streaming chunks of one task are merged into a single entry (the newest
    // one), so a long reply does not push everything else out of the log.
    if (evType === "stream_delta" && rest && typeof rest === "object" && !rest.reset) {
      const top = logEl.firstElementChild;
      if (top && top.dataset.type === "stream_delta" && top._delta && top._delta.task_id === rest.task_id) {
        const d = top._delta;
        d.chunks += 1;
        d.content += typeof rest.content === "string" ? rest.content : "";
        d.reasoning += typeof rest.reasoning === "string" ? rest.reasoning : "";
        top.querySelector(".ev-type").textContent = "stream_delta ×" + d.chunks;
        top.querySelector(".ev-data").textContent = JSON.stringify(d.view());
        top.querySelector(".ev-text").replaceChildren(...eventSentence("stream_delta", Object.assign({ chunks: d.chunks }, d.view())));
        const t = top.querySelector(".ev-time");
        t.textContent = fmtTime(ts);
        t.dateTime = new Date(ts).toISOString();
        return;
      }
    }

    const li = el("li", "ev");
    li.dataset.type = evType;
    const kind = evType.replace(/[^a-z0-9_-]/gi, "");
    if (/exit|fail|escalat|error/i.test(kind)) li.classList.add("ev-bad");
    else if (/restart|backoff/i.test(kind)) li.classList.add("ev-warn");
    else if (/start/i.test(kind)) li.classList.add("ev-ok");
    const time = el("time", "ev-time", fmtTime(ts));
    time.dateTime = new Date(ts).toISOString();
    // A sentence a person reads (with links to the actor or task it is about), the
    // event's own name and fields folded below it for whoever needs them.
    const text = el("span", "ev-text");
    text.append(...eventSentence(evType, rest));
    const more = el("details", "ev-more");
    const t = el("summary", "ev-type", evType);
    let json;
    try { json = typeof rest === "string" ? rest : JSON.stringify(rest); } catch (_) { json = String(rest); }
    const code = el("code", "ev-data", json === "{}" ? "" : json);
    more.append(t, code);
    li.append(time, text, more);
    li._ev = { type: evType, rest };
    if (evType === "stream_delta" && rest && typeof rest === "object" && !rest.reset) {
      const d = {
        task_id: rest.task_id, channel: rest.channel, chunks: 1,
        content: typeof rest.content === "string" ? rest.content : "",
        reasoning: typeof rest.reasoning === "string" ? rest.reasoning : "",
      };
      d.view = () => {
        const v = { task_id: d.task_id, channel: d.channel, content: d.content };
        if (d.reasoning) v.reasoning = d.reasoning;
        return v;
      };
      li._delta = d;
    }
    logEl.insertBefore(li, logEl.firstChild);
    while (logEl.children.length > LOG_CAP) logEl.lastElementChild.remove();
    countEl.textContent = "(" + logEl.children.length + ")";
  }

  /** A link that shows an actor's row on the Dashboard (and flashes it). */
  function actorLink(id) {
    const a = el("a", "ev-link data", String(id));
    a.href = "#/dashboard";
    a.addEventListener("click", () => {
      setTimeout(() => {
        const tr = rows.get(String(id));
        if (tr) { tr.scrollIntoView({ block: "center" }); flash(tr); }
      }, 50);
    });
    return a;
  }
  /** A link to a task: its message in the chat when it is there, else the queues. */
  function taskLink(id) {
    const a = el("a", "ev-link", tx("ev.task_ref", { id }));
    a.href = "#/tasks";
    return a;
  }

  /** Nodes of the sentence for one event, in the page's language. Values that are
   *  names (an actor, a tool, a setting) are links or code; an event this page does
   *  not know is named as it is. */
  function eventSentence(type, r) {
    const o = r && typeof r === "object" ? r : {};
    const code = (v) => el("code", null, String(v));
    // Fill a catalog text whose {slots} are nodes or plain values.
    const fill = (key, vars) => {
      const out = [];
      const textOf = tx(key);
      let last = 0;
      textOf.replace(/\{(\w+)\}/g, (m, k, at) => {
        out.push(textOf.slice(last, at));
        const v = vars[k];
        out.push(v instanceof Node ? v : String(v === undefined || v === null ? "" : v));
        last = at + m.length;
        return m;
      });
      out.push(textOf.slice(last));
      return out.filter((x) => x !== "");
    };
    const task = o.task_id !== undefined && o.task_id !== null ? taskLink(o.task_id) : "";
    switch (type) {
      case "task": return fill("ev.task", { task, state: stateWord(String(o.state)) });
      case "recalled": return fill("ev.recalled", { task, ms: Math.round(num(o.ms)) });
      case "stream_delta": return fill("ev.stream_delta", { task, n: o.chunks || 1 });
      case "agent_llm_chain": {
        const u = o.usage || {};
        return fill(o.tool_calls && o.tool_calls.length ? "ev.llm_tools" : "ev.llm", { task, source: code(o.source || "?"), model: code(o.model || "?"), input: num(u.prompt), output: num(u.completion), n: (o.tool_calls || []).length });
      }
      case "agent_output": return fill(o.error ? "ev.output_error" : "ev.output", { task, channel: whoLabel("user", o.channel) });
      case "output": return fill("ev.output", { task, channel: whoLabel("user", o.channel) });
      case "tool_call": return fill("ev.tool", { task, tool: code(o.name), status: trOr("tool." + o.status, String(o.status)) });
      case "actor_started": return fill("ev.actor_started", { actor: actorLink(o.id) });
      case "actor_exit": return fill(o.abnormal ? "ev.actor_crashed" : "ev.actor_exit", { actor: actorLink(o.id), reason: el("span", "data", trOr("ev.reason." + o.reason, String(o.reason))) });
      case "actor_restart": return fill("ev.actor_restart", { actor: actorLink(o.id), n: o.restarts });
      case "actor_stopped": return fill("ev.actor_stopped", { actor: actorLink(o.id) });
      case "actor_stuck": return fill("ev.actor_stuck", { actor: actorLink(o.id) });
      case "actor_failed": return fill("ev.actor_failed", { actor: actorLink(o.id), reason: el("span", "data", String(o.reason || "")) });
      case "supervisor_escalated": return fill("ev.escalated", { actor: actorLink(o.id), reason: el("span", "data", String(o.reason || "")) });
      case "setting_changed": return fill(o.reset || o.value === null ? "ev.setting_reset" : "ev.setting", { key: code(o.key) });
      case "daemon": return fill("ev.daemon", { phase: trOr("ev.phase." + o.phase, String(o.phase)) });
      case "approval_requested": return fill("ev.approval_requested", { task, tool: code(o.tool) });
      case "approval_resolved": return fill(o.allowed ? "ev.approval_allowed" : "ev.approval_denied", { task });
      case "task_waiting": return fill("ev.task_waiting", { task, s: Math.round(num(o.retry_in_ms) / 1000), n: o.attempt });
      case "budget_reached": return fill("ev.budget", { key: code(o.setting) });
      case "stage_handler_error": return fill("ev.stage_error", { handler: code(o.handler), stage: code(o.stage) });
      case "lagged": return fill("ev.lagged", { n: o.skipped || o.n || "?" });
      default: return [code(type)];
    }
  }

  $("#clear-log").addEventListener("click", () => {
    logEl.replaceChildren();
    countEl.textContent = "";
  });

  // ---------------------------------------------------------------- daemon log

  // The daemon's recent log (GET /api/v1/logs, secrets masked there), polled with
  // `after` while the Log tab is shown. A filter change starts over; answers to a
  // request made under an older filter are dropped.
  const API_LOGS = "/api/v1/logs";
  const LOGS_POLL_MS = 2000;
  const LOGS_CAP = 1000;        // lines kept on the page
  const tabEvents = $("#tab-events");
  const tabLogs = $("#tab-logs");
  const logsView = $("#logs-view");
  const logsLines = $("#logs-lines");
  const logsLevel = $("#logs-level");
  const logsQ = $("#logs-q");
  const logsErr = $("#logs-error");
  let logsLast = null;
  let logsGen = 0;
  let logsBusy = false;
  let logsTimer = null;

  /** A log line's message split into its sentence and its `key=value` fields
   *  (tracing writes the fields after the text). The `log` bridge's source
   *  position (`log.file`, `log.line`, `log.module_path`) says nothing to a reader
   *  and is dropped; `log.target` stands in for the target. */
  function splitLogMessage(msg, target) {
    const m = /(^|\s)[a-z_][a-z0-9_.]*=/.exec(msg);
    const text = m ? msg.slice(0, m.index).trim() : msg;
    const fields = [];
    let tgt = target;
    if (m) {
      const rest = msg.slice(m.index).trim();
      // Split before each ` key=` that is not inside quotes or braces.
      let depth = 0, quote = false, start = 0;
      for (let i = 0; i <= rest.length; i++) {
        const c = rest[i];
        if (i === rest.length || (!quote && depth === 0 && c === " " && /^ [a-z_][a-z0-9_.]*=/.test(rest.slice(i, i + 40)))) {
          const f = rest.slice(start, i).trim();
          if (f) fields.push(f);
          start = i + 1;
          continue;
        }
        if (c === '"' && rest[i - 1] !== "\\") quote = !quote;
        else if (!quote && (c === "{" || c === "[" || c === "(")) depth++;
        else if (!quote && (c === "}" || c === "]" || c === ")")) depth = Math.max(0, depth - 1);
      }
    }
    const kept = [];
    for (const f of fields) {
      const eq = f.indexOf("=");
      const k = f.slice(0, eq);
      if (k === "log.file" || k === "log.line" || k === "log.module_path") continue;
      if (k === "log.target") { tgt = f.slice(eq + 1).replace(/^"|"$/g, ""); continue; }
      kept.push([k, f.slice(eq + 1)]);
    }
    return { text: text || msg, fields: kept, target: tgt };
  }

  // One line: time, level (coloured), the sentence wrapped; a click opens its
  // details (where it came from, every field) under it.
  function logLineEl(l) {
    const li = el("li", "log-line");
    const level = String(l.level || "").toUpperCase().replace(/[^A-Z]/g, "");
    li.dataset.level = level;
    const parts = splitLogMessage(String(l.message || ""), String(l.target || ""));
    const d = el("details", "log-details");
    const sum = el("summary", "log-sum");
    const time = el("time", "ev-time", fmtTime(l.ts_ms));
    time.dateTime = new Date(num(l.ts_ms) || Date.now()).toISOString();
    sum.append(time, el("span", "log-level lv-" + level.toLowerCase(), level), el("span", "log-msg data", parts.text));
    const dl = el("dl", "log-fields data");
    dl.append(el("dt", null, "target"), el("dd", null, parts.target));
    for (const [k, v] of parts.fields) dl.append(el("dt", null, k), el("dd", null, v));
    d.append(sum, dl);
    li.append(d);
    return li;
  }

  async function pollLogs() {
    if (logsBusy) return;
    logsBusy = true;
    const gen = logsGen;
    try {
      const params = new URLSearchParams();
      if (logsLevel.value) params.set("level", logsLevel.value);
      if (logsQ.value.trim()) params.set("q", logsQ.value.trim());
      if (logsLast !== null) params.set("after", String(logsLast));
      const body = await getJson(API_LOGS + "?" + params.toString());
      if (gen !== logsGen) return;
      const stick = logsLines.scrollHeight - logsLines.scrollTop - logsLines.clientHeight < 40;
      const lines = Array.isArray(body.lines) ? body.lines : [];
      logsLines.append(...lines.map(logLineEl));
      while (logsLines.children.length > LOGS_CAP) logsLines.firstElementChild.remove();
      if (stick) logsLines.scrollTop = logsLines.scrollHeight;
      logsLast = Number.isFinite(body.last_seq) ? body.last_seq : logsLast;
      logsLines.dataset.loaded = "1";
      logsErr.textContent = "";
    } catch (e) {
      logsErr.textContent = "log: " + (e && e.message ? e.message : e);
    } finally {
      logsBusy = false;
      if (gen !== logsGen) pollLogs();
    }
  }

  function restartLogs() {
    logsGen++;
    logsLast = null;
    delete logsLines.dataset.loaded;
    logsLines.replaceChildren();
    pollLogs();
  }

  function showTab(logs) {
    tabEvents.setAttribute("aria-selected", String(!logs));
    tabLogs.setAttribute("aria-selected", String(logs));
    tabEvents.tabIndex = logs ? -1 : 0;
    tabLogs.tabIndex = logs ? 0 : -1;
    logEl.hidden = logs;
    logsView.hidden = !logs;
    countEl.hidden = logs;
    $("#clear-log").hidden = logs;
    if (logs) {
      if (logsLast === null) restartLogs();
      if (!logsTimer) logsTimer = setInterval(pollLogs, LOGS_POLL_MS);
    } else if (logsTimer) {
      clearInterval(logsTimer);
      logsTimer = null;
    }
  }

  tabEvents.addEventListener("click", () => showTab(false));
  tabLogs.addEventListener("click", () => showTab(true));
  for (const t of [tabEvents, tabLogs]) {
    t.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
        const other = t === tabEvents ? tabLogs : tabEvents;
        other.focus();
        showTab(other === tabLogs);
      }
    });
  }
  logsLevel.addEventListener("change", restartLogs);
  let logsQTimer = null;
  logsQ.addEventListener("input", () => {
    clearTimeout(logsQTimer);
    logsQTimer = setTimeout(restartLogs, 250);
  });

  // ---------------------------------------------------------------- data sources

  async function refreshOnce() {
    const res = await fetch(API_ACTORS, { cache: "no-store", headers: { "Accept": "application/json" } });
    if (!res.ok) throw new Error("HTTP " + res.status);
    applySnapshot(await res.json());
  }

  function startPolling() {
    if (pollTimer) return;
    const tick = async () => {
      try {
        await refreshOnce();
        if (!es) setMode("polling", "EventSource unavailable; polling every " + POLL_MS / 1000 + " s");
      } catch (e) {
        if (!es) setMode("disconnected", String(e && e.message ? e.message : e));
      }
    };
    tick();
    pollTimer = setInterval(tick, POLL_MS);
  }

  function stopPolling() {
    if (pollTimer) clearInterval(pollTimer);
    pollTimer = null;
  }

  function onSseData(name, ev) {
    if (name === "actors") {
      try { applySnapshot(JSON.parse(ev.data)); } catch (e) { console.warn("bad actors event", e); }
      return;
    }
    let data = null;
    try { data = JSON.parse(ev.data); } catch (_) { /* not JSON: log as text */ }
    if (data && typeof data === "object") {
      try {
        if (name === "stream_delta") chatOnDelta(data);
        else if (name === "task") chatOnTask(data);
        else if (name === "tool_call") chatOnToolCall(data);
        else if (name === "agent_llm_chain") chatOnLlmChain(data);
        else if (name === "agent_output") chatOnOutput(data);
        else if (name === "approval_requested") approvalCard(data);
        else if (name === "approval_resolved") approvalResolved(data);
        else if (name === "task_waiting") chatOnWaiting(data);
        else if (name === "budget_reached") budgetCard(data);
        else if (/^actor_/.test(name) && typeof data.id === "string" && data.id.startsWith("kernel/plugins/")) {
          pluginsSoon();
        }
      } catch (e) { console.warn("event handler failed", name, e); }
    }
    logEvent(name, data !== null ? data : ev.data);
  }

  function connectSse() {
    setMode("connecting");
    const src = new EventSource(API_EVENTS);
    es = src;
    src.onopen = () => {
      if (es !== src) return;
      stopPolling();
      setMode("live");
      loadApprovals();
      loadDead();
    };
    for (const name of KNOWN_EVENTS) {
      if (name === "error") continue; // shared with connection errors, below
      src.addEventListener(name, (ev) => { if (es === src) onSseData(name, ev); });
    }
    // Unnamed events: either a snapshot or a kernel event with a "type" field.
    src.onmessage = (ev) => {
      if (es !== src) return;
      let data = null;
      try { data = JSON.parse(ev.data); } catch (_) { /* generic text */ }
      if (data && Array.isArray(data.actors) && (data.type === undefined || data.type === "actors")) {
        applySnapshot(data);
      } else {
        logEvent(data && typeof data.type === "string" ? data.type : "message", data !== null ? data : ev.data);
      }
    };
    // "error" is both the kernel's `event: error` (a MessageEvent with data)
    // and EventSource's own connection-error event (no data).
    src.addEventListener("error", (ev) => {
      if (es !== src) return;
      if (typeof ev.data === "string") {
        logEvent("error", ev.data);
        return;
      }
      if (src.readyState === EventSource.CLOSED) {
        // The browser gave up (e.g. non-200 or wrong content type): poll
        // meanwhile and open a fresh EventSource a bit later.
        setMode("disconnected", "event stream closed");
        es = null;
        src.close();
        startPolling();
        setTimeout(() => { if (!es) { stopPolling(); connectSse(); } }, SSE_REOPEN_MS);
      } else {
        // readyState CONNECTING: EventSource retries by itself.
        setMode("disconnected", "event stream lost");
      }
    });
  }

  // ---------------------------------------------------------------- plugins

  const pluginRowsEl = $("#plugin-rows");
  const pluginCountEl = $("#plugin-count");
  const pluginsErrEl = $("#plugins-error");
  /** name -> <tr> */
  const pluginRows = new Map();
  let pluginsInFlight = false;
  let pluginsAgain = false;
  let pluginsSoonTimer = null;

  function pluginRestartUrl(name) {
    return API_PLUGINS + "/" + encodeURIComponent(name) + "/restart";
  }

  // `restarts` of GET /api/v1/plugins counts crash restarts of the process
  // plus operator restarts / reloads of the whole plugin; shown as given.
  function pluginRestarts(p) {
    return Math.max(0, num(p.restarts));
  }

  function buildPluginRow(name) {
    const tr = el("tr", "plugin");
    tr.dataset.plugin = name;
    const tdName = el("td", "plugin-name data", name);
    const tdKind = el("td", "kind data");
    const tdState = el("td", "state");
    const badge = el("span", "badge plugin-state");
    const problem = el("span", "plugin-problem data");
    tdState.append(badge, problem);
    const tdPid = el("td", "num plugin-pid");
    const tdRestarts = el("td", "num plugin-restarts");
    const tdTools = el("td", "plugin-tools");
    const tdExit = el("td", "last-exit plugin-exit data");
    const tdErr = el("td", "plugin-stderr data");
    const tdAct = el("td", "actions");
    const btn = elT("button", "plugin-restart", "app.restart");
    btn.dataset.i18n = "app.restart";
    btn.type = "button";
    btn.addEventListener("click", () => restartPlugin(name, tr));
    const err = el("span", "restart-error");
    err.setAttribute("role", "alert");
    tdAct.append(btn, err);
    tr.append(tdName, tdKind, tdState, tdPid, tdRestarts, tdTools, tdExit, tdErr, tdAct);
    tr._cells = { tdKind, tdState, badge, problem, tdPid, tdRestarts, tdTools, tdExit, tdErr, btn, err };
    return tr;
  }

  function updatePluginRow(tr, p) {
    const c = tr._cells;
    tr._last = p;
    setText(c.tdKind, p.kind ? trOr("plugins.kind." + p.kind, p.kind) : "");
    const state = String(p.state || "unknown");
    setText(c.badge, stateWord(state));
    c.badge.className = "badge plugin-state b-" + state.replace(/[^a-z0-9_-]/gi, "");
    c.tdState.dataset.state = state;
    tr.dataset.state = state;
    tr.classList.toggle("is-backoff", state === "backoff");
    tr.classList.toggle("is-failed", state === "quarantined");
    tr.classList.toggle("is-stopped", state === "disabled" || state === "stopped");
    setText(c.problem, typeof p.problem === "string" ? p.problem : "");

    setText(c.tdPid, p.pid === null || p.pid === undefined ? "—" : p.pid);
    const restarts = String(pluginRestarts(p));
    const prev = c.tdRestarts.textContent;
    setText(c.tdRestarts, restarts);
    c.tdRestarts.dataset.n = String(restarts);
    if (prev !== "" && prev !== restarts) flash(tr);

    const tools = Array.isArray(p.tools) ? p.tools.map(String) : [];
    const key = tools.join("\n");
    if (c.tdTools._key !== key) {
      c.tdTools._key = key;
      c.tdTools.replaceChildren(...tools.map((t) => el("code", "tool", t)));
      if (!tools.length) c.tdTools.append(el("span", "muted", "—"));
    }

    const exit = p.last_exit === null || p.last_exit === undefined ? "" : String(p.last_exit);
    setText(c.tdExit, exit);
    c.tdExit.title = exit;
    const tail = Array.isArray(p.stderr_tail) ? p.stderr_tail.map(String) : [];
    setText(c.tdErr, tail.length ? tail[tail.length - 1] : "");
    c.tdErr.title = tail.join("\n");

    const restartable = state !== "disabled";
    c.btn.hidden = !restartable;
    if (!tr._pending) c.btn.disabled = !restartable;
  }

  function renderPlugins(list) {
    const next = new Map();
    const order = [];
    for (const p of list) {
      if (!p || typeof p.name !== "string" || next.has(p.name)) continue;
      let tr = pluginRows.get(p.name);
      if (!tr) tr = buildPluginRow(p.name);
      updatePluginRow(tr, p);
      next.set(p.name, tr);
      order.push(tr);
    }
    for (const [name, tr] of pluginRows) if (!next.has(name)) tr.remove();
    pluginRows.clear();
    for (const [name, tr] of next) pluginRows.set(name, tr);
    const ph = pluginRowsEl.querySelector("tr.placeholder");
    if (order.length === 0) {
      if (!ph || ph.dataset.empty !== "1") {
        const row = el("tr", "placeholder");
        row.dataset.empty = "1";
        const td = elT("td", null, "app.no_plugins");
        td.title = "DATA is the directory given to homed with --data";
        td.colSpan = 9;
        row.append(td);
        pluginRowsEl.replaceChildren(row);
      }
    } else {
      if (ph) ph.remove();
      let cursor = pluginRowsEl.firstElementChild;
      for (const tr of order) {
        if (tr === cursor) cursor = cursor.nextElementSibling;
        else pluginRowsEl.insertBefore(tr, cursor);
      }
    }
    const counts = {};
    for (const p of list) if (p && p.state) counts[p.state] = (counts[p.state] || 0) + 1;
    const parts = Object.keys(counts).sort().map((s) => tx("app.count_state", { n: counts[s], state: stateWord(s) }));
    pluginCountEl.textContent = order.length ? "(" + order.length + (parts.length ? ": " + parts.join(", ") : "") + ")" : "";
  }

  async function refreshPlugins() {
    if (pluginsInFlight) { pluginsAgain = true; return; }
    pluginsInFlight = true;
    try {
      const res = await fetch(API_PLUGINS, { cache: "no-store", headers: { "Accept": "application/json" } });
      const text = await res.text();
      let body = null;
      try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
      if (!res.ok) {
        throw new Error("HTTP " + res.status + ": " + (body && typeof body.error === "string" ? body.error : text.slice(0, 200)));
      }
      if (!body || !Array.isArray(body.plugins)) throw new Error("GET " + API_PLUGINS + ": no \"plugins\" array");
      pluginsErrEl.textContent = "";
      renderPlugins(body.plugins);
    } catch (e) {
      pluginsErrEl.textContent = tx("app.plugins_failed", { e: e && e.message ? e.message : e });
    } finally {
      pluginsInFlight = false;
      if (pluginsAgain) { pluginsAgain = false; refreshPlugins(); }
    }
  }

  // A plugin actor changed (SSE): refresh a little later, coalescing bursts.
  function pluginsSoon() {
    if (pluginsSoonTimer) return;
    pluginsSoonTimer = setTimeout(() => { pluginsSoonTimer = null; refreshPlugins(); }, 300);
  }

  async function restartPlugin(name, tr) {
    const c = tr._cells;
    if (tr._pending) return;
    tr._pending = true;
    c.btn.disabled = true;
    c.btn.textContent = "Restarting…";
    c.err.textContent = "";
    try {
      const res = await fetch(pluginRestartUrl(name), {
        method: "POST",
        headers: { "Accept": "application/json" },
        cache: "no-store",
      });
      const text = await res.text();
      let body = null;
      try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
      if (!res.ok) {
        const msg = body && typeof body.error === "string" ? body.error : (text || res.statusText || tx("app.request_failed"));
        c.err.textContent = (res.status >= 500 ? "HTTP " + res.status + ": " : "") + msg;
      }
    } catch (e) {
      c.err.textContent = tx("app.network_error", { e: e && e.message ? e.message : e });
    } finally {
      tr._pending = false;
      c.btn.textContent = "Restart";
      c.btn.disabled = tr.dataset.state === "disabled";
      refreshPlugins();
      // The new process needs a moment to hand over its tools.
      setTimeout(refreshPlugins, 1000);
    }
  }

  // ---------------------------------------------------------------- chat

  const chatLog = $("#chat-log");
  const chatForm = $("#chat-form");
  const chatInput = $("#chat-input");
  const chatSend = $("#chat-send");
  const chatStop = $("#chat-stop");
  const chatStatus = $("#chat-status");
  /** requests waiting for their reply, oldest first:
   *  {li, textEl, extraEl, taskId, content, reasoning, tools} */
  const pendingChats = [];
  /** ids of agent tasks currently running (from `task` events) */
  const runningTasks = new Set();

  function chatNearBottom() {
    return chatLog.scrollHeight - chatLog.scrollTop - chatLog.clientHeight < 40;
  }

  function chatScroll(stick) {
    if (stick) chatLog.scrollTop = chatLog.scrollHeight;
  }

  // A log filled while it had no height (the view hidden, the page still signing in)
  // cannot be scrolled: when it gets its height it goes to its newest line, unless the
  // person had scrolled up in it.
  let chatAtBottom = true;
  chatLog.addEventListener("scroll", () => { if (chatLog.clientHeight) chatAtBottom = chatNearBottom(); });
  if (window.ResizeObserver) {
    new ResizeObserver(() => { if (chatAtBottom && chatLog.clientHeight) chatLog.scrollTop = chatLog.scrollHeight; }).observe(chatLog);
  }

  // ---- markdown

  // Replies are hostile input (a prompt-injected web page can make the model write
  // anything). marked turns Markdown into HTML; DOMPurify then drops scripts, event
  // handlers, `javascript:` URLs and the like. Images are not loaded at all: a remote
  // image in a reply could carry conversation data out in its URL, so Markdown images
  // become plain links the owner may choose to open, and raw <img> tags are dropped
  // (the page's CSP also refuses remote images). Without the vendored files the text
  // is shown as it is.
  const mdReady = typeof window.marked === "object" && typeof window.marked.Marked === "function"
    && typeof window.DOMPurify === "function" && window.DOMPurify.isSupported;
  const escHtml = (t) => String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const md = mdReady ? new window.marked.Marked({
    gfm: true,
    breaks: true,
    async: false,
    renderer: {
      // Never an <img>: even a sanitised one would be fetched as soon as it exists.
      image(token) {
        const label = "[" + escHtml(token.text || "image") + "]";
        return /^https?:/i.test(token.href || "")
          ? '<a class="md-img" href="' + escHtml(token.href) + '" title="image not loaded: ' + escHtml(token.href) + '">' + label + "</a>"
          : label;
      },
    },
  }) : null;
  if (mdReady) {
    window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      }
    });
  }
  const PURIFY = {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["img", "picture", "video", "audio", "source", "style", "form", "input", "button", "textarea", "select", "option", "iframe", "svg", "math"],
    FORBID_ATTR: ["style", "id", "name"],
    RETURN_DOM_FRAGMENT: true,
  };

  function renderMarkdown(node, text) {
    const t = String(text);
    if (node._md === t) return;
    node._md = t;
    if (!mdReady) { node.textContent = t; return; }
    let frag;
    try {
      frag = window.DOMPurify.sanitize(md.parse(t), PURIFY);
    } catch (e) {
      node.textContent = t;
      return;
    }
    node.replaceChildren(frag);
    node.classList.add("md");
  }

  /** A message's time: the hour today, the date and hour before, in the page's locale. */
  function fmtDateTime(tsMs) {
    const d = new Date(Number(tsMs));
    if (!Number.isFinite(d.getTime())) return "";
    const loc = window.HA.locale();
    const time = d.toLocaleTimeString(loc, { hour: "2-digit", minute: "2-digit" });
    return d.toDateString() === new Date().toDateString() ? time
      : d.toLocaleDateString(loc, { year: "numeric", month: "short", day: "numeric" }) + " " + time;
  }

  /** Who a message is from: "you" for this page's channel, else the source itself. */
  function whoLabel(role, source) {
    if (role === "error") return tx("chat.error");
    if (role !== "user") return tx("chat.agent");
    return !source || source === CHAT_CHANNEL ? tx("chat.you") : trOr("channel." + source, String(source));
  }
  /** The catalog key of a `whoLabel`, or null when it is a channel's own name (data). */
  function whoKey(role, source) {
    if (role === "error") return "chat.error";
    if (role !== "user") return "chat.agent";
    if (!source || source === CHAT_CHANNEL) return "chat.you";
    return tx("channel." + source) !== "channel." + source ? "channel." + source : null;
  }

  // opts: {source, ts, id, markdown, level}
  function buildMessage(role, text, opts) {
    const o = opts || {};
    const li = el("li", "msg");
    li.dataset.role = role;
    if (o.source) li.dataset.source = String(o.source);
    if (o.id !== undefined) li.dataset.historyId = String(o.id);
    const head = el("div", "msg-head");
    const who = el("span", "msg-who", whoLabel(role, o.source));
    const wk = whoKey(role, o.source);
    if (wk) who.dataset.i18n = wk; else who.classList.add("data");
    // An interrupt (a timer reminder, an urgent message) says so beside its source.
    if (o.level) who.append(" ", el("span", "badge msg-interrupt", tx("chat.interrupt", { level: o.level })));
    if (role === "user" && o.source && o.source !== CHAT_CHANNEL) {
      who.classList.add("msg-foreign");
      who.title = tx("chat.sent_from", { source: o.source });
    }
    const time = el("time", "msg-time", fmtDateTime(o.ts || Date.now()));
    time.dateTime = new Date(Number(o.ts || Date.now())).toISOString();
    head.append(who, time);
    const textEl = el("div", "msg-text");
    if (o.markdown) renderMarkdown(textEl, text);
    else textEl.textContent = String(text);
    const extraEl = el("div", "msg-extra");
    const metaEl = el("div", "msg-meta");
    li._raw = String(text);
    li.append(head, textEl, extraEl, metaEl, messageActions(li));
    li._parts = { textEl, extraEl, metaEl, who };
    return li;
  }

  // Copy any message; edit one of yours (back into the box, to change and send);
  // ask an answer again (its question is sent anew, past the duplicate guard).
  function messageActions(li) {
    const bar = el("div", "msg-actions");
    const act = (label, fn) => {
      const b = el("button", "link msg-act", tx(label));
      b.dataset.i18n = label;
      b.type = "button";
      b.dataset.act = label.split(".").pop();
      b.addEventListener("click", () => fn(b));
      bar.append(b);
    };
    act("chat.copy", async (b) => {
      // The clipboard API may wait on a permission that never comes (a headless or
      // locked-down browser): a selection copy is the fallback.
      const viaApi = navigator.clipboard
        ? Promise.race([navigator.clipboard.writeText(li._raw || ""), new Promise((_, no) => setTimeout(no, 800))])
        : Promise.reject(new Error("no clipboard API"));
      try { await viaApi; } catch (_) {
        const r = document.createRange();
        r.selectNodeContents(li._parts.textEl);
        const sel = getSelection(); sel.removeAllRanges(); sel.addRange(r);
        document.execCommand("copy");
        sel.removeAllRanges();
      }
      b.textContent = tx("chat.copied");
      setTimeout(() => { b.textContent = tx("chat.copy"); }, 1500);
    });
    act("chat.edit", () => {
      chatInput.value = li._raw || "";
      chatInput.focus();
      chatInput.setSelectionRange(chatInput.value.length, chatInput.value.length);
    });
    act("chat.regenerate", () => {
      let q = li.previousElementSibling;
      while (q && q.dataset.role !== "user") q = q.previousElementSibling;
      if (q && q._raw) sendChat({ text: q._raw, again: true });
    });
    return bar;
  }

  function chatMessage(role, text, opts) {
    const stick = chatNearBottom();
    const li = buildMessage(role, text, opts);
    chatLog.append(li);
    chatScroll(stick);
    return li;
  }

  // ---- approvals: a risky call waits for the owner's yes (firewall::approval)

  const API_APPROVALS = "/api/v1/approvals";
  /** question id -> its card */
  const approvalCards = new Map();

  function approvalCard(q) {
    if (!q || approvalCards.has(q.id)) return;
    const stick = chatNearBottom();
    const li = el("li", "msg approval");
    li.dataset.role = "approval";
    li.dataset.approvalId = String(q.id);
    li.setAttribute("role", "group");
    const head = el("div", "msg-head");
    head.append(el("span", "approval-title", tx("approval.title", { tool: q.tool })));
    const time = el("time", "msg-time", fmtDateTime(q.at_ms || Date.now()));
    head.append(time);
    const args = el("pre", "approval-args", q.summary || "");
    const why = el("div", "approval-why", tx("approval.why", { why: q.why || "" }));
    const actions = el("div", "approval-actions");
    const allow = elT("button", "btn primary", "approval.allow");
    const deny = elT("button", "btn danger", "approval.deny");
    allow.type = deny.type = "button";
    const status = el("span", "approval-status");
    status.setAttribute("role", "status");
    actions.append(allow, deny, status);
    li.append(head, why, args, actions);
    const send = async (yes) => {
      allow.disabled = deny.disabled = true;
      try {
        const res = await fetch(API_APPROVALS + "/" + encodeURIComponent(q.id), {
          method: "POST",
          headers: { "Content-Type": "application/json", "Accept": "application/json" },
          body: JSON.stringify({ allow: yes }),
        });
        if (!res.ok) {
          let msg = res.statusText;
          try { msg = (await res.json()).error || msg; } catch (_) { /* not JSON */ }
          throw new Error(msg);
        }
        settleApproval(li, yes ? "allowed" : "denied");
      } catch (e) {
        allow.disabled = deny.disabled = false;
        status.textContent = tx("approval.failed", { e: e && e.message ? e.message : e });
      }
    };
    allow.addEventListener("click", () => send(true));
    deny.addEventListener("click", () => send(false));
    approvalCards.set(q.id, li);
    chatLog.append(li);
    chatScroll(stick);
  }

  function settleApproval(li, how) {
    li.dataset.settled = how;
    li.querySelectorAll(".approval-actions button").forEach((b) => b.remove());
    const status = li.querySelector(".approval-status");
    if (status) status.textContent = tx("approval." + how);
  }

  function approvalResolved(d) {
    const li = approvalCards.get(d.id);
    if (!li || li.dataset.settled) return;
    settleApproval(li, d.by === "timeout" ? "timeout" : d.allowed ? "allowed" : "denied");
  }

  /** The questions already waiting when the page opens (or the stream comes back). */
  async function loadApprovals() {
    try {
      const res = await fetch(API_APPROVALS, { cache: "no-store", headers: { "Accept": "application/json" } });
      if (!res.ok) return;
      const body = await res.json();
      (body.approvals || []).forEach(approvalCard);
    } catch (_) { /* the stream will bring new ones */ }
  }

  // ---- inputs that wait out an outage, and those that failed for good (issue 30)

  const API_DEAD = "/api/v1/inbox/dead";
  /** dead input id -> its card */
  const deadCards = new Map();

  /** A turn waits for an LLM source: say so where the chat's status is. */
  function chatOnWaiting(d) {
    const text = tx("chat.waiting", {
      attempt: d.attempt,
      s: Math.max(1, Math.round(num(d.retry_in_ms) / 1000)),
      error: d.error || "",
    });
    chatStatus.textContent = text;
    chatStatus.title = d.error || "";
    chatStatus.dataset.waiting = "1";
    setTimeout(() => { if (chatStatus.textContent === text) clearWaiting(); }, num(d.retry_in_ms) + 1500);
  }

  function clearWaiting() {
    if (!chatStatus.dataset.waiting) return;
    delete chatStatus.dataset.waiting;
    chatStatus.textContent = "";
    chatStatus.title = "";
  }

  /** One acknowledged input that was not answered: what it was, why, Retry / Discard. */
  function deadCard(d) {
    if (!d || deadCards.has(d.id)) return;
    const stick = chatNearBottom();
    const li = el("li", "msg approval dead");
    li.dataset.role = "dead";
    li.dataset.deadId = String(d.id);
    li.setAttribute("role", "group");
    const head = el("div", "msg-head");
    head.append(el("span", "approval-title", tx("dead.title", { source: d.source || "" })));
    head.append(el("time", "msg-time", fmtDateTime(num(d.accepted_at_ms) || Date.now())));
    const text = el("pre", "approval-args", d.text || "");
    const why = el("div", "approval-why", tx("dead.why", { error: d.error || "" }));
    const actions = el("div", "approval-actions");
    const retry = elT("button", "btn primary", "dead.retry");
    const discard = elT("button", "btn", "dead.discard");
    retry.type = discard.type = "button";
    const status = el("span", "approval-status");
    status.setAttribute("role", "status");
    actions.append(retry, discard, status);
    li.append(head, why, text, actions);
    const act = async (again) => {
      retry.disabled = discard.disabled = true;
      try {
        const url = API_DEAD + "/" + encodeURIComponent(d.id) + (again ? "/retry" : "");
        const res = await fetch(url, { method: again ? "POST" : "DELETE", headers: { "Accept": "application/json" } });
        if (!res.ok && res.status !== 404) {
          let msg = res.statusText;
          try { msg = (await res.json()).error || msg; } catch (_) { /* not JSON */ }
          throw new Error(msg);
        }
        li.dataset.settled = again ? "retried" : "discarded";
        actions.querySelectorAll("button").forEach((b) => b.remove());
        status.textContent = tx(again ? "dead.retried" : "dead.discarded");
      } catch (e) {
        retry.disabled = discard.disabled = false;
        status.textContent = tx("approval.failed", { e: e && e.message ? e.message : e });
      }
    };
    retry.addEventListener("click", () => act(true));
    discard.addEventListener("click", () => act(false));
    deadCards.set(d.id, li);
    chatLog.append(li);
    chatScroll(stick);
  }

  /** A budget limit reached (told once per limit and period): which, and where to change it. */
  function budgetCard(d) {
    if (!d || !d.message) return;
    const stick = chatNearBottom();
    const li = el("li", "msg approval budget");
    li.dataset.role = "budget";
    li.setAttribute("role", "status");
    const head = el("div", "msg-head");
    head.append(elT("span", "approval-title", "budget.title"));
    head.append(el("time", "msg-time", fmtDateTime(Date.now())));
    const link = elT("a", null, "budget.open_usage");
    link.href = "#/usage";
    li.append(head, el("div", "approval-why", d.message), el("div", "approval-actions", null));
    li.lastChild.append(link);
    chatLog.append(li);
    chatScroll(stick);
  }

  /** The dead-letter list, oldest first, as cards (on open, and after a failed turn). */
  async function loadDead() {
    try {
      const res = await fetch(API_DEAD, { cache: "no-store", headers: { "Accept": "application/json" } });
      if (!res.ok) return;
      const body = await res.json();
      (body.dead || []).slice().reverse().forEach(deadCard);
    } catch (_) { /* shown next time */ }
  }

  // ---- tool-call cards

  function capText(t) {
    const s = String(t);
    return s.length > TOOL_TEXT_CAP ? s.slice(0, TOOL_TEXT_CAP) + "\n… (" + (s.length - TOOL_TEXT_CAP) + " more characters)" : s;
  }

  // One card per call, collapsed: name, status (denied calls stand out), duration;
  // opened: the arguments and the result (as text, never as HTML).
  function toolCard(t) {
    const d = el("details", "tool-card");
    const status = String(t.status || "").replace(/[^a-z0-9_-]/gi, "") || "unknown";
    d.dataset.status = status;
    d.dataset.tool = t.name;
    const sum = el("summary", "tool-summary");
    sum.append(el("span", "tool-icon", status === "denied" ? "⛔" : status === "ok" ? "⚙" : "⚠"),
      el("code", "tool-name", t.name), el("span", "badge tool-status b-tool-" + status, trOr("tool." + status, status)));
    if (Number.isFinite(t.durationMs) && t.durationMs >= 0) {
      const dur = el("span", "tool-duration", fmtMs(t.durationMs));
      dur.title = tx("tool.duration_title");
      sum.append(dur);
    }
    let args;
    try { args = typeof t.arguments === "string" ? t.arguments : JSON.stringify(t.arguments, null, 2); } catch (_) { args = String(t.arguments); }
    d.append(sum,
      elT("div", "tool-label", "tool.arguments"), el("pre", "tool-args", capText(args === undefined ? "" : args)),
      el("div", "tool-label", tx(status === "denied" ? "tool.refused" : "tool.result")), el("pre", "tool-result", capText(t.result || "")));
    return d;
  }

  function updateStopButton() {
    chatStop.disabled = pendingChats.length === 0 && runningTasks.size === 0;
  }

  function renderPending(p) {
    const stick = chatNearBottom();
    const { textEl, extraEl } = p.li._parts;
    setText(textEl, p.content);
    p.li.classList.toggle("thinking", !p.content);
    renderExtra(p, extraEl);
    chatScroll(stick);
  }

  function renderExtra(p, extraEl) {
    if (p.taskId !== null) p.tools = toolsByTask.get(p.taskId) || [];
    const extra = [];
    if (p.reasoning) {
      const r = el("details", "msg-reasoning");
      r.append(elT("summary", null, "chat.reasoning"), el("div", "msg-reasoning-text", p.reasoning));
      extra.push(r);
    }
    for (const t of p.tools) {
      if (!t.card) t.card = toolCard(t);
      extra.push(t.card);
    }
    extraEl.replaceChildren(...extra);
  }

  // The reply to a synchronous POST carries its task id only at the end, so a
  // streaming chunk on our channel belongs to the pending request already bound
  // to its task, else to the oldest pending request not yet bound to a task.
  function pendingFor(taskId, bind) {
    let p = pendingChats.find((x) => x.taskId !== null && x.taskId === taskId);
    if (!p && bind) {
      p = pendingChats.find((x) => x.taskId === null);
      if (p) p.taskId = taskId;
    }
    return p || null;
  }

  function chatOnDelta(d) {
    if (d.channel !== CHAT_CHANNEL || !pendingChats.length) return;
    const p = pendingFor(d.task_id, true);
    if (!p) return;
    if (d.reset) {
      p.content = "";
      p.reasoning = "";
    } else {
      if (typeof d.content === "string") p.content += d.content;
      if (typeof d.reasoning === "string") p.reasoning += d.reasoning;
    }
    renderPending(p);
  }

  /** task id -> ts_ms of the model answer that asked for the current tool batch */
  const toolBatchAt = new Map();

  /** task id -> its tool calls so far. A `tool_call` event names no channel, and a
   *  turn that calls a tool first streams nothing before it, so calls are kept by
   *  task until the request is bound to its task (by a delta or by the reply). */
  const toolsByTask = new Map();
  const TOOL_TASKS_KEPT = 64;

  // A model answer that asks for tools starts the clock of that batch.
  function chatOnLlmChain(d) {
    if (Array.isArray(d.tool_calls) && d.tool_calls.length) {
      toolBatchAt.set(d.task_id, num(d.ts_ms));
      if (toolBatchAt.size > TOOL_TASKS_KEPT) toolBatchAt.delete(toolBatchAt.keys().next().value);
    }
  }

  function tasksTools(taskId) {
    let list = toolsByTask.get(taskId);
    if (!list) {
      list = [];
      toolsByTask.set(taskId, list);
      if (toolsByTask.size > TOOL_TASKS_KEPT) toolsByTask.delete(toolsByTask.keys().next().value);
    }
    return list;
  }

  function chatOnToolCall(d) {
    const started = toolBatchAt.get(d.task_id);
    tasksTools(d.task_id).push({
      name: String(d.name || "?"),
      status: String(d.status || ""),
      arguments: d.arguments,
      result: typeof d.result === "string" ? d.result : JSON.stringify(d.result),
      durationMs: started && num(d.ts_ms) ? num(d.ts_ms) - started : NaN,
    });
    const p = pendingFor(d.task_id, false);
    if (p) renderPending(p);
  }

  function chatOnTask(d) {
    const id = d.task_id;
    if (d.state === "running" || d.state === "resumed") runningTasks.add(id);
    else if (d.state !== "queued") runningTasks.delete(id); // done, cancelled, failed, suspended
    updateStopButton();
  }

  function finishChat(p, role, text, meta) {
    const i = pendingChats.indexOf(p);
    if (i >= 0) pendingChats.splice(i, 1);
    const stick = chatNearBottom();
    const { textEl, extraEl, metaEl } = p.li._parts;
    p.li.dataset.role = role;
    delete p.li.dataset.pending;
    p.li.classList.remove("thinking");
    p.li._parts.who.textContent = tx(role === "error" ? "chat.error" : "chat.agent");
    p.li._parts.who.dataset.i18n = role === "error" ? "chat.error" : "chat.agent";
    p.li._raw = String(text);
    if (role === "assistant") renderMarkdown(textEl, text);
    else setText(textEl, text);
    // The tool cards (and the reasoning) stay with the reply, collapsed.
    renderExtra(p, extraEl);
    setText(metaEl, meta || "");
    chatScroll(stick);
    updateStopButton();
  }

  function replyMeta(body) {
    const parts = [];
    if (body && body.task_id !== undefined && body.task_id !== null) parts.push(tx("chat.task", { id: body.task_id }));
    if (body && Array.isArray(body.tools_used) && body.tools_used.length) parts.push(tx("chat.tools", { list: body.tools_used.join(", ") }));
    const u = body && body.usage;
    if (u && typeof u === "object" && Number.isFinite(Number(u.total_tokens)) && Number(u.total_tokens) > 0) {
      parts.push(tx("chat.tokens", { n: u.total_tokens }));
    }
    if (body && Number(body.memory_tokens) > 0) parts.push(tx("chat.memory_tokens", { n: body.memory_tokens }));
    const micros = u && typeof u === "object" ? Number(u.cost_micros) : 0;
    if (Number.isFinite(micros) && micros > 0) {
      const usd = micros / 1e6;
      parts.push(usd < 0.0001 ? "<$0.0001" : "$" + (usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2)));
    }
    if (body && Number(body.elapsed_ms) > 0) {
      const ms = Number(body.elapsed_ms);
      parts.push(ms < 1000 ? tx("chat.ms", { n: Math.round(ms) }) : tx("chat.seconds", { n: (ms / 1000).toFixed(1) }));
    }
    return parts.join(" · ");
  }

  async function sendChat(opts) {
    const again = !!(opts && opts.again);
    const text = opts && typeof opts.text === "string" ? opts.text : chatInput.value;
    if (!text.trim()) {
      chatInput.focus();
      return;
    }
    if (!again) chatInput.value = "";
    // Viewing an earlier conversation: the new message belongs to now.
    if (chatLog.dataset.viewing) backToNow();
    // Images pasted, dropped or picked (static/media.js) go as a multipart form.
    const files = !again && window.HA && window.HA.media ? window.HA.media.take() : [];
    const userLi = chatMessage("user", text);
    if (files.length) window.HA.media.showIn(userLi, files);
    const li = chatMessage("assistant", "");
    li.dataset.pending = "1";
    li.classList.add("thinking");
    const p = { li, taskId: null, content: "", reasoning: "", tools: [] };
    pendingChats.push(p);
    updateStopButton();
    chatStatus.textContent = "";
    try {
      let init = {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        cache: "no-store",
        body: JSON.stringify({ text, source: CHAT_CHANNEL, channel: CHAT_CHANNEL, sync: true, again }),
      };
      if (files.length) {
        const form = new FormData();
        form.append("text", text);
        form.append("source", CHAT_CHANNEL);
        form.append("channel", CHAT_CHANNEL);
        form.append("sync", "true");
        for (const f of files) form.append("attachment", f, f.name || "image");
        init = { method: "POST", headers: { "Accept": "application/json" }, cache: "no-store", body: form };
      }
      const sentAt = performance.now();
      const res = await fetch(API_MESSAGES, init);
      const raw = await res.text();
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch (_) { body = null; }
      if (body && body.task_id !== undefined) {
        // Chunks wrongly bound to this task belong to this request, not another.
        for (const o of pendingChats) {
          if (o !== p && o.taskId === body.task_id) {
            o.taskId = null; o.content = ""; o.reasoning = ""; o.tools = [];
            renderPending(o);
          }
        }
      }
      if (body && body.task_id !== undefined && body.task_id !== null) p.taskId = body.task_id;
      if (res.ok && body && typeof body.reply === "string") {
        // The time is what the owner waited: from sending to the whole answer.
        finishChat(p, "assistant", body.reply, replyMeta({ ...body, elapsed_ms: performance.now() - sentAt }));
      } else if (body && typeof body.error === "string") {
        if (res.status === 503) checkSetup();
        finishChat(p, "error", body.error, "HTTP " + res.status + (body.task_id !== undefined ? " · " + tx("chat.task", { id: body.task_id }) : ""));
      } else {
        finishChat(p, "error", raw || res.statusText || tx("app.request_failed"), "HTTP " + res.status);
      }
    } catch (e) {
      finishChat(p, "error", tx("app.network_error", { e: e && e.message ? e.message : e }), "");
    }
  }

  async function stopChat() {
    chatStop.disabled = true;
    chatStatus.textContent = tx("chat.stopping");
    try {
      const res = await fetch(API_STOP, { method: "POST", headers: { "Accept": "application/json" }, cache: "no-store" });
      const raw = await res.text();
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch (_) { body = null; }
      if (res.ok) {
        const sent = tx("chat.stop_sent");
        chatStatus.textContent = sent;
        setTimeout(() => { if (chatStatus.textContent === sent) chatStatus.textContent = ""; }, 4000);
      }
      else chatStatus.textContent = tx("chat.stop_failed", { e: "HTTP " + res.status + ": " + (body && typeof body.error === "string" ? body.error : raw) });
    } catch (e) {
      chatStatus.textContent = tx("chat.stop_failed", { e: e && e.message ? e.message : e });
    } finally {
      updateStopButton();
    }
  }

  chatForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sendChat();
  });
  chatInput.addEventListener("keydown", (ev) => {
    // Enter sends; Shift+Enter inserts a new line; Enter while an IME is
    // composing (e.g. Chinese input) only confirms the composition.
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing && ev.keyCode !== 229) {
      ev.preventDefault();
      sendChat();
    }
  });
  chatStop.addEventListener("click", stopChat);

  // ---- history

  // The conversation of every channel, from the text log (it survives reloads and
  // restarts): the newest page on open, older pages when scrolled to the top (or
  // with the "older messages" button, for the keyboard).
  const chatMore = $("#chat-more");
  let historyBefore = null;   // `before` of the next older page; null: the start is shown
  let historyLoading = false;
  let historyMaxId = -1;      // newest history item shown

  function historyElements(items) {
    const out = [];
    for (const it of items) {
      if (!it || typeof it.text !== "string") continue;
      const role = it.role === "assistant" ? "assistant" : "user";
      const li = buildMessage(role, it.text, { source: it.source, ts: it.ts_ms, id: it.id, markdown: role === "assistant", level: it.level });
      li.classList.add("from-history");
      const meta = [];
      if (Array.isArray(it.tools_used) && it.tools_used.length) meta.push("tools: " + it.tools_used.join(", "));
      if (it.imported) meta.push("imported");
      setText(li._parts.metaEl, meta.join(" · "));
      if (role === "user" && Array.isArray(it.media) && window.HA && window.HA.media) window.HA.media.showBlocks(li, it.media);
      out.push(li);
    }
    return out;
  }

  async function getJson(url) {
    const res = await fetch(url, { cache: "no-store", headers: { "Accept": "application/json" } });
    const raw = await res.text();
    let body = null;
    try { body = raw ? JSON.parse(raw) : null; } catch (_) { body = null; }
    if (!res.ok) throw new Error("HTTP " + res.status + ": " + (body && typeof body.error === "string" ? body.error : raw.slice(0, 200)));
    if (!body || typeof body !== "object") throw new Error("GET " + url + ": not JSON");
    return body;
  }

  async function loadHistory(initial) {
    if (historyLoading || (!initial && historyBefore === null)) return;
    historyLoading = true;
    chatMore.disabled = true;
    try {
      const body = await getJson(API_HISTORY + "?limit=" + HISTORY_PAGE + (initial ? "" : "&before=" + historyBefore));
      const items = Array.isArray(body.items) ? body.items : [];
      const prevHeight = chatLog.scrollHeight;
      const prevTop = chatLog.scrollTop;
      chatLog.prepend(...historyElements(items));
      if (initial) {
        for (const it of items) historyMaxId = Math.max(historyMaxId, num(it.id));
        chatLog.scrollTop = chatLog.scrollHeight;
      } else {
        chatLog.scrollTop = prevTop + (chatLog.scrollHeight - prevHeight); // keep the view still
      }
      historyBefore = Number.isFinite(body.next_before) ? body.next_before : null;
      chatMore.hidden = historyBefore === null;
      chatLog.dataset.historyLoaded = "1";
    } catch (e) {
      chatStatus.textContent = "could not load the history: " + (e && e.message ? e.message : e);
    } finally {
      historyLoading = false;
      chatMore.disabled = false;
    }
  }

  // Another channel's turn finished (CLI, a plugin...): show its input and reply.
  // Turns of this page's own channel are already on screen and are skipped.
  let syncTimer = null;
  function chatOnOutput(d) {
    // The turn ended: it no longer waits. A failed turn of a stored input lands on the
    // dead-letter list a moment later.
    clearWaiting();
    if (d.error) setTimeout(loadDead, 500);
    if (d.channel === CHAT_CHANNEL || d.error || !chatLog.dataset.historyLoaded || syncTimer) return;
    // The text log is written as the turn ends: give its actor a moment.
    syncTimer = setTimeout(() => { syncTimer = null; syncNewest(); }, 400);
  }

  async function syncNewest() {
    let body;
    try { body = await getJson(API_HISTORY + "?limit=" + HISTORY_PAGE); } catch (_) { return; }
    const items = (Array.isArray(body.items) ? body.items : []).filter((it) => num(it.id) > historyMaxId);
    if (!items.length) return;
    const own = new Set(items.filter((it) => it.role === "user" && it.source === CHAT_CHANNEL).map((it) => Math.floor(num(it.id) / 2)));
    for (const it of items) historyMaxId = Math.max(historyMaxId, num(it.id));
    const fresh = items.filter((it) => !own.has(Math.floor(num(it.id) / 2)));
    if (!fresh.length) return;
    const stick = chatNearBottom();
    chatLog.append(...historyElements(fresh));
    chatScroll(stick);
  }

  chatLog.addEventListener("scroll", () => {
    if (chatLog.scrollTop < 40 && historyBefore !== null) loadHistory(false);
  });
  chatMore.addEventListener("click", () => loadHistory(false));
  loadHistory(true);

  /** A JSON request: `{ok, body, error}` (the daemon's error text, or why it failed). */
  async function sendJson(method, path, body) {
    try {
      const res = await fetch(path, { method, cache: "no-store", headers: { "Content-Type": "application/json", "Accept": "application/json" }, body: JSON.stringify(body) });
      let b = null;
      try { b = await res.json(); } catch (_) { b = null; }
      return { ok: res.ok, body: b, error: b && typeof b.error === "string" ? b.error : "HTTP " + res.status };
    } catch (e) {
      return { ok: false, body: null, error: tx("app.network_error", { e: e && e.message ? e.message : e }) };
    }
  }

  // ---------------------------------------------------------------- conversations
  //
  // History: the conversations (a channel's turns of a day, newest first) and a search
  // over every turn; picking one shows it in the log, read-only, until "Back to now".
  // New chat: the context window becomes a document (POST /api/v1/chat/new) — the next
  // prompt's timeline starts empty while recall still finds every word.

  const chatSide = $("#chat-side");
  const chatFound = $("#chat-found");
  const chatQ = $("#chat-q");
  const chatViewing = $("#chat-viewing");
  const historyBtn = $("#chat-history");

  function listItem(label, sub, onPick) {
    const li = el("li");
    const b = el("button", "chat-pick");
    b.type = "button";
    b.append(el("span", "chat-pick-title", label), el("span", "chat-pick-sub muted", sub));
    b.addEventListener("click", onPick);
    li.append(b);
    return li;
  }

  async function showConversations() {
    let body;
    try { body = await getJson("/api/v1/chat/conversations"); } catch (e) { chatFound.replaceChildren(el("li", "muted", String(e && e.message ? e.message : e))); return; }
    const list = Array.isArray(body.conversations) ? body.conversations : [];
    if (!list.length) { chatFound.replaceChildren(elT("li", "muted", "chat.no_history")); return; }
    chatFound.replaceChildren(...list.map((c) => listItem(
      c.day + " · " + whoLabel("user", c.source) + " · " + tx("chat.turns", { n: c.turns }),
      c.first,
      () => viewRange(c.to, Math.min(500, c.to - c.from), c.day + " · " + whoLabel("user", c.source)),
    )));
  }

  async function searchHistory(q) {
    let body;
    try { body = await getJson(API_HISTORY + "?limit=100&q=" + encodeURIComponent(q)); } catch (_) { return; }
    const items = (Array.isArray(body.items) ? body.items : []).slice().reverse();
    if (!items.length) { chatFound.replaceChildren(el("li", "muted", tx("chat.no_match", { q }))); return; }
    chatFound.replaceChildren(...items.map((it) => listItem(
      fmtDateTime(it.ts_ms) + " · " + whoLabel(it.role === "assistant" ? "assistant" : "user", it.source),
      String(it.text).slice(0, 160),
      () => viewRange(Number(it.id) + 11, 20, tx("chat.around", { q })),
    )));
  }

  async function viewRange(before, limit, label) {
    let body;
    try { body = await getJson(API_HISTORY + "?before=" + before + "&limit=" + Math.max(1, limit)); } catch (e) { chatStatus.textContent = String(e && e.message ? e.message : e); return; }
    chatLog.replaceChildren(...historyElements(Array.isArray(body.items) ? body.items : []));
    chatLog.dataset.viewing = "1";
    chatMore.hidden = true;
    chatViewing.firstElementChild.textContent = tx("chat.viewing", { what: label });
    chatViewing.hidden = false;
    chatLog.scrollTop = chatLog.scrollHeight;
  }

  function backToNow() {
    chatViewing.hidden = true;
    delete chatLog.dataset.viewing;
    chatLog.replaceChildren();
    historyBefore = null;
    loadHistory(true);
  }
  chatViewing.querySelector("button").addEventListener("click", backToNow);

  historyBtn.addEventListener("click", () => {
    const open = chatSide.hidden;
    chatSide.hidden = !open;
    historyBtn.setAttribute("aria-expanded", String(open));
    if (open) { chatQ.value = ""; showConversations(); chatQ.focus(); }
  });
  let searchTimer = null;
  chatQ.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => (chatQ.value.trim() ? searchHistory(chatQ.value.trim()) : showConversations()), 250);
  });
  $("#chat-search").addEventListener("submit", (ev) => { ev.preventDefault(); if (chatQ.value.trim()) searchHistory(chatQ.value.trim()); });

  $("#chat-new").addEventListener("click", async () => {
    const btn = $("#chat-new");
    btn.disabled = true;
    try {
      const r = await sendJson("POST", "/api/v1/chat/new", {});
      if (!r.ok) { chatStatus.textContent = r.error; return; }
      if (chatLog.dataset.viewing) { chatViewing.hidden = true; delete chatLog.dataset.viewing; }
      chatLog.replaceChildren(elT("li", "chat-divider", "chat.new_started"));
      chatMore.hidden = true;
      chatInput.focus();
    } finally { btn.disabled = false; }
  });

  // ---------------------------------------------------------------- theme, keys
  //
  // The header's switch cycles follow-the-system → light → dark; the choice stays in
  // this browser (localStorage), nothing is stored on the daemon.

  const THEMES = ["auto", "light", "dark"];
  const themeBtn = document.getElementById("theme");
  const systemDark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  // The stylesheet has one dark block, keyed on data-theme: "auto" resolves here.
  function applyTheme(t) {
    const dark = t === "dark" || (t === "auto" && systemDark && systemDark.matches);
    document.documentElement.dataset.theme = dark ? "dark" : "light";
    document.documentElement.dataset.themeChoice = t;
    if (themeBtn) themeBtn.textContent = tx("theme." + t);
  }
  if (systemDark) systemDark.addEventListener("change", () => applyTheme(theme));
  let theme = "auto";
  try { theme = THEMES.includes(localStorage.getItem("ha-theme")) ? localStorage.getItem("ha-theme") : "auto"; } catch (_) { /* private mode */ }
  applyTheme(theme);
  if (themeBtn) {
    themeBtn.addEventListener("click", () => {
      theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
      try { localStorage.setItem("ha-theme", theme); } catch (_) { /* private mode */ }
      applyTheme(theme);
    });
    document.addEventListener("ha:lang", () => applyTheme(theme));
  }
  // The header's language switch: the page redraws at once (HA.setLang), and the
  // daemon's `core.agent.language` follows, so the agent answers in it too.
  // What the scripts wrote with values (the connection, the counts, state words in
  // the tables) is written again in the new language; plain labels carry data-i18n.
  logEl.dataset.empty = tx("dash.no_events");
  document.addEventListener("ha:lang", () => {
    logEl.dataset.empty = tx("dash.no_events");
    for (const li of logEl.children) {
      if (li._ev) li.querySelector(".ev-text").replaceChildren(...eventSentence(li._ev.type, li._delta ? Object.assign({ chunks: li._delta.chunks }, li._delta.view()) : li._ev.rest));
    }
    setMode(mode, connEl.dataset.detail || "");
    for (const tm of document.querySelectorAll("time.msg-time")) {
      if (tm.dateTime) tm.textContent = fmtDateTime(Date.parse(tm.dateTime));
    }
    if (lastSummary) renderSummary(lastSummary);
    if (lastActorsData) applySnapshot(lastActorsData);
    for (const [, tr] of pluginRows) if (tr._last) updatePluginRow(tr, tr._last);
    refreshPlugins();
  });
  const langBtn = document.getElementById("lang");
  if (langBtn) {
    langBtn.addEventListener("click", async () => {
      const next = window.HA.lang() === "zh" ? "en" : "zh";
      const before = window.HA.lang();
      window.HA.setLang(next);
      const r = await sendJson("PUT", "/api/v1/settings", { "core.agent.language": next });
      if (!r.ok) {
        window.HA.setLang(before);
        const said = tx("lang.failed", { error: r.error });
        bannerEl.textContent = said;
        bannerEl.hidden = false;
        setTimeout(() => { if (bannerEl.textContent === said) bannerEl.hidden = true; }, 8000);
      }
    });
  }

  // Keys: Esc stops the answer being written (as the Stop button does); "/" goes to
  // the message box; "g" then a view's letter opens it; "?" lists them all. Letters
  // act only when no field has the keyboard, so typing is never taken.
  const keysDialog = document.getElementById("keys");
  const GO = { c: "", d: "dashboard", s: "settings", p: "plugins", m: "memory", t: "tasks", u: "usage", x: "terminals" };
  let pendingG = 0;
  function openKeys() { if (keysDialog && !keysDialog.open) keysDialog.showModal(); }
  const keysBtn = document.getElementById("keys-open");
  if (keysBtn) keysBtn.addEventListener("click", openKeys);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !ev.defaultPrevented && !chatStop.disabled && document.body.dataset.view === "chat") {
      ev.preventDefault();
      stopChat();
      return;
    }
    const t = ev.target;
    const typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.closest && t.closest(".xterm"));
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) return;
    if (pendingG && Date.now() - pendingG < 1500 && Object.prototype.hasOwnProperty.call(GO, ev.key)) {
      pendingG = 0;
      ev.preventDefault();
      location.hash = "#/" + GO[ev.key];
      return;
    }
    pendingG = 0;
    if (ev.key === "g") pendingG = Date.now();
    else if (ev.key === "?") { ev.preventDefault(); openKeys(); }
    else if (ev.key === "/" && document.body.dataset.view === "chat") { ev.preventDefault(); chatInput.focus(); }
  });

  // ---------------------------------------------------------------- first run
  //
  // With no usable model the chat opens a setup card: pick a provider (the bundled
  // adapters' presets; a local Ollama with the models it has), paste a key, Connect.
  // Connect saves the source (PUT /api/v1/settings) and asks it one real question
  // (POST /api/v1/llm/sources/<name>/test); the card goes once that answered.

  let setupEl = null;

  async function checkSetup() {
    let p;
    try { p = await getJson("/api/v1/llm/presets"); } catch (_) { return; }
    if (p.configured) { if (setupEl) { setupEl.remove(); setupEl = null; } return; }
    if (setupEl) return;
    setupEl = setupCard(p);
    chatLog.before(setupEl);
  }

  function setupCard(p) {
    const box = el("section", "setup-card");
    box.id = "setup";
    box.setAttribute("aria-labelledby", "setup-title");
    const h = elT("h3", null, "setup.title");
    h.id = "setup-title";
    box.append(h, elT("p", "muted", "setup.intro"));
    const form = el("form", "setup-form");
    form.noValidate = true;
    const field = (label, input) => {
      const w = el("label", "setup-field");
      w.append(el("span", "field-label", label), input);
      form.append(w);
      return w;
    };
    const provider = el("select");
    provider.id = "setup-provider";
    for (const pr of p.presets || []) {
      const o = el("option", null, pr.label + (pr.adapter === "ollama" ? " — " + (p.ollama_found ? tx("setup.ollama_found", { n: pr.models.length }) : tx("setup.ollama_missing")) : ""));
      o.value = pr.adapter;
      provider.append(o);
    }
    field(tx("setup.provider"), provider);
    const key = el("input");
    key.id = "setup-key";
    key.type = "password";
    key.autocomplete = "off";
    key.spellcheck = false;
    const keyWrap = field(tx("setup.key"), key);
    const keyLink = elT("a", "setup-keylink", "setup.key_get");
    keyLink.target = "_blank";
    keyLink.rel = "noopener noreferrer";
    keyWrap.append(keyLink);
    const model = el("input");
    model.id = "setup-model";
    model.spellcheck = false;
    const models = el("datalist");
    models.id = "setup-models";
    model.setAttribute("list", models.id);
    field(tx("setup.model"), model).append(models);
    const url = el("input");
    url.id = "setup-url";
    url.type = "url";
    url.spellcheck = false;
    const more = el("details", "setup-more");
    more.append(elT("summary", null, "setup.url"));
    const urlWrap = el("label", "setup-field");
    urlWrap.append(elT("span", "field-label sr-only", "setup.url"), url);
    more.append(urlWrap);
    form.append(more);
    const connect = elT("button", "btn primary", "setup.connect");
    connect.type = "submit";
    const status = el("p", "setup-status");
    status.setAttribute("role", "status");
    form.append(connect, status);
    box.append(form);
    const pick = () => {
      const pr = (p.presets || []).find((x) => x.adapter === provider.value) || {};
      keyWrap.hidden = !pr.needs_key;
      keyLink.href = pr.key_url || "#";
      keyLink.hidden = !pr.key_url;
      url.value = pr.base_url || "";
      models.replaceChildren(...(pr.models || []).map((m) => { const o = el("option"); o.value = m; return o; }));
      model.value = (pr.models || [])[0] || "";
      status.textContent = "";
      delete status.dataset.state;
    };
    provider.addEventListener("change", pick);
    for (const i of [key, model, url]) i.addEventListener("input", () => { if (status.dataset.state === "error") { status.textContent = ""; delete status.dataset.state; } });
    pick();
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const pr = (p.presets || []).find((x) => x.adapter === provider.value) || {};
      const say = (state, text) => { status.dataset.state = state; status.textContent = text; };
      if (pr.needs_key && !key.value.trim()) { say("error", tx("setup.key_missing")); key.focus(); return; }
      if (!model.value.trim()) { say("error", tx("setup.model_missing")); model.focus(); return; }
      const name = pr.adapter;
      const prefix = "core.llm.sources." + name + ".";
      const update = { [prefix + "base_url"]: url.value.trim(), [prefix + "model"]: model.value.trim(), [prefix + "adapter"]: pr.adapter };
      if (pr.needs_key) update[prefix + "api_key"] = key.value.trim();
      connect.disabled = true;
      say("pending", tx("setup.connecting"));
      const saved = await sendJson("PUT", "/api/v1/settings", update);
      if (!saved.ok) { connect.disabled = false; say("error", saved.error); return; }
      const test = await sendJson("POST", "/api/v1/llm/sources/" + encodeURIComponent(name) + "/test", {});
      connect.disabled = false;
      if (test.ok && test.body && test.body.ok) {
        key.value = "";
        say("ok", tx("setup.ok", { model: test.body.model, ms: test.body.elapsed_ms }));
        setTimeout(() => { if (setupEl === box) { box.remove(); setupEl = null; } chatInput.focus(); }, 1500);
      } else {
        say("error", tx("setup.failed", { error: test.error || (test.body && test.body.error) || "" }));
      }
    });
    return box;
  }

  checkSetup();

  // ---------------------------------------------------------------- backlog

  // The agent's backlog lives in the scheduler's queues, not in a mailbox: the
  // scheduler's row shows it next to its (near-empty) mailbox depth.
  const SCHEDULER_ID = "kernel/agent/scheduler";
  async function refreshBacklog() {
    const tr = rows.get(SCHEDULER_ID);
    if (!tr || document.body.dataset.view && document.body.dataset.view !== "dashboard") return;
    let s;
    try { s = await getJson("/api/v1/tasks"); } catch (_) { return; }
    const ints = Array.isArray(s.interrupts) ? s.interrupts.reduce((n, q) => n + (Array.isArray(q) ? q.length : 0), 0) : 0;
    // Inputs stored in inbox.db while the ready queue is full are waiting too.
    const n = (Array.isArray(s.ready) ? s.ready.length : 0) + ints + (s.immediate ? 1 : 0) + (Number(s.stored_waiting) || 0);
    const c = tr._cells;
    if (!c.backlog) {
      c.backlog = el("span", "backlog");
      c.backlog.title = tx("tasks.backlog_title");
      c.tdQ.append(c.backlog);
    }
    setText(c.backlog, window.HA ? window.HA.t("tasks.backlog", { n }) : "backlog " + n);
    c.backlog.dataset.backlog = String(n);
    c.backlog.hidden = n === 0 && !s.running;
  }

  // ---------------------------------------------------------------- start

  setInterval(tickCountdowns, 250);
  refreshPlugins();
  setInterval(refreshPlugins, PLUGINS_POLL_MS);
  setInterval(refreshBacklog, PLUGINS_POLL_MS);
  if (typeof window.EventSource === "function") {
    // Initial snapshot right away so the tree does not wait for the first SSE tick.
    refreshOnce().catch(() => { /* SSE will bring it */ });
    connectSse();
  } else {
    startPolling();
  }
})();
