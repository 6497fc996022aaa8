#!/usr/bin/env node
// Every view, as a person sees it: at 1440x900 and 375x812, in English and then in
// Chinese (switched in the page, no reload), each view must
//   * fit the window: the page never scrolls sideways and no element of the view
//     reaches past the right edge (wide tables become cards on a phone);
//   * log no console error (CSP violations included) and throw nothing;
//   * in Chinese, show no English words outside what is data (the owner's messages,
//     names of tools, plugins, settings keys, log lines) or a name (the ALLOWED list).
// A screenshot of each view at each width and language goes to
// `<shot>-<view>-<width>-<lang>.png`.
//
//   E2E_TOKEN=… node tour.mjs http://127.0.0.1:PORT target/e2e-tour
//
// tests/dashboard_e2e.rs prepares the daemon: a fake vendor as the one source, a few
// answered turns, a memory document, the terminal plugin running.
import { harness } from './lib.mjs';

const h = harness('tour e2e');
const { base, shotPath, token, log, fail, fetchJson, putJson, waitHealthy, pollPage, launch, signIn, consoleErrors } = h;

const VIEWS = ['chat', 'dashboard', 'settings', 'plugins', 'memory', 'tasks', 'usage', 'terminals'];

// Words a Chinese page may show in Latin letters: names of things, units and
// formats that Chinese text writes the same way.
const ALLOWED = new Set([
  'HomeAgent', 'homed', 'LLM', 'API', 'URL', 'HTTP', 'HTTPS', 'JSON', 'MCP', 'ONNX', 'CPU', 'ID', 'id',
  'OpenAI', 'DeepSeek', 'Anthropic', 'Claude', 'Ollama', 'Gemini', 'Qwen', 'Kimi', 'Moonshot', 'GLM', 'Zhipu',
  'Lua', 'SQLite', 'BM25', 'TF', 'IDF', 'TF-IDF', 'PID', 'pid', 'OK', 'QQ', 'OneBot', 'Prometheus', 'OTLP',
  'ms', 's', 'm', 'h', 'd', 'KB', 'MB', 'GB', 'KiB', 'MiB', 'GiB', 'B', 'USD', 'UTC', 'px', 'k',
  'L1', 'L2', 'L3', 'L4', 'en', 'zh', 'token', 'tokens',
  // Technical terms Chinese technical writing keeps as they are.
  'TCP', 'TLS', 'OAuth', 'CLI', 'HTML', 'PyPI', 'SHA-256', 'Collector', 'OpenTelemetry', 'Jina', 'Lagrange', 'Landlock', 'NapCat', 'POST', 'GET', 'WebSocket', 'v11', 'unix', 'http', 'https', 'MiniLM', 'Runtime', 'Bearer', 'WordPiece', 'Chromium', 'bash', 'Backspace', 'Delete', 'Up', 'Down', 'Left', 'Right', 'Home', 'End', 'PageUp', 'PageDown', 'Space', 'stdio', 'stdin', 'stdout', 'stderr', 'shell', 'KEY', 'VALUE', 'PTY', 'SDK', 'PDF', 'UI', 'SSH', 'DNS', 'IP', 'WAL', 'UTF-8', 'Markdown', 'cron', 'English', 'Esc', 'Enter', 'Shift', 'Ctrl', 'Alt', 'Tab', 'SSE', 'WebUI',
]);

/** The view, shown and loaded (and a terminal drawn on the terminals view). */
async function openView(page, view) {
  await h.goView(page, view);
  // Each view fetches what it shows; wait until it says it has it.
  await pollPage(page, `view ${view} never finished loading`, 10_000, (v) => {
    const sec = document.getElementById('view-' + v);
    const busy = sec.querySelector('[aria-busy="true"], .loading');
    return !busy ? { ok: true } : { ok: false, why: busy.outerHTML.slice(0, 120) };
  }, view);
  // A terminal drawn by xterm.js (its styles are where CSP violations came from).
  if (view === 'terminals' && await page.locator('#term-list .term-pick').count()) {
    await page.locator('#term-list .term-pick').first().click();
    await pollPage(page, 'the terminal was not drawn', 15_000, () => {
      const s = document.querySelector('#term-screen');
      return s && s.dataset.ready === '1' ? { ok: true } : { ok: false, why: document.querySelector('#term-error')?.textContent || '' };
    });
  }
  await page.waitForTimeout(400);
}

/** What reaches past the window's right edge, and the page's own width. */
function overflow(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const out = [];
    const sec = document.querySelector('main.view:not([hidden])');
    for (const e of [document.querySelector('header.top'), ...sec.querySelectorAll('*')]) {
      if (!e || !e.offsetParent || e.closest('.xterm')) continue;
      // Inside a box that scrolls on purpose (a terminal, a code block) is fine.
      let clipped = false;
      for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
        const s = getComputedStyle(p);
        if (/(auto|scroll|hidden|clip)/.test(s.overflowX) && p.getBoundingClientRect().right <= vw + 1) { clipped = true; break; }
      }
      if (clipped) continue;
      const r = e.getBoundingClientRect();
      if (r.width > 0 && r.right > vw + 1) out.push(`${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : ''} right=${Math.round(r.right)}`);
    }
    return { page: document.scrollingElement.scrollWidth, vw, out: out.slice(0, 8) };
  });
}

/** English words in the visible text of the header and the view, outside data. */
function englishLeft(page, allowed) {
  return page.evaluate((allowed) => {
    const ok = new Set(allowed);
    // Data, not interface: what people and plugins wrote, names, keys, logs.
    const DATA = 'code, pre, kbd, samp, .data, .msg-text, .xterm, textarea, input, select option:not(:checked), .tool-name';
    const sec = document.querySelector('main.view:not([hidden])');
    const found = new Map();
    for (const root of [document.querySelector('header.top'), sec]) {
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const e = n.parentElement;
        if (!e || !e.offsetParent || e.closest(DATA)) continue;
        const cs = getComputedStyle(e);
        if (cs.visibility === 'hidden') continue;
        const ctx = n.textContent;
        // Words inside quotes or braces are examples (JSON, a command line), and a
        // word joined to a name by _ . / : @ \ - is part of that name.
        const quoted = [];
        for (const m of ctx.matchAll(/"[^"]*"|\{[^}]*\}|“[^”]*”/g)) quoted.push([m.index, m.index + m[0].length]);
        for (const m of ctx.matchAll(/[A-Za-z][A-Za-z0-9'-]*[A-Za-z0-9]|[A-Za-z]/g)) {
          const w = m[0];
          const i = m.index;
          if (ok.has(w)) continue;
          if (quoted.some(([a, b]) => i > a && i < b)) continue;
          if (/[_./:@\\=<-]/.test(ctx[i - 1] || '') || /[_./:@(=>]/.test(ctx[i + w.length] || '')) continue;
          if (!found.has(w)) found.set(w, `${e.tagName.toLowerCase()}${e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : ''}: "${ctx.trim().slice(0, 60)}"`);
        }
      }
    }
    return [...found.entries()].slice(0, 15).map(([w, where]) => `${w} (${where})`);
  }, [...allowed]);
}

async function tour(page, width, lang, problems) {
  for (const view of VIEWS) {
    await openView(page, view);
    const errsBefore = consoleErrors.length;
    const o = await overflow(page);
    if (o.page > o.vw + 1) problems.push(`${view} @${width} ${lang}: the page is ${o.page} px wide in a ${o.vw} px window`);
    if (o.out.length) problems.push(`${view} @${width} ${lang}: past the right edge: ${o.out.join(', ')}`);
    if (lang === 'zh') {
      const left = await englishLeft(page, ALLOWED);
      if (left.length) problems.push(`${view} @${width} zh: English left: ${left.join('; ')}`);
    }
    if (shotPath) await page.screenshot({ path: `${shotPath}-${view}-${width}-${lang}.png`, fullPage: width < 800 });
    if (consoleErrors.length > errsBefore) problems.push(`${view} @${width} ${lang}: console errors: ${consoleErrors.slice(errsBefore).join(' | ').slice(0, 300)}`);
  }
}

async function main() {
  await waitHealthy(Date.now() + 20_000);
  const { context, page } = await launch();
  await signIn(page, token);
  const problems = [];
  // The sign-in page itself is answered 401 (it is the gate's answer to a request
  // without a session), which Chromium logs; the app's pages start clean.
  consoleErrors.length = 0;
  // Something drawn before the language switch: a new conversation's divider.
  await page.locator('#chat-new').click();
  await pollPage(page, 'New chat drew no divider', 10_000, () => (document.querySelector('#chat-log .chat-divider') ? { ok: true } : { ok: false }));
  for (const [w, hgt] of [[1440, 900], [375, 812]]) {
    await page.setViewportSize({ width: w, height: hgt });
    for (const lang of ['en', 'zh']) {
      // The header's language switch: the page and the daemon change together.
      const now = await page.evaluate(() => window.HA.lang());
      if (now !== lang) {
        await page.click('#lang');
        await pollPage(page, `the page did not switch to ${lang}`, 5_000, (l) => (window.HA.lang() === l ? { ok: true } : { ok: false, why: window.HA.lang() }), lang);
        // The page switches at once; the daemon's setting follows its PUT.
        let stored = '';
        for (let i = 0; i < 50 && stored !== lang; i++) {
          stored = (await fetchJson(`${base}/api/v1/settings`)).settings['core.agent.language'];
          if (stored !== lang) await page.waitForTimeout(100);
        }
        if (stored !== lang) problems.push(`the language switch did not reach the daemon: core.agent.language=${stored}`);
      }
      await tour(page, w, lang, problems);
      log(`${w} px, ${lang}: ${VIEWS.length} views toured, ${problems.length} problem(s) so far`);
    }
  }
  await putJson(`${base}/api/v1/settings`, { 'core.agent.language': 'en' });
  await context.close();
  if (problems.length) fail(`${problems.length} problem(s):\n  ${problems.join('\n  ')}`);
  return `${VIEWS.length} views x 2 widths x 2 languages: no overflow, no console error, no English left in zh`;
}

h.run(main);
