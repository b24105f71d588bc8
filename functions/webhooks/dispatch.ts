/**
 * Consumer of the `webhooks` queue (wiring): outbox stream records and attempt messages, with
 * partial batch failures (ReportBatchItemFailures). See shared/webhooks/dispatcher.ts.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { dispatchBatch } from '../../shared/webhooks/dispatcher';
import { withInvocationScope } from '../../shared/logger';

// The context's remaining time keeps the batch within the function's timeout.
export const handler = withInvocationScope((event: SQSEvent, context: Context): Promise<SQSBatchResponse> => dispatchBatch(event, context));
