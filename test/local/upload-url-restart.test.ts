/**
 * A pre-signed upload URL handed out before `npm start` stops still works after it starts again,
 * until it expires: the S3 front keeps its port, and the credentials that signed the URL (the
 * upload-signing role's, issued by the STS emulator) are kept in the data folder, as STS's outlive
 * a restart of the function that asked for them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startRuntime, type RuntimeOptions } from '../../local/runtime';
import { headObject, presignPut } from '../../shared/storage/s3';

const dataDir = mkdtempSync(join(tmpdir(), 'upload-url-restart-'));
const options = (): RuntimeOptions => ({
  dynamoEndpoint: process.env.DYNAMODB_ENDPOINT,
  dataDir,
  port: 0,
  tableName: `test-${randomBytes(6).toString('hex')}`,
  enablePollers: false,
  enableStreams: false,
  enableScheduler: false,
  logLevel: 'error',
  cursorSecret: 'test-cursor-secret',
});

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

test('an upload URL signed before a restart writes its object after it', async () => {
  const first = await startRuntime(options());
  const body = Buffer.from('bytes signed for before the restart');
  const key = 'uploads/restart-test/1.jpg';
  let signed;
  try {
    signed = await presignPut(key, 'image/jpeg', body.length);
    expect(new URL(signed.url).searchParams.get('X-Amz-Security-Token')).toEqual(expect.any(String));
  } finally {
    await first.stop();
  }
  const second = await startRuntime(options());
  try {
    expect((await fetch(signed.url, { method: 'PUT', body, headers: signed.headers })).status).toBe(200);
    expect(await headObject(key)).toMatchObject({ size: body.length });
  } finally {
    await second.stop();
  }
});
