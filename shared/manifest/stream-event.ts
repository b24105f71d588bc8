/**
 * The events the table stream's pipe puts on the stream bus (`TABLE_STREAM` in ./wiring): their
 * source and detail type, and how a consumer finds the stream record in a message. Kept apart from
 * the wiring so that consumers import these few lines, not the whole manifest.
 */

export const STREAM_EVENT_SOURCE = 'media-collection.table-stream';
export const STREAM_EVENT_DETAIL_TYPE = 'Table stream record';

/**
 * The stream record in a queue message's (parsed) body. The stream rules send the record itself
 * (their target input is the event's detail); a message moved back by hand from a stream rule's
 * dead-letter queue carries the whole bus event (docs/operations.md), so that is unwrapped.
 * Anything else is returned as it is.
 */
export function streamRecordOf<T = unknown>(message: T): T {
  const m = message as { source?: unknown; 'detail-type'?: unknown; detail?: unknown } | null | undefined;
  if (m && typeof m === 'object' && m.source === STREAM_EVENT_SOURCE && m['detail-type'] === STREAM_EVENT_DETAIL_TYPE && m.detail && typeof m.detail === 'object') {
    return m.detail as T;
  }
  return message;
}
