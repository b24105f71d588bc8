/**
 * Consumer of the `exports` queue (D73): one message per export, the export item's INSERT record
 * from the table stream (pipe `exports-requested`), or the build message the create route sent
 * before that pipe existed. The build records its own failures (export.failed); what escapes it
 * (the table unreachable) fails the message, which comes back and, after maxReceiveCount
 * receives, rests in the DLQ.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { buildExport } from '../../shared/exports/build';
import type { BuildMessage } from '../../shared/exports';
import { logger } from '../../shared/logger';
import { streamRecordOf } from '../../shared/manifest/stream-event';
import { RetryLater } from '../../shared/work/stage-message';

type Message = Partial<BuildMessage> & { eventName?: string; dynamodb?: { NewImage?: { entity?: { S?: string }; id?: { S?: string } } } };

/** The export a message asks for, or null when it is not one of ours. */
function exportIdOf(msg: Message): string | null {
  const image = msg.dynamodb?.NewImage;
  if (msg.eventName === 'INSERT' && image?.entity?.S === 'export' && typeof image.id?.S === 'string') return image.id.S;
  if (msg.kind === 'export.build' && typeof msg.export_id === 'string') return msg.export_id;
  return null;
}

export const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
  const failures: SQSBatchResponse['batchItemFailures'] = [];
  for (const record of event.Records) {
    try {
      const exportId = exportIdOf(streamRecordOf(JSON.parse(record.body) as Message));
      if (!exportId) {
        logger.warn('export: unrecognised message dropped', { body: record.body.slice(0, 200) });
        continue;
      }
      const outcome = await buildExport(exportId);
      logger.info('export built', { export_id: exportId, outcome });
    } catch (err) {
      // A duplicate delivery of an export whose run is alive is handed back: a wait, not an error.
      if (err instanceof RetryLater) logger.info('export: message handed back', { reason: err.message, message_id: record.messageId });
      else logger.error('export: message failed', { error: err as Error, message_id: record.messageId });
      failures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures: failures };
};
