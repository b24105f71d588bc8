/**
 * A small AWS KMS on loopback speaking the published JSON 1.1 wire protocol
 * (`X-Amz-Target: TrentService.<Op>`, base64 blobs), for testing the KMS adapter with the real SDK.
 * It knows GenerateDataKey and Decrypt, checks the encryption context the way KMS does, and models
 * automatic key rotation: a key id keeps every earlier key version, so old ciphertexts decrypt.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface KmsRequest {
  target: string;
  body: Record<string, unknown>;
}

export interface FakeKms {
  endpoint: string;
  requests: KmsRequest[];
  /** Add a customer managed key; returns its ARN. */
  createKey(): string;
  /** KMS automatic rotation: a new backing version becomes current, older ones stay. */
  rotate(arn: string): void;
  close(): Promise<void>;
}

const ctxKey = (c: unknown) => JSON.stringify(Object.entries((c ?? {}) as Record<string, string>).sort());

export async function startFakeKms(): Promise<FakeKms> {
  const keys = new Map<string, Buffer[]>(); // arn -> versions (last = current)
  const requests: KmsRequest[] = [];
  let n = 0;

  function fail(res: import('node:http').ServerResponse, status: number, type: string, message: string) {
    res.writeHead(status, { 'Content-Type': 'application/x-amz-json-1.1' });
    res.end(JSON.stringify({ __type: type, message }));
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      requests.push({ target, body });
      // KMS answers a request not signed for it, or not in its protocol, with these errors.
      if (!/^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/[a-z0-9-]+\/kms\/aws4_request, /.test(String(req.headers.authorization ?? ''))) return fail(res, 400, 'MissingAuthenticationTokenException', 'not signed for kms');
      if (req.headers['content-type'] !== 'application/x-amz-json-1.1') return fail(res, 400, 'UnsupportedMediaTypeException', String(req.headers['content-type']));
      if (target === 'TrentService.GenerateDataKey') {
        const arn = String(body.KeyId);
        const versions = keys.get(arn);
        if (!versions) return fail(res, 400, 'NotFoundException', `key ${arn} not found`);
        if (body.KeySpec !== 'AES_256') return fail(res, 400, 'ValidationException', 'KeySpec');
        const plaintext = randomBytes(32);
        const v = versions.length - 1;
        const iv = randomBytes(12);
        const c = createCipheriv('aes-256-gcm', versions[v]!, iv);
        c.setAAD(Buffer.from(ctxKey(body.EncryptionContext)));
        const ct = Buffer.concat([c.update(plaintext), c.final()]);
        const blob = Buffer.concat([Buffer.from(JSON.stringify({ arn, v }) + '\n'), iv, c.getAuthTag(), ct]);
        res.writeHead(200, { 'Content-Type': 'application/x-amz-json-1.1' });
        return res.end(JSON.stringify({ KeyId: arn, Plaintext: plaintext.toString('base64'), CiphertextBlob: blob.toString('base64') }));
      }
      if (target === 'TrentService.Decrypt') {
        const blob = Buffer.from(String(body.CiphertextBlob), 'base64');
        const nl = blob.indexOf(10);
        const head = JSON.parse(blob.subarray(0, nl).toString()) as { arn: string; v: number };
        if (body.KeyId !== undefined && body.KeyId !== head.arn) return fail(res, 400, 'IncorrectKeyException', 'wrong key');
        const key = keys.get(head.arn)?.[head.v];
        if (!key) return fail(res, 400, 'InvalidCiphertextException', 'unknown key');
        const rest = blob.subarray(nl + 1);
        try {
          const d = createDecipheriv('aes-256-gcm', key, rest.subarray(0, 12));
          d.setAAD(Buffer.from(ctxKey(body.EncryptionContext)));
          d.setAuthTag(rest.subarray(12, 28));
          const plaintext = Buffer.concat([d.update(rest.subarray(28)), d.final()]);
          res.writeHead(200, { 'Content-Type': 'application/x-amz-json-1.1' });
          return res.end(JSON.stringify({ KeyId: head.arn, Plaintext: plaintext.toString('base64') }));
        } catch {
          return fail(res, 400, 'InvalidCiphertextException', 'context mismatch');
        }
      }
      return fail(res, 400, 'UnknownOperationException', target);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    createKey() {
      const arn = `arn:aws:kms:us-east-1:000000000000:key/test-${++n}-${randomBytes(4).toString('hex')}`;
      keys.set(arn, [randomBytes(32)]);
      return arn;
    },
    rotate(arn) {
      keys.get(arn)!.push(randomBytes(32));
    },
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
