/** Buyers for the jobs and billing API tests: signup, phone verification (250 live cents), purchases. */
import { randomBytes, randomInt } from 'node:crypto';
import { startTestRuntime, type TestRuntime } from '../support/harness';

/** The runtime (which mounts the local checkout page, D32) without queue pollers. */
export async function startBillingRuntime(): Promise<TestRuntime & { stopAll(): Promise<void> }> {
  process.env.LOCAL_FIXED_OTP = '123456';
  // Only the auto top-up's consumer runs (D34: a crossing queues it through its event).
  const rt = await startTestRuntime({ onlyQueues: ['top-ups'] });
  return { ...rt, stopAll: () => rt.stop() };
}

export interface Buyer {
  orgId: string;
  live: string;
  test: string;
}

const key = () => `k-${randomBytes(8).toString('hex')}`;

export async function newBuyer(rt: TestRuntime, opts: { verified?: boolean; purchaseCents?: number } = {}): Promise<Buyer> {
  const s = await rt.request('POST', '/v1/auth/signup', { body: { name: 'Buyer', email: `b-${randomBytes(8).toString('hex')}@example.com` } });
  if (s.status !== 201) throw new Error(`signup: ${s.status} ${s.text}`);
  const b: Buyer = { orgId: s.json.organization.id, live: s.json.api_key.secret, test: s.json.test_api_key.secret };
  if (opts.verified ?? true) {
    const phone = `+1555${randomInt(1_000_000, 9_999_999)}`;
    const h = (k: string) => ({ key: b.live, headers: { 'Idempotency-Key': k } });
    const start = await rt.request('POST', '/v1/auth/phone_verification', { ...h(key()), body: { phone } });
    if (start.status !== 202) throw new Error(`phone start: ${start.status} ${start.text}`);
    const ok = await rt.request('POST', '/v1/auth/phone_verification/confirm', { ...h(key()), body: { phone, code: '123456' } });
    if (ok.status !== 200) throw new Error(`phone confirm: ${ok.status} ${ok.text}`);
  }
  if (opts.purchaseCents) await buyCredits(rt, b.live, opts.purchaseCents);
  return b;
}

/** Purchase through the API and pay on the local hosted page (POST, as the Pay button does). */
export async function buyCredits(rt: TestRuntime, apiKey: string, amount: number) {
  const cs = await rt.request('POST', '/v1/billing/credits/purchase', { key: apiKey, headers: { 'Idempotency-Key': key() }, body: { amount_cents: amount } });
  if (cs.status !== 200) throw new Error(`purchase: ${cs.status} ${cs.text}`);
  if (cs.json.status === 'paid') return cs.json; // a test key's purchase completes at once
  const paid = await fetch(`${cs.json.checkout_url}/pay`, { method: 'POST', redirect: 'manual' });
  if (paid.status !== 303) throw new Error(`pay: ${paid.status}`);
  return cs.json;
}

export const post = (rt: TestRuntime, apiKey: string, path: string, body?: unknown, idem: string | null = key()) =>
  rt.request('POST', path, { key: apiKey, body, headers: idem ? { 'Idempotency-Key': idem } : {} });

export const newKey = key;

export const jobBody = (over: Record<string, unknown> = {}) => ({
  type: 'data_collection',
  description: 'Photos of storefronts in daylight',
  files_needed: 10,
  accepted_formats: ['image/jpeg'],
  price_per_file_cents: 20,
  ...over,
});
