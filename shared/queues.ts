/**
 * The functions' SQS calls (SendMessage, ChangeMessageVisibility, GetQueueUrl) and queue URLs.
 *
 * The calls go out in SQS's JSON protocol (awsJson1_0, target `AmazonSQS`, with the `x-amzn-query-mode`
 * header the SDK client sends) through shared/aws/json-rpc.ts, not the SQS SDK client: the routes
 * and consumers that send a message parsed that client at every cold start for these three
 * operations (docs/benchmarks.md). As the SDK client does, a send checks the MD5 SQS reports of the
 * body it received against the body sent. Held by test/unit/aws-json-clients.test.ts against the
 * SDK client; locally the calls reach the SQS emulator and pass the same grant checks.
 */
import { createHash } from 'node:crypto';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { JsonRpcClient } from './aws/json-rpc';
import { config, type Config } from './config';
import { localCredentials } from './db/client';

let client: JsonRpcClient | null = null;
let clientFor: Config | null = null;

/** A client of SQS at the region's endpoint unless another is given (the local emulator's). */
export function sqsClient(opts: { region?: string; endpoint?: string; credentials?: AwsCredentialIdentityProvider } = {}): JsonRpcClient {
  return new JsonRpcClient({ service: 'sqs', targetPrefix: 'AmazonSQS', version: '1.0', clientName: 'SQSClient', headers: { 'x-amzn-query-mode': 'true' }, ...opts });
}

/** The process's SQS client (pointed at the local emulator when configured). */
export function sqs(): JsonRpcClient {
  const c = config();
  if (!client || clientFor !== c) {
    client = sqsClient({ region: c.region, ...(c.sqsEndpoint ? { endpoint: c.sqsEndpoint, credentials: async () => localCredentials } : {}) });
    clientFor = c;
  }
  return client;
}

/** URL of a wiring queue (QUEUE_URL_<NAME>, set by the stack's grant helper or the local runtime). */
export function queueUrl(name: string): string {
  const url = config().queueUrls[name];
  if (!url) throw new Error(`QUEUE_URL_${name.toUpperCase().replace(/-/g, '_')} is not set`);
  return url;
}

/** SQS answered a send with the MD5 of another body than the one sent (the SDK client's check). */
export class MessageChecksumMismatch extends Error {
  override readonly name = 'MessageChecksumMismatch';
}

/** SendMessage of `body` (text) to the queue at `url`; answers the message id. */
export async function sendToQueueUrl(url: string, body: string, delaySeconds = 0, client: JsonRpcClient = sqs()): Promise<string> {
  const out = await client.call<{ MessageId?: string; MD5OfMessageBody?: string }>('SendMessage', { QueueUrl: url, MessageBody: body, DelaySeconds: delaySeconds });
  const md5 = createHash('md5').update(body, 'utf8').digest('hex');
  if (out.MD5OfMessageBody !== md5) throw new MessageChecksumMismatch(`SQS received another message body than was sent (MD5 ${out.MD5OfMessageBody ?? 'missing'}, expected ${md5})`);
  return out.MessageId ?? '';
}

/** Sends `body` (as JSON) to the wiring queue `queue`, delayed by `delaySeconds`. */
export async function sendMessage(queue: string, body: unknown, delaySeconds = 0): Promise<void> {
  await sendToQueueUrl(queueUrl(queue), JSON.stringify(body), delaySeconds);
}

/** ChangeMessageVisibility of one received message. */
export async function changeMessageVisibility(url: string, receiptHandle: string, visibilityTimeoutSeconds: number): Promise<void> {
  await sqs().call('ChangeMessageVisibility', { QueueUrl: url, ReceiptHandle: receiptHandle, VisibilityTimeout: visibilityTimeoutSeconds });
}

/** GetQueueUrl of a queue by its name and owner account. */
export async function getQueueUrl(name: string, ownerAccountId?: string): Promise<string> {
  const out = await sqs().call<{ QueueUrl?: string }>('GetQueueUrl', { QueueName: name, ...(ownerAccountId ? { QueueOwnerAWSAccountId: ownerAccountId } : {}) });
  if (!out.QueueUrl) throw new Error(`SQS answered no URL for queue ${name}`);
  return out.QueueUrl;
}
