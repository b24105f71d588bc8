/**
 * The S3 emulator (s3rver, files on disk) behind a front that checks Signature Version 4 as S3
 * does (local/s3-front.ts, D61), and the conversion of its object-created notifications into the
 * EventBridge "Object Created" events that S3 sends to the default bus. The endpoint handed out
 * (clients, pre-signed URLs) is the front's; s3rver itself listens on an internal port.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { writeFileDurably } from './durable-write';
import type { AddressInfo } from 'node:net';
import type { S3ObjectCreatedNotificationEvent, S3ObjectCreatedNotificationEventDetail } from 'aws-lambda';
import S3rver from 's3rver';
import { startSigV4Front } from './s3-front';
import { correctStore, removeCutOffWrites } from './s3-store';
import { s3rverUploadsDir } from './s3-multipart';
import type { IssuedCredentials } from './sts';

// s3rver verifies SigV4 signatures against its own key registry; the runtime's clients (and the
// pre-signed URLs they produce) sign with these local credentials, so register them once.
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account') as {
  DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void };
};
export const S3_LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;
DUMMY_ACCOUNT.createKeyPair(S3_LOCAL_CREDENTIALS.accessKeyId, S3_LOCAL_CREDENTIALS.secretAccessKey);

/** One record of the S3 notification that s3rver emits as its `event` (S3 event-notification format). */
export interface S3rverRecord {
  eventName: string;
  eventTime: string;
  awsRegion: string;
  requestParameters: { sourceIPAddress: string };
  responseElements: { 'x-amz-request-id': string };
  s3: { bucket: { name: string }; object: { key: string; size?: number; eTag?: string; sequencer: string } };
}

/** S3 → EventBridge "reason" by s3rver's event name (s3rver reports multipart completion as Post). */
const REASONS: Record<string, S3ObjectCreatedNotificationEventDetail['reason']> = {
  'ObjectCreated:Put': 'PutObject',
  'ObjectCreated:Copy': 'CopyObject',
  'ObjectCreated:Post': 'POST Object',
};

/** The object-created detail without `version-id`, which S3 sends only for versioned buckets. */
export type ObjectCreatedEvent = Omit<S3ObjectCreatedNotificationEvent, 'detail'> & {
  detail: Omit<S3ObjectCreatedNotificationEventDetail, 'object'> & {
    object: Omit<S3ObjectCreatedNotificationEventDetail['object'], 'version-id'> & { 'version-id'?: string };
  };
};

export interface EventContext {
  account: string;
  region: string;
}

/**
 * The EventBridge event S3 publishes for an ObjectCreated notification, or null for other events
 * (deletions). `time` has second precision like the real events.
 */
export function toObjectCreatedEvent(record: S3rverRecord, ctx: EventContext): ObjectCreatedEvent | null {
  const reason = REASONS[record.eventName];
  if (!reason) return null;
  const { bucket, object } = record.s3;
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Object Created',
    source: 'aws.s3',
    account: ctx.account,
    time: new Date(record.eventTime).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: ctx.region,
    resources: [`arn:aws:s3:::${bucket.name}`],
    detail: {
      version: '0',
      bucket: { name: bucket.name },
      object: { key: object.key, size: object.size ?? 0, etag: object.eTag ?? '', sequencer: object.sequencer },
      'request-id': record.responseElements['x-amz-request-id'],
      requester: ctx.account,
      'source-ip-address': normaliseIp(record.requestParameters.sourceIPAddress),
      reason: object.eTag?.includes('-') ? 'CompleteMultipartUpload' : reason,
    },
  };
}

function normaliseIp(ip: string): string {
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip;
}

export interface S3Emulator {
  /** The verifying front: what clients and pre-signed URLs use. */
  endpoint: string;
  port: number;
  /** s3rver itself, unverified (tests that look behind the front). */
  backendEndpoint: string;
  bucket: string;
  stop(): Promise<void>;
}

export interface S3EmulatorOptions {
  directory: string;
  bucket: string;
  host?: string;
  /** Port of the verifying front (0 or unset: a free one). */
  port?: number;
  /**
   * Keeps the front's port across restarts: the port saved here is taken again when free (and
   * the chosen one saved), so pre-signed upload URLs handed out before a restart still work.
   */
  portFile?: string;
  account: string;
  region: string;
  /** Temporary credentials the front also accepts (the STS emulator's, local/sts.ts). */
  temporaryCredentials?: IssuedCredentials;
  /** Called for every object-created event, in the EventBridge shape. */
  onObjectCreated(event: ObjectCreatedEvent): void;
}

export async function startS3Emulator(opts: S3EmulatorOptions): Promise<S3Emulator> {
  const host = opts.host ?? '127.0.0.1';
  await removeCutOffWrites(opts.directory);
  const server = new S3rver({
    address: host,
    port: 0,
    directory: opts.directory,
    silent: true,
    configureBuckets: [{ name: opts.bucket, configs: [] }],
  });
  correctStore(server.store);
  server.on('event', (notification: { Records: S3rverRecord[] }) => {
    for (const record of notification.Records) {
      const event = toObjectCreatedEvent(record, opts);
      if (event) opts.onObjectCreated(event);
    }
  });
  const address = (await server.run()) as AddressInfo;
  // s3rver checks the access key of what the front passes on against its own registry too.
  opts.temporaryCredentials?.onIssue((c) => DUMMY_ACCOUNT.createKeyPair(c.accessKeyId, c.secretAccessKey));
  let front;
  try {
    const start = (port: number) => startSigV4Front({
        target: { host, port: address.port },
        host,
        port,
        credentials: opts.temporaryCredentials ? opts.temporaryCredentials.lookup(S3_LOCAL_CREDENTIALS) : S3_LOCAL_CREDENTIALS,
        region: opts.region,
        multipartUploadsDir: s3rverUploadsDir(opts.directory, opts.bucket),
      });
    const saved = opts.port === undefined && opts.portFile && existsSync(opts.portFile) ? Number(readFileSync(opts.portFile, 'utf8').trim()) : 0;
    front = await start(opts.port ?? saved).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EADDRINUSE' || opts.port) throw err;
      return start(0); // the saved port is taken: URLs signed for it cannot be honoured anyway
    });
    if (opts.portFile) writeFileDurably(opts.portFile, String(front.port));
  } catch (err) {
    await server.close();
    throw err;
  }
  return {
    endpoint: front.endpoint,
    port: front.port,
    backendEndpoint: `http://${host}:${address.port}`,
    bucket: opts.bucket,
    stop: async () => {
      await front.stop();
      await server.close();
    },
  };
}
