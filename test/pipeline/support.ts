/** Builders for the worker / pipeline tests: workers, live jobs, media bytes, multipart bodies, queue messages. */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import sharp, { type Sharp } from 'sharp';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { ConverseCommandOutput } from '@aws-sdk/client-bedrock-runtime';
import { idemKey, signupBuyer, verifyPhone, uniqueEmail } from '../support/buyers';
import { startTestRuntime, waitFor, type TestResponse, type TestRuntime } from '../support/harness';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import type { RuntimeOptions } from '../../local/runtime';
import { BedrockScorer } from '../../shared/scoring';
import { setScorerFactory } from '../../shared/work/scoring-stage';
import { TranscribeTranscriber, setSpeechModelClient, setTranscriberFactory } from '../../shared/speech';

export async function signupWorker(rt: TestRuntime): Promise<{ id: string; token: string }> {
  const r = await rt.request('POST', '/internal/worker/auth/signup', { body: { name: 'Worker', email: uniqueEmail('worker') } });
  if (r.status !== 201) throw new Error(`worker signup: ${r.status} ${r.text}`);
  return { id: r.json.worker.id, token: r.json.token };
}

/** A buyer with the 250 live starter cents (LOCAL_FIXED_OTP must be set before the runtime starts). */
export async function liveBuyer(rt: TestRuntime) {
  const b = await signupBuyer(rt);
  await verifyPhone(rt, b.live);
  return b;
}

export async function createJob(rt: TestRuntime, key: string, over: Record<string, unknown> = {}) {
  const r = await rt.request('POST', '/v1/jobs', {
    key,
    headers: { 'Idempotency-Key': idemKey() },
    body: {
      type: 'data_collection',
      description: 'Photos of storefronts in daylight, whole front visible.',
      files_needed: 2,
      accepted_formats: ['image/jpeg', 'image/png'],
      price_per_file_cents: 10,
      ...over,
    },
  });
  if (r.status !== 201) throw new Error(`job create: ${r.status} ${r.text}`);
  return r.json as { id: string; status: string; price_per_file_cents: number; files_needed: number };
}

/**
 * A detailed, well-exposed picture (gradients + a checker texture + discs), unique per `seed`,
 * which the local scorer rates ≥ 3 (D28). 640×480 keeps the shorter side ≥ 480 px. Pictures of
 * different seeds are also perceptually distinct (D69: a seed-derived 8×8 grid of lighter and
 * darker cells sets the coarse structure), so they are never near-duplicates of each other.
 */
export async function detailedJpeg(seed = randomBytes(4).readUInt32BE(0), w = 640, h = 480, exif?: Parameters<Sharp['withExif']>[0]): Promise<Buffer> {
  const px = Buffer.alloc(w * h * 3);
  const phase = (seed % 997) / 997;
  const cells = createHash('sha256').update(`detailed:${seed}`).digest();
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const checker = ((x >> 4) + (y >> 4)) % 2 === 0 ? 40 : -40;
      const d = Math.hypot(x - w * (0.3 + 0.4 * phase), y - h / 2);
      const ring = Math.sin(d / 6) * 30;
      const c = Math.floor((y * 8) / h) * 8 + Math.floor((x * 8) / w);
      const cell = (cells[c >> 3]! >> (c & 7)) & 1 ? 30 : -30;
      const i = (y * w + x) * 3;
      px[i] = clamp(90 + (x * 80) / w + checker + ring + cell);
      px[i + 1] = clamp(80 + (y * 90) / h + checker - ring + cell);
      px[i + 2] = clamp(140 - (x * 60) / w + ring + cell);
    }
  }
  let img = sharp(px, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 90 });
  if (exif) img = img.withExif(exif);
  return img.toBuffer();
}

const clamp = (v: number) => Math.max(0, Math.min(255, Math.round(v)));

/** A flat single-colour image (the local scorer gives 1 star: relevance 1, quality 1). */
export async function flatPng(w = 640, h = 480, colour = { r: 120, g: 130, b: 140 }): Promise<Buffer> {
  return sharp({ create: { width: w, height: h, channels: 3, background: colour } }).png().toBuffer();
}

export interface Part {
  field?: string;
  filename?: string;
  contentType?: string;
  data: Buffer | string;
}

/** A multipart/form-data body: files (Buffer data) and plain fields (string data without filename). */
export function multipart(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----test${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const field = p.field ?? 'file';
    const head =
      p.filename !== undefined
        ? `--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${p.filename}"\r\nContent-Type: ${p.contentType ?? 'application/octet-stream'}\r\n\r\n`
        : `--${boundary}\r\nContent-Disposition: form-data; name="${field}"\r\n\r\n`;
    chunks.push(Buffer.from(head), Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

export function uploadFile(rt: TestRuntime, token: string, subId: string, data: Buffer, contentType = 'image/jpeg', filename = 'photo.jpg', path: 'upload' | 'retry' = 'upload') {
  const m = multipart([{ filename, contentType, data }]);
  return rt.request('POST', `/internal/worker/submissions/${subId}/${path}`, { key: token, body: m.body, headers: { 'Content-Type': m.contentType } });
}

export async function accept(rt: TestRuntime, token: string, jobId: string) {
  return rt.request('POST', `/internal/worker/jobs/${jobId}/accept`, { key: token });
}

/** Polls the worker's view of a submission until it has a verdict (approved, rejected or retry_pending). */
/**
 * Until every file of the submission has its annotations recorded: a pre-check rejection does not
 * wait for them (D54), and an override cannot approve a file before they are (a File carries them).
 */
export async function annotationsRecorded(subId: string, timeoutMs = 90_000): Promise<void> {
  const { GetCommand } = await import('@aws-sdk/lib-dynamodb');
  const { db, tableName } = await import('../../shared/db/client');
  const { keys } = await import('../../shared/db/keys');
  await waitFor(
    async () => {
      const it = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(subId), ConsistentRead: true }))).Item;
      return it && (it.uploads as { file_id: string }[]).every((u) => it.parts?.[u.file_id]?.annotations !== undefined) ? true : null;
    },
    { timeoutMs, intervalMs: 300 },
  );
}

export function waitForVerdict(rt: TestRuntime, token: string, subId: string, timeoutMs = 90_000) {
  return waitFor(
    async () => {
      const r = await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token });
      return ['approved', 'rejected', 'retry_pending'].includes(r.json?.status) ? r.json : null;
    },
    { timeoutMs, intervalMs: 700 },
  );
}

/** An SQS record as Lambda's event source mapping hands one message to a consumer. */
export function sqsRecord(body: string, id: string): SQSRecord {
  return { messageId: id, body, receiptHandle: id, attributes: {} as never, messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:x', awsRegion: 'us-east-1' };
}

/** A client of the runtime's SQS emulator, for tests that hand messages to a consumer themselves. */
export function queueClient(rt: TestRuntime): SQSClient {
  return new SQSClient({ endpoint: rt.sqsEndpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}

/**
 * Takes the next message of one of the runtime's queues (hidden for 5 minutes, not deleted); with
 * `subId`, the next whose S3 object key names that submission.
 */
export function takeMessage(rt: TestRuntime, sqs: SQSClient, queue: string, subId?: string): Promise<string> {
  return waitFor(async () => {
    const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: rt.queues.get(queue)!.url, MaxNumberOfMessages: 1, WaitTimeSeconds: 0, VisibilityTimeout: 300 }));
    const body = r.Messages?.[0]?.Body;
    if (!body) return null;
    // An S3 event names the submission in its key; a fan-in record in its image.
    return subId === undefined || ((JSON.parse(body).detail?.object?.key as string | undefined) ?? body).includes(subId) ? body : null;
  });
}

/** Messages waiting in a queue's dead-letter queue. */
export async function dlqDepth(rt: TestRuntime, sqs: SQSClient, queue: string): Promise<number> {
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: rt.queues.get(queue)!.dlqUrl, AttributeNames: ['ApproximateNumberOfMessages'] }));
  return Number(Attributes?.ApproximateNumberOfMessages ?? 0);
}

/** A live buyer's one-file job, accepted by a new worker, with a detailed JPEG (seeded) uploaded. */
export async function uploadedSubmission(rt: TestRuntime, seed: number) {
  const buyer = await liveBuyer(rt);
  const job = await createJob(rt, buyer.live, { files_needed: 1 });
  const w = await signupWorker(rt);
  const a = await accept(rt, w.token, job.id);
  const up = await uploadFile(rt, w.token, a.json.id, await detailedJpeg(seed), 'image/jpeg', 'shop.jpg');
  if (up.status !== 202) throw new Error(`upload: ${up.status} ${up.text}`);
  return { buyer, job, w, subId: a.json.id as string };
}

/** A new worker per seed accepts `jobId` and uploads a detailed JPEG of that seed; the submissions, in order. */
export async function workersUpload(rt: TestRuntime, jobId: string, seeds: number[]) {
  const workers: { id: string; token: string }[] = [];
  const subs: string[] = [];
  for (const seed of seeds) {
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, jobId);
    if (a.status !== 201) throw new Error(`accept: ${a.status} ${a.text}`);
    const up = await uploadFile(rt, w.token, a.json.id, await detailedJpeg(seed));
    if (up.status !== 202) throw new Error(`upload: ${up.status} ${up.text}`);
    workers.push(w);
    subs.push(a.json.id as string);
  }
  return { workers, subs };
}

/** A Bedrock Converse answer in the published format, the model saying `text`. */
export const converseReply = (text: string): ConverseCommandOutput => ({
  $metadata: { httpStatusCode: 200 },
  output: { message: { role: 'assistant', content: [{ text }] } },
  stopReason: 'end_turn',
  usage: { inputTokens: 500, outputTokens: 60, totalTokens: 560 },
  metrics: { latencyMs: 1200 },
});

/** What the stood-in speech providers were sent (standInSpeechProviders). */
export interface SpeechStandIns {
  /** StartTranscriptionJob requests Transcribe accepted. */
  started: any[];
  /** The job names of every StartTranscriptionJob sent, accepted or refused. */
  asked: string[];
  /** The scoring prompts Bedrock was sent. */
  prompts: string[];
  /** The speech-derivation prompts (topics, keywords, tone). */
  derivations: string[];
  /** Puts the real providers back. */
  restore(): void;
}

/**
 * D65 on the local stack: Amazon Transcribe, the scoring model and the speech-derivation model
 * stood in for at their SDK clients (the adapters above them run as deployed). Transcribe accepts
 * every job unless `refuse` says it is throttled (ThrottlingException, as Transcribe answers) or
 * its name was started before (ConflictException);
 * `onStart` runs inside StartTranscriptionJob; the scorer answers `score(prompt)`, by default a
 * 4-star verdict of a bakery order, after `beforeReply(prompt)` (a test may hold the answer back).
 */
export function standInSpeechProviders(opts: { onStart?: (input: any) => Promise<void> | void; refuse?: () => boolean; score?: (prompt: string) => string | undefined; beforeReply?: (prompt: string) => Promise<void> } = {}): SpeechStandIns {
  const s: SpeechStandIns = { started: [], asked: [], prompts: [], derivations: [], restore: () => undefined };
  setTranscriberFactory(
    () =>
      new TranscribeTranscriber({
        startTranscriptionJob: async (input: any) => {
          s.asked.push(input.TranscriptionJobName);
          if (opts.refuse?.()) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException', $fault: 'client', $metadata: { httpStatusCode: 400 } });
          // A job name is unique in the account and Region: a second start of it is refused.
          if (s.started.some((j) => j.TranscriptionJobName === input.TranscriptionJobName)) {
            throw Object.assign(new Error('The requested job name already exists. Use a different job name.'), { name: 'ConflictException', $fault: 'client', $metadata: { httpStatusCode: 400 } });
          }
          s.started.push(input);
          await opts.onStart?.(input);
          return {};
        },
      }),
  );
  setScorerFactory(
    () =>
      new BedrockScorer({
        client: {
          converse: async (input: any) => {
            const prompt = input.messages[0].content.map((c: any) => c.text ?? '').join('\n');
            s.prompts.push(prompt);
            await opts.beforeReply?.(prompt);
            return converseReply(opts.score?.(prompt) ?? '{"relevance": 5, "quality": 4, "instruction_compliance": 4, "reasoning": "A customer orders croissants at a bakery counter, as asked."}');
          },
        },
      }),
  );
  setSpeechModelClient({
    converse: async (input: any) => {
      s.derivations.push(input.messages[0].content[0].text);
      return converseReply('{"topics":["bakery order"],"keywords":["croissants","bakery"],"emotion_tone":"positive"}');
    },
  });
  s.restore = () => {
    setTranscriberFactory(null);
    setScorerFactory(null);
    setSpeechModelClient(null);
  };
  return s;
}

/** A whole-flow suite's runtime and webhook receiver: `rt` and `rx` are set before its first test. */
export interface FlowSuite {
  rt: TestRuntime;
  rx: DevReceiver;
  /** A POST with a fresh Idempotency-Key. */
  post(key: string, path: string, body?: unknown): Promise<TestResponse>;
  /**
   * A live buyer with a webhook endpoint on every event (at `hook` on the receiver), its credits
   * before, and a job of two files at 10 cents that two workers filled (uploads seeded `seeds`),
   * both submissions approved with their 8-cent payout.
   */
  twoApprovals(seeds: [number, number]): Promise<{
    buyer: Awaited<ReturnType<typeof liveBuyer>>;
    hook: string;
    before: { available_cents: number };
    job: { id: string };
    subs: string[];
  }>;
  /** The export `exportId` once it has succeeded or failed (waits up to 60 s). */
  finishedExport(key: string, exportId: string): Promise<any>;
}

/**
 * Starts a runtime with `options` and a webhook receiver before the calling scope's tests and stops
 * both after them (beforeAll/afterAll), with every phone code `123456` and `env` set meanwhile.
 */
export function flowSuite(options: Partial<RuntimeOptions>, env: Record<string, string> = {}): FlowSuite {
  const suite: FlowSuite = {
    rt: undefined as unknown as TestRuntime, // set before the first test
    rx: undefined as unknown as DevReceiver,
    post: (key: string, path: string, body?: unknown) => suite.rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': randomUUID() } }),
    async twoApprovals(seeds: [number, number]) {
      const buyer = await liveBuyer(suite.rt);
      const hook = `/hook/${randomUUID()}`;
      expect((await suite.post(buyer.live, '/v1/webhook_endpoints', { url: `${suite.rx.url}${hook}`, events: ['*'] })).status).toBe(201);
      const before = (await suite.rt.request('GET', '/v1/billing/credits', { key: buyer.live })).json;
      const job = await createJob(suite.rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
      const { workers, subs } = await workersUpload(suite.rt, job.id, seeds);
      for (const [i, w] of workers.entries()) expect(await waitForVerdict(suite.rt, w.token, subs[i]!)).toMatchObject({ status: 'approved', payout_cents: 8 });
      return { buyer, hook, before, job, subs };
    },
    finishedExport: (key: string, exportId: string) =>
      waitFor(
        async () => {
          const r = (await suite.rt.request('GET', `/v1/exports/${exportId}`, { key })).json;
          return ['succeeded', 'failed'].includes(r.status) ? r : null;
        },
        { timeoutMs: 60_000 },
      ),
  };
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    Object.assign(process.env, env);
    suite.rt = await startTestRuntime(options);
    suite.rx = await startDevReceiver();
  });
  afterAll(async () => {
    await suite.rx?.close();
    await suite.rt?.stop();
    for (const k of Object.keys(env)) delete process.env[k];
  });
  return suite;
}
