#!/usr/bin/env node
// Real-browser end-to-end test of the homed actor dashboard.
//
//   node dashboard.mjs http://127.0.0.1:PORT [screenshot.png]
//
// Drives the system Chromium (/usr/bin/chromium, or $CHROMIUM) through
// playwright-core; never downloads a browser. Exits 0 on success; on failure
// prints "dashboard e2e: FAIL: <reason>" and exits 1. The whole run is
// bounded to 60 s ($E2E_TIMEOUT_MS overrides).
import { chromium } from 'playwright-core';
import fs from 'node:fs';

const TOTAL_MS = Number(process.env.E2E_TIMEOUT_MS || 60_000);
const t0 = Date.now();
const base = (process.argv[2] || '').replace(/\/+$/, '');
const shotPath = process.argv[3] || '';
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

let browser = null;
const pageErrors = [];
const consoleErrors = [];

function log(msg) {
  console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
}

class Fail extends Error {}
const fail = (msg) => { throw new Fail(msg); };

async function finish(code, msg) {
  if (code === 0) console.log(`dashboard e2e: PASS (${((Date.now() - t0) / 1000).toFixed(1)} s)${msg ? ' — ' + msg : ''}`);
  else {
    console.error(`dashboard e2e: FAIL: ${msg}`);
    for (const e of pageErrors) console.error(`  page error: ${e}`);
    for (const e of consoleErrors.slice(0, 10)) console.error(`  console error: ${e}`);
  }
  if (browser) {
    const b = browser;
    browser = null;
    await Promise.race([b.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  }
  process.exit(code);
}

// Hard bound on the whole script, whatever hangs.
const watchdog = setTimeout(() => {
  finish(1, `timed out after ${TOTAL_MS / 1000} s (overall limit)`);
}, TOTAL_MS);
process.on('SIGINT', () => finish(1, 'interrupted'));
process.on('SIGTERM', () => finish(1, 'terminated'));

async function fetchJson(url, timeoutMs = 5000) {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${url} -> HTTP ${res.status}: ${text.slice(0, 200)}`);
  try { return JSON.parse(text); } catch { throw new Error(`GET ${url}: not JSON: ${text.slice(0, 200)}`); }
}

async function waitHealthy(deadlineMs) {
  let last = '';
  while (Date.now() < deadlineMs) {
    try {
      const h = await fetchJson(`${base}/healthz`, 2000);
      if (h && h.status === 'ok') return;
      last = `unexpected body ${JSON.stringify(h)}`;
    } catch (e) { last = e.cause ? `${e.message}: ${e.cause.code || e.cause.message}` : e.message; }
    await new Promise((r) => setTimeout(r, 250));
  }
  fail(`daemon not healthy at ${base}/healthz: ${last}`);
}

// Poll fn() in the browser until it returns a truthy value; returns it.
async function pollPage(page, what, timeoutMs, fn, arg) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await page.evaluate(fn, arg);
    if (last && last.ok) return last;
    await page.waitForTimeout(100);
  }
  fail(`${what} (waited ${timeoutMs / 1000} s)${last && last.why ? ': ' + last.why : ''}`);
}

async function main() {
  if (!/^https?:\/\/[^/]+$/.test(base)) {
    fail('usage: node dashboard.mjs http://127.0.0.1:PORT [screenshot.png]');
  }
  if (!fs.existsSync(executablePath)) {
    fail(`chromium not found at ${executablePath} (run scripts/install-e2e-deps.sh or set CHROMIUM)`);
  }

  // 1. The daemon and its API, from node.
  await waitHealthy(Date.now() + 10_000);
  const api = await fetchJson(`${base}/api/v1/actors`);
  if (!api || !Array.isArray(api.actors)) fail(`GET /api/v1/actors: no "actors" array: ${JSON.stringify(api).slice(0, 200)}`);
  const ids = api.actors.map((a) => a.id);
  log(`API lists ${ids.length} actors: ${ids.join(', ')}`);
  if (!ids.includes('kernel')) fail('GET /api/v1/actors has no root actor "kernel"');
  if (!ids.some((id) => id.startsWith('kernel/'))) fail('GET /api/v1/actors has no child of "kernel"');
  const candidates = api.actors.filter((a) => a.restartable);
  const target = candidates.find((a) => a.id === 'kernel/config') || candidates[0];
  if (!target) fail('no actor has restartable: true');

  // 2. Browser.
  // playwright-core gives the browser a fresh temporary profile of its own
  // (and deletes it on close), so no --user-data-dir is needed.
  browser = await chromium.launch({
    executablePath,
    headless: true,
    timeout: 20_000,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
      '--disable-dev-shm-usage',
    ],
  }).catch((e) => fail(`could not launch ${executablePath}: ${e.message.split('\n')[0]}`));
  log(`launched ${executablePath} (${browser.version()})`);
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.on('pageerror', (e) => pageErrors.push(String(e && e.stack ? e.stack.split('\n')[0] : e)));
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('dialog', (d) => { pageErrors.push(`unexpected dialog: ${d.message()}`); d.dismiss().catch(() => {}); });

  // 3. Page loads and renders the tree.
  const resp = await page.goto(`${base}/`, { waitUntil: 'domcontentloaded', timeout: 15_000 });
  if (!resp || !resp.ok()) fail(`GET / -> HTTP ${resp ? resp.status() : 'no response'}`);
  const h1 = (await page.textContent('h1').catch(() => '')) || '';
  if (!h1.includes('HomeAgent — actors')) fail(`header is ${JSON.stringify(h1)}, expected "HomeAgent — actors"`);

  await pollPage(page, 'rows for "kernel" and a child never rendered', 15_000, () => {
    const rows = [...document.querySelectorAll('tr[data-actor-id]')].map((r) => r.dataset.actorId);
    return rows.includes('kernel') && rows.some((id) => id.startsWith('kernel/'))
      ? { ok: true } : { ok: false, why: `rows present: [${rows.join(', ')}]` };
  });
  const rowCheck = await pollPage(page, 'not every actor from GET /api/v1/actors has a row', 10_000, (want) => {
    const have = new Set([...document.querySelectorAll('tr[data-actor-id]')].map((r) => r.dataset.actorId));
    const missing = want.filter((id) => !have.has(id));
    return missing.length ? { ok: false, why: `missing rows: ${missing.join(', ')}` } : { ok: true, n: have.size };
  }, ids);
  log(`all ${ids.length} actors rendered as rows (${rowCheck.n} rows)`);

  // 4. The live connection (SSE) comes up.
  await pollPage(page, 'connection indicator never showed "live" (SSE /api/v1/events)', 10_000, () => {
    const c = document.querySelector('#conn');
    return c && c.dataset.state === 'live' ? { ok: true } : { ok: false, why: `#conn state=${c && c.dataset.state}` };
  });
  log('event stream is live');

  // 5. Restart the target through its button.
  const info = await page.evaluate((id) => {
    const row = [...document.querySelectorAll('tr[data-actor-id]')].find((r) => r.dataset.actorId === id);
    if (!row) return null;
    const btn = row.querySelector('button.restart');
    const cell = row.querySelector('.restarts');
    const log = [...document.querySelectorAll('#event-log li')];
    return {
      restarts: cell ? cell.textContent.trim() : null,
      button: !!btn && !btn.hidden && !btn.disabled,
      events: log.length,
    };
  }, target.id);
  if (!info) fail(`no row for ${target.id}`);
  if (!info.button) fail(`row ${target.id} has no enabled button.restart`);
  const before = Number.parseInt(info.restarts, 10);
  if (!Number.isFinite(before)) fail(`row ${target.id} .restarts is ${JSON.stringify(info.restarts)}, not a number`);
  log(`restarting ${target.id} (restarts shown: ${before})`);

  // Mark existing log entries so only entries that arrive after the click count.
  await page.evaluate(() => document.querySelectorAll('#event-log li').forEach((li) => { li.dataset.e2eSeen = '1'; }));
  const row = page.locator(`tr[data-actor-id="${target.id}"]`);
  const [postResp] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/restart'), { timeout: 10_000 })
      .catch(() => fail('clicking Restart sent no POST …/restart within 10 s')),
    row.locator('button.restart').click({ timeout: 5_000 }),
  ]);
  const expectUrl = `${base}/api/v1/actors/${target.id}/restart`;
  if (postResp.url() !== expectUrl) fail(`POST went to ${postResp.url()}, expected ${expectUrl}`);
  if (postResp.status() !== 200) {
    const body = await postResp.text().catch(() => '');
    const inline = await row.locator('.restart-error').textContent().catch(() => '');
    fail(`POST ${postResp.url()} -> HTTP ${postResp.status()} ${body.slice(0, 200)} (inline: ${JSON.stringify(inline)})`);
  }
  log(`POST restart -> 200 ${(await postResp.text().catch(() => '')).slice(0, 100)}`);

  const upd = await pollPage(page, `row ${target.id} .restarts did not grow above ${before}`, 10_000, ({ id, before }) => {
    const row = [...document.querySelectorAll('tr[data-actor-id]')].find((r) => r.dataset.actorId === id);
    const txt = row && row.querySelector('.restarts') ? row.querySelector('.restarts').textContent.trim() : '';
    const n = Number.parseInt(txt, 10);
    return n > before ? { ok: true, n } : { ok: false, why: `.restarts shows ${JSON.stringify(txt)}` };
  }, { id: target.id, before });
  log(`row ${target.id} now shows restarts=${upd.n}`);

  const ev = await pollPage(page, `no new actor_restart/actor_exit entry for ${target.id} in #event-log`, 10_000, (id) => {
    const fresh = [...document.querySelectorAll('#event-log li')].filter((li) => !li.dataset.e2eSeen);
    const hit = fresh.find((li) => (li.dataset.type === 'actor_restart' || li.dataset.type === 'actor_exit')
      && li.textContent.includes(`"${id}"`));
    return hit ? { ok: true, type: hit.dataset.type, text: hit.textContent }
      : { ok: false, why: `new entries: ${fresh.map((li) => li.dataset.type).join(', ') || 'none'}` };
  }, target.id);
  log(`event log shows ${ev.type}: ${ev.text.slice(0, 120)}`);

  const btnBack = await row.locator('button.restart').isEnabled().catch(() => false);
  if (!btnBack) fail(`button.restart of ${target.id} stayed disabled after the response`);

  if (shotPath) {
    await page.screenshot({ path: shotPath, fullPage: true, timeout: 10_000 });
    log(`screenshot written to ${shotPath}`);
  }
  if (pageErrors.length) fail(`the page raised ${pageErrors.length} error(s)`);
  return `${ids.length} actors rendered, ${target.id} restarted ${before} -> ${upd.n}, ${ev.type} logged`;
}

main().then(
  (msg) => { clearTimeout(watchdog); return finish(0, msg); },
  (e) => { clearTimeout(watchdog); return finish(1, e instanceof Fail ? e.message : (e && e.stack) || String(e)); },
);
