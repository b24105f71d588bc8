/**
 * What both pipeline stages (D54) share: finding the submission and planned file an object
 * belongs to, and writing one stage's attributes of the file's part, conditioned on the upload
 * round, first writer wins (scoring-stage.ts, annotation-stage.ts).
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { db, tableName } from '../db/client';
import { retryingConflicts } from '../db/tx';
import { keys } from '../db/keys';
import { parseUploadKey } from '../storage/s3';
import { locateFile, type Located } from './locate';
import type { SubmissionItem } from './model';

const isConditionFailure = (e: unknown): boolean => e instanceof ConditionalCheckFailedException || (e as Error).name === 'ConditionalCheckFailedException';

/** After a failed condition, the submission as it was (ALL_OLD; undefined when the item is gone); any other error is thrown again. */
function submissionAsItWas(e: unknown): SubmissionItem | undefined {
  if (!isConditionFailure(e)) throw e;
  const old = (e as { Item?: Record<string, AttributeValue> }).Item;
  return old ? (unmarshall(old) as SubmissionItem) : undefined;
}

/** The submission and planned file an object belongs to, or null (unknown, stale round, decided). */
export async function locate(key: string, opts: { rejected?: boolean } = {}): Promise<Located | null> {
  const ref = parseUploadKey(key);
  return ref ? locateFile(ref, opts) : null;
}

/**
 * Writes attributes of one file's part, only while the round is current. Answers whether it was
 * stored and the submission as DynamoDB holds it right after this write (ReturnValues ALL_NEW),
 * or as it was when the condition failed (ALL_OLD; undefined when the item is gone), so the
 * fan-in needs no further read.
 */
export async function writePart(sub: SubmissionItem, fileId: string, attrs: Record<string, unknown>, firstOnly?: string): Promise<{ stored: boolean; item: SubmissionItem | undefined }> {
  const names: Record<string, string> = { '#p': 'parts', '#f': fileId, '#r': 'round', ...(firstOnly ? { '#g': firstOnly } : {}) };
  const values: Record<string, unknown> = { ':r': sub.round };
  const sets = Object.entries(attrs).map(([k, v], i) => {
    names[`#a${i}`] = k;
    values[`:v${i}`] = v;
    return `#p.#f.#a${i} = :v${i}`;
  });
  try {
    // A verdict's transaction may hold the submission at that moment: the write is retried (its
    // condition makes it safe to repeat) rather than failing the message and redoing the stage.
    const out = await retryingConflicts(() =>
      db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: keys.submission(sub.id),
          UpdateExpression: `SET ${sets.join(', ')}`,
          // First writer wins: a concurrent duplicate delivery never replaces a result already written.
          ConditionExpression: `#r = :r AND attribute_exists(#p.#f)${firstOnly ? ' AND attribute_not_exists(#p.#f.#g)' : ''}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    return { stored: true, item: out.Attributes as SubmissionItem | undefined };
  } catch (e) {
    return { stored: false, item: submissionAsItWas(e) };
  }
}

/**
 * Claims the scoring of one file for this delivery until `untilMs` (epoch ms): while the round is
 * current, the file has no score yet, and no other delivery holds an unexpired claim. A file that
 * waited for its transcript has two deliveries of its scoring message by design (the message that
 * waited comes back on its own; the transcript's arrival sends a fresh one), and without a claim
 * both would ask the model. Answers whether it was claimed and, when not, the submission as it was
 * (ALL_OLD: a score already there, or another delivery's claim).
 */
export async function claimScoring(sub: SubmissionItem, fileId: string, nowMs: number, untilMs: number): Promise<{ claimed: boolean; item: SubmissionItem | undefined }> {
  try {
    await retryingConflicts(() =>
      db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: keys.submission(sub.id),
          UpdateExpression: 'SET #p.#f.#c = :until',
          ConditionExpression: '#r = :r AND attribute_exists(#p.#f) AND attribute_not_exists(#p.#f.#s) AND (attribute_not_exists(#p.#f.#c) OR #p.#f.#c < :now)',
          ExpressionAttributeNames: { '#p': 'parts', '#f': fileId, '#r': 'round', '#s': 'score', '#c': 'scoring_claimed_until' },
          ExpressionAttributeValues: { ':r': sub.round, ':until': untilMs, ':now': nowMs },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    return { claimed: true, item: undefined };
  } catch (e) {
    return { claimed: false, item: submissionAsItWas(e) };
  }
}

/**
 * Gives back this delivery's claim (`untilMs`, as claimed) after a failure, so its retry need not
 * wait for it to expire. A transaction holding the submission at that moment is waited out, as for
 * the claim: a release refused by it would leave the retry waiting for the claim to run out.
 */
export async function releaseScoringClaim(sub: SubmissionItem, fileId: string, untilMs: number): Promise<void> {
  try {
    await retryingConflicts(() =>
      db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: keys.submission(sub.id),
          UpdateExpression: 'REMOVE #p.#f.#c',
          ConditionExpression: '#p.#f.#c = :until',
          ExpressionAttributeNames: { '#p': 'parts', '#f': fileId, '#c': 'scoring_claimed_until' },
          ExpressionAttributeValues: { ':until': untilMs },
        }),
      ),
    );
  } catch (e) {
    if (!isConditionFailure(e)) throw e;
  }
}
