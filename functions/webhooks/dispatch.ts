/**
 * Consumer of the `webhooks` queue (wiring): outbox stream records and attempt messages, with
 * partial batch failures (ReportBatchItemFailures). See shared/webhooks/dispatcher.ts.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { dispatchBatch } from '../../shared/webhooks/dispatcher';
import { withInvocationScope } from '../../shared/logger';

export const handler = withInvocationScope((event: SQSEvent): Promise<SQSBatchResponse> => dispatchBatch(event));
