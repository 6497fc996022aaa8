#!/usr/bin/env node
// Real-browser end-to-end test of the homed dashboard (actors, chat, plugins).
//
//   node dashboard.mjs http://127.0.0.1:PORT [screenshot.png]
//
// The daemon must have an LLM source that answers `echo: <text>` (and `slow
// <ms> ...` slowly) and the `echo` test plugin installed: tests/dashboard_e2e.rs
// sets both up.
//
// Drives the system Chromium (/usr/bin/chromium, or $CHROMIUM) through
// playwright-core; never downloads a browser. Exits 0 on success; on failure
// prints "dashboard e2e: FAIL: <reason>" and exits 1. The whole run is
// bounded to 90 s ($E2E_TIMEOUT_MS overrides).
import { harness } from './lib.mjs';

const {
  base, shotPath, token, pageErrors, log, fail, fetchJson, postJson, waitHealthy, pollPage, launch, run,
} = harness('dashboard e2e');

async function main() {
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
  const { context, page } = await launch();

  // 3. Without a session the page is the sign-in form; a wrong token is refused on
  // the page, the right one leads to the dashboard (session cookie).
  const gate = await page.goto(`${base}/`, { waitUntil: 'domcontentloaded', timeout: 15_000 });
  if (!gate || gate.status() !== 401) fail(`GET / without a session -> HTTP ${gate ? gate.status() : 'no response'}, expected 401 (the sign-in page)`);
  await page.fill('#t', 'not-the-token');
  await page.click('button');
  await pollPage(page, 'a wrong token was not refused on the sign-in page', 5_000, () => {
    const e = document.querySelector('#err');
    return e && /not the owner token/.test(e.textContent) ? { ok: true } : { ok: false, why: `#err=${e && e.textContent}` };
  });
  await page.fill('#t', token);
  await page.click('button');
  await page.waitForSelector('tr[data-actor-id]', { state: 'attached', timeout: 10_000 })
    .catch(() => fail('signing in with the right token did not lead to the app'));
  log('signed in with the owner token');
  const resp = await page.goto(`${base}/`, { waitUntil: 'domcontentloaded', timeout: 15_000 });
  if (!resp || !resp.ok()) fail(`GET / -> HTTP ${resp ? resp.status() : 'no response'}`);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'homed_session');
  if (!session || !session.httpOnly || session.sameSite !== 'Strict') fail(`session cookie is ${JSON.stringify(session)}; expected HttpOnly, SameSite=Strict`);
  const h1 = (await page.textContent('h1').catch(() => '')) || '';
  if (h1.trim() !== 'HomeAgent') fail(`header is ${JSON.stringify(h1)}, expected "HomeAgent"`);
  // The chat is the home page; the operator console is its own view.
  const show = async (view) => {
    await page.evaluate((v) => { location.hash = v === 'chat' ? '#/' : '#/' + v; }, view);
    await pollPage(page, `the ${view} view was not shown`, 5_000, (v) => (
      document.body.dataset.view === v && !document.getElementById('view-' + v).hidden
        ? { ok: true } : { ok: false, why: `view ${document.body.dataset.view}` }), view);
  };
  const home = await page.evaluate(() => document.body.dataset.view);
  if (home !== 'chat') fail(`the home page is ${home}, not the chat`);
  await show('dashboard');

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

  await show('chat');
  // 6. Chat: Shift+Enter is a new line, Enter sends; the reply from the
  //    (fake) LLM replaces the pending assistant bubble.
  const input = page.locator('#chat-input');
  await input.click();
  await page.keyboard.type('hello');
  await page.keyboard.press('Shift+Enter');
  const multi = await input.inputValue();
  if (multi !== 'hello\n') fail(`Shift+Enter in #chat-input gave ${JSON.stringify(multi)}, expected "hello\\n"`);
  if (await page.locator('#chat-log li').count()) fail('Shift+Enter sent the message');
  await input.fill('');
  await page.keyboard.type('hello browser');
  await page.evaluate(() => {
    document.querySelectorAll('#event-log li').forEach((li) => { li.dataset.e2eSeen = '1'; });
    // Record what the pending assistant bubble shows while the reply streams in.
    window.__e2eStreamed = [];
    new MutationObserver(() => {
      const li = document.querySelector('#chat-log li[data-pending]');
      const t = li && li.querySelector('.msg-text') ? li.querySelector('.msg-text').textContent : '';
      if (t && window.__e2eStreamed[window.__e2eStreamed.length - 1] !== t) window.__e2eStreamed.push(t);
    }).observe(document.querySelector('#chat-log'), { subtree: true, childList: true, characterData: true });
  });
  const chatT0 = Date.now();
  const [msgReq] = await Promise.all([
    page.waitForRequest((r) => r.method() === 'POST' && r.url() === `${base}/api/v1/messages`, { timeout: 5_000 })
      .catch(() => fail('pressing Enter in #chat-input sent no POST /api/v1/messages within 5 s')),
    page.keyboard.press('Enter'),
  ]);
  const sent = msgReq.postDataJSON();
  if (!sent || sent.text !== 'hello browser' || sent.source !== 'webui' || sent.channel !== 'webui') {
    fail(`POST /api/v1/messages body is ${JSON.stringify(sent)}, expected text "hello browser", source and channel "webui"`);
  }
  if ((await input.inputValue()) !== '') fail('#chat-input was not cleared after sending');
  const chat = await pollPage(page, 'no assistant message "echo: hello browser" in #chat-log', 10_000, () => {
    const items = [...document.querySelectorAll('#chat-log li')];
    const text = (li) => (li.querySelector('.msg-text') || li).textContent.trim();
    const err = items.find((li) => li.dataset.role === 'error');
    if (err) return { ok: false, why: `error message: ${text(err)}` };
    const user = items.find((li) => li.dataset.role === 'user' && text(li) === 'hello browser');
    const reply = items.find((li) => li.dataset.role === 'assistant' && !li.dataset.pending && text(li) === 'echo: hello browser');
    return user && reply && items.indexOf(user) < items.indexOf(reply)
      ? { ok: true, n: items.length }
      : { ok: false, why: `messages: ${JSON.stringify(items.map((li) => `${li.dataset.role}${li.dataset.pending ? '(pending)' : ''}: ${text(li)}`))}` };
  });
  const streamed = await page.evaluate(() => window.__e2eStreamed);
  log(`chat: "hello browser" -> "echo: hello browser" in ${((Date.now() - chatT0) / 1000).toFixed(1)} s (${chat.n} messages; `
    + `streamed into the pending bubble: ${streamed.length ? JSON.stringify(streamed) : 'nothing (reply came first)'})`);
  const agentEvents = await pollPage(page, 'the event log shows no task / stream_delta / agent_output of the chat', 5_000, () => {
    const types = new Set([...document.querySelectorAll('#event-log li')].filter((li) => !li.dataset.e2eSeen)
      .map((li) => li.dataset.type));
    const want = ['task', 'stream_delta', 'agent_output'];
    const missing = want.filter((t) => !types.has(t));
    return missing.length ? { ok: false, why: `missing ${missing.join(', ')}; new: ${[...types].join(', ')}` }
      : { ok: true, types: [...types].join(', ') };
  });
  log(`event log shows ${agentEvents.types}`);

  // 7. Stop: a slow answer is cut short by the Stop button.
  await page.evaluate(() => document.querySelectorAll('#event-log li').forEach((li) => { li.dataset.e2eSeen = '1'; }));
  await input.fill('slow 8000 never shown');
  await page.locator('#chat-send').click();
  await pollPage(page, 'the slow task never showed as running (task event) with #chat-stop enabled', 10_000, () => {
    const running = [...document.querySelectorAll('#event-log li[data-type="task"]')]
      .some((li) => !li.dataset.e2eSeen && li.textContent.includes('"running"'));
    const stop = document.querySelector('#chat-stop');
    return running && stop && !stop.disabled ? { ok: true } : { ok: false, why: `running=${running} stop.disabled=${stop && stop.disabled}` };
  });
  await page.waitForTimeout(300); // let the task reach its LLM call
  const stopT0 = Date.now();
  const [stopResp] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${base}/api/v1/stop`, { timeout: 5_000 })
      .catch(() => fail('clicking #chat-stop sent no POST /api/v1/stop within 5 s')),
    page.locator('#chat-stop').click(),
  ]);
  if (stopResp.status() !== 200) fail(`POST /api/v1/stop -> HTTP ${stopResp.status()}`);
  const stopped = await pollPage(page, 'the slow reply was not cut short after Stop', 6_000, () => {
    const items = [...document.querySelectorAll('#chat-log li')];
    const last = items[items.length - 1];
    const text = last ? (last.querySelector('.msg-text') || last).textContent.trim() : '';
    if (!last || last.dataset.pending) return { ok: false, why: 'still pending' };
    return last.dataset.role !== 'user' && !text.includes('slow done')
      ? { ok: true, role: last.dataset.role, text } : { ok: false, why: `last message: ${last.dataset.role}: ${text}` };
  });
  log(`stop: reply cut short after ${((Date.now() - stopT0) / 1000).toFixed(1)} s (${stopped.role}: ${stopped.text})`);

  await show('dashboard');
  // 8. Plugins: the echo plugin runs with its tool; its Restart button restarts it.
  const plug = await pollPage(page, 'plugins panel never showed "echo" running with tool echo_say', 10_000, () => {
    const row = document.querySelector('[data-plugin="echo"]');
    if (!row) return { ok: false, why: `rows: [${[...document.querySelectorAll('[data-plugin]')].map((r) => r.dataset.plugin).join(', ')}]` };
    const state = (row.querySelector('.plugin-state') || {}).textContent;
    const tools = row.textContent.includes('echo_say');
    const btn = row.querySelector('button.plugin-restart');
    const restarts = Number.parseInt((row.querySelector('.plugin-restarts') || {}).textContent, 10);
    return state === 'running' && tools && btn && !btn.hidden && !btn.disabled && Number.isFinite(restarts)
      ? { ok: true, restarts } : { ok: false, why: `state=${state} echo_say=${tools} button=${!!btn && !btn.hidden && !btn.disabled} restarts=${restarts}` };
  });
  log(`plugin echo running with echo_say (restarts shown: ${plug.restarts})`);
  const prow = page.locator('[data-plugin="echo"]');
  const [pResp] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${base}/api/v1/plugins/echo/restart`, { timeout: 10_000 })
      .catch(() => fail('clicking the echo plugin\'s Restart sent no POST /api/v1/plugins/echo/restart within 10 s')),
    prow.locator('button.plugin-restart').click({ timeout: 5_000 }),
  ]);
  if (pResp.status() !== 200) {
    const inline = await prow.locator('.restart-error').textContent().catch(() => '');
    fail(`POST /api/v1/plugins/echo/restart -> HTTP ${pResp.status()} (inline: ${JSON.stringify(inline)})`);
  }
  const pUpd = await pollPage(page, `echo plugin's restarts did not grow above ${plug.restarts}, or it did not come back running`, 10_000, (before) => {
    const row = document.querySelector('[data-plugin="echo"]');
    const n = Number.parseInt(row.querySelector('.plugin-restarts').textContent, 10);
    const state = row.querySelector('.plugin-state').textContent;
    return n > before && state === 'running' && row.textContent.includes('echo_say')
      ? { ok: true, n } : { ok: false, why: `restarts=${n} state=${state}` };
  }, plug.restarts);
  log(`plugin echo restarted: restarts ${plug.restarts} -> ${pUpd.n}, running again`);

  await show('chat');
  // 8b. Chat as a person lives in it: Markdown rendered, hostile markup inert,
  //     tool calls as cards, other channels visible, history across a reload.
  const replyOf = async (what, text, timeoutMs = 10_000) => {
    await input.fill(text);
    await page.locator('#chat-send').click();
    return pollPage(page, what, timeoutMs, (want) => {
      const items = [...document.querySelectorAll('#chat-log li.msg:not(.from-history)')];
      const last = items[items.length - 1];
      if (!last || last.dataset.pending) return { ok: false, why: 'still pending' };
      const t = last.querySelector('.msg-text').textContent;
      return last.dataset.role === 'assistant' && t.includes(want) ? { ok: true, html: last.querySelector('.msg-text').innerHTML }
        : { ok: false, why: `last: ${last.dataset.role}: ${t.slice(0, 200)}` };
    }, text.startsWith('call-help') ? 'done after tool' : 'echo:');
  };
  const xss = '<img src=x onerror="window.__xss=1"> [click me](javascript:window.__xss=2) '
    + '<a href="javascript:window.__xss=3">plain</a> <svg onload="window.__xss=4"></svg> ![pic](http://127.0.0.1:9/leak.png)';
  await replyOf('no reply to the XSS payload', xss);
  await page.waitForTimeout(300); // give a handler (if any) the time to run
  const inert = await page.evaluate(() => {
    const log = document.querySelector('#chat-log');
    return {
      xss: window.__xss,
      handlers: [...log.querySelectorAll('*')].filter((n) => [...n.attributes].some((a) => /^on/i.test(a.name))).length,
      jsLinks: [...log.querySelectorAll('a')].filter((a) => /^\s*javascript:/i.test(a.getAttribute('href') || '')).length,
      imgs: log.querySelectorAll('img, svg').length,
      rendered: !!log.querySelector('li.msg[data-role="assistant"] .msg-text.md a'),
    };
  });
  if (inert.xss !== undefined || inert.handlers || inert.jsLinks || inert.imgs) {
    fail(`a hostile reply was not inert: ${JSON.stringify(inert)}`);
  }
  if (!inert.rendered) fail('the reply with links was not rendered as Markdown (.msg-text.md a)');
  log(`hostile reply inert: no global set, no on* attribute, no javascript: link, no image loaded`);

  const code = await replyOf('no reply with a code block', 'code:\n\n```js\nlet x = 1;\n```\n\n**bold**');
  const block = await page.evaluate(() => {
    const li = [...document.querySelectorAll('#chat-log li.msg[data-role="assistant"]')].pop();
    const c = li.querySelector('pre > code');
    return { code: c ? c.textContent : null, cls: c ? c.className : '', bold: !!li.querySelector('strong') };
  });
  if (!block.code || !block.code.includes('let x = 1;') || !block.bold) fail(`Markdown not rendered: ${JSON.stringify(block)} (${code.html.slice(0, 200)})`);
  log(`Markdown rendered: <pre><code class="${block.cls}"> and <strong>`);

  await replyOf('no reply after a tool call', 'call-help');
  const card = await pollPage(page, 'no tool-call card for output_send__http_help', 5_000, () => {
    const c = [...document.querySelectorAll('#chat-log .tool-card')].pop();
    if (!c) {
      const ev = [...document.querySelectorAll('#event-log li')].slice(0, 12).map((li) => li.textContent.slice(0, 160));
      return { ok: false, why: `no .tool-card; newest events: ${JSON.stringify(ev)}` };
    }
    const r = { ok: true, open: c.open, tool: c.dataset.tool, status: c.dataset.status,
      args: c.querySelector('.tool-args').textContent, result: c.querySelector('.tool-result').textContent,
      duration: (c.querySelector('.tool-duration') || {}).textContent || '' };
    return r.tool === 'output_send__http_help' ? r : { ok: false, why: JSON.stringify(r) };
  });
  if (card.open) fail('the tool-call card is open by default');
  if (!card.status || !card.result || card.args === '') fail(`tool-call card incomplete: ${JSON.stringify(card)}`);
  if (!/\d/.test(card.duration)) fail(`tool-call card shows no duration: ${JSON.stringify(card)}`);
  log(`tool card: ${card.tool} ${card.status} in ${card.duration}, args ${card.args.replace(/\s+/g, ' ').slice(0, 60)}, result ${card.result.slice(0, 60)}`);

  // Another channel (the CLI's source) talks to the agent: its turn shows up live, labelled.
  const N = 26; // 52 history items: more than one page (50), so paging is exercised
  for (let i = 0; i < N; i++) {
    await postJson(`${base}/api/v1/messages`, { text: `from the cli ${i}`, source: 'cli', channel: 'cli' });
  }
  await pollPage(page, 'the CLI\'s turn never appeared in the chat with its source', 10_000, (n) => {
    const li = [...document.querySelectorAll('#chat-log li.msg[data-source="cli"]')].pop();
    const who = li ? li.querySelector('.msg-who').textContent : '';
    return li && who === 'command line' && li.querySelector('.msg-text').textContent === `from the cli ${n - 1}`
      ? { ok: true } : { ok: false, why: li ? `last cli: ${who}: ${li.textContent}` : 'no cli message' };
  }, N);
  log(`${N} turns sent by source "cli" appeared live, labelled "command line"`);
  // One more with a photo (a red 2×3 PNG): after the reload the history shows it again,
  // from the media memory.
  const RED_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAIAAAA2iEnWAAAAEElEQVR4nGM4IScHRAwoFABEDQYZFCZhYwAAAABJRU5ErkJggg==';
  await postJson(`${base}/api/v1/messages`, { text: 'a photo from the cli', source: 'cli', channel: 'cli',
    attachments: [{ mime: 'image/png', data: RED_PNG }] });

  // Reload: the history comes back (newest page), older pages on scroll-up.
  await page.reload({ waitUntil: 'domcontentloaded' });
  await pollPage(page, 'no history after a reload', 10_000, (n) => {
    const log = document.querySelector('#chat-log');
    const items = [...log.querySelectorAll('li.msg.from-history')];
    const texts = items.map((li) => li.querySelector('.msg-text').textContent.trim());
    return log.dataset.historyLoaded && texts.includes(`from the cli ${n - 1}`) && texts.includes(`echo: from the cli ${n - 1}`)
      ? { ok: true } : { ok: false, why: `${items.length} items, last: ${texts.slice(-2).join(' | ')}` };
  }, N);
  const photo = await pollPage(page, 'the photo of an earlier turn is not shown after a reload', 10_000, () => {
    const li = [...document.querySelectorAll('#chat-log li.msg.from-history')]
      .find((l) => l.querySelector('.msg-text').textContent.trim() === 'a photo from the cli');
    const img = li && li.querySelector('.media-row img.media-thumb');
    return img && img.complete && img.naturalWidth === 2 && img.naturalHeight === 3
      ? { ok: true, src: img.getAttribute('src') }
      : { ok: false, why: (li ? (img ? `image ${img.naturalWidth}×${img.naturalHeight}, complete ${img.complete}, at ${JSON.stringify(img.getBoundingClientRect())}` : 'no image') : 'no message')
        + ` (log scroll ${document.querySelector('#chat-log').scrollTop}/${document.querySelector('#chat-log').scrollHeight}/${document.querySelector('#chat-log').clientHeight}, view ${document.body.dataset.view}, setup ${!!document.querySelector('#setup')}, inner ${innerWidth}x${innerHeight}, `
        + ['body', '#view-chat', '.chat-panel'].map((q) => q + ' ' + Math.round(document.querySelector(q).getBoundingClientRect().height) + ' ' + getComputedStyle(document.querySelector(q)).display).join(', ') + ')' };
  });
  if (!/^\/api\/v1\/memory\/media\/blk_media_[0-9a-f]{12}\/data$/.test(photo.src)) fail(`the history image is not the stored block: ${photo.src}`);
  log(`after a reload the earlier turn's photo is shown from the media memory (${photo.src})`);
  const first = await page.evaluate(() => ({
    n: document.querySelectorAll('#chat-log li.msg').length,
    hello: [...document.querySelectorAll('#chat-log .msg-text')].some((t) => t.textContent.trim() === 'hello browser'),
    more: !document.querySelector('#chat-more').hidden,
  }));
  if (first.hello || !first.more) fail(`the first history page should hold the newest 50 items only: ${JSON.stringify(first)}`);
  await page.evaluate(() => { document.querySelector('#chat-log').scrollTop = 0; });
  const paged = await pollPage(page, 'scrolling up did not load the older history', 10_000, () => {
    const items = [...document.querySelectorAll('#chat-log li.msg')];
    const t = (li) => li.querySelector('.msg-text').textContent.trim();
    const hello = items.find((li) => li.dataset.role === 'user' && li.dataset.source === 'webui' && t(li) === 'hello browser');
    const reply = items.find((li) => li.dataset.role === 'assistant' && t(li) === 'echo: hello browser');
    return hello && reply && items.indexOf(hello) < items.indexOf(reply)
      ? { ok: true, n: items.length, who: hello.querySelector('.msg-who').textContent } : { ok: false, why: `${items.length} items` };
  });
  if (paged.who !== 'you') fail(`this page's own messages should be labelled "you", got ${paged.who}`);
  const still = await page.evaluate(() => ({
    xss: window.__xss,
    handlers: [...document.querySelectorAll('#chat-log *')].filter((n) => [...n.attributes].some((a) => /^on/i.test(a.name))).length,
    // Images other than the thumbnails of stored blocks (the photo above).
    imgs: [...document.querySelectorAll('#chat-log img, #chat-log svg')].filter((n) => !(n.matches('.media-row > img.media-thumb')
      && /^\/api\/v1\/memory\/media\/blk_media_[0-9a-f]{12}\/data$/.test(n.getAttribute('src') || ''))).length,
  }));
  if (still.xss !== undefined || still.handlers || still.imgs) fail(`the hostile reply is not inert in the history: ${JSON.stringify(still)}`);
  log(`after a reload: ${first.n} newest history items, scrolled up to ${paged.n} (back to "hello browser"); hostile reply still inert`);

  await show('dashboard');
  // 8c. The daemon's log in the page: the Log tab, a level filter and a search box.
  await page.locator('#tab-logs').click();
  const logs = await pollPage(page, 'the Log tab showed no log lines', 10_000, () => {
    const lines = [...document.querySelectorAll('#logs-lines li.log-line')];
    return document.querySelector('#logs-lines').dataset.loaded && lines.length
      && !document.querySelector('#logs-view').hidden && document.querySelector('#event-log').hidden
      ? { ok: true, n: lines.length, levels: [...new Set(lines.map((l) => l.dataset.level))].join(',') }
      : { ok: false, why: `${lines.length} lines; error: ${document.querySelector('#logs-error').textContent}` };
  });
  await page.selectOption('#logs-level', 'warn');
  const warn = await pollPage(page, 'the level filter "warn" did not apply', 10_000, () => {
    const lines = [...document.querySelectorAll('#logs-lines li.log-line')];
    const bad = lines.filter((l) => l.dataset.level !== 'WARN' && l.dataset.level !== 'ERROR');
    return document.querySelector('#logs-lines').dataset.loaded && lines.length && !bad.length
      ? { ok: true, n: lines.length } : { ok: false, why: `${lines.length} lines, ${bad.length} below warn` };
  });
  await page.selectOption('#logs-level', '');
  await page.fill('#logs-q', 'plugin READY');
  const found = await pollPage(page, 'searching the log for "plugin READY" found nothing or let other lines through', 10_000, () => {
    const lines = [...document.querySelectorAll('#logs-lines li.log-line')];
    const other = lines.filter((l) => !l.textContent.toLowerCase().includes('plugin ready'));
    return document.querySelector('#logs-lines').dataset.loaded && lines.length && !other.length
      ? { ok: true, n: lines.length } : { ok: false, why: `${lines.length} lines, ${other.length} not matching` };
  });
  const logText = await page.textContent('#logs-lines');
  if (logText.includes('sk-test')) fail('the source\'s API key is shown in the log view');
  if (/\u001b\[/.test(logText)) fail('ANSI escapes in the log view');
  await page.locator('#tab-events').click();
  log(`log tab: ${logs.n} lines (${logs.levels}); warn and up: ${warn.n}; search "plugin READY": ${found.n}`);

  // 9. Layout: on 1440x900 the page does not scroll; the console's three panels
  //    are on screen with their tables fitting without a horizontal scrollbar, and
  //    the chat fills its own view.
  const layout = (sels) => page.evaluate((sels) => {
    const out = { problems: [] };
    const vw = window.innerWidth;
    const vh = window.innerHeight;
    const doc = document.scrollingElement;
    if (doc.scrollHeight > vh + 1) out.problems.push(`page scrolls vertically (${doc.scrollHeight} > ${vh})`);
    if (doc.scrollWidth > vw + 1) out.problems.push(`page scrolls horizontally (${doc.scrollWidth} > ${vw})`);
    for (const sel of sels) {
      const r = document.querySelector(sel)?.getBoundingClientRect();
      if (!r || r.width < 1 || r.height < 1) out.problems.push(`${sel} not shown`);
      else if (r.left < 0 || r.top < 0 || r.right > vw + 1 || r.bottom > vh + 1) {
        out.problems.push(`${sel} off screen (${Math.round(r.left)},${Math.round(r.top)} to ${Math.round(r.right)},${Math.round(r.bottom)})`);
      }
    }
    for (const sel of ['.tree-panel .table-wrap', '.plugins-panel .table-wrap']) {
      const w = document.querySelector(sel);
      if (w && w.offsetParent && w.scrollWidth > w.clientWidth + 1) out.problems.push(`${sel} overflows horizontally (${w.scrollWidth} > ${w.clientWidth})`);
    }
    return out;
  }, sels);
  const lay = await layout(['.tree-panel', '.plugins-panel', '.log-panel']);
  await show('chat');
  const chatLay = await layout(['.chat-panel', '#chat-input', '#chat-send', '#chat-stop']);
  lay.problems.push(...chatLay.problems);
  const chatWidth = await page.evaluate(() => document.querySelector('.chat-panel').getBoundingClientRect().width);
  if (chatWidth < 800) lay.problems.push(`the chat is ${Math.round(chatWidth)} px wide at 1440`);
  if (lay.problems.length) fail(`layout at 1440x900: ${lay.problems.join('; ')}`);
  log('layout fits 1440x900: the console\'s panels on screen, the chat across its view, no page or table scrollbars');

  if (shotPath) {
    await page.screenshot({ path: shotPath, fullPage: true, timeout: 10_000 });
    log(`screenshot written to ${shotPath}`);
  }
  // 10. A phone (375 px wide): nothing is cut off horizontally; the chat is usable.
  await page.setViewportSize({ width: 375, height: 812 });
  await page.waitForTimeout(200);
  const phoneCheck = (sels) => page.evaluate((sels) => {
    const vw = window.innerWidth;
    const problems = [];
    const doc = document.scrollingElement;
    if (doc.scrollWidth > vw) {
      // Name the outermost elements that stick out, to say what to fix.
      const out = [...document.querySelectorAll('body *')].filter((e) => {
        const r = e.getBoundingClientRect();
        const p = e.parentElement.getBoundingClientRect();
        return r.right > vw + 0.5 && p.right <= vw + 0.5;
      }).slice(0, 5).map((e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${e.className} (${Math.round(e.getBoundingClientRect().right)})`);
      problems.push(`page is ${doc.scrollWidth} px wide: ${out.join(', ')}`);
    }
    for (const sel of sels) {
      const r = document.querySelector(sel)?.getBoundingClientRect();
      if (!r || r.width < 1) problems.push(`${sel} not shown`);
      else if (r.left < 0 || r.right > vw + 0.5) problems.push(`${sel} cut off (${Math.round(r.left)} to ${Math.round(r.right)})`);
    }
    for (const m of document.querySelectorAll('#chat-log li.msg')) {
      const r = m.getBoundingClientRect();
      if (r.width && r.right > vw + 0.5) { problems.push(`a chat message reaches ${Math.round(r.right)} px`); break; }
    }
    return problems;
  }, sels);
  const phone = await phoneCheck(['.chat-panel', '#chat-input', '#chat-send', '#chat-stop']);
  if (shotPath) await page.screenshot({ path: shotPath.replace(/\.png$/, '') + '-chat-375.png', timeout: 10_000 });
  await show('dashboard');
  phone.push(...await phoneCheck(['.tree-panel', '.plugins-panel', '.log-panel', '#tab-logs']));
  if (phone.length) fail(`layout at 375 px: ${phone.join('; ')}`);
  if (shotPath) {
    const phoneShot = shotPath.replace(/\.png$/, '') + '-375.png';
    await page.screenshot({ path: phoneShot, fullPage: true, timeout: 10_000 });
    log(`375 px: nothing cut off horizontally; screenshot ${phoneShot}`);
  } else log('375 px: nothing cut off horizontally');

  // 11. Dark: the page follows the system's colour scheme, text stays readable.
  await page.setViewportSize({ width: 1440, height: 900 });
  await show('chat');
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(200);
  const dark = await page.evaluate(() => {
    const rgb = (c) => (c.match(/\d+(\.\d+)?/g) || []).slice(0, 3).map(Number);
    const lum = ([r, g, b]) => {
      const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const contrast = (el) => {
      const cs = getComputedStyle(el);
      let bgEl = el;
      let bg = cs.backgroundColor;
      while (bgEl && /rgba\(0, 0, 0, 0\)|transparent/.test(bg)) { bgEl = bgEl.parentElement; bg = bgEl ? getComputedStyle(bgEl).backgroundColor : 'rgb(255,255,255)'; }
      const a = lum(rgb(cs.color));
      const b = lum(rgb(bg));
      return { ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), bg: lum(rgb(bg)) };
    };
    const body = contrast(document.body);
    const msgs = [...document.querySelectorAll('#chat-log .msg-text')].slice(-6).map(contrast);
    return { bodyBg: body.bg, body: body.ratio, worstMsg: Math.min(...msgs.map((m) => m.ratio)) };
  });
  if (!(dark.bodyBg < 0.05)) fail(`dark scheme: the page background is not dark (luminance ${dark.bodyBg.toFixed(3)})`);
  if (!(dark.body >= 4.5 && dark.worstMsg >= 4.5)) fail(`dark scheme: text contrast below 4.5:1 (body ${dark.body.toFixed(1)}, chat ${dark.worstMsg.toFixed(1)})`);
  if (shotPath) await page.screenshot({ path: shotPath.replace(/\.png$/, '') + '-dark.png', timeout: 10_000 });
  log(`dark scheme: background luminance ${dark.bodyBg.toFixed(3)}, contrast body ${dark.body.toFixed(1)}:1, chat ≥ ${dark.worstMsg.toFixed(1)}:1`);

  if (pageErrors.length) fail(`the page raised ${pageErrors.length} error(s)`);
  return `${ids.length} actors rendered, ${target.id} restarted ${before} -> ${upd.n}, ${ev.type} logged; `
    + `chat echoed, stop cut a reply short; plugin echo restarted ${plug.restarts} -> ${pUpd.n}; `
    + `markdown safe, tool card, history paged after a reload, log filtered`;
}

run(main);
