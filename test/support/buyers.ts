/** Test builders for buyers and workers, through the public API. */
import { randomBytes } from 'node:crypto';
import type { TestRuntime } from './harness';

export interface TestBuyer {
  orgId: string;
  email: string;
  live: string;
  test: string;
  liveKeyId: string;
  testKeyId: string;
}

let n = 0;
export const uniqueEmail = (tag = 'buyer') => `${tag}-${Date.now()}-${++n}-${randomBytes(3).toString('hex')}@example.test`;
export const idemKey = () => `idem-${randomBytes(8).toString('hex')}`;

export async function signupBuyer(rt: TestRuntime, name = 'Acme'): Promise<TestBuyer> {
  const email = uniqueEmail();
  const r = await rt.request('POST', '/v1/auth/signup', { body: { name, email } });
  if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${r.text}`);
  return {
    orgId: r.json.organization.id,
    email,
    live: r.json.api_key.secret,
    test: r.json.test_api_key.secret,
    liveKeyId: r.json.api_key.id,
    testKeyId: r.json.test_api_key.id,
  };
}

/** Phone verification with the local runtime's fixed code (D44: LOCAL_FIXED_OTP). */
export async function verifyPhone(rt: TestRuntime, key: string, phone = randomPhone()): Promise<void> {
  const code = process.env.LOCAL_FIXED_OTP;
  if (!code) throw new Error('set LOCAL_FIXED_OTP before starting the runtime');
  const a = await rt.request('POST', '/v1/auth/phone_verification', { key, body: { phone }, headers: { 'Idempotency-Key': idemKey() } });
  if (a.status !== 202) throw new Error(`phone verification failed: ${a.status} ${a.text}`);
  const b = await rt.request('POST', '/v1/auth/phone_verification/confirm', {
    key,
    body: { phone, code },
    headers: { 'Idempotency-Key': idemKey() },
  });
  if (b.status !== 200) throw new Error(`phone confirm failed: ${b.status} ${b.text}`);
}

export const randomPhone = () => `+1415${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;

export async function createKey(
  rt: TestRuntime,
  key: string,
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string }> {
  const r = await rt.request('POST', '/v1/api_keys', { key, body, headers: { 'Idempotency-Key': idemKey() } });
  if (r.status !== 200) throw new Error(`create key failed: ${r.status} ${r.text}`);
  return { id: r.json.id, secret: r.json.secret };
}
