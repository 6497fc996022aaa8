#!/usr/bin/env node
// The owner answers a risky call in the WebUI: after the agent read a web page, its
// `cmd_run` waits; the chat shows the question with Allow / Deny, and the answer
// reaches the call.
//
//   node approval.mjs http://127.0.0.1:PORT [screenshot-prefix]
//
// tests/dashboard_e2e.rs prepares the daemon (cmd and web plugins, the scripted
// vendor) and passes the page URL and the two turns' texts in E2E_TURN_DENY and
// E2E_TURN_ALLOW.
import { harness } from './lib.mjs';

const h = harness('approval e2e');
const { base, shotPath, token, log, fail, fetchJson, postJson, waitHealthy, launch, signIn, pollPage, run } = h;

async function card(page, what) {
  const got = await pollPage(page, `no approval card (${what})`, 20_000, () => {
    const li = [...document.querySelectorAll('#chat-log li.approval')].find((l) => !l.dataset.settled);
    return li ? { ok: true, id: li.dataset.approvalId, text: li.textContent } : { ok: false, why: document.querySelector('#chat-log')?.textContent?.slice(-200) || '' };
  });
  return got;
}

async function main() {
  await waitHealthy(Date.now() + 10_000);
  const { context, page } = await launch();
  await signIn(page, token);

  await postJson(`${base}/api/v1/messages`, { text: process.env.E2E_TURN_DENY, sync: false });
  const first = await card(page, 'deny');
  if (!/cmd_run/.test(first.text) || !/web_fetch/.test(first.text)) fail(`the card does not say what and why: ${first.text}`);
  const li = page.locator(`#chat-log li.approval[data-approval-id="${first.id}"]`);
  await li.scrollIntoViewIfNeeded();
  if (shotPath) await page.screenshot({ path: `${shotPath}-1440.png` });
  await page.setViewportSize({ width: 375, height: 812 });
  await li.scrollIntoViewIfNeeded();
  if (shotPath) await page.screenshot({ path: `${shotPath}-375.png` });
  const box = await li.boundingBox();
  if (!box || box.x < 0 || box.x + box.width > 375 + 1) fail(`the card does not fit a phone: ${JSON.stringify(box)}`);
  await li.getByRole('button', { name: 'Deny' }).click();
  await pollPage(page, 'the card did not say Denied', 10_000, (id) => {
    const l = document.querySelector(`#chat-log li.approval[data-approval-id="${id}"]`);
    return l && l.dataset.settled === 'denied' ? { ok: true } : { ok: false, why: l ? l.textContent : 'gone' };
  }, first.id);
  const open = await fetchJson(`${base}/api/v1/approvals`);
  if (open.approvals.length) fail(`the question is still open: ${JSON.stringify(open)}`);
  log('denied from the chat');

  await page.setViewportSize({ width: 1440, height: 900 });
  await postJson(`${base}/api/v1/messages`, { text: process.env.E2E_TURN_ALLOW, sync: false });
  const second = await card(page, 'allow');
  await page.locator(`#chat-log li.approval[data-approval-id="${second.id}"]`).getByRole('button', { name: 'Allow' }).click();
  await pollPage(page, 'the card did not say Allowed', 10_000, (id) => {
    const l = document.querySelector(`#chat-log li.approval[data-approval-id="${id}"]`);
    return l && l.dataset.settled === 'allowed' ? { ok: true } : { ok: false, why: l ? l.textContent : 'gone' };
  }, second.id);
  await context.close();
  return 'a risky call was denied and allowed from the chat';
}

run(main);
