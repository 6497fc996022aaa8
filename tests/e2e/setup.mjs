#!/usr/bin/env node
// First run in the page: a fresh daemon with no model shows the setup card above the
// chat; a person picks a provider, pastes a key, names the model (the address points
// at the scripted vendor, as a self-hosted server's would), connects, and the first
// message is answered — no curl, no Settings page. At 1440 and 375 px.
//
//   VENDOR_URL=http://127.0.0.1:PORT/v1 node setup.mjs http://127.0.0.1:PORT [screenshot-prefix]
import { harness } from './lib.mjs';

const h = harness('setup e2e');
const { base, shotPath, token, log, fail, waitHealthy, launch, signIn, pollPage, fetchJson, run } = h;
const vendorUrl = process.env.VENDOR_URL || fail('VENDOR_URL is not set');

async function main() {
  await waitHealthy(Date.now() + 10_000);
  const { context, page } = await launch();
  await page.setViewportSize({ width: 375, height: 812 });
  await signIn(page, token);
  await pollPage(page, 'no setup card on a daemon without a model', 10_000, () => {
    const card = document.querySelector('#setup');
    const providers = card ? card.querySelectorAll('#setup-provider option').length : 0;
    return providers >= 5 ? { ok: true } : { ok: false, why: `card=${!!card} providers=${providers}` };
  });
  const wide = await page.evaluate(() => document.scrollingElement.scrollWidth);
  if (wide > 376) fail(`the page is ${wide} px wide on a 375 px phone`);
  if (shotPath) await page.screenshot({ path: `${shotPath}-375.png`, fullPage: true });
  await page.setViewportSize({ width: 1440, height: 900 });
  // A key is asked for before anything is saved.
  await page.selectOption('#setup-provider', 'openai');
  await page.locator('#setup form button[type="submit"]').click();
  const missing = await page.locator('#setup .setup-status').textContent();
  if (!/key/i.test(missing)) fail(`Connect without a key said: ${missing}`);
  await page.locator('#setup-key').fill('sk-first-run');
  await page.locator('#setup-model').fill('fake-model');
  await page.locator('#setup details summary').click();
  await page.locator('#setup-url').fill(vendorUrl);
  if (shotPath) await page.screenshot({ path: `${shotPath}-1440.png` });
  await page.locator('#setup form button[type="submit"]').click();
  const ok = await pollPage(page, 'the setup never connected', 20_000, () => {
    const s = document.querySelector('#setup .setup-status');
    if (!s) return { ok: true, text: '(card gone)' };
    return s.dataset.state === 'ok' ? { ok: true, text: s.textContent } : { ok: s.dataset.state === 'error' ? false : false, why: s.textContent };
  });
  log(`setup: ${ok.text}`);
  if (shotPath) await page.screenshot({ path: `${shotPath}-connected-1440.png` });
  await pollPage(page, 'the setup card stayed after connecting', 5_000, () => (
    document.querySelector('#setup') ? { ok: false, why: 'still there' } : { ok: true }
  ));
  const sources = await fetchJson(`${base}/api/v1/llm/sources`);
  if (sources.current !== 'openai') fail(`the connected source is not current: ${JSON.stringify(sources.current)}`);
  await page.locator('#chat-input').fill('hello after setup');
  await page.keyboard.press('Enter');
  const reply = await pollPage(page, 'the first message was not answered', 15_000, () => {
    const li = [...document.querySelectorAll('#chat-log li[data-role="assistant"]')].pop();
    const text = li && !li.dataset.pending ? (li.querySelector('.msg-text') || li).textContent : '';
    return /echo: hello after setup/.test(text) ? { ok: true, text } : { ok: false, why: text || 'no reply yet' };
  });
  log(`first answer: ${reply.text.trim().slice(0, 80)}`);
  // Regenerate asks the same question again (no duplicate refusal), Edit puts a
  // question back in the box, Copy says it copied.
  const lastAnswer = page.locator('#chat-log li[data-role="assistant"]').last();
  await lastAnswer.hover();
  await lastAnswer.locator('.msg-act[data-act="regenerate"]').click();
  await pollPage(page, 'Regenerate did not answer the question again', 15_000, () => {
    const n = [...document.querySelectorAll('#chat-log li[data-role="assistant"]')]
      .filter((li) => !li.dataset.pending && /echo: hello after setup/.test(li.textContent)).length;
    return n >= 2 ? { ok: true } : { ok: false, why: `${n} answers` };
  });
  const question = page.locator('#chat-log li[data-role="user"]').last();
  await question.hover();
  await question.locator('.msg-act[data-act="edit"]').click();
  const boxed = await page.locator('#chat-input').inputValue();
  if (boxed !== 'hello after setup') fail(`Edit put ${JSON.stringify(boxed)} in the box`);
  await page.locator('#chat-input').fill('');
  await lastAnswer.hover();
  await lastAnswer.locator('.msg-act[data-act="copy"]').click();
  await pollPage(page, 'Copy never said it copied', 5_000, () => {
    const b = [...document.querySelectorAll('#chat-log li[data-role="assistant"] .msg-act[data-act="copy"]')].pop();
    return b && b.textContent === 'Copied' ? { ok: true } : { ok: false, why: b ? b.textContent : 'no button' };
  });
  log('regenerate answered again, edit filled the box, copy copied');
  // History: the day's conversation is listed, a search finds a turn, and picking it
  // shows it until "Back to now"; New chat starts an empty timeline.
  await page.locator('#chat-history').click();
  await pollPage(page, 'no conversation listed', 5_000, () => {
    const items = [...document.querySelectorAll('#chat-found .chat-pick')].map((b) => b.textContent);
    return items.some((t) => /hello after setup/.test(t)) ? { ok: true } : { ok: false, why: items.join(' | ') || 'none' };
  });
  await page.locator('#chat-q').fill('AFTER SETUP');
  await pollPage(page, 'the search found nothing', 5_000, () => {
    const items = [...document.querySelectorAll('#chat-found .chat-pick')];
    return items.length >= 2 && /after setup/i.test(items[0].textContent) ? { ok: true } : { ok: false, why: String(items.length) };
  });
  if (shotPath) await page.screenshot({ path: `${shotPath}-history-1440.png` });
  await page.locator('#chat-found .chat-pick').first().click();
  await pollPage(page, 'picking a search result did not show it', 5_000, () => (
    !document.querySelector('#chat-viewing').hidden && /hello after setup/.test(document.querySelector('#chat-log').textContent) ? { ok: true } : { ok: false }));
  await page.locator('#chat-viewing button').click();
  await page.locator('#chat-history').click();
  await page.locator('#chat-new').click();
  await pollPage(page, 'New chat did not start a new conversation', 5_000, () => (
    document.querySelector('#chat-log .chat-divider') ? { ok: true } : { ok: false }));
  const ctx = await fetchJson(`${base}/api/v1/memory/context`);
  if (ctx.events.length) fail(`after New chat the timeline still holds ${ctx.events.length} events`);
  log('history listed the conversation, search found it, New chat emptied the timeline');
  // Esc stops an answer being written; the words already shown stay, marked.
  await page.locator('#chat-input').fill('trickle 400 one two three four five six seven eight nine ten');
  await page.keyboard.press('Enter');
  await pollPage(page, 'the trickled answer never started', 15_000, () => {
    const li = [...document.querySelectorAll('#chat-log li[data-role="assistant"]')].pop();
    return li && /two/.test(li.textContent) ? { ok: true } : { ok: false, why: li ? li.textContent : 'none' };
  });
  await page.locator('#chat-input').press('Escape');
  const stopped = await pollPage(page, 'Esc did not stop the answer, keeping its words', 15_000, () => {
    const li = [...document.querySelectorAll('#chat-log li[data-role="assistant"]')].pop();
    const text = li && !li.dataset.pending ? (li.querySelector('.msg-text') || li).textContent : '';
    return /one two/.test(text) && /\[stopped\]/.test(text) && !/ten/.test(text) ? { ok: true, text } : { ok: false, why: text || 'pending' };
  });
  log(`Esc: ${stopped.text.trim().replace(/\s+/g, ' ')}`);
  // The theme switch: auto → light → dark, kept across a reload.
  const scheme = () => page.evaluate(() => ({
    theme: document.documentElement.dataset.themeChoice || 'auto',
    bg: getComputedStyle(document.body).backgroundColor,
    label: document.querySelector('#theme').textContent,
  }));
  await page.locator('#theme').click();
  await page.locator('#theme').click();
  const dark = await scheme();
  if (dark.theme !== 'dark' || !/rgb\(2\d, 2\d, 2\d\)/.test(dark.bg) || !/dark/.test(dark.label)) fail(`the theme switch did not make it dark: ${JSON.stringify(dark)}`);
  await page.reload({ waitUntil: 'domcontentloaded' });
  await page.waitForTimeout(300);
  const kept = await scheme();
  if (kept.theme !== 'dark') fail(`the dark theme was not kept across a reload: ${JSON.stringify(kept)}`);
  if (shotPath) await page.screenshot({ path: `${shotPath}-dark-1440.png` });
  log(`theme: ${kept.label}, background ${kept.bg}`);
  await context.close();
  return 'a fresh daemon is set up in the page and answers its first message';
}

run(main);
