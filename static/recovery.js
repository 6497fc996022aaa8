// The recovery page: what `homed --failback` serves when the normal start failed
// (a damaged database, a refused upgrade, an invalid setting). It reads
// GET /api/v1/recovery and offers the ways back: start again, or restore a backup.
(function () {
  "use strict";
  const HA = window.HA;
  const t = HA.t;
  const $ = (s) => document.querySelector(s);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };

  async function call(method, url) {
    let res;
    try {
      res = await fetch(url, { method, cache: "no-store", headers: { Accept: "application/json" } });
    } catch (e) {
      return { ok: false, error: String(e && e.message ? e.message : e) };
    }
    let body = null;
    try { body = await res.json(); } catch (_) { body = null; }
    return { ok: res.ok, status: res.status, body, error: body && body.error ? body.error : "HTTP " + res.status };
  }

  function size(n) {
    const v = Number(n) || 0;
    return v >= 1048576 ? (v / 1048576).toFixed(1) + " MB" : v >= 1024 ? Math.round(v / 1024) + " KB" : v + " B";
  }

  /** Polls until the daemon answers as a normal daemon again, then opens the page. */
  function waitForRestart() {
    $("#recovery-status").textContent = t("recovery.restarting");
    const tick = async () => {
      const r = await call("GET", "/readyz");
      if (r.ok && r.body && r.body.status === "ready") { location.href = "/"; return; }
      setTimeout(tick, 1500);
    };
    setTimeout(tick, 2000);
  }

  async function render() {
    const r = await call("GET", "/api/v1/recovery");
    if (!r.ok) { $("#recovery-err").textContent = r.error; return; }
    const b = r.body || {};
    if (!b.recovery) { location.href = "/"; return; }
    $("#recovery-error").textContent = b.error || "";
    const list = $("#recovery-backups");
    const items = b.backups || [];
    if (!items.length) { list.replaceChildren(el("li", "muted", t("recovery.none"))); return; }
    list.replaceChildren(...items.map((x) => {
      const li = el("li", "history-item backup-item");
      const line = el("div", "history-line");
      line.append(el("span", null, new Date(x.at_ms).toLocaleString(HA.locale())), " · ", el("span", "muted", size(x.bytes)));
      const btn = el("button", "btn small", t("recovery.restore"));
      btn.type = "button";
      btn.addEventListener("click", async () => {
        btn.disabled = true;
        const res = await call("POST", "/api/v1/recovery/backups/" + encodeURIComponent(x.name) + "/restore");
        if (res.ok) waitForRestart();
        else { btn.disabled = false; $("#recovery-err").textContent = res.error; }
      });
      li.append(line, btn);
      return li;
    }));
  }

  document.addEventListener("DOMContentLoaded", () => {
    HA.setLang(navigator.language || "en");
    HA.applyI18n(document);
    $("#recovery-retry").addEventListener("click", async () => {
      const r = await call("POST", "/api/v1/daemon/restart");
      if (r.ok) waitForRestart();
      else $("#recovery-err").textContent = r.error;
    });
    render();
  });
})();
