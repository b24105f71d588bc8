/**
 * One DynamoDB transaction: a state change together with its ledger rows, its events (outbox), its
 * audit record and its idempotency record. Items carry labels so a cancelled transaction reports
 * which condition failed (a business outcome, not a fault).
 */
import { TransactWriteCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { db, tableName } from './client';
import { ConditionFailed, Contention } from '../errors';
import type { Key } from './keys';
import { recordCommitted } from '../observability/metrics';
import { contentionBackoff, mayRetryContention } from './conflicts';

export type TxItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
type Values = Record<string, unknown>;
type Names = Record<string, string>;

export interface CondOpts {
  condition?: string;
  names?: Names;
  values?: Values;
}

export class Tx {
  private readonly items: TxItem[] = [];
  private readonly labels: string[] = [];
  private readonly committed: (() => void)[] = [];
  /**
   * When this transaction's events happened (shared/outbox.ts `emit`): one time for every event of
   * one commit, so that none is dated before another it follows from (a job.completed before the
   * approval that completed it).
   */
  eventTime?: Date;
  /** The ids of this transaction's events: all carry `eventTime`, ordered as they are emitted. */
  eventIds?: () => string;

  get size(): number {
    return this.items.length;
  }

  /** Add a raw item (e.g. an idempotency record built elsewhere). */
  add(label: string, item: TxItem): this {
    this.items.push(item);
    this.labels.push(label);
    return this;
  }

  put(label: string, item: Record<string, unknown> & Key, opts: CondOpts = {}): this {
    return this.add(label, {
      Put: {
        TableName: tableName(),
        Item: item,
        ...cond(opts),
      },
    });
  }

  /** Put that fails when the item already exists. */
  create(label: string, item: Record<string, unknown> & Key): this {
    return this.put(label, item, { condition: 'attribute_not_exists(PK)' });
  }

  update(label: string, key: Key, update: string, opts: CondOpts = {}): this {
    return this.add(label, {
      Update: {
        TableName: tableName(),
        Key: key,
        UpdateExpression: update,
        ...cond(opts),
      },
    });
  }

  delete(label: string, key: Key, opts: CondOpts = {}): this {
    return this.add(label, { Delete: { TableName: tableName(), Key: key, ...cond(opts) } });
  }

  check(label: string, key: Key, opts: Required<Pick<CondOpts, 'condition'>> & CondOpts): this {
    return this.add(label, { ConditionCheck: { TableName: tableName(), Key: key, ...cond(opts) } as never });
  }

  /**
   * DynamoDB refuses a transaction that names one item twice with a ValidationException ("cannot
   * include multiple operations on one item"); DynamoDB Local reports some such transactions as a
   * failed condition instead, which the caller would read as a business outcome. Refused here,
   * before sending, with DynamoDB's own error, so both sides fail the same way.
   */
  private refuseRepeatedItems(): void {
    const seen = new Map<string, string>();
    this.items.forEach((item, i) => {
      const key = (item.Put?.Item ?? item.Update?.Key ?? item.Delete?.Key ?? item.ConditionCheck?.Key) as Key | undefined;
      if (!key) return;
      const id = `${String(key.PK)}\u0000${String(key.SK)}`;
      const first = seen.get(id);
      if (first !== undefined) {
        const message = `Transaction request cannot include multiple operations on one item (${first} and ${this.labels[i]}: ${String(key.PK)} ${String(key.SK)})`;
        throw Object.assign(new Error(message), { name: 'ValidationException' });
      }
      seen.set(id, this.labels[i]!);
    });
  }

  /** Runs `fn` once this transaction has committed (never when it fails). */
  onCommit(fn: () => void): this {
    this.committed.push(fn);
    return this;
  }

  /**
   * Commit atomically. A failed condition throws `ConditionFailed` with the labels of the items
   * whose condition failed. Transaction conflicts (another transaction on the same items, or the
   * same idempotent transaction still in progress) are retried with full-jitter exponential
   * backoff, bounded; when they outlast the retries, `Contention` (409 for a request, never 500).
   * The writes are all-or-nothing, so a retry is safe. A committed transaction whose answer is
   * lost (a reset connection) is sent again by the SDK's own retry with the ClientRequestToken it
   * gave the first attempt, which DynamoDB answers as that transaction, done, for 10 minutes: the
   * caller sees its commit succeed, never its own conditions failing on what it wrote.
   */
  async commit(): Promise<void> {
    if (this.items.length === 0) return;
    if (this.items.length > 100) throw new Error(`transaction too large: ${this.items.length} items`);
    this.refuseRepeatedItems();
    const since = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await db().send(new TransactWriteCommand({ TransactItems: this.items }));
        recordCommitted(this.items);
        for (const fn of this.committed) fn();
        return;
      } catch (err) {
        const name = (err as Error).name;
        let contended = name === 'TransactionInProgressException' || name === 'TransactionConflictException';
        if (err instanceof TransactionCanceledException || name === 'TransactionCanceledException') {
          const reasons = (err as TransactionCanceledException).CancellationReasons ?? [];
          const failed = reasons
            .map((r, i) => (r.Code === 'ConditionalCheckFailed' ? this.labels[i] : undefined))
            .filter((x): x is string => !!x);
          if (failed.length > 0) throw new ConditionFailed(failed);
          contended = reasons.some((r) => r.Code === 'TransactionConflict');
        }
        if (!contended) throw err;
        if (!mayRetryContention(attempt + 1, since)) throw new Contention(attempt + 1);
        await contentionBackoff(attempt);
      }
    }
  }
}

export { COMMIT_ATTEMPTS, CONTENTION_BUDGET_MS, retryingConflicts } from './conflicts';

/** True for an error that means "contention, retry later" (Tx gave up), as opposed to a fault. */
export const isContention = (e: unknown): e is Contention => e instanceof Contention;

function cond(opts: CondOpts) {
  return {
    ...(opts.condition ? { ConditionExpression: opts.condition } : {}),
    ...(opts.names && Object.keys(opts.names).length ? { ExpressionAttributeNames: opts.names } : {}),
    ...(opts.values && Object.keys(opts.values).length ? { ExpressionAttributeValues: opts.values } : {}),
  };
}

