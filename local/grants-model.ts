/**
 * What the local grant check (grants.ts) holds an invocation to, and what it throws instead.
 */
import type { BucketAccess, KmsAccess } from '../shared/manifest/access';

/** What one function was granted (its manifest entry). */
export interface Grants {
  fn: string;
  table?: 'read' | 'write';
  /** UpdateItem on the request-count partitions (read routes with a rate limit). */
  requestCounting?: boolean;
  /** UpdateItem on the held-wait slots (long-poll read routes: shared/long-poll-slots.ts). */
  waitSlots?: boolean;
  /** Put, Update and Delete on idempotency records only (read routes that take an Idempotency-Key). */
  idempotencyRecords?: boolean;
  bucket?: BucketAccess;
  sendTo?: readonly string[];
  /** The queue a consumer reads (it may change its messages' visibility). */
  consumes?: string;
  kms?: KmsAccess;
  transcribe?: boolean;
  /** sts:AssumeRole on the upload-signing role (UPLOAD_SIGNER_ROLE_ARN). */
  uploadSigner?: boolean;
  bedrock?: boolean;
  sms?: boolean;
  /**
   * The invocation's trace header (a queue consumer's: local/lineage.ts), which the SDK puts on
   * every request deployed and SQS keeps with each message the invocation sends.
   */
  traceHeader?: string;
}

/** Thrown locally where the deployed role would get 403 AccessDenied. */
export class AccessDenied extends Error {
  readonly $metadata = { httpStatusCode: 403 };
  constructor(message: string) {
    super(message);
    this.name = 'AccessDenied';
  }
}
