// Images in the WebUI: attachments of the chat (the file button, paste, drag and
// drop) and the media blocks of the memory browser. Served by homed at /media.js,
// before app.js, which asks it for the pending images when it sends a message:
//
//   HA.media.take()          -> the pending image Files (and clears the strip)
//   HA.media.showIn(li, fs)  -> thumbnails of Files under a chat message
//   HA.media.renderBrowser() -> fills the memory view's Media panel
//
// Images shown here are either the owner's own files (read locally as data: URLs)
// or the daemon's stored blocks (same-origin /api/v1/memory/media/<id>/data): the CSP
// allows `img-src 'self' data:` only, and no image is ever made from a reply's text.
"use strict";

(function () {
  const TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const MAX_PENDING = 16;
  const t = (k, v) => (window.HA && window.HA.t ? window.HA.t(k, v) : k);
  const $ = (s) => document.querySelector(s);
  /** Files waiting to go with the next message. */
  let pending = [];

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function thumb(file) {
    const img = el("img", "media-thumb");
    img.alt = file.name || file.type;
    const r = new FileReader();
    r.onload = () => { if (typeof r.result === "string" && r.result.startsWith("data:image/")) img.src = r.result; };
    r.readAsDataURL(file);
    return img;
  }

  function renderStrip() {
    const strip = $("#chat-attachments");
    if (!strip) return;
    strip.replaceChildren(...pending.map((f, i) => {
      const item = el("span", "media-pending");
      const rm = el("button", "btn small media-remove", "×");
      rm.type = "button";
      rm.title = t("media.remove");
      rm.addEventListener("click", () => { pending.splice(i, 1); renderStrip(); });
      item.append(thumb(f), rm);
      return item;
    }));
    strip.hidden = pending.length === 0;
  }

  function add(files) {
    const status = $("#chat-status");
    for (const f of files) {
      if (!TYPES.includes(f.type)) {
        if (status) status.textContent = t("media.unsupported", { name: f.name || f.type || "?" });
        continue;
      }
      if (pending.length >= MAX_PENDING) break;
      pending.push(f);
    }
    renderStrip();
  }

  function wireChat() {
    const form = $("#chat-form");
    const input = $("#chat-file");
    const pick = $("#chat-attach");
    if (!form || !input || !pick) return;
    pick.addEventListener("click", () => input.click());
    input.addEventListener("change", () => { add(Array.from(input.files || [])); input.value = ""; });
    form.addEventListener("paste", (ev) => {
      const files = Array.from((ev.clipboardData && ev.clipboardData.files) || []);
      if (files.length) { ev.preventDefault(); add(files); }
    });
    form.addEventListener("dragover", (ev) => { ev.preventDefault(); form.classList.add("drop-target"); });
    form.addEventListener("dragleave", () => form.classList.remove("drop-target"));
    form.addEventListener("drop", (ev) => {
      ev.preventDefault();
      form.classList.remove("drop-target");
      add(Array.from((ev.dataTransfer && ev.dataTransfer.files) || []));
    });
  }

  function take() {
    const out = pending;
    pending = [];
    renderStrip();
    return out;
  }

  function showIn(li, files) {
    if (!li || !files || !files.length) return;
    const row = el("div", "media-row");
    row.append(...files.map(thumb));
    li.append(row);
  }

  /** Thumbnails of stored media blocks (by id) under a chat message of the history. */
  function showBlocks(li, ids) {
    if (!li || !Array.isArray(ids)) return;
    const imgs = [];
    for (const raw of ids) {
      const id = String(raw || "");
      if (!/^blk_media_[0-9a-f]{12}$/.test(id)) continue;
      const img = el("img", "media-thumb");
      img.loading = "lazy";
      img.alt = id;
      img.src = "/api/v1/memory/media/" + id + "/data";
      // A block deleted since: a short note instead of a broken image.
      img.addEventListener("error", () => img.replaceWith(el("span", "muted media-gone", t("media.gone"))));
      imgs.push(img);
    }
    if (!imgs.length) return;
    const row = el("div", "media-row");
    row.append(...imgs);
    li.append(row);
  }

  function fmtBytes(n) {
    return n >= 1048576 ? (n / 1048576).toFixed(1) + " MB" : n >= 1024 ? Math.round(n / 1024) + " KB" : n + " B";
  }

  async function renderBrowser() {
    const box = $("#mem-media");
    if (!box) return;
    let body;
    try {
      const res = await fetch("/api/v1/memory/media?limit=100", { cache: "no-store", headers: { Accept: "application/json" } });
      body = await res.json();
      if (!res.ok) throw new Error(body && body.error ? body.error : "HTTP " + res.status);
    } catch (e) {
      box.replaceChildren(el("p", "field-error", String(e && e.message ? e.message : e)));
      return;
    }
    const s = body.status || {};
    const head = el("p", "muted", t("media.status", {
      blocks: s.blocks ?? 0, embedded: s.embedded ?? 0,
      space: s.space || t("media.nospace"),
    }) + (s.reembed ? " · " + t("media.reembed", { done: s.reembed[0], total: s.reembed[1] }) : "")
      + (s.last_error ? " · " + s.last_error : ""));
    const blocks = Array.isArray(body.blocks) ? body.blocks : [];
    if (!blocks.length) { box.replaceChildren(head, el("p", "muted", t("media.none"))); return; }
    const grid = el("ul", "media-grid");
    for (const b of blocks) {
      const id = String(b.id || "");
      if (!/^blk_media_[0-9a-f]{12}$/.test(id)) continue;
      const li = el("li", "media-card");
      li.dataset.id = id;
      const img = el("img", "media-thumb");
      img.loading = "lazy";
      img.alt = id;
      img.src = "/api/v1/memory/media/" + id + "/data";
      const meta = el("div", "muted", [b.mime, (b.width | 0) + "×" + (b.height | 0), fmtBytes(b.size | 0),
        new Date(b.created_ms).toLocaleString(window.HA.locale()), b.fingerprint ? t("media.embedded") : t("media.notembedded")].join(" · "));
      const links = (b.links || []).map((l) => el("div", "media-link", l));
      const del = el("button", "btn small danger", t("common.delete"));
      del.type = "button";
      del.addEventListener("click", async () => {
        if (!window.confirm(t("media.confirm", { id }))) return;
        const r = await fetch("/api/v1/memory/media/" + id, { method: "DELETE", cache: "no-store" });
        if (r.ok) renderBrowser();
        else meta.textContent = "HTTP " + r.status;
      });
      li.append(img, el("code", null, id), meta, ...links, del);
      grid.append(li);
    }
    box.replaceChildren(head, grid);
  }

  window.HA = Object.assign(window.HA || {}, { media: { take, showIn, showBlocks, renderBrowser } });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wireChat);
  else wireChat();
})();
