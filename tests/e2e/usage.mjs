#!/usr/bin/env node
// The usage view: the days' tokens as bars, the calls by kind and by model with their
// cost, and every limit that is set with its period's spending — read by a person at
// 1440 and 375 px.
//
//   node usage.mjs http://127.0.0.1:PORT [screenshot-prefix]
//
// tests/dashboard_e2e.rs prepares the daemon: a few answered turns on the scripted
// vendor and a price table, so there is something to show.
import { harness } from './lib.mjs';

const h = harness('usage e2e');
const { base, shotPath, token, log, fail, waitHealthy, launch, signIn, pollPage, putJson, fetchJson, run } = h;

async function main() {
  await waitHealthy(Date.now() + 10_000);
  const { context, page } = await launch();
  await signIn(page, token);
  // An answer in the chat says what it cost.
  await page.locator('#chat-input').fill('what does this cost');
  await page.keyboard.press('Enter');
  const meta = await pollPage(page, 'the answer does not say its cost', 15_000, () => {
    const li = [...document.querySelectorAll('#chat-log li')].find((l) => l.dataset.role === 'assistant' && !l.dataset.pending
      && (l.querySelector('.msg-text') || l).textContent.includes('what does this cost'));
    const m = li && li.querySelector('.msg-meta') ? li.querySelector('.msg-meta').textContent : '';
    return /\$/.test(m) ? { ok: true, meta: m } : { ok: false, why: m || 'no reply yet' };
  });
  log(`the answer's line: ${meta.meta}`);
  if (!/memory tokens/.test(meta.meta)) fail(`the answer's line does not say how much memory it carried: ${meta.meta}`);
  if (!/\d+(\.\d)? (ms|s)\b/.test(meta.meta)) fail(`the answer's line does not say how long it took: ${meta.meta}`);
  const reply = page.locator('#chat-log li[data-role="assistant"]').last();
  await reply.scrollIntoViewIfNeeded();
  if (shotPath) await page.screenshot({ path: `${shotPath}-chat-1440.png` });
  // A money limit the next answer cannot fit: the owner is told once, in the chat, which
  // limit and where to change it.
  await putJson(`${base}/api/v1/settings`, { 'core.llm.budget.daily_usd': 0.000001 });
  for (let i = 0; i < 50; i++) {
    const s = await fetchJson(`${base}/api/v1/llm/sources`);
    if (s.budget && s.budget.daily_usd > 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await page.locator('#chat-input').fill('one more, over the money limit');
  await page.keyboard.press('Enter');
  const card = await pollPage(page, 'no budget notice in the chat', 15_000, () => {
    const li = document.querySelector('#chat-log li[data-role="budget"]');
    return li ? { ok: true, text: li.textContent } : { ok: false, why: 'no card' };
  });
  if (!/core\.llm\.budget\.daily_usd/.test(card.text)) fail(`the notice does not name its setting: ${card.text}`);
  log(`the budget notice: ${card.text.slice(0, 160)}`);
  await page.locator('#chat-log li[data-role="budget"]').scrollIntoViewIfNeeded();
  if (shotPath) await page.screenshot({ path: `${shotPath}-budget-1440.png` });
  // Limits from every corner of the matrix: they read as one row each, with what the
  // period spent and when it resets.
  await putJson(`${base}/api/v1/settings`, {
    'core.llm.budget.daily_usd': 0,
    'core.llm.budget.monthly_tokens': 2000000,
    'core.llm.budget.background_daily_tokens': 50000,
    'core.llm.budget.guest_monthly_usd': 5,
    'core.llm.sources.fake.monthly_usd': 20,
  });
  await page.goto(`${base}/#/usage`);
  const got = await pollPage(page, 'the usage view never loaded', 20_000, () => {
    const v = document.querySelector('#view-usage');
    if (!v || v.hidden || !v.dataset.loaded) return { ok: false, why: 'not loaded' };
    const cols = document.querySelectorAll('#usage-chart .usage-col').length;
    const kinds = [...document.querySelectorAll('#usage-by-kind td.usage-key')].map((td) => td.textContent);
    const total = document.querySelector('#usage-total')?.textContent || '';
    const limits = [...document.querySelectorAll('#usage-limits tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent).join(' = '));
    const ok = kinds.includes('your turns') && limits.some((l) => l.startsWith('Source fake · month · dollars'));
    return ok ? { ok: true, cols, kinds, total, limits } : { ok: false, why: JSON.stringify({ cols, kinds, total, limits }) };
  });
  log(`limits: ${got.limits.join(' | ')}`);
  for (const want of ['All calls · month · tokens', 'Background work · day · tokens', 'Each guest · month · dollars', 'Source fake · month · dollars']) {
    if (!got.limits.some((l) => l.startsWith(want) && /= (in \d+ h|\d{4}-\d\d-\d\d)$/.test(l))) fail(`no "${want}" row with its reset: ${got.limits.join(' | ')}`);
  }
  if (got.cols < 28) fail(`the chart shows ${got.cols} days, not the month`);
  if (!/\$/.test(got.total) || !/calls/.test(got.total)) fail(`the total does not say calls and cost: ${got.total}`);
  log(`chart of ${got.cols} days; kinds ${got.kinds.join(', ')}; ${got.total}`);
  if (shotPath) await page.screenshot({ path: `${shotPath}-1440.png`, fullPage: true });
  await page.setViewportSize({ width: 375, height: 812 });
  const overflow = await page.evaluate(() => document.scrollingElement.scrollWidth);
  if (overflow > 376) fail(`the page is ${overflow} px wide on a 375 px phone`);
  if (shotPath) await page.screenshot({ path: `${shotPath}-375.png`, fullPage: true });
  await context.close();
  return 'an answer says its cost; the usage view shows the days, the kinds and the cost';
}

run(main);
