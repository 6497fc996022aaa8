#!/usr/bin/env node
// Real-browser end-to-end test of the terminal panel (#/terminals): the session the
// agent opened is listed, its scrollback is drawn by xterm.js, what the person types
// reaches the shell on its PTY, and the shell's answer comes back live over the
// event stream.
//
//   node terminal.mjs http://127.0.0.1:PORT [screenshot.png]
//
// tests/dashboard_e2e.rs prepares the daemon: the bundled terminal plugin running,
// session 1 started by the model (terminal_create through the tool loop) with
// `echo before-$((2+3))` already run in it.
import { harness } from './lib.mjs';

const h = harness('terminal e2e');
const { base, shotPath, token, log, fail, fetchJson, waitHealthy, pollPage, launch, signIn, consoleErrors } = h;

/** The terminal's visible lines (xterm's DOM renderer: one div per row). */
function rows() {
  return [...document.querySelectorAll('#term-screen .xterm-rows > div')].map((d) => d.textContent.replace(/\s+$/, ''));
}

async function main() {
  await waitHealthy(Date.now() + 10_000);
  const { page } = await launch();
  await signIn(page, token);
  await page.evaluate(() => { location.hash = '#/terminals'; });
  await pollPage(page, 'session 1 is not listed', 15_000, () => {
    const b = document.querySelector('#term-list .term-pick[data-session="1"]');
    return b ? { ok: true } : { ok: false, why: document.querySelector('#term-list')?.textContent || '' };
  });
  await page.click('#term-list .term-pick[data-session="1"]');
  await pollPage(page, 'the terminal was not drawn', 15_000, () => {
    const s = document.querySelector('#term-screen');
    return s && s.dataset.ready === '1' && s.querySelector('.xterm-rows') ? { ok: true } : { ok: false, why: document.querySelector('#term-error')?.textContent || '' };
  });
  const before = await pollPage(page, 'the scrollback (before-5) is not shown', 10_000, (src) => {
    const lines = eval(src)();
    return lines.includes('before-5') ? { ok: true, lines } : { ok: false, why: JSON.stringify(lines.filter(Boolean)) };
  }, `(${rows})`);
  log(`scrollback drawn: ${JSON.stringify(before.lines.filter(Boolean))}`);
  // xterm's own styles reach the page under its CSP (views.js adopts them).
  const font = await page.evaluate(() => getComputedStyle(document.querySelector('#term-screen .xterm-rows')).fontFamily);
  if (!/courier|monospace/i.test(font)) fail(`xterm's theme styles were not applied (font-family: ${font})`);

  await page.click('#term-screen');
  await page.keyboard.type('echo hi');
  await page.keyboard.press('Enter');
  const after = await pollPage(page, 'typing `echo hi` did not show `hi`', 15_000, (src) => {
    const lines = eval(src)();
    const i = lines.findIndex((l) => l.endsWith('echo hi'));
    return i >= 0 && lines.slice(i + 1).includes('hi') ? { ok: true, lines } : { ok: false, why: JSON.stringify(lines.filter(Boolean)) };
  }, `(${rows})`);
  log(`after typing: ${JSON.stringify(after.lines.filter(Boolean))}`);

  // The shell itself got the keys: its output, as the plugin keeps it, has the line.
  const out = await fetchJson(`${base}/api/v1/terminals/1/output?offset=0`);
  // (bash wraps each command in bracketed-paste switches: `ESC[?2004l` + CR before it)
  if (!/\rhi\r\n/.test(out.data)) fail(`the session's output has no "hi" line: ${JSON.stringify(out.data)}`);
  const list = await fetchJson(`${base}/api/v1/terminals`);
  if (!list.sessions || list.sessions[0].id !== 1) fail(`GET /api/v1/terminals: ${JSON.stringify(list)}`);
  if (shotPath) await page.screenshot({ path: shotPath, fullPage: true });
  // xterm's styles arrive through constructed sheets (the font check above), never
  // as <style> elements the CSP would refuse: not one violation on the console.
  const csp = consoleErrors.filter((e) => /Content Security Policy/.test(e));
  if (csp.length) fail(`${csp.length} CSP violation(s) opening a terminal: ${csp[0]}`);
  return 'typed echo hi, saw hi; no CSP violation';
}

h.run(main);
