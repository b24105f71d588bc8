/**
 * Consumer of the `sandbox` queue (D40): the first message of a job is the DynamoDB stream record
 * of its test-environment `job.created` event (delivered after SANDBOX_DELAY_SECONDS); every later
 * one is a tick the simulator scheduled itself as a delayed message.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { getJobItem } from '../../shared/jobs';
import { tick } from '../../shared/sandbox/simulator';
import { markTickSent, startChain } from '../../shared/sandbox/chain-state';
import { sendMessage } from '../../shared/queues';
import { logger, withInvocationScope } from '../../shared/logger';
import { streamRecordOf } from '../../shared/manifest/stream-event';

interface TickMessage {
  kind: 'sandbox.tick';
  job_id: string;
  seq: number;
}

async function handleRecord(body: string): Promise<void> {
  const msg = streamRecordOf(JSON.parse(body) as Partial<TickMessage> & { dynamodb?: { NewImage?: Record<string, AttributeValue> } });
  let jobId: string;
  let seq: number;
  if (msg.kind === 'sandbox.tick' && typeof msg.job_id === 'string' && typeof msg.seq === 'number') {
    jobId = msg.job_id;
    seq = msg.seq;
  } else if (msg.dynamodb?.NewImage) {
    const image = unmarshall(msg.dynamodb.NewImage, { wrapNumbers: false }) as { job_id?: string; type?: string; environment?: string };
    if (image.type !== 'job.created' || image.environment !== 'test' || !image.job_id) return;
    const job = await getJobItem(image.job_id, true);
    if (!job) return;
    // A redelivered record (its first tick failed) runs tick 0 again; the state's seq makes a
    // duplicate that finds the chain further on do nothing.
    await startChain(job);
    jobId = job.id;
    seq = 0;
  } else {
    logger.warn('sandbox: unrecognised message dropped', { body: body.slice(0, 200) });
    return;
  }
  const r = await tick(jobId, seq);
  logger.info('sandbox tick', { job_id: jobId, seq, reason: r.reason });
  if (r.next) {
    const next: TickMessage = { kind: 'sandbox.tick', job_id: jobId, seq: r.next.seq };
    await sendMessage('sandbox', next, r.next.delaySeconds);
    await markTickSent(jobId, r.next.seq);
  }
}

export const handler = withInvocationScope(async (event: SQSEvent): Promise<SQSBatchResponse> => {
  const failures: SQSBatchResponse['batchItemFailures'] = [];
  for (const record of event.Records) {
    try {
      await handleRecord(record.body);
    } catch (err) {
      logger.error('sandbox tick failed', { error: err as Error, messageId: record.messageId });
      failures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures: failures };
});
