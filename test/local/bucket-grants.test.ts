import { grantedTo } from '../../local/lambda';
import { routeById } from '../../shared/manifest/routes';
import { queueByName, SCHEDULES } from '../../shared/manifest/wiring';
import { deleteObjects, getObjectBytes, headObject, presignPut, putObject, tagVerdict } from '../../shared/storage/s3';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// Deployed, each function's role allows only the S3 operations of its manifest entry's bucket
// access (lib/constructs/grants.ts). Locally one set of emulator credentials serves every handler,
// so the runtime's S3 client refuses, per invocation, what the deployed role could not do: a
// handler that calls S3 beyond its grant fails locally first (test/cdk/bucket-grants.test.ts checks
// that the local rules and the synthesized policies agree).
describe('local runtime: a function calls only the S3 operations its bucket access allows', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const key = (name: string) => `uploads/sub_grants/r1/${name}.jpg`;
  const asRoute = <T>(id: string, fn: () => Promise<T>) => grantedTo(id, routeById(id).access, fn)({}, {} as never) as Promise<T>;
  const asQueue = <T>(name: string, fn: () => Promise<T>) => grantedTo(name, queueByName(name).access, fn)({}, {} as never) as Promise<T>;

  it('the upload route puts, pre-signs and tags upload objects', async () => {
    await asRoute('worker.submissions.upload', async () => {
      await putObject(key('a'), Buffer.from('bytes'), 'image/jpeg');
      await presignPut(key('b'), 'image/jpeg', 5);
      await tagVerdict([key('a')], 'rejected');
    });
    expect(await headObject(key('a'))).toMatchObject({ size: 5 });
  });

  it('the upload route may not delete, read, or write outside uploads/', async () => {
    await putObject(key('c'), Buffer.from('bytes'), 'image/jpeg'); // outside any invocation: unchecked
    await expect(asRoute('worker.submissions.upload', () => deleteObjects([key('c')]))).rejects.toThrow(/not authorized to perform s3:DeleteObject/);
    await expect(asRoute('worker.submissions.upload', () => getObjectBytes(key('c')))).rejects.toThrow(/s3:GetObject/);
    await expect(asRoute('worker.submissions.upload', () => putObject('exports/x.jsonl', Buffer.from('{}'), 'application/json'))).rejects.toThrow(/s3:PutObject on exports\/x.jsonl/);
    expect(await headObject(key('c'))).not.toBeNull();
  });

  it('a function without bucket access makes no S3 call', async () => {
    await expect(asRoute('jobs.get', () => headObject(key('a')))).rejects.toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
    const sweep = SCHEDULES.find((s) => s.name === 'reservation-sweep')!;
    await expect(grantedTo(sweep.name, sweep.access, () => headObject(key('a')))({}, {} as never)).rejects.toThrow(/bucket access: none/);
  });

  it('a consumer granted only tagging tags upload objects and nothing else', async () => {
    await asQueue('cancellations', () => tagVerdict([key('a')], 'rejected'));
    await expect(asQueue('cancellations', () => deleteObjects([key('a')]))).rejects.toThrow(/s3:DeleteObject/);
  });

  it('a consumer granted only deletion deletes, and reads nothing', async () => {
    await expect(asQueue('withdrawals', () => getObjectBytes(key('a')))).rejects.toThrow(/s3:GetObject/);
    await asQueue('withdrawals', () => deleteObjects([key('a')]));
    expect(await headObject(key('a'))).toBeNull();
  });
});
