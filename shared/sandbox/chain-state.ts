/**
 * The sandbox chain's state item (one per test-environment job, D40, D53): created once by
 * `startChain`, read by each tick, advanced only by a conditional write on its `seq`, and marked
 * when a tick's message was sent (`tick_sent`).
 */
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { nowIso } from '../clock';
import type { JobItem } from '../jobs/model';
import { scenarioOf, type Scenario } from './scenarios';

export interface SandboxState {
  job_id: string;
  scenario: Scenario;
  seq: number;
  attempts: number;
  workers: string[];
  /** Nonce of the first upload, reused once by `mixed` to produce a duplicate (D26). */
  first_nonce: string | null;
  finished: string | null;
  /** The last `seq` whose tick message was sent. */
  tick_sent?: number;
  /**
   * The chain's own submissions not yet seen settled, read by id (strongly consistent) each tick.
   * Absent on a chain started before it was kept: that chain's first tick reads them from the
   * job's submission index once.
   */
  open_submissions?: string[];
}

export async function loadState(jobId: string): Promise<SandboxState | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.sandboxState(jobId), ConsistentRead: true }));
  return out.Item as SandboxState | undefined;
}

/** Start the chain for a job; false when it already started (a duplicated event). */
export async function startChain(job: JobItem): Promise<boolean> {
  try {
    await db().send(
      new PutCommand({
        TableName: tableName(),
        Item: {
          ...keys.sandboxState(job.id),
          entity: 'sandbox_state',
          job_id: job.id,
          scenario: scenarioOf(job),
          seq: 0,
          attempts: 0,
          workers: [],
          first_nonce: null,
          finished: null,
          open_submissions: [],
          created_at: nowIso(),
        },
        ConditionExpression: 'attribute_not_exists(PK)',
      }),
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionalCheckFailedException) return false;
    throw e;
  }
}

export async function advance(state: SandboxState, patch: Partial<SandboxState>): Promise<boolean> {
  const names: Record<string, string> = { '#seq': 'seq' };
  const values: Record<string, unknown> = { ':seq': state.seq, ':next': state.seq + 1 };
  const sets = ['#seq = :next'];
  for (const [k, v] of Object.entries(patch)) {
    names[`#${k}`] = k;
    values[`:${k}`] = v;
    sets.push(`#${k} = :${k}`);
  }
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.sandboxState(state.job_id),
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: '#seq = :seq',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionalCheckFailedException) return false;
    throw e;
  }
}

/** Records that the tick of `seq` was sent (a redelivered predecessor then sends nothing). */
export async function markTickSent(jobId: string, seq: number): Promise<void> {
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.sandboxState(jobId),
        UpdateExpression: 'SET tick_sent = :seq',
        ConditionExpression: '#seq = :seq',
        ExpressionAttributeNames: { '#seq': 'seq' },
        ExpressionAttributeValues: { ':seq': seq },
      }),
    );
  } catch (e) {
    if (!(e instanceof ConditionalCheckFailedException)) throw e; // the chain moved on already
  }
}
