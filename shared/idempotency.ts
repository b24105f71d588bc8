/**
 * Idempotency records (D10, D11, D49).
 *
 * A request with a key first takes a lock (conditional Put: the key is new, expired, or a stale
 * lock). The write it protects then records the response *in its own transaction* (`record`), so
 * the effect and the stored response commit together or not at all. Responses of requests that
 * wrote nothing (4xx) are stored after the fact; a 5xx releases the key so a retry can run.
 * Expiry (24 h) is checked in code; the TTL attribute only cleans up.
 *
 * Issue 11.1: on routes whose response holds a one-time secret (a new API key, an endpoint's
 * signing secret, a signup's keys or worker token) the stored body is sealed (shared/secrets/sealer)
 * and bound to its record, so the table, its backups and exports never hold the secret in the
 * clear; a replay opens it and answers the caller exactly as the first time.
 */
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { db, tableName } from './db/client';
import { keys } from './db/keys';
import { now, DAY_MS } from './clock';
import { errors } from './errors';
import { sha256hex } from './auth/secrets';
import type { PreparedSeal, Sealer } from './secrets/sealer';
import type { Tx } from './db/tx';

export const IDEMPOTENCY_TTL_MS = DAY_MS;
/** A lock older than this belongs to a request that died (Lambda timeouts are far shorter). */
const STALE_LOCK_MS = 5 * 60_000;
export const MAX_KEY_LENGTH = 255;

export interface StoredResponse {
  status: number;
  body: unknown;
  request_id: string;
  headers?: Record<string, string>;
}

/** What the record holds: the body itself, or (sealed routes) null and the sealed JSON of it. */
type StoredItem = Omit<StoredResponse, 'body'> & { body: unknown; body_sealed?: string };

const sealContext = (scope: string, keyHash: string) => `idempotency:${scope}#${keyHash}`;

export class IdempotencyHandle {
  recorded = false;
  constructor(
    readonly scope: string,
    readonly keyHash: string,
    readonly lockId: string,
    readonly successStatus: number,
    /** Set on routes whose response holds a one-time secret: the body is stored sealed. */
    readonly sealing: PreparedSeal | null = null,
  ) {}

  private key() {
    return keys.idempotency(this.scope, this.keyHash);
  }

  private stored(r: StoredResponse): StoredItem {
    if (!this.sealing || r.body === null || r.body === undefined) return r;
    return { ...r, body: null, body_sealed: this.sealing.seal(JSON.stringify(r.body), sealContext(this.scope, this.keyHash)) };
  }

  /**
   * Add the final response to the transaction of the write this key protects. It counts as
   * recorded once that transaction commits: a domain function whose transaction failed and that
   * answers otherwise (e.g. a revoke that finds the key already revoked) still has its answer
   * stored by the middleware, instead of leaving the key in progress.
   */
  record(tx: Tx, body: unknown, status = this.successStatus, headers?: Record<string, string>): void {
    tx.update('idempotency', this.key(), 'SET #s = :done, #r = :resp', {
      condition: '#l = :lock AND #s = :inprog',
      names: { '#s': 'status', '#r': 'response', '#l': 'lock_id' },
      values: {
        ':done': 'done',
        ':resp': this.stored({ status, body, request_id: this.lockId, ...(headers ? { headers } : {}) }),
        ':lock': this.lockId,
        ':inprog': 'in_progress',
      },
    });
    tx.onCommit(() => (this.recorded = true));
  }

  /** Store a response after the fact (4xx outcomes, and writes that did not record in their tx). */
  async store(response: StoredResponse): Promise<void> {
    try {
      await db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: this.key(),
          UpdateExpression: 'SET #s = :done, #r = :resp',
          ConditionExpression: '#l = :lock AND #s = :inprog',
          ExpressionAttributeNames: { '#s': 'status', '#r': 'response', '#l': 'lock_id' },
          ExpressionAttributeValues: { ':done': 'done', ':resp': this.stored(response), ':lock': this.lockId, ':inprog': 'in_progress' },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /** Give the key back (5xx): the next request with it runs afresh. */
  async release(): Promise<void> {
    try {
      await db().send(
        new DeleteCommand({
          TableName: tableName(),
          Key: this.key(),
          ConditionExpression: '#l = :lock AND #s = :inprog',
          ExpressionAttributeNames: { '#s': 'status', '#l': 'lock_id' },
          ExpressionAttributeValues: { ':lock': this.lockId, ':inprog': 'in_progress' },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }
}

export type AcquireResult = { kind: 'acquired'; handle: IdempotencyHandle } | { kind: 'replay'; stored: StoredResponse };

/**
 * Canonical request fingerprint: method, path and the body (JSON with sorted keys when JSON). A
 * multipart form's boundary is chosen afresh by the client on every send (curl, browsers, fetch's
 * FormData), so it is left out: the same files and fields resent with the same key are the same
 * request (D11), and get the stored answer.
 */
export function fingerprint(method: string, path: string, rawBody: string | null, contentType?: string, query?: Record<string, string> | null): string {
  let canonical = rawBody ?? '';
  const boundary = multipartBoundary(contentType);
  if (boundary) canonical = canonical.split(`--${boundary}`).join('--<boundary>');
  else {
    try {
      if (canonical.trim()) canonical = stableStringify(JSON.parse(canonical));
    } catch {
      /* not JSON: the raw bytes are the body */
    }
  }
  // The query string too, when there is one (sorted): `POST /v1/jobs?x=1` is another request than
  // `POST /v1/jobs`. Without one the fingerprint is what it always was.
  const q = query && Object.keys(query).length ? `?${new URLSearchParams(Object.entries(query).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))).toString()}` : '';
  return sha256hex(`${method.toUpperCase()} ${path}${q}\n${canonical}`);
}

function multipartBoundary(contentType: string | undefined): string | null {
  if (!contentType || !/^\s*multipart\//i.test(contentType)) return null;
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return m ? (m[1] ?? m[2] ?? null) : null;
}

function stableStringify(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableStringify).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableStringify((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

export async function acquire(opts: {
  scope: string;
  key: string;
  fingerprint: string;
  requestId: string;
  successStatus: number;
  /**
   * The response holds a one-time secret: store it sealed with this sealer (issue 11.1). Passed in
   * by the routes that seal, so the others do not bundle the sealer and its KMS client.
   */
  sealer?: Sealer;
}): Promise<AcquireResult> {
  const keyHash = sha256hex(opts.key);
  const k = keys.idempotency(opts.scope, keyHash);
  for (let attempt = 0; attempt < 3; attempt++) {
    const t = now().getTime();
    try {
      await db().send(
        new PutCommand({
          TableName: tableName(),
          Item: {
            ...k,
            entity: 'idempotency',
            status: 'in_progress',
            fingerprint: opts.fingerprint,
            lock_id: opts.requestId,
            locked_at: t,
            expires_at: t + IDEMPOTENCY_TTL_MS,
            ttl: Math.floor((t + IDEMPOTENCY_TTL_MS) / 1000) + 3600,
          },
          ConditionExpression: 'attribute_not_exists(PK) OR expires_at <= :now OR (#s = :inprog AND locked_at <= :stale)',
          ExpressionAttributeNames: { '#s': 'status' },
          ExpressionAttributeValues: { ':now': t, ':inprog': 'in_progress', ':stale': t - STALE_LOCK_MS },
        }),
      );
      let sealing = null;
      try {
        sealing = opts.sealer ? await opts.sealer.prepare() : null;
      } catch (e) {
        // No key to seal the response with (KMS refused or throttled): the request fails with a
        // 5xx, and a 5xx leaves the key free for the retry, not locked for minutes (D11).
        await new IdempotencyHandle(opts.scope, keyHash, opts.requestId, opts.successStatus, null).release().catch(() => undefined);
        throw e;
      }
      return { kind: 'acquired', handle: new IdempotencyHandle(opts.scope, keyHash, opts.requestId, opts.successStatus, sealing) };
    } catch (err) {
      // A TransactionConflictException: the first request's transaction, which completes this
      // record, is committing right now (DynamoDB refuses a plain write to an item a transaction
      // holds; DynamoDB Local serialises them and never answers it). Read the record as for a
      // failed condition: still in progress (409, retry) or already answered (replayed).
      if (!(err instanceof ConditionalCheckFailedException) && (err as Error).name !== 'TransactionConflictException') throw err;
    }
    const out = await db().send(new GetCommand({ TableName: tableName(), Key: k, ConsistentRead: true }));
    const rec = out.Item;
    if (!rec) continue; // released between our Put and Get: try again
    if (Number(rec.expires_at) <= now().getTime()) continue;
    if (rec.fingerprint !== opts.fingerprint) throw errors.idempotencyConflict();
    if (rec.status === 'in_progress') {
      throw errors.conflict(
        'A request with this Idempotency-Key is still being processed; retry shortly.',
        [{ field: 'Idempotency-Key', message: 'the first request with this key is still running', code: 'idempotency_key_in_use' }],
        { 'Retry-After': '1' },
      );
    }
    const stored = rec.response as StoredItem;
    if (typeof stored.body_sealed === 'string') {
      // Same fingerprint (method, path, body), so the route that sealed it: it has the sealer.
      if (!opts.sealer) throw new Error('a sealed idempotent response met a route without a sealer');
      const { body_sealed: sealed, ...rest } = stored;
      return { kind: 'replay', stored: { ...rest, body: JSON.parse(await opts.sealer.open(sealed, sealContext(opts.scope, keyHash))) } };
    }
    return { kind: 'replay', stored };
  }
  throw errors.conflict('Could not take the Idempotency-Key; retry shortly.', [
    { field: 'Idempotency-Key', message: 'contention on this key', code: 'idempotency_key_in_use' },
  ], { 'Retry-After': '1' });
}
