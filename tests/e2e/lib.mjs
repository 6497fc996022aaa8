// Shared harness of the browser tests (dashboard.mjs, views.mjs): logging, a hard
// time bound, the daemon's API from node, the system Chromium, and signing in.
//
//   const h = harness('views e2e');   // prints "views e2e: PASS (…)" / "…: FAIL: …"
//
// Drives the system Chromium (/usr/bin/chromium, or $CHROMIUM) through
// playwright-core; never downloads a browser.
import { chromium } from 'playwright-core';
import fs from 'node:fs';

export class Fail extends Error {}

export function harness(name) {
  const TOTAL_MS = Number(process.env.E2E_TIMEOUT_MS || 90_000);
  const t0 = Date.now();
  const base = (process.argv[2] || '').replace(/\/+$/, '');
  const shotPath = process.argv[3] || '';
  // The owner token (DATA/api-token): the API needs it, the browser signs in with it.
  const token = process.env.E2E_TOKEN || '';
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  const pageErrors = [];
  const consoleErrors = [];
  let browser = null;

  const log = (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
  const fail = (msg) => { throw new Fail(msg); };

  async function finish(code, msg) {
    if (code === 0) console.log(`${name}: PASS (${((Date.now() - t0) / 1000).toFixed(1)} s)${msg ? ' — ' + msg : ''}`);
    else {
      console.error(`${name}: FAIL: ${msg}`);
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
  setTimeout(() => { finish(1, `timed out after ${TOTAL_MS / 1000} s (overall limit)`); }, TOTAL_MS);
  process.on('SIGINT', () => finish(1, 'interrupted'));
  process.on('SIGTERM', () => finish(1, 'terminated'));

  async function fetchJson(url, timeoutMs = 5000) {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { authorization: `Bearer ${token}` } });
    const text = await res.text();
    if (!res.ok) throw new Error(`GET ${url} -> HTTP ${res.status}: ${text.slice(0, 200)}`);
    try { return JSON.parse(text); } catch { throw new Error(`GET ${url}: not JSON: ${text.slice(0, 200)}`); }
  }

  async function sendJson(method, url, body, timeoutMs = 20_000) {
    const res = await fetch(url, {
      method, signal: AbortSignal.timeout(timeoutMs),
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${url} -> HTTP ${res.status}: ${text.slice(0, 200)}`);
    return JSON.parse(text);
  }
  const postJson = (url, body, timeoutMs) => sendJson('POST', url, body, timeoutMs);
  const putJson = (url, body, timeoutMs) => sendJson('PUT', url, body, timeoutMs);

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

  // Poll fn() in the browser until it returns {ok: true, …}; returns it.
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

  async function launch() {
    if (!/^https?:\/\/[^/]+$/.test(base)) fail(`usage: node ${process.argv[1]} http://127.0.0.1:PORT [screenshot.png]`);
    if (!fs.existsSync(executablePath)) fail(`chromium not found at ${executablePath} (run scripts/install-e2e-deps.sh or set CHROMIUM)`);
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
    return { context, page };
  }

  /** Signs in on the token page (the session cookie); answers the first response. */
  async function signIn(page, tok) {
    const gate = await page.goto(`${base}/`, { waitUntil: 'domcontentloaded', timeout: 15_000 });
    await page.fill('#t', tok);
    await page.click('button');
    await page.waitForSelector('tr[data-actor-id]', { state: 'attached', timeout: 10_000 })
      .catch(() => fail('signing in with the right token did not lead to the app'));
    return gate;
  }

  /** Opens a view by its address (`chat` is `#/`) and waits until it is shown. */
  async function goView(page, view) {
    await page.evaluate((v) => { location.hash = v === 'chat' ? '#/' : '#/' + v; }, view);
    await pollPage(page, `view ${view} not shown`, 5_000, (v) => {
      const sec = document.getElementById('view-' + v);
      return sec && !sec.hidden ? { ok: true } : { ok: false, why: `body data-view=${document.body.dataset.view}` };
    }, view);
  }

  /** Runs main() and turns its outcome into PASS/FAIL and the exit code. */
  function run(main) {
    main().then(
      (msg) => finish(pageErrors.length ? 1 : 0, pageErrors.length ? `uncaught page errors: ${pageErrors.join(' | ')}` : msg),
      (e) => finish(1, e instanceof Fail ? e.message : (e && e.stack) || String(e)),
    );
  }

  return {
    base, shotPath, token, executablePath, pageErrors, consoleErrors,
    log, fail, finish, fetchJson, postJson, putJson, waitHealthy, pollPage, launch, signIn, goView, run,
  };
}
