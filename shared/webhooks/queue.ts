/**
 * The webhooks queue (wiring: `webhooks`, with its DLQ): attempt messages and their delays. SQS
 * caps DelaySeconds at 900, so a longer wait is sent as 900 s with the due time in the message; the
 * dispatcher re-defers it until due (no sleeping Lambdas).
 */
import { now } from '../clock';
import { queueUrl, sendToQueueUrl } from '../queues';

export const MAX_DELAY_SECONDS = 900;
/** An attempt due within this margin runs now rather than waiting for another receive. */
export const DUE_MARGIN_MS = 50;

/** One delivery attempt of one event to one endpoint (retry, replay or re-deferral). */
export interface AttemptMessage {
  kind: 'webhook.attempt';
  event_id: string;
  endpoint_id: string;
  org_id: string;
  environment: 'live' | 'test';
  /** The delivery's `next_token` that makes this message the live one (stale copies drop). */
  token: string;
  /** The delivery's attempt count at which this message is valid. */
  expect_attempts: number;
  /** Position in the D37 retry schedule of the attempt after this one. */
  retry_index: number;
  /** A replay is one attempt, not a new retry schedule. */
  replay: boolean;
  /**
   * A replay of a delivery that was still being retried (or not attempted yet): if it fails, the
   * retry at `retry_index` is planned again, so the replay takes none of the retries left.
   */
  keep_retries?: boolean;
  due_at: string;
  /** Wall-clock ms when first sent: a message whose state is not visible yet waits a little. */
  created_ms: number;
}

export function webhooksQueueUrl(): string {
  return queueUrl('webhooks');
}

/** Sends (or re-defers) an attempt message so that it is received around `due_at`. */
export async function sendAttempt(msg: AttemptMessage, minDelaySeconds = 0): Promise<void> {
  const remaining = Date.parse(msg.due_at) - now().getTime();
  const delay = Math.min(MAX_DELAY_SECONDS, Math.max(minDelaySeconds, remaining > DUE_MARGIN_MS ? Math.ceil(remaining / 1000) : 0));
  await sendToQueueUrl(webhooksQueueUrl(), JSON.stringify(msg), delay);
}
