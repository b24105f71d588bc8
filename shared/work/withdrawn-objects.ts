/**
 * Deleting a withdrawn submission's delivered objects (D71, override to reject). The override's
 * transaction keeps the object keys on the submission (`withdrawn_object_keys`) and writes the
 * `submission.overridden` event; the event's INSERT record reaches the `withdrawals` queue through
 * the table stream (pipe `files-withdrawn`), so the deletion is queued by the same commit and
 * happens at least once, whatever becomes of the override's function after its commit.
 *
 * Idempotent: deleting a deleted key succeeds, and `withdrawn_objects_deleted_at` records that it
 * was done (a redelivered message deletes again, harmlessly). A failure throws: the message comes
 * back with the backoff and, after maxReceiveCount receives, rests in the DLQ.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { nowIso } from '../clock';
import { isId } from '../ids';
import { deleteObjects } from '../storage/s3';
import { jsonBody, PoisonMessage, type StageOutcome } from './stage-message';
import { streamRecordOf } from '../manifest/stream-event';

interface StreamImage {
  entity?: { S?: string };
  type?: { S?: string };
  envelope?: { M?: { data?: { M?: { submission_id?: { S?: string }; decision?: { S?: string } } } } };
}

/**
 * The submission whose Files an override withdrew: from the event's INSERT record (the pipe), or
 * from `{"kind":"withdrawal.delete","submission_id":"sub_…"}` (an operator's redrive,
 * docs/operations.md). Null: an override that withdrew nothing.
 */
export function withdrawnSubmissionOf(body: string): string | null {
  const record = streamRecordOf(jsonBody<{ eventName: string; dynamodb: { NewImage?: StreamImage }; kind: string; submission_id: unknown }>(body));
  if (record?.kind === 'withdrawal.delete') {
    if (typeof record.submission_id !== 'string' || !isId('submission', record.submission_id)) throw new PoisonMessage('withdrawal.delete names no submission');
    return record.submission_id;
  }
  const image = record?.dynamodb?.NewImage;
  const data = image?.envelope?.M?.data?.M;
  if (record?.eventName !== 'INSERT' || image?.entity?.S !== 'event' || image.type?.S !== 'submission.overridden') {
    throw new PoisonMessage('not the INSERT record of a submission.overridden event');
  }
  if (data?.decision?.S !== 'reject') return null;
  const id = data.submission_id?.S;
  if (typeof id !== 'string') throw new PoisonMessage('the event names no submission');
  return id;
}

/** Deletes the objects the override withdrew from `subId`, once they are recorded on it. */
export async function deleteWithdrawnObjects(subId: string | null): Promise<StageOutcome> {
  if (!subId) return 'ignored';
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(subId), ConsistentRead: true }));
  const objectKeys = out.Item?.withdrawn_object_keys as string[] | undefined;
  if (!Array.isArray(objectKeys) || objectKeys.length === 0) return 'ignored';
  await deleteObjects(objectKeys);
  if (out.Item!.withdrawn_objects_deleted_at) return 'skipped';
  await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.submission(subId),
      UpdateExpression: 'SET withdrawn_objects_deleted_at = if_not_exists(withdrawn_objects_deleted_at, :at)',
      ConditionExpression: 'attribute_exists(PK)',
      ExpressionAttributeValues: { ':at': nowIso() },
    }),
  );
  return 'stored';
}
