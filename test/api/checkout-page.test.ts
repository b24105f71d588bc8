/**
 * D32: the local provider's hosted checkout page in headless Chromium: checkout_url opens a real
 * page with the amount, the bonus and a Pay button; paying applies the purchase once, even on a
 * double click.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { newBuyer, post, startBillingRuntime } from './billing-support';
import { indexesCaughtUp, type TestRuntime } from '../support/harness';

const CHROMIUM = '/usr/bin/chromium';
// Skipped only when the browser is absent (.ci/run installs Debian's chromium package).
const maybe = describe; // Chromium is installed by CI and listed in the README's test prerequisites

maybe('local checkout page (headless Chromium)', () => {
  let rt: TestRuntime & { stopAll(): Promise<void> };
  let browser: BrowserContext;
  let profile: string;
  beforeAll(async () => {
    rt = await startBillingRuntime();
    profile = mkdtempSync(join(tmpdir(), 'chromium-profile-'));
    // A fresh profile directory: playwright passes it as --user-data-dir.
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await rt?.stopAll();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  test('D32: checkout_url shows amount, bonus and Pay; paying (double click) credits the balance once and emits credits.purchased', async () => {
    const b = await newBuyer(rt, { verified: false });
    const cs = (await post(rt, b.live, '/v1/billing/credits/purchase', { amount_cents: 10_000 })).json;
    const page = await browser.newPage();
    await page.goto(cs.checkout_url);
    expect(await page.textContent('#amount')).toBe('$100.00');
    expect(await page.textContent('#bonus')).toBe('$15.00');
    await page.dblclick('#pay');
    await page.waitForSelector('#status');
    expect(await page.textContent('h1')).toBe('Payment received');

    // A replayed POST of the form changes nothing either.
    const replay = await fetch(`${cs.checkout_url}/pay`, { method: 'POST', redirect: 'manual' });
    expect(replay.status).toBe(303);
    const credits = (await rt.request('GET', '/v1/billing/credits', { key: b.live })).json;
    expect(credits.available_cents).toBe(11_500);
    const rows = (await rt.request('GET', '/v1/billing/transactions', { key: b.live })).json.data;
    expect(rows.map((t: { type: string }) => t.type).sort()).toEqual(['bonus', 'purchase']);
    await indexesCaughtUp();
    const events = (await rt.request('GET', '/v1/webhook_events?type=credits.purchased', { key: b.live })).json.data;
    expect(events.map((e: { data: unknown }) => e.data)).toEqual([{ checkout_session_id: cs.id, amount_cents: 10_000, bonus_cents: 1_500, total_credits_cents: 11_500 }]);
    await page.close();
  });

  test('D32: an unknown checkout session shows a not-found page', async () => {
    const page = await browser.newPage();
    const res = await page.goto(`${rt.url}/checkout/cs_01ARZ3NDEKTSV4RRFFQ69G5FAV`);
    expect(res?.status()).toBe(404);
    await page.close();
  });
});
