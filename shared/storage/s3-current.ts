/**
 * The S3 client of this process, once created (shared/storage/s3-client.ts). Kept apart from the
 * SDK so that `resetS3` (shared/storage/s3.ts) can drop it without loading the SDK.
 */
export const current: { client: { destroy(): void } | null } = { client: null };
