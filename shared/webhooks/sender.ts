/**
 * One HTTP attempt (D37): POST, 15 s for the whole exchange (resolving the name included), 2xx
 * only, redirects not followed, connection pinned to an address the SSRF guard accepted at connect
 * time (DNS rebinding).
 */
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { ensureRunning } from '../observability/invocation';
import { resolvePublic, UnsafeUrl, type Resolver, type UrlPolicy } from './ssrf';

export const ATTEMPT_TIMEOUT_MS = 15_000;
/** We read at most this much of a receiver's answer, then drop the connection. */
const MAX_RESPONSE_BYTES = 4096;

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  /** Short machine-readable reason when not ok: http_<code>, timeout, blocked_address, network error code. */
  error: string | null;
  retryAfter: string | undefined;
  durationMs: number;
}

export async function postWebhook(
  rawUrl: string,
  body: string,
  headers: Record<string, string>,
  policy: UrlPolicy,
  resolve?: Resolver,
  /** The whole exchange's limit; shorter only in tests of the dispatcher's time budget. */
  timeoutMs: number = ATTEMPT_TIMEOUT_MS,
): Promise<AttemptResult> {
  ensureRunning(); // locally: a timed-out invocation sends nothing more, as Lambda would have stopped it
  const started = Date.now();
  let url: URL;
  let address: string;
  let resolveTimer: NodeJS.Timeout | undefined;
  try {
    // A slow name server counts against the attempt's time (the dispatcher's budget assumes every
    // attempt ends within it); the lookup itself cannot be called off and is left to finish.
    const timedOut = new Promise<null>((r) => (resolveTimer = setTimeout(() => r(null), timeoutMs)));
    const r = await Promise.race([resolvePublic(rawUrl, policy, resolve), timedOut]);
    if (!r) return { ok: false, statusCode: null, error: 'timeout', retryAfter: undefined, durationMs: Date.now() - started };
    url = r.url;
    address = r.addresses[0]!;
  } catch (e) {
    const error = e instanceof UnsafeUrl ? (e.code === 'unresolvable_host' ? 'dns_failure' : 'blocked_address') : 'invalid_url';
    return { ok: false, statusCode: null, error, retryAfter: undefined, durationMs: Date.now() - started };
  } finally {
    clearTimeout(resolveTimer);
  }
  const family = isIP(address) === 6 ? 6 : 4;
  // Pin: whatever name the client library looks up, it gets the address we checked.
  const lookup: LookupFunction = (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else cb(null, address, family);
  };
  ensureRunning(); // the invocation may have been stopped while the name resolved
  // node:http as a CommonJS built-in, not an ES import: on Node 22 the ES facade of node:http loads
  // undici at load (7–11 ms of the cold start; shared/secrets/index.ts says more).
  const mod = url.protocol === 'https:' ? https : process.getBuiltinModule('node:http');
  return new Promise<AttemptResult>((done) => {
    let settled = false;
    /** The outcome the status line gave (D37: a 2xx within the time-out is a success, body or not). */
    let answered: Omit<AttemptResult, 'durationMs'> | null = null;
    const finish = (r: Omit<AttemptResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      done({ ...r, durationMs: Date.now() - started });
    };
    const req = mod.request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup,
        agent: false,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        answered = {
          ok: status >= 200 && status < 300,
          statusCode: status,
          error: status >= 200 && status < 300 ? null : `http_${status}`,
          retryAfter: res.headers['retry-after'],
        };
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) res.destroy();
        });
        const end = () => finish(answered!);
        res.on('end', end);
        res.on('close', end);
        res.on('error', end);
      },
    );
    const timer = setTimeout(() => {
      // A receiver that answered in time but never finished its body is judged by its status.
      const outcome = answered ?? { ok: false, statusCode: null, error: 'timeout', retryAfter: undefined };
      req.destroy(new Error('timeout'));
      finish(outcome);
    }, Math.max(0, started + timeoutMs - Date.now()));
    req.on('error', (e: NodeJS.ErrnoException) =>
      finish({ ok: false, statusCode: null, error: e.code ?? 'network_error', retryAfter: undefined }),
    );
    req.end(body);
  });
}
