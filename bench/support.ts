/**
 * What the request benches share: a JSON client of a started local runtime, and a live buyer
 * whose rate limit is lifted (an enterprise override) and whose balance is funded.
 */
import { randomBytes } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';

type Runtime = { url: string };

export type BenchRequest = (method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>) => Promise<any>;

/**
 * Sends one request; a status of 300 or more throws with the body, so a bench never times errors.
 * The client is Node's http module over one kept-alive connection, as a load generator would be:
 * fetch (undici) costs this process about 0.6 ms more CPU per request, which the sequential
 * latency rows would otherwise count against the service.
 */
export function benchClient(rt: Runtime): BenchRequest {
  const agent = new Agent({ keepAlive: true });
  const base = new URL(rt.url);
  return (method, path, key, body, headers = {}) =>
    new Promise((resolve, reject) => {
      const payload = body ? Buffer.from(JSON.stringify(body)) : undefined;
      const req = httpRequest(
        {
          host: base.hostname,
          port: base.port,
          path,
          method,
          agent,
          headers: { Authorization: `Bearer ${key}`, ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) } : {}), ...headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let json: any;
            try {
              json = text ? JSON.parse(text) : undefined;
            } catch {
              json = text;
            }
            if ((res.statusCode ?? 500) >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${JSON.stringify(json)}`));
            else resolve(json);
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
}

/** Signs a buyer up, lifts its key's rate limit so it never caps a bench, and buys `cents` of credits. */
export async function fundedBuyer(rt: Runtime, cents: number): Promise<{ key: string; orgId: string }> {
  const { setRateLimitOverride } = await import('../shared/orgs/rate-tier');
  const { confirmCheckout } = await import('../shared/billing');
  const req = benchClient(rt);
  const signup = await fetch(`${rt.url}/v1/auth/signup`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Bench', email: `bench-${randomBytes(6).toString('hex')}@example.com` }) });
  const s = (await signup.json()) as any;
  const key: string = s.api_key.secret;
  const orgId: string = s.organization.id;
  await setRateLimitOverride(orgId, { perMinute: 1e6, perHour: 1e7 });
  const cs = await req('POST', '/v1/billing/credits/purchase', key, { amount_cents: cents }, { 'Idempotency-Key': 'bench-purchase' });
  await confirmCheckout(cs.id, { paymentMethod: 'pm_bench', providerRef: cs.id });
  return { key, orgId };
}
