/**
 * The messages of the pipeline stages (kept apart from the stage modules so light consumers, such as the
 * transcription stage, do not bundle the media code): the S3 "Object Created" event the scoring and
 * annotation stages read, the fan-in record the scoring stage reads too, the poison error, and the
 * outcomes a stage reports.
 */
import { streamRecordOf } from '../manifest/stream-event';

/** The part of the EventBridge "Object Created" event the stages read. */
export interface ObjectCreatedEvent {
  'detail-type'?: string;
  detail?: { bucket?: { name?: string }; object?: { key?: string; size?: number } };
}

export type StageOutcome = 'ignored' | 'stored' | 'skipped' | 'refused' | 'deferred';

/** Poison: a message body that is not an Object Created event. Thrown, so it ends in the DLQ. */
export class PoisonMessage extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PoisonMessage';
  }
}

/**
 * Not yet: the message arrived before the state it completes was recorded (e.g. a Transcribe job
 * that finished before the scoring stage wrote that it started it). Thrown, so the message comes
 * back after the backoff like any failure, logged as a wait rather than an error.
 */
export class RetryLater extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RetryLater';
  }
}

/** A message body's JSON, or poison. The shape is the caller's to check. */
export function jsonBody<T>(body: string): Partial<T> | undefined {
  try {
    return JSON.parse(body) as Partial<T> | undefined;
  } catch {
    throw new PoisonMessage('message body is not JSON');
  }
}

/**
 * A scoring-queue message: an S3 Object Created event (a file to score), or the stream record of a
 * fan-in item's insert (a round completed after both stages wrote: take its verdict).
 */
export function parseScoringMessage(body: string): { key: string } | { fanIn: string } {
  const record = streamRecordOf(jsonBody<{ eventName: string; dynamodb: { NewImage?: { entity?: { S?: string }; submission_id?: { S?: string } } } }>(body));
  const image = record?.dynamodb?.NewImage;
  if (image?.entity?.S === 'fan_in') {
    const subId = image.submission_id?.S;
    if (record?.eventName !== 'INSERT' || !subId) throw new PoisonMessage('not the INSERT record of a fan-in item');
    return { fanIn: subId };
  }
  return parseEvent(body);
}

export function parseEvent(body: string): { key: string } {
  const ev = jsonBody<ObjectCreatedEvent>(body);
  const key = ev?.detail?.object?.key;
  if (ev?.['detail-type'] !== 'Object Created' || typeof key !== 'string') throw new PoisonMessage('not an S3 Object Created event');
  // S3 URL-encodes keys in notifications (spaces as '+').
  return { key: decodeURIComponent(key.replace(/\+/g, ' ')) };
}

