/**
 * The HTTP core: one `Idempotency-Key` per logical call (reused on its retries), retries with full
 * jitter on 409 `idempotency_key_in_use`, 429 (honouring Retry-After), 5xx and lost connections,
 * typed errors, and pagination as async iteration.
 */
import { randomUUID } from 'node:crypto';
import { ConnectionError, errorFromResponse, MarketplaceError } from './errors';

export interface ClientOptions {
  /** A buyer API key (`svc_live_sk_…` / `svc_test_sk_…`) or a worker token. */
  apiKey?: string;
  /** Default: MARKETPLACE_BASE_URL, else http://127.0.0.1:3000. */
  baseUrl?: string;
  /** Retries after the first attempt; default 3. */
  maxRetries?: number;
  /** First backoff step in ms (doubles per retry, full jitter); default 500. */
  retryBaseMs?: number;
  /** Largest wait between attempts in ms; default 20,000. */
  retryMaxMs?: number;
  /** Per-attempt time-out in ms (long polls add their wait); default 30,000. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Makes the keys a call generates (default: a random UUID per logical call). */
  idempotencyKey?: () => string;
  /** Called before each retry (for logs and tests). */
  onRetry?: (info: RetryInfo) => void;
}

export interface RetryInfo {
  attempt: number;
  delayMs: number;
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  reason: string;
}

export interface CallOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined | null>;
  headers?: Record<string, string>;
  /** For POSTs: the key of this logical call; generated when absent, reused on every retry. */
  idempotencyKey?: string;
  /** Long poll: sends `Prefer: wait=N`. */
  waitSeconds?: number;
  signal?: AbortSignal;
}

export interface Response<T> {
  status: number;
  headers: Record<string, string>;
  body: T;
  /** The key that was sent (POSTs). */
  idempotencyKey?: string;
}

export interface ListPage<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });

/** The longest delay a Node timer holds (a longer one would fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class HttpClient {
  readonly baseUrl: string;
  private readonly opts: Required<Pick<ClientOptions, 'maxRetries' | 'retryBaseMs' | 'retryMaxMs' | 'timeoutMs'>> & ClientOptions;

  constructor(opts: ClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? process.env.MARKETPLACE_BASE_URL ?? 'http://127.0.0.1:3000').replace(/\/+$/, '');
    // An option passed as undefined keeps its default (a spread alone would let it erase it).
    this.opts = {
      ...opts,
      maxRetries: opts.maxRetries ?? 3,
      retryBaseMs: opts.retryBaseMs ?? 500,
      retryMaxMs: opts.retryMaxMs ?? 20_000,
      timeoutMs: opts.timeoutMs ?? 30_000,
    };
    if (!(Number.isFinite(this.opts.timeoutMs) && this.opts.timeoutMs > 0)) {
      throw new RangeError(`timeoutMs must be a finite number of milliseconds above 0 (got ${String(opts.timeoutMs)})`);
    }
  }

  /**
   * Whether an answer is worth another attempt, and why. A 409 that carries Retry-After is a
   * transient conflict (contention on the same balance, a key rotation race): the service freed the
   * Idempotency-Key, so the same call with the same key may be sent again.
   */
  static retryReason(status: number, body: unknown, headers: Record<string, string> = {}): string | null {
    if (status === 429) return 'rate limited';
    if (status >= 500) return `server error ${status}`;
    const code = (body as { error?: { details?: { code?: string }[] } } | null)?.error?.details?.[0]?.code;
    if (status === 409 && code === 'idempotency_key_in_use') return 'the same key is still running';
    if (status === 409 && headers['retry-after'] !== undefined) return 'conflict, retry after the wait asked';
    return null;
  }

  /** The longest Retry-After waited for inside a call; a longer one is the caller's (the error says it). */
  private get longestRetryAfterMs(): number {
    return this.opts.retryMaxMs * 3;
  }

  /** Milliseconds before the next attempt, or null when the service asked for longer than a call waits. */
  private backoff(attempt: number, retryAfter: string | undefined): number | null {
    const exp = Math.min(this.opts.retryMaxMs, this.opts.retryBaseMs * 2 ** (attempt - 1));
    const jittered = Math.random() * exp; // full jitter
    const ra = Number(retryAfter);
    if (!(retryAfter !== undefined && Number.isFinite(ra) && ra > 0)) return jittered;
    // Retry-After is a floor: never earlier than the service asked.
    if (ra * 1000 > this.longestRetryAfterMs) return null;
    return Math.max(ra * 1000, jittered);
  }

  url(path: string, query?: CallOptions['query']): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
    return u.toString();
  }

  async call<T>(method: string, path: string, o: CallOptions = {}): Promise<Response<T>> {
    const doFetch = this.opts.fetch ?? fetch;
    const key = method === 'POST' ? (o.idempotencyKey ?? (this.opts.idempotencyKey ?? randomUUID)()) : undefined;
    const headers: Record<string, string> = { Accept: 'application/json', ...o.headers };
    if (this.opts.apiKey) headers.Authorization = `Bearer ${this.opts.apiKey}`;
    if (key) headers['Idempotency-Key'] = key;
    if (o.waitSeconds !== undefined && !(Number.isFinite(o.waitSeconds) && o.waitSeconds >= 0)) {
      throw new RangeError(`waitSeconds must be a finite number of seconds, 0 or more (got ${String(o.waitSeconds)})`);
    }
    // The wait the service is asked for (whole seconds, 1 to 60), and each attempt's time-out:
    // whole milliseconds (AbortSignal.timeout takes nothing else), within what a timer can hold.
    const waitSeconds = o.waitSeconds ? Math.max(1, Math.min(60, Math.round(o.waitSeconds))) : 0;
    if (waitSeconds) headers.Prefer = `wait=${waitSeconds}`;
    const attemptTimeoutMs = Math.min(MAX_TIMER_MS, Math.ceil(this.opts.timeoutMs) + waitSeconds * 1000);
    let body: string | undefined;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['Content-Type'] = 'application/json';
    }
    const url = this.url(path, o.query);
    for (let attempt = 0; ; attempt++) {
      let res: globalThis.Response;
      let text: string;
      let answered: number | null = null;
      try {
        const timeout = AbortSignal.timeout(attemptTimeoutMs);
        const signal = o.signal ? AbortSignal.any([o.signal, timeout]) : timeout;
        res = await doFetch(url, { method, headers, body, signal });
        answered = res.status;
        // The body is part of the answer: a connection lost (or the time-out firing) while it is
        // read is a lost connection like any other. The service may have acted, so a POST is
        // retried with the same key, and the final error carries that key.
        text = await res.text();
      } catch (err) {
        if (o.signal?.aborted) throw err;
        if (attempt >= this.opts.maxRetries) {
          const cause = (err as { cause?: { code?: string; message?: string } }).cause;
          const why = cause?.code ?? cause?.message ?? (err as Error).message ?? String(err);
          const safe = key ? `; send it again with Idempotency-Key ${key} to retry safely` : '';
          const message =
            answered === null
              ? `cannot reach ${this.baseUrl} (${why}) for ${method} ${path}${safe}`
              : `lost the connection to ${this.baseUrl} while reading the HTTP ${answered} answer (${why}) to ${method} ${path}${safe}`;
          throw new ConnectionError(message, err, { method, path, idempotencyKey: key, answeredStatus: answered });
        }
        await this.retry(attempt + 1, method, path, key, answered === null ? 'connection failed' : 'connection lost while reading the answer', undefined, o.signal);
        continue;
      }
      let parsed: unknown = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = text;
      }
      const resHeaders = Object.fromEntries(res.headers);
      if (res.ok) return { status: res.status, headers: resHeaders, body: parsed as T, idempotencyKey: key };
      // A DELETE is only retried when an earlier attempt's outcome is unknown (a lost connection
      // or a 5xx). A 404 then most likely means that attempt removed it: the call did what it
      // asked, so it answers the 404 with a null body instead of throwing NotFoundError.
      if (method === 'DELETE' && res.status === 404 && attempt > 0) return { status: res.status, headers: resHeaders, body: null as T };
      const reason = HttpClient.retryReason(res.status, parsed, resHeaders);
      // A long poll refused for capacity (429/503 with Retry-After) is its waiting loop's to
      // handle: that loop knows its deadline and asks for a fresh wait.
      const longPollRefused = o.waitSeconds !== undefined && (res.status === 429 || res.status === 503) && resHeaders['retry-after'] !== undefined;
      // A 5xx on a POST without a key could run twice; every POST here carries one, so it is safe.
      if (reason && !longPollRefused && attempt < this.opts.maxRetries && (await this.retry(attempt + 1, method, path, key, reason, resHeaders['retry-after'], o.signal))) {
        continue;
      }
      throw errorFromResponse(res.status, parsed, resHeaders);
    }
  }

  /** Waits before attempt `attempt`; false when the service asked for a longer wait than a call makes. */
  private async retry(attempt: number, method: string, path: string, key: string | undefined, reason: string, retryAfter: string | undefined, signal?: AbortSignal): Promise<boolean> {
    const delayMs = this.backoff(attempt, retryAfter);
    if (delayMs === null) return false;
    this.opts.onRetry?.({ attempt, delayMs, method, path, idempotencyKey: key, reason });
    await sleep(delayMs, signal);
    return true;
  }

  async json<T>(method: string, path: string, o: CallOptions = {}): Promise<T> {
    return (await this.call<T>(method, path, o)).body;
  }

  /** Every item of a list, page by page (each page fetched when the previous one is used up). */
  paginate<T>(path: string, query: CallOptions['query'] = {}): Paginator<T> {
    return new Paginator<T>((cursor) => this.json<ListPage<T>>('GET', path, { query: { ...query, ...(cursor ? { cursor } : {}) } }));
  }
}

/** An async-iterable list: `for await (const x of client.jobs.list())`, or `.firstPage()`, `.toArray()`. */
export class Paginator<T> implements AsyncIterable<T> {
  constructor(private readonly fetchPage: (cursor: string | null) => Promise<ListPage<T>>) {}

  firstPage(): Promise<ListPage<T>> {
    return this.fetchPage(null);
  }

  async *pages(): AsyncGenerator<ListPage<T>> {
    let cursor: string | null = null;
    for (;;) {
      const page: ListPage<T> = await this.fetchPage(cursor);
      yield page;
      if (!page.has_more || !page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for await (const page of this.pages()) yield* page.data;
  }

  async toArray(): Promise<T[]> {
    const out: T[] = [];
    for await (const x of this) out.push(x);
    return out;
  }
}

export { MarketplaceError };
