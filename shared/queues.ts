/** The SQS client (one per process, pointed at the local emulator when configured) and queue URLs. */
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { config, type Config } from './config';
import { localCredentials } from './db/client';
import { traced } from './observability/tracer';

let client: SQSClient | null = null;
let clientFor: Config | null = null;

export function sqs(): SQSClient {
  const c = config();
  if (!client || clientFor !== c) {
    client = traced(
      new SQSClient({
        region: c.region,
        ...(c.sqsEndpoint ? { endpoint: c.sqsEndpoint, credentials: localCredentials } : {}),
      }),
    );
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

export async function sendMessage(queue: string, body: unknown, delaySeconds = 0): Promise<void> {
  await sqs().send(new SendMessageCommand({ QueueUrl: queueUrl(queue), MessageBody: JSON.stringify(body), DelaySeconds: delaySeconds }));
}
