/**
 * Issue 11.3: any text a user may send flows through every local part, as through real SQS (which
 * accepts characters outside the Basic Multilingual Plane), and one poison record never stops the
 * others: the stream pipes retry a failing record a bounded number of times, dead-letter it with a
 * log line, and go on.
 */
import { ReceiveMessageCommand, SendMessageBatchCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { createHash } from 'node:crypto';
import { localSqsClient, startSqsEmulator, createQueues, type SqsEmulator } from '../../local/sqs';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { signupBuyer, idemKey } from '../support/buyers';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { withRecordingPipes } from '../support/stream-pipes';

const ASTRAL = 'Boom \u{1F4A5} 𝕏 🀄 𐍈 \u{10FFFD}';

describe('the local SQS takes every character real SQS takes', () => {
  let emulator: SqsEmulator;
  let sqs: SQSClient;
  beforeAll(async () => {
    emulator = await startSqsEmulator();
    sqs = localSqsClient(emulator.endpoint);
  });
  afterAll(async () => {
    sqs?.destroy();
    await emulator?.stop();
  });

  it('a body with characters outside the Basic Multilingual Plane arrives unchanged, with the MD5 of its UTF-8 bytes', async () => {
    const { url } = (await createQueues(sqs, [{ name: 'astral', consumer: 'x.ts', visibilityTimeoutSeconds: 30, maxReceiveCount: 3, batchSize: 10, consumerTimeoutSeconds: 10, consumerMemoryMb: 128, dlqAlarmThreshold: 1, access: { table: 'read' } }])).get('astral')!;
    const body = JSON.stringify({ title: ASTRAL });
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body }));
    const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '1', MessageBody: `${ASTRAL} (batch)` }] }));
    expect(batch.Failed ?? []).toEqual([]);
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }));
    expect(Messages?.map((m) => m.Body).sort()).toEqual([`${ASTRAL} (batch)`, body].sort());
    const m = Messages!.find((x) => x.Body === body)!;
    expect(m.MD5OfBody).toBe(createHash('md5').update(body, 'utf8').digest('hex'));
  });

  it('characters real SQS refuses are still refused (a control character)', async () => {
    const { url } = (await createQueues(sqs, [{ name: 'astral-strict', consumer: 'x.ts', visibilityTimeoutSeconds: 30, maxReceiveCount: 3, batchSize: 10, consumerTimeoutSeconds: 10, consumerMemoryMb: 128, dlqAlarmThreshold: 1, access: { table: 'read' } }])).get('astral-strict')!;
    await expect(sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'bell \u0007' }))).rejects.toThrow(/Invalid characters/);
  });
});

describe('a job titled with astral characters stalls nothing', () => {
  let rt: TestRuntime;
  let rx: DevReceiver;
  beforeAll(async () => {
    rt = await startTestRuntime();
    rx = await startDevReceiver();
  });
  afterAll(async () => {
    await rx?.close();
    await rt?.stop();
  });

  const post = (path: string, key: string, body: unknown) => rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });
  const job = (title: string, files = 1) => ({
    type: 'data_collection',
    title,
    description: 'Photos of colourful shapes for an integration test',
    files_needed: files,
    accepted_formats: ['image/jpeg'],
    price_per_file_cents: 25,
  });

  it('its webhooks arrive with the title intact, and another organization then gets its webhooks and its sandbox run', async () => {
    const a = await signupBuyer(rt, 'Emoji Co');
    expect((await post('/v1/webhook_endpoints', a.test, { url: `${rx.url}/a`, events: ['job.created'] })).status).toBe(201);
    const aJob = await post('/v1/jobs', a.test, job(`${ASTRAL} job`, 1));
    expect(aJob.status).toBe(201);
    expect(aJob.json.title).toBe(`${ASTRAL} job`);

    const b = await signupBuyer(rt, 'Plain Co');
    expect((await post('/v1/webhook_endpoints', b.test, { url: `${rx.url}/b`, events: ['job.created', 'job.completed'] })).status).toBe(201);
    const bJob = await post('/v1/jobs', b.test, job('Plain shapes', 1));
    expect(bJob.status).toBe(201);

    const aCreated = await waitFor(() => rx.at('/a').find((r) => r.event.type === 'job.created'), { timeoutMs: 20_000 });
    expect((aCreated.event.data as { title: string }).title).toBe(`${ASTRAL} job`);
    await waitFor(() => rx.at('/b').find((r) => r.event.type === 'job.created'), { timeoutMs: 20_000 });
    // The sandbox runs for the other organization (and for the astral job too).
    await waitFor(() => rx.at('/b').find((r) => r.event.type === 'job.completed'), { timeoutMs: 60_000, intervalMs: 200 });
    const aDone = await rt.request('GET', `/v1/jobs/${aJob.json.id}`, { key: a.test, headers: { Prefer: 'wait=30' } });
    expect(aDone.json.status).toBe('completed');
  }, 120_000);

  it('a control character is escaped in the event\'s JSON, so that job is stored and its webhook arrives too', async () => {
    const a = await signupBuyer(rt, 'Control Co');
    expect((await post('/v1/webhook_endpoints', a.test, { url: `${rx.url}/c`, events: ['job.created'] })).status).toBe(201);
    const title = `nul \u0000 bell \u0007 ${ASTRAL}`;
    const created = await post('/v1/jobs', a.test, job(title, 1));
    expect(created.status).toBe(201);
    const delivered = await waitFor(() => rx.at('/c').find((r) => r.event.type === 'job.created'), { timeoutMs: 20_000 });
    expect((delivered.event.data as { title: string }).title).toBe(title);
  }, 60_000);

  it('U+FFFF, which SQS refuses in a message, is a 400 naming the field instead of an event that could never be delivered', async () => {
    const a = await signupBuyer(rt, 'Noncharacter Co');
    const r = await post('/v1/jobs', a.test, job('shapes \uFFFF', 1));
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'validation_error', details: [{ field: 'title', code: 'invalid_character', message: expect.stringContaining('U+FFFF') }] });
    expect((await rt.request('GET', '/v1/jobs', { key: a.test })).json.data).toEqual([]);
  });

  it('an unpaired surrogate in a nested value is a 400 naming its path', async () => {
    const a = await signupBuyer(rt, 'Surrogate Co');
    const r = await post('/v1/jobs', a.test, { ...job('shapes', 1), metadata: { note: 'half \uD83D pair' } });
    expect(r.status).toBe(400);
    expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'metadata.note', code: 'invalid_character', message: expect.stringContaining('unpaired surrogate') })]);
  });
});

describe('one poison stream record never stops the others', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('a record whose send keeps failing is retried a bounded number of times, dead-lettered with a log line, and the next record goes through', async () => {
    let poisonAttempts = 0;
    const refuse = (body: string) => body.includes('evt_poison') && ++poisonAttempts > 0;
    await withRecordingPipes(rt, { maxAttempts: 3, refuse }, async ({ pipes, sent, errors, putEvent }) => {
      await putEvent('EVT#evt_poison');
      await putEvent('EVT#evt_after');
      await waitFor(() => sent.includes('EVT#evt_after'));
      expect(poisonAttempts).toBe(3);
      expect(pipes.deadLetters.map((d) => d.record.dynamodb?.Keys?.PK?.S)).toEqual(['EVT#evt_poison']);
      expect(errors).toEqual([expect.stringMatching(/rule outbox-to-webhooks gave up on record .* after 3 attempts \(InvalidMessageContents\); dead-lettered, moving on/)]);
    });
  });
});
