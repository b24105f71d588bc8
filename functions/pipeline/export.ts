/**
 * Consumer of the `exports` queue (D73): one message per export, sent by the create route. The
 * build records its own failures (export.failed); what escapes it (the table unreachable) fails
 * the message, which comes back and, after maxReceiveCount receives, rests in the DLQ.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { buildExport } from '../../shared/exports/build';
import type { BuildMessage } from '../../shared/exports';
import { logger } from '../../shared/logger';

export const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
  const failures: SQSBatchResponse['batchItemFailures'] = [];
  for (const record of event.Records) {
    try {
      const msg = JSON.parse(record.body) as Partial<BuildMessage>;
      if (msg.kind !== 'export.build' || typeof msg.export_id !== 'string') {
        logger.warn('export: unrecognised message dropped', { body: record.body.slice(0, 200) });
        continue;
      }
      const outcome = await buildExport(msg.export_id);
      logger.info('export built', { export_id: msg.export_id, outcome });
    } catch (err) {
      logger.error('export: message failed', { error: err as Error, message_id: record.messageId });
      failures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures: failures };
};
