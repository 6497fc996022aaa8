#!/usr/bin/env node
// An acknowledged message the LLM cannot answer is never lost from the owner's view:
// while it waits, the chat says so; when it fails for good it is a card with why,
// Retry and Discard.
//
//   node dead.mjs http://127.0.0.1:PORT [screenshot-prefix]
//
// tests/dashboard_e2e.rs prepares the daemon: the scripted vendor (which answers the
// text `fail` with HTTP 500) and `core.agent.outage_wait` of a few seconds.
import { harness } from './lib.mjs';

const h = harness('dead-letter e2e');
const { base, shotPath, token, log, fail, fetchJson, postJson, waitHealthy, launch, signIn, pollPage, run } = h;

async function openCard(page, what, not) {
  return pollPage(page, `no dead-input card (${what})`, 60_000, (skip) => {
    const li = [...document.querySelectorAll('#chat-log li.dead')].find((l) => !l.dataset.settled && l.dataset.deadId !== skip);
    return li ? { ok: true, id: li.dataset.deadId, text: li.textContent } : { ok: false, why: document.querySelector('#chat-status')?.textContent || '' };
  }, not || '');
}

async function main() {
  await waitHealthy(Date.now() + 10_000);
  const { context, page } = await launch();
  await signIn(page, token);

  await postJson(`${base}/api/v1/messages`, { text: 'fail', sync: false });
  await pollPage(page, 'the chat never said the input waits', 20_000, () => {
    const t = document.querySelector('#chat-status')?.textContent || '';
    return /no LLM source answers/.test(t) ? { ok: true } : { ok: false, why: t };
  });
  log('the chat says the input waits for a source');
  const first = await openCard(page, 'after the wait');
  if (!/fail/.test(first.text) || !/Why:/.test(first.text) || !/LLM/.test(first.text)) fail(`the card does not say what and why: ${first.text}`);
  const li = page.locator(`#chat-log li.dead[data-dead-id="${first.id}"]`);
  await li.scrollIntoViewIfNeeded();
  if (shotPath) await page.screenshot({ path: `${shotPath}-1440.png` });
  await page.setViewportSize({ width: 375, height: 812 });
  await li.scrollIntoViewIfNeeded();
  if (shotPath) await page.screenshot({ path: `${shotPath}-375.png` });
  const box = await li.boundingBox();
  if (!box || box.x < 0 || box.x + box.width > 375 + 1) fail(`the card does not fit a phone: ${JSON.stringify(box)}`);

  await li.getByRole('button', { name: 'Retry' }).click();
  await pollPage(page, 'the card did not say Sent again', 10_000, (id) => {
    const l = document.querySelector(`#chat-log li.dead[data-dead-id="${id}"]`);
    return l && l.dataset.settled === 'retried' ? { ok: true } : { ok: false, why: l ? l.textContent : 'gone' };
  }, first.id);
  log('retried from the chat');
  // The vendor still fails it: it comes back as a new card, which is discarded.
  await page.setViewportSize({ width: 1440, height: 900 });
  const second = await openCard(page, 'after the retry', first.id);
  await page.locator(`#chat-log li.dead[data-dead-id="${second.id}"]`).getByRole('button', { name: 'Discard' }).click();
  await pollPage(page, 'the card did not say Discarded', 10_000, (id) => {
    const l = document.querySelector(`#chat-log li.dead[data-dead-id="${id}"]`);
    return l && l.dataset.settled === 'discarded' ? { ok: true } : { ok: false, why: l ? l.textContent : 'gone' };
  }, second.id);
  const left = await fetchJson(`${base}/api/v1/inbox/dead`);
  if (left.dead.length) fail(`still on the list: ${JSON.stringify(left)}`);
  await context.close();
  return 'a failed input was shown waiting, then retried and discarded from the chat';
}

run(main);
