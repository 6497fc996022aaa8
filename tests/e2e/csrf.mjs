#!/usr/bin/env node
// A page on another port of the same host attacks the signed-in owner's daemon.
//
//   node csrf.mjs http://127.0.0.1:PORT [screenshot.png]
//
// Another port of 127.0.0.1 is the same *site* as the WebUI, so the browser sends the
// owner's `SameSite=Strict` cookie with the page's requests. The page posts a message
// (a multipart form, and fetch in `no-cors` mode, both without a preflight) and asks for
// a stop; none of it may reach the agent or change anything. The WebUI's own
// page, signed in with the same cookie, still can post.
import http from 'node:http';
import { harness } from './lib.mjs';

const h = harness('csrf e2e');
const { base, token, log, fail, fetchJson, waitHealthy, launch, signIn, run } = h;
const CANARY = 'csrf-canary-7d1';

function attackPage(target) {
  return `<!doctype html><meta charset="utf-8"><title>cute cats</title>
<form id="f" method="POST" action="${target}/api/v1/messages" enctype="multipart/form-data" target="sink">
  <input name="text" value="${CANARY} form">
</form>
<iframe name="sink"></iframe>
<script>
  const t = ${JSON.stringify(target)};
  const body = JSON.stringify({ text: '${CANARY} fetch' });
  const form = new FormData();
  form.append('text', '${CANARY} fetch');
  const tries = [
    fetch(t + '/api/v1/messages', { method: 'POST', mode: 'no-cors', credentials: 'include', body: form }),
    fetch(t + '/api/v1/messages', { method: 'POST', mode: 'no-cors', credentials: 'include', body }),
    fetch(t + '/api/v1/stop', { method: 'POST', mode: 'no-cors', credentials: 'include' }),
  ];
  Promise.allSettled(tries).then(() => { document.getElementById('f').submit(); document.title = 'sent'; });
</script>`;
}

async function main() {
  await waitHealthy(Date.now() + 10_000);
  const attacker = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(attackPage(base));
  });
  await new Promise((r) => attacker.listen(0, '127.0.0.1', r));
  const evil = `http://127.0.0.1:${attacker.address().port}`;
  log(`attacker page on ${evil}, daemon on ${base}`);

  const { context, page } = await launch();
  await signIn(page, token);
  const cookies = await context.cookies(base);
  if (!cookies.some((c) => c.name === 'homed_session')) fail('signing in set no session cookie');

  const other = await context.newPage();
  await other.goto(`${evil}/`, { waitUntil: 'domcontentloaded' });
  await other.waitForFunction(() => document.title === 'sent', null, { timeout: 10_000 });
  await other.waitForTimeout(1500);

  // The agent's context window and the chat history both hold every input that ran.
  const history = JSON.stringify(await fetchJson(`${base}/api/v1/chat/history`))
    + JSON.stringify(await fetchJson(`${base}/api/v1/memory/context`));
  if (history.includes(CANARY)) fail(`a page on another port started a turn: ${history.slice(0, 400)}`);
  const settings = await fetchJson(`${base}/api/v1/settings`);
  if (settings.settings['core.security.review'] !== true) fail('a page on another port changed a setting');
  log('the attacker page changed nothing');

  // The WebUI's own page, with the same cookie, still writes.
  const own = await page.evaluate(async () => {
    const r = await fetch('/api/v1/settings', {
      method: 'PUT', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ 'core.agent.tool_timeout': '61s' }),
    });
    return r.status;
  });
  if (own !== 200) fail(`the WebUI's own write was refused: HTTP ${own}`);
  attacker.close();
  return 'another port is another origin; the WebUI still writes';
}

run(main);
