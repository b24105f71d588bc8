/**
 * SQS batch consumer for the pipeline stages: the records of a batch run in parallel, each failure
 * is reported as a partial batch failure (`batchItemFailures`), so only that message comes back
 * (after the visibility timeout) and, after maxReceiveCount receives, rests in the queue's DLQ.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { logger, withChildLogScope, withInvocationScope } from '../logger';
import { parseEvent, type StageOutcome } from './pipeline';

export function stageConsumer(stage: string, run: (key: string) => Promise<StageOutcome>) {
  return withInvocationScope(async (event: SQSEvent): Promise<SQSBatchResponse> => {
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    await Promise.all(
      event.Records.map((record) => withChildLogScope({ stage, message_id: record.messageId }, async () => {
        try {
          const { key } = parseEvent(record.body);
          const outcome = await run(key);
          logger.debug(`${stage}: ${outcome}`, { key, message_id: record.messageId });
        } catch (err) {
          logger.error(`${stage}: message failed`, { error: err as Error, message_id: record.messageId, receive_count: record.attributes?.ApproximateReceiveCount });
          failures.push({ itemIdentifier: record.messageId });
        }
      })),
    );
    return { batchItemFailures: failures };
  });
}
