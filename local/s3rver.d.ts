/** The part of s3rver 3.x (no bundled types) that the local runtime uses. */
declare module 's3rver' {
  import { EventEmitter } from 'node:events';
  import type { AddressInfo } from 'node:net';

  interface S3rverOptions {
    address?: string;
    port?: number;
    directory?: string;
    silent?: boolean;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    configureBuckets?: { name: string; configs?: (string | Buffer)[] }[];
  }

  /** Its file store (lib/stores/filesystem.js): what local/s3.ts corrects. */
  interface S3rverStore {
    getResourcePath(bucket: string, key: string, resource: 'object' | 'object.md5' | 'metadata.json'): string;
    putObject(object: { bucket: string; key: string; content: Buffer | NodeJS.ReadableStream; metadata: Record<string, string> }): Promise<{ md5: string; size: number }>;
    putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
    deleteObject(bucket: string, key: string): Promise<void>;
    deleteSubresource(bucket: string, key: string, resourceType: 'tagging'): Promise<void>;
  }

  class S3rver extends EventEmitter {
    constructor(options?: S3rverOptions);
    readonly store: S3rverStore;
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
    reset(): void;
  }

  export = S3rver;
}
