#!/usr/bin/env node
// Real-browser end-to-end test of the WebUI views: settings (source editor with a
// real test call, inline validation, masked secrets), plugins (upload an .hmap, see
// its tool schemas, disable a skill, uninstall), memory (find and open a document,
// draw an entity's relations, delete one, run a heartbeat), tasks (queued inputs
// listed), Chinese texts, and screenshots of each view at 1440 and 375 px.
//
//   E2E_VENDOR_URL=http://127.0.0.1:V/v1 E2E_HMAP=/path/webdemo.hmap \
//     node views.mjs http://127.0.0.1:PORT [screenshot.png]
//
// tests/dashboard_e2e.rs prepares the daemon (the `pdf-tools` skill installed, no
// LLM source), the fake vendor and the package, and afterwards reads the vendor's
// recorded requests: "skill check before" must carry the skill, "skill check after"
// (sent once the browser disabled it) must not.
import { harness } from './lib.mjs';

const h = harness('views e2e');
const { base, shotPath, token, log, fail, fetchJson, postJson, putJson, waitHealthy, pollPage, launch, signIn, goView } = h;
const vendorUrl = process.env.E2E_VENDOR_URL || '';
const hmapPath = process.env.E2E_HMAP || '';
const KEY = 'sk-browser-typed-key-0123';

async function settings(page) {
  await goView(page, 'settings');
  await pollPage(page, 'the settings forms never loaded', 10_000, () => {
    const v = document.querySelector('#view-settings');
    const groups = [...document.querySelectorAll('.settings-group')].map((g) => g.dataset.ns);
    return v.dataset.loaded && groups.includes('core.agent') ? { ok: true, groups } : { ok: false, why: `groups: ${groups.join(', ')}` };
  });
  // Generated from the definitions: types, units, secrets masked.
  const form = await page.evaluate(() => {
    const q = (s) => document.querySelector(s);
    return {
      level: q('#set-core-daemon-log_level')?.tagName,
      options: [...(q('#set-core-daemon-log_level')?.options || [])].map((o) => o.value),
      turns: q('#set-core-agent-max_tool_turns')?.type,
      secret: q('#set-core-llm-api_key')?.type,
      secretValue: q('#set-core-llm-api_key')?.value,
      help: q('.field[data-key="core.agent.tool_timeout"] .field-help')?.textContent || '',
    };
  });
  if (form.level !== 'SELECT' || !form.options.includes('debug')) fail(`log_level is not a select of levels: ${JSON.stringify(form)}`);
  if (form.turns !== 'number') fail(`max_tool_turns is not a number input: ${JSON.stringify(form)}`);
  if (form.secret !== 'password' || form.secretValue !== '') fail(`core.llm.api_key is not an empty password field: ${JSON.stringify(form)}`);
  if (!/30s/.test(form.help)) fail(`tool_timeout shows no unit: ${form.help}`);

  // Find: words narrow the page to the fields that hold them.
  await page.fill('#settings-q', 'tool turns');
  const found = await pollPage(page, 'the find box did not narrow the settings', 5_000, () => {
    const shown = [...document.querySelectorAll('#view-settings .field')].filter((f) => !f.hidden).map((f) => f.dataset.key);
    return shown.includes('core.agent.max_tool_turns') && shown.length < 10 ? { ok: true, shown } : { ok: false, why: shown.length + ' shown' };
  });
  log(`find "tool turns": ${found.shown.join(', ')}`);
  await page.fill('#settings-q', '');
  await page.locator('#settings-q').dispatchEvent('input');

  // A refused value shows the daemon's reason under its field; nothing is written.
  // Groups are folded to their titles; the agent's opens with a click.
  const folded = await page.evaluate(() => document.querySelector('.settings-group[data-ns="core.agent"]').classList.contains('folded'));
  if (!folded) fail('the agent settings group is not folded on opening the page');
  await page.locator('.settings-group[data-ns="core.agent"] .group-toggle').click();
  await page.fill('#set-core-agent-max_tool_turns', '20000');
  await page.locator('.settings-group[data-ns="core.agent"] .group-save').click();
  const inline = await pollPage(page, 'no inline error under max_tool_turns', 5_000, () => {
    const e = document.querySelector('.field[data-key="core.agent.max_tool_turns"] .field-error');
    return e && e.textContent.includes('core.agent.max_tool_turns') ? { ok: true, text: e.textContent } : { ok: false, why: `error: ${e && e.textContent}` };
  });
  log(`inline validation error: ${inline.text.slice(0, 120)}`);
  const turns = (await fetchJson(`${base}/api/v1/settings`)).settings['core.agent.max_tool_turns'];
  if (turns !== 10) fail(`a refused value was written: max_tool_turns=${turns}`);
  // A good value is saved; "reset to default" deletes it again.
  const readTurns = async () => (await fetchJson(`${base}/api/v1/settings`)).settings['core.agent.max_tool_turns'];
  await page.fill('#set-core-agent-max_tool_turns', '12');
  await page.locator('.settings-group[data-ns="core.agent"] .group-save').click();
  await pollPage(page, 'max_tool_turns = 12 was not reported saved', 5_000, () => {
    const r = document.querySelector('.settings-group[data-ns="core.agent"] .result');
    return r && /core\.agent\.max_tool_turns/.test(r.textContent) ? { ok: true } : { ok: false, why: r && r.textContent };
  });
  if ((await readTurns()) !== 12) fail('max_tool_turns = 12 did not reach the daemon');
  await page.locator('.field[data-key="core.agent.max_tool_turns"] .field-reset').click();
  await page.locator('.settings-group[data-ns="core.agent"] .group-save').click();
  const deadline = Date.now() + 5_000;
  while ((await readTurns()) !== 10 && Date.now() < deadline) await page.waitForTimeout(100);
  if ((await readTurns()) !== 10) fail('reset to default did not bring max_tool_turns back to 10');
  log('a valid value saved, then reset to its default');

  // The history lists both changes, by "you"; Revert on the reset puts 12 back.
  const hist = await pollPage(page, 'the settings history does not list the two changes', 10_000, () => {
    const items = [...document.querySelectorAll('#settings-history li.history-item')]
      .filter((li) => li.querySelector('.history-key')?.textContent === 'core.agent.max_tool_turns');
    return items.length >= 2 ? { ok: true, first: items[0].textContent } : { ok: false, why: `${items.length} items` };
  });
  if (!/you/.test(hist.first) || !/12/.test(hist.first)) fail(`the newest change reads ${hist.first}`);
  await page.locator('#settings-history li.history-item .history-revert').first().click();
  const back = Date.now() + 5_000;
  while ((await readTurns()) !== 12 && Date.now() < back) await page.waitForTimeout(100);
  if ((await readTurns()) !== 12) fail('Revert in the history did not put max_tool_turns back to 12');
  await putJson(`${base}/api/v1/settings`, { 'core.agent.max_tool_turns': null });
  log(`history: "${hist.first.replace(/\s+/g, ' ').slice(0, 90)}"; Revert put 12 back`);

  // The MCP server list (the bundled bridge is installed): a row becomes an entry of
  // plugin.mcp.servers; removing it empties the list again.
  await page.locator('#mcp-body .card-actions button').first().click();
  const row = page.locator('#mcp-body .mcp-row').last();
  await row.locator('.mcp-name').fill('e2e-demo');
  await row.locator('.mcp-command').fill('/nonexistent/mcp-server');
  await row.locator('.mcp-args').fill('--stdio\n--verbose');
  await row.locator('.mcp-env').fill('DEMO_MODE=1');
  // A remote server: a URL and headers, no command.
  await page.locator('#mcp-body .card-actions button').first().click();
  const remote = page.locator('#mcp-body .mcp-row').last();
  await remote.locator('.mcp-name').fill('e2e-remote');
  await remote.locator('.mcp-url').fill('http://127.0.0.1:9/mcp');
  await remote.locator('.mcp-headers').fill('X-Key=k1');
  await page.locator('#mcp-body .card-actions .btn.primary').click();
  const readMcp = async () => (await fetchJson(`${base}/api/v1/settings`)).settings['plugin.mcp.servers'];
  let mcp;
  for (let i = 0; i < 50 && !(mcp = await readMcp()); i++) await page.waitForTimeout(100);
  const got = mcp && mcp['e2e-demo'];
  const rem = mcp && mcp['e2e-remote'];
  if (!got || got.command !== '/nonexistent/mcp-server' || got.args.join(' ') !== '--stdio --verbose' || got.env.DEMO_MODE !== '1'
    || !rem || rem.url !== 'http://127.0.0.1:9/mcp' || rem.headers['X-Key'] !== 'k1' || 'command' in rem
    || Object.keys(mcp).length !== 2) fail(`plugin.mcp.servers is ${JSON.stringify(mcp)}`);
  await page.locator('#mcp-body .mcp-row').last().locator('button.link').click();
  await page.locator('#mcp-body .mcp-row').last().locator('button.link').click();
  await page.locator('#mcp-body .card-actions .btn.primary').click();
  for (let i = 0; i < 50 && Object.keys((await readMcp()) || {}).length; i++) await page.waitForTimeout(100);
  if (Object.keys((await readMcp()) || {}).length) fail('removing the MCP row did not empty plugin.mcp.servers');
  log('MCP server list: a stdio row and a remote row saved as plugin.mcp.servers, then removed');

  // The source editor: add, fill, save, test (one real call), then chat with it.
  await page.fill('#source-new-name', 'fakevendor');
  await page.locator('#source-add button[type=submit]').click();
  const card = page.locator('.source-card[data-source="fakevendor"]');
  await card.waitFor({ timeout: 5_000 });
  await page.fill('#src-fakevendor-base_url', vendorUrl);
  await page.fill('#src-fakevendor-model', 'fake-model');
  // The adapter is a choice of the bundled ones, not a free text box.
  const adapters = await page.evaluate(() => [...document.querySelectorAll('#src-fakevendor-adapter option')].map((o) => o.value));
  if (!adapters.includes('openai') || !adapters.includes('anthropic')) fail(`the adapter is not a choice of the bundled adapters: ${adapters}`);
  await page.selectOption('#src-fakevendor-adapter', 'openai');
  await page.fill('#src-fakevendor-api_key', KEY);
  await page.fill('#src-fakevendor-priority', '5');
  // Timeouts and limits are folded under "More options".
  await card.locator('.more-fields > summary').click();
  await page.fill('#src-fakevendor-first_byte_timeout', '30s');
  await card.locator('.source-save').click();
  const saved = await pollPage(page, 'the saved source never came back as a stored card with its values in force', 10_000, () => {
    const c = document.querySelector('.source-card[data-source="fakevendor"]');
    const conc = c && c.querySelector('#src-fakevendor-max_concurrent')?.placeholder;
    return c && !c.classList.contains('unsaved') && c.querySelector('#src-fakevendor-model')?.value === 'fake-model' && conc
      ? { ok: true, vision: c.querySelector('#src-fakevendor-vision')?.selectedOptions[0]?.textContent, conc }
      : { ok: false, why: c ? `${c.className}; max_concurrent placeholder "${conc}"` : 'no card' };
  });
  // Unset fields say what is in force, not "off" or empty.
  if (!/\d/.test(saved.conc || '')) fail(`max_concurrent left empty shows no value in force: ${JSON.stringify(saved)}`);
  log(`stored source card: vision "${saved.vision}", max_concurrent "${saved.conc}"`);
  const leak = await page.evaluate((key) => {
    const inputs = [...document.querySelectorAll('input, textarea')].some((i) => i.value.includes(key));
    return inputs || document.documentElement.outerHTML.includes(key);
  }, KEY);
  if (leak) fail('the API key typed into the form came back to the page in clear');
  const keyField = await page.evaluate(() => document.querySelector('#src-fakevendor-api_key').placeholder);
  log(`source saved; its key shows as "${keyField}"`);
  await page.locator('.source-card[data-source="fakevendor"] .source-test-btn').click();
  const test = await pollPage(page, 'Test never showed OK', 20_000, () => {
    const r = document.querySelector('.source-card[data-source="fakevendor"] .source-test');
    return r && r.dataset.state === 'ok' ? { ok: true, text: r.textContent } : { ok: false, why: `${r && r.dataset.state}: ${r && r.textContent}` };
  });
  if (!/echo: /.test(test.text)) fail(`the test answer is not the vendor's: ${test.text}`);
  log(`Test: ${test.text}`);

  await goView(page, 'chat');
  await page.locator('#chat-input').click();
  await page.keyboard.type('hello from the settings page');
  await page.keyboard.press('Enter');
  await pollPage(page, 'no reply from the source configured in the form', 15_000, () => {
    const li = [...document.querySelectorAll('#chat-log li.msg')].find((x) => x.dataset.role === 'assistant' && !x.dataset.pending
      && x.querySelector('.msg-text')?.textContent.trim() === 'echo: hello from the settings page');
    return li ? { ok: true } : { ok: false };
  });
  log('chat answered by the source configured in the form');
}

async function plugins(page) {
  await goView(page, 'plugins');
  await pollPage(page, 'pdf-tools not listed as running', 10_000, () => {
    const c = document.querySelector('.plugin-card[data-plugin="pdf-tools"]');
    return c && c.dataset.state === 'running' ? { ok: true } : { ok: false, why: c ? c.dataset.state : 'no card' };
  });
  // Upload a package: installed, started, its tool listed with its parameter schema.
  await page.setInputFiles('#pl-file', hmapPath);
  await page.locator('#pl-install-btn').click();
  await pollPage(page, 'the upload did not install webdemo', 15_000, () => {
    const r = document.querySelector('#pl-install-result');
    const e = document.querySelector('#pl-install-error');
    return r.dataset.installed === 'webdemo' ? { ok: true } : { ok: false, why: `result=${r.textContent} error=${e.textContent}` };
  });
  const tool = await pollPage(page, 'webdemo_greet and its schema not listed', 10_000, () => {
    const d = document.querySelector('.plugin-card[data-plugin="webdemo"] .tool-schema[data-tool="webdemo_greet"]');
    const params = d ? [...d.querySelectorAll('.params td')].map((td) => td.textContent) : [];
    return d && params.includes('name *') && params.includes('string') ? { ok: true, params } : { ok: false, why: d ? params.join('|') : 'no tool' };
  });
  log(`uploaded webdemo.hmap: webdemo_greet(${tool.params.join(' ')})`);
  // The same package again: the daemon's refusal is shown.
  await page.setInputFiles('#pl-file', hmapPath);
  await page.locator('#pl-install-btn').click();
  const again = await pollPage(page, 'a second install showed no error', 10_000, () => {
    const e = document.querySelector('#pl-install-error');
    return e.textContent ? { ok: true, text: e.textContent } : { ok: false };
  });
  if (!/exists/.test(again.text)) fail(`second install error is not the daemon's: ${again.text}`);
  log(`second upload refused on the page: ${again.text.slice(0, 100)}`);

  // Disable the skill: the vendor's next request has no pdf-tools (checked by the Rust side).
  await postJson(`${base}/api/v1/messages`, { text: 'skill check before' });
  const skill = page.locator('.plugin-card[data-plugin="pdf-tools"]');
  await skill.locator('.plugin-toggle').click();
  await pollPage(page, 'pdf-tools did not turn disabled', 10_000, () => {
    const c = document.querySelector('.plugin-card[data-plugin="pdf-tools"]');
    return c && c.dataset.state === 'disabled' && c.querySelector('.plugin-toggle').dataset.action === 'enable'
      ? { ok: true } : { ok: false, why: c && c.dataset.state };
  });
  await postJson(`${base}/api/v1/messages`, { text: 'skill check after' });
  log('pdf-tools disabled from the page; prompts sent before and after');

  // Uninstall the uploaded plugin (two clicks: the button asks once more).
  const un = page.locator('.plugin-card[data-plugin="webdemo"] .plugin-uninstall');
  await un.click();
  await un.click();
  await pollPage(page, 'webdemo still listed after uninstall', 10_000, () => (
    document.querySelector('.plugin-card[data-plugin="webdemo"]') ? { ok: false } : { ok: true }));
  const left = (await fetchJson(`${base}/api/v1/plugins`)).plugins.map((p) => p.name);
  if (left.includes('webdemo')) fail('webdemo still in GET /api/v1/plugins after uninstall');
  log('webdemo uninstalled from the page');
}

async function memory(page) {
  const commit = (text) => postJson(`${base}/api/v1/messages`, { text }, 30_000);
  await commit(`call-tool doc_commit ${JSON.stringify({ summary: 'garden notes', content: 'The tomatoes need water every morning before nine.' })}`);
  await commit(`call-tool memory_commit ${JSON.stringify({ triples: [
    { subject: 'Alice', relation: 'likes', object: 'chess' },
    { subject: 'Alice', relation: 'lives_in', object: 'Paris' },
    { subject: 'Bob', relation: 'knows', object: 'Alice' },
  ] })}`);
  await goView(page, 'memory');
  await page.fill('#docs-q', 'tomatoes water');
  await page.locator('#docs-form button[type=submit]').click();
  await pollPage(page, 'the search found no garden notes', 10_000, () => {
    const li = [...document.querySelectorAll('#docs-list li.doc-item')].find((x) => x.textContent.includes('garden notes'));
    return li ? { ok: true } : { ok: false, why: document.querySelector('#docs-list').textContent.slice(0, 200) };
  });
  await page.locator('#docs-list li.doc-item').filter({ hasText: 'garden notes' }).locator('.doc-open').click();
  const doc = await page.textContent('#doc-view-content');
  if (!doc.includes('tomatoes need water')) fail(`the opened document shows ${JSON.stringify(doc)}`);
  log('document found by search and opened');

  // Before any name is typed the graph shows the most connected entities.
  const overview = await pollPage(page, 'the graph showed nothing on opening the memory view', 60_000, () => {
    const rows = [...document.querySelectorAll('#graph-rels tr.rel-row')];
    return rows.some((r) => r.textContent.includes('Alice')) && document.querySelector('#graph-what').textContent
      ? { ok: true, n: rows.length } : { ok: false, why: `${rows.length} relation rows; ${document.querySelector('#graph-error').textContent}` };
  });
  log(`graph on opening: the most connected entities, ${overview.n} relations among them`);
  await page.fill('#graph-q', 'Alice');
  await page.selectOption('#graph-depth', '1');
  await page.locator('#graph-form button[type=submit]').click();
  // Generous: the first drawing fetches Cytoscape (440 kB) and runs its force layout in
  // software rendering, which took over 15 s with the whole suite loading two cores.
  const drawn = await pollPage(page, 'Alice\'s relations were not drawn', 60_000, () => {
    const c = document.querySelector('#graph-canvas');
    const n = Number(c.dataset.nodes);
    return n >= 4 && c.querySelector('canvas') ? { ok: true, n, e: Number(c.dataset.edges) } : { ok: false, why: `nodes=${c.dataset.nodes} cytoscape=${Boolean(window.cytoscape)} count=${document.querySelector('#graph-count').textContent} error=${document.querySelector('#graph-error').textContent}` };
  });
  log(`graph of Alice drawn by cytoscape: ${drawn.n} nodes, ${drawn.e} edges`);
  const likes = page.locator('#graph-rels tr.rel-row').filter({ hasText: 'likes' });
  await likes.locator('.rel-delete').click();
  await likes.locator('.rel-delete').click();
  await pollPage(page, 'the deleted relation is still shown', 10_000, (before) => {
    const rows = [...document.querySelectorAll('#graph-rels tr.rel-row')];
    return !rows.some((r) => r.textContent.includes('likes')) && Number(document.querySelector('#graph-canvas').dataset.edges) === before - 1
      ? { ok: true } : { ok: false, why: `${rows.length} rows` };
  }, drawn.e);
  log('relation "Alice likes chess" deleted from the page');
  const livesId = await page.locator('#graph-rels tr.rel-row').filter({ hasText: 'lives_in' }).getAttribute('data-id');
  const lives = page.locator(`#graph-rels tr.rel-row[data-id="${livesId}"]`);
  await lives.locator('.rel-edit').click();
  await lives.locator('input.rel-input').nth(2).fill('Lyon');
  await lives.locator('.rel-save').click();
  await pollPage(page, 'the edited relation does not read "Alice lives_in Lyon"', 10_000, () => {
    const rows = [...document.querySelectorAll('#graph-rels tr.rel-row')].map((r) => r.textContent);
    return rows.some((t) => t.includes('lives_in') && t.includes('Lyon')) ? { ok: true } : { ok: false, why: rows.join(' | ') };
  });
  log('relation edited to "Alice lives_in Lyon" from the page');

  // Notes (the memo plugin): added by the model, listed and searched on the page
  // (Chinese found inside a sentence, tags too), marked done from it.
  await commit(`call-tool memo_add ${JSON.stringify({ text: '周末买牛奶和鸡蛋', tags: ['购物'] })}`);
  await commit(`call-tool memo_add ${JSON.stringify({ text: 'Call the plumber about the sink', tags: ['home'], remind_at: '2d' })}`);
  await page.fill('#notes-q', '');
  await page.locator('#notes-form button[type=submit]').click();
  await pollPage(page, 'the notes panel does not list both notes', 10_000, () => {
    const n = document.querySelectorAll('#notes-list li.note-item').length;
    return n === 2 ? { ok: true } : { ok: false, why: document.querySelector('#notes-list').textContent.slice(0, 200) };
  });
  for (const [q, want] of [['牛奶', '周末买牛奶和鸡蛋'], ['PLUMBER', 'Call the plumber about the sink'], ['home', 'Call the plumber about the sink']]) {
    await page.fill('#notes-q', q);
    await page.locator('#notes-form button[type=submit]').click();
    await pollPage(page, `searching notes for ${q} did not find only ${want}`, 10_000, (a) => {
      const items = [...document.querySelectorAll('#notes-list li.note-item .note-text')].map((x) => x.textContent);
      return document.querySelector('#notes-list').dataset.query === a[0] && items.length === 1 && items[0] === a[1]
        ? { ok: true } : { ok: false, why: items.join(' | ') };
    }, [q, want]);
  }
  await page.fill('#notes-q', '牛奶');
  await page.locator('#notes-form button[type=submit]').click();
  await pollPage(page, 'the milk note is not listed alone', 10_000, () => (
    document.querySelectorAll('#notes-list li.note-item').length === 1 && document.querySelector('#notes-list').dataset.query === '牛奶' ? { ok: true } : { ok: false }));
  await page.locator('#notes-list li.note-item .note-done').click();
  await pollPage(page, 'the note marked done is still listed', 10_000, () => (
    document.querySelectorAll('#notes-list li.note-item').length === 0 ? { ok: true } : { ok: false }));
  await page.check('#notes-done');
  await pollPage(page, 'the done note is not shown with "done ones too"', 10_000, () => {
    const li = document.querySelector('#notes-list li.note-item[data-done="1"]');
    return li ? { ok: true } : { ok: false, why: document.querySelector('#notes-list').textContent.slice(0, 200) };
  });
  await page.uncheck('#notes-done');
  log('notes listed, searched (Chinese, case, tags) and one marked done from the page');

  const hb = page.locator('#mem-status tr[data-heartbeat="review"] .hb-run');
  await hb.click();
  await pollPage(page, 'review heartbeat shows no round after Run now', 10_000, () => {
    const c = document.querySelector('#mem-status tr[data-heartbeat="review"] .hb-last');
    return c && /items/.test(c.textContent) ? { ok: true } : { ok: false, why: c && c.textContent };
  });
  log('heartbeat "review" run from the page');
}

async function tasks(page) {
  // A resident sub-agent exists (made by the model's tool call), idle after its first round.
  await postJson(`${base}/api/v1/messages`,
    { text: `call-tool resident_agents ${JSON.stringify({ action: 'create', id: 'watcher', task: 'slow 50 watch the door' })}` }, 30_000);
  // Its first round done and reported (an L3 interrupt the main agent answers), so
  // nothing preempts the slow task below.
  for (let i = 0; ; i++) {
    const r = (await fetchJson(`${base}/api/v1/residents`)).residents[0];
    const main = await fetchJson(`${base}/api/v1/tasks`);
    const idle = !main.running && !(main.interrupts || []).some((q) => q.length);
    if (r && r.rounds === 1 && idle) break;
    if (i > 200) fail(`the resident's first round was not reported: ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
  // One slow input runs, three wait in the ready queue.
  await postJson(`${base}/api/v1/messages`, { text: 'slow 9000 the long one', sync: false });
  for (const n of ['one', 'two', 'three']) await postJson(`${base}/api/v1/messages`, { text: `slow 100 queued ${n}`, sync: false });
  await goView(page, 'tasks');
  const q = await pollPage(page, 'the running task and 3 queued inputs are not listed', 8_000, () => {
    const ready = document.querySelectorAll('#tasks-ready li[data-task-id]').length;
    const running = document.querySelectorAll('#tasks-running li[data-task-id]').length;
    return ready === 3 && running === 1 ? { ok: true, ids: [...document.querySelectorAll('#tasks-ready li')].map((l) => l.textContent) }
      : { ok: false, why: `running ${running}, ready ${ready}` };
  });
  log(`tasks view: 1 running, ready queue ${q.ids.join(' | ')}`);
  // Each task says what it is: its source and the start of its text.
  for (const n of ['one', 'two', 'three']) {
    if (!q.ids.some((t) => t.includes(`slow 100 queued ${n}`) && t.includes('http'))) fail(`queued ${n} shows no text: ${q.ids.join(' | ')}`);
  }
  await pollPage(page, 'the running task shows no text', 8_000, () => {
    const li = document.querySelector('#tasks-running li[data-task-id]');
    return li && li.textContent.includes('slow 9000 the long one') ? { ok: true } : { ok: false, why: li && li.textContent };
  });
  // The resident is listed with its task, and is destroyed from the page.
  await pollPage(page, 'the resident watcher is not listed', 8_000, () => {
    const li = document.querySelector('#tasks-residents li[data-resident="watcher"]');
    return li && li.textContent.includes('watch the door') && li.textContent.includes('1 rounds') ? { ok: true } : { ok: false, why: li ? li.textContent : 'absent' };
  });
  await page.click('#tasks-residents li[data-resident="watcher"] button.danger');
  await pollPage(page, 'the destroyed resident is still listed', 8_000, () => (
    document.querySelector('#tasks-residents li[data-resident]') ? { ok: false } : { ok: true }));
  const left = await fetchJson(`${base}/api/v1/residents`);
  if (left.residents.length) fail(`resident still in GET /api/v1/residents: ${JSON.stringify(left)}`);
  log('tasks view: tasks show their text; the resident watcher is listed and destroyed from the page');
  await goView(page, 'dashboard');
  await pollPage(page, 'the scheduler row shows no backlog of 3', 6_000, () => {
    const b = document.querySelector('tr[data-actor-id="kernel/agent/scheduler"] .backlog');
    return b && b.dataset.backlog === '3' ? { ok: true } : { ok: false, why: b ? b.textContent : 'no backlog cell' };
  });
  log('dashboard: the scheduler row shows backlog 3');
}

async function language(page) {
  await putJson(`${base}/api/v1/settings`, { 'core.agent.language': 'zh' });
  await page.reload({ waitUntil: 'domcontentloaded' });
  await pollPage(page, 'the nav is not in Chinese with core.agent.language = zh', 5_000, () => {
    const a = document.querySelector('.views-nav a[data-view="settings"]');
    const send = document.querySelector('#chat-send');
    return a && a.textContent === '设置' && send.textContent === '发送' ? { ok: true } : { ok: false, why: `${a && a.textContent} / ${send.textContent}` };
  });
  await putJson(`${base}/api/v1/settings`, { 'core.agent.language': 'en' });
  await page.reload({ waitUntil: 'domcontentloaded' });
  await pollPage(page, 'the nav did not come back to English', 5_000, () => {
    const a = document.querySelector('.views-nav a[data-view="settings"]');
    return a && a.textContent === 'Settings' ? { ok: true } : { ok: false, why: a && a.textContent };
  });
  log('texts follow core.agent.language (zh, then en)');
}

async function screenshots(page) {
  const stem = shotPath ? shotPath.replace(/\.png$/, '') : '';
  for (const view of ['chat', 'dashboard', 'settings', 'plugins', 'memory', 'tasks']) {
    for (const width of [1440, 375]) {
      await page.setViewportSize({ width, height: width === 375 ? 812 : 900 });
      await goView(page, view);
      if (view === 'memory') {
        // Drawn again after the language reload, so the screenshot shows the graph.
        await page.fill('#graph-q', 'Alice');
        await page.locator('#graph-form button[type=submit]').click();
        await pollPage(page, 'the graph was not drawn again', 10_000, () => (
          Number(document.querySelector('#graph-canvas').dataset.nodes) >= 3 ? { ok: true } : { ok: false }));
      }
      await page.waitForTimeout(400);
      const over = await page.evaluate(() => {
        const vw = window.innerWidth;
        const doc = document.scrollingElement;
        if (doc.scrollWidth <= vw) return null;
        // Name what sticks out (outermost first), to say what to fix.
        const out = [...document.querySelectorAll('body *')].filter((e) => {
          const r = e.getBoundingClientRect();
          return r.right > vw + 0.5 || e.scrollWidth > vw + 0.5;
        }).slice(0, 6).map((e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${e.className} (right ${Math.round(e.getBoundingClientRect().right)}, scrollWidth ${e.scrollWidth})`);
        return `page is ${doc.scrollWidth} px wide at ${vw}: ${out.join(', ')}`;
      });
      if (over) fail(`${view}: ${over}`);
      if (stem) await page.screenshot({ path: `${stem}-${view}-${width}.png`, fullPage: true, timeout: 10_000 });
    }
    log(`${view}: nothing cut off at 375 px${stem ? `; screenshots ${stem}-${view}-{1440,375}.png` : ''}`);
  }
  await page.setViewportSize({ width: 1440, height: 900 });
  // Dark: the views follow the system scheme with readable text.
  await page.emulateMedia({ colorScheme: 'dark' });
  for (const view of ['settings', 'plugins']) {
    await goView(page, view);
    await page.waitForTimeout(200);
    const dark = await page.evaluate(() => {
      const rgb = (c) => (c.match(/\d+(\.\d+)?/g) || []).slice(0, 3).map(Number);
      const lum = ([r, g, b]) => {
        const f = (v) => { const x = v / 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
      };
      const ratio = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      const bg = lum(rgb(getComputedStyle(document.body).backgroundColor));
      const worst = Math.min(...[...document.querySelectorAll('.page:not([hidden]) .field-label, .page:not([hidden]) .card-title, .page:not([hidden]) .kv dd')]
        .slice(0, 40).map((e) => {
          let p = e; let c = 'rgba(0, 0, 0, 0)';
          while (p && /rgba\(0, 0, 0, 0\)|transparent/.test(c)) { c = getComputedStyle(p).backgroundColor; p = p.parentElement; }
          return ratio(lum(rgb(getComputedStyle(e).color)), lum(rgb(c)));
        }));
      return { bg, worst };
    });
    if (!(dark.bg < 0.05) || !(dark.worst >= 4.5)) fail(`${view} in dark: background luminance ${dark.bg.toFixed(3)}, worst text contrast ${dark.worst.toFixed(1)}`);
    if (stem) await page.screenshot({ path: `${stem}-${view}-dark.png`, timeout: 10_000 });
    log(`${view} in dark: background ${dark.bg.toFixed(3)}, text contrast ≥ ${dark.worst.toFixed(1)}:1`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

async function main() {
  if (!vendorUrl || !hmapPath) fail('set E2E_VENDOR_URL and E2E_HMAP (tests/dashboard_e2e.rs does)');
  await waitHealthy(Date.now() + 10_000);
  const { page } = await launch();
  await signIn(page, token);
  log('signed in');
  await settings(page);
  await plugins(page);
  await memory(page);
  await tasks(page);
  await language(page);
  await screenshots(page);
  return 'settings, plugins, memory and tasks views';
}

h.run(main);
