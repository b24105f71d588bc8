import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { scoreObject } from '../../shared/work/scoring-stage';
import { RetryLater } from '../../shared/work/stage-message';
import { LATE_TRANSCRIPT_CHECK_MS, LATE_TRANSCRIPT_GIVE_UP_MS, TRANSCRIBE_MAX_JOBS, TRANSCRIBE_REDRIVE_AFTER_MS } from '../../shared/work/transcript-output';
import { clock } from '../../shared/clock';
import { parseTranscribeEvent, transcriptionDone } from '../../shared/work/transcription';
import { transcriptKeyFor } from '../../shared/speech';
import { RULES, matchesPattern } from '../../shared/manifest/wiring';
import { audioFixtures, hasFfmpeg, videoFixtures } from '../fixtures/media';
import { db } from '../../shared/db/client';
import { transactionConflict } from '../../local/dynamodb-conflicts';
import { accept, annotationsRecorded, createJob, liveBuyer, signupWorker, standInSpeechProviders, uploadFile, type SpeechStandIns } from './support';


// D65 as deployed, run on the local stack with the two services that cannot run here stood in for
// at their SDK clients: the Transcribe adapter sends StartTranscriptionJob to a stub, the test then
// writes the output document (written to the published format) where Transcribe would and
// delivers the "Transcribe Job State Change" event to the transcription queue as the EventBridge
// rule would; Bedrock answers in the published Converse format. The verdict waits for the
// transcript (D54), the audio prompt carries it, and the File's annotations hold it.
describe('pipeline: audio is scored and annotated with its Amazon Transcribe transcript', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  let sqs: SQSClient;
  let speech: SpeechStandIns;
  /** Runs inside StartTranscriptionJob, before the scoring stage has recorded the job it speech.started. */
  let onStart: ((input: any) => Promise<void>) | null = null;
  /** Runs inside the scoring model's call, before it answers. */
  let beforeReply: ((prompt: string) => Promise<void>) | null = null;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    process.env.PIPELINE_RETRY_BASE_SECONDS = '1'; // an early event comes back after 1 s, not 30 s
    rt = await startTestRuntime();
    const creds = { accessKeyId: 'local', secretAccessKey: 'local' };
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: creds });
    sqs = new SQSClient({ endpoint: rt.sqsEndpoint, region: 'us-east-1', credentials: creds });
    speech = standInSpeechProviders({
      onStart: (input) => onStart?.(input),
      beforeReply: async (prompt) => beforeReply?.(prompt),
      score: (prompt) => (prompt.includes('Wrong shop') ? '{"relevance": 1, "quality": 2, "instruction_compliance": 1, "reasoning": "Not the shop the job asks for."}' : undefined),
    });
  });
  afterAll(async () => {
    delete process.env.PIPELINE_RETRY_BASE_SECONDS;
    speech?.restore();
    s3?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  it('upload → Transcribe job started, verdict waits → transcript arrives → scored with it → File annotated with it', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30, description: 'Customers ordering at a bakery counter.' });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, audioFixtures.wav(3), 'audio/wav', 'order.wav')).status).toBe(202);

    await waitFor(() => speech.started.length === 1, { timeoutMs: 60_000, intervalMs: 200 });
    const jobName = speech.started[0].TranscriptionJobName as string;
    expect(speech.started[0]).toMatchObject({ IdentifyLanguage: true, Settings: { ShowSpeakerLabels: true }, OutputBucketName: rt.bucketName, OutputKey: transcriptKeyFor(jobName) });
    // Waiting for the transcript: no verdict, no provider call.
    expect((await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token })).json.status).toBe('pending_score');
    expect(speech.prompts).toHaveLength(0);

    // Transcribe writes its output document, then EventBridge delivers the job state change.
    const doc = readFileSync(join(__dirname, '..', 'fixtures', 'transcribe-output.published-format.two-speakers.json'));
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: transcriptKeyFor(jobName), Body: doc, ContentType: 'application/json' }));
    const event = {
      version: '0',
      id: 'b1e3c7a0-0000-4000-8000-000000000001',
      'detail-type': 'Transcribe Job State Change',
      source: 'aws.transcribe',
      account: '111122223333',
      time: new Date().toISOString(),
      region: 'us-east-1',
      resources: [],
      detail: { TranscriptionJobName: jobName, TranscriptionJobStatus: 'COMPLETED' },
    };
    const rule = RULES.find((r) => r.name === 'transcription-done')!;
    expect(matchesPattern(rule.pattern, event)).toBe(true);
    await sqs.send(new SendMessageCommand({ QueueUrl: rt.queues.get(rule.targets[0]!)!.url, MessageBody: JSON.stringify(event) }));

    const done = await waitFor(
      async () => {
        const r = await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token });
        return r.json.status !== 'pending_score' ? r.json : null;
      },
      { timeoutMs: 60_000, intervalMs: 700 },
    );
    expect(done).toMatchObject({ status: 'approved', ai_star_rating: 4, reason_codes: [] });
    expect(speech.prompts).toHaveLength(1);
    expect(speech.prompts[0]).toContain('<<<TRANSCRIPT\nWelcome to the bakery. What would you like? Two croissants, please.\nTRANSCRIPT>>>');
    expect(speech.prompts[0]).toMatch(/mean volume -?\d+(\.\d+)? dBFS/); // measured by the pipeline: the model cannot hear the file

    const f = (await rt.request('GET', `/v1/jobs/${job.id}/files`, { key: buyer.live })).json.data[0];
    expect(f.annotations).toMatchObject({ type: 'audio', speaker_count: 2, language: 'en', topics: ['bakery order'], keywords: ['croissants', 'bakery'], emotion_tone: 'positive' });
    expect(f.annotations.transcript.segments.map((s: any) => s.speaker)).toEqual(['spk_0', 'spk_1']);
    expect(f.annotations.annotation_model).toMatch(/amazon-transcribe/);
    for (const k of ['transcript', 'language', 'speaker_count', 'topics', 'keywords', 'emotion_tone']) expect(f.annotations.unavailable?.[k]).toBeUndefined();
    expect(f.annotations.unavailable.speaker_demographics).toEqual(expect.any(String));
  });

  /** Transcribe writes the output document, then EventBridge delivers the job state change. */
  async function transcribed(jobName: string): Promise<void> {
    const doc = readFileSync(join(__dirname, '..', 'fixtures', 'transcribe-output.published-format.two-speakers.json'));
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: transcriptKeyFor(jobName), Body: doc, ContentType: 'application/json' }));
    const event = { 'detail-type': 'Transcribe Job State Change', source: 'aws.transcribe', detail: { TranscriptionJobName: jobName, TranscriptionJobStatus: 'COMPLETED' } };
    await sqs.send(new SendMessageCommand({ QueueUrl: rt.queues.get('transcription')!.url, MessageBody: JSON.stringify(event) }));
  }

  it('a File approved by the buyer\'s override carries its transcript, as an approved one does', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30, description: 'Wrong shop: customers ordering at a bakery counter.' });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const before = speech.started.length;
    expect((await uploadFile(rt, w.token, a.json.id, audioFixtures.wav(4), 'audio/wav', 'order.wav')).status).toBe(202);
    await waitFor(() => speech.started.length > before, { timeoutMs: 60_000, intervalMs: 200 });
    await transcribed(speech.started[before].TranscriptionJobName as string);
    const done = await waitFor(
      async () => {
        const r = await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token });
        return r.json.status !== 'pending_score' ? r.json : null;
      },
      { timeoutMs: 60_000, intervalMs: 700 },
    );
    expect(done.status).toBe('rejected');
    const o = await rt.request('POST', `/v1/submissions/${a.json.id}/override`, { key: buyer.live, body: { decision: 'approve' }, headers: { 'Idempotency-Key': `ovr-${a.json.id}` } });
    expect(o.status).toBe(200);
    const f = (await rt.request('GET', `/v1/jobs/${job.id}/files?min_score=1`, { key: buyer.live })).json.data[0];
    expect(f.annotations).toMatchObject({ type: 'audio', speaker_count: 2, language: 'en', topics: ['bakery order'] });
    expect(f.annotations.transcript.segments.map((s: any) => s.speaker)).toEqual(['spk_0', 'spk_1']);
    for (const k of ['transcript', 'language', 'speaker_count', 'topics']) expect(f.annotations.unavailable?.[k]).toBeUndefined();
  });

  it('audio a pre-check rejected is never heard: approved by override, its File says so in its speech fields, null with that reason (D58)', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30, min_duration_seconds: 10 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const started = speech.started.length;
    expect((await uploadFile(rt, w.token, a.json.id, audioFixtures.wav(2), 'audio/wav', 'short.wav')).status).toBe(202);
    expect(await settled(a.json.id, w.token)).toMatchObject({ status: 'rejected' });
    expect(speech.started).toHaveLength(started); // never sent to Transcribe
    await annotationsRecorded(a.json.id);
    const o = await rt.request('POST', `/v1/submissions/${a.json.id}/override`, { key: buyer.live, body: { decision: 'approve', reason_code: 'other' }, headers: { 'Idempotency-Key': `ovr-${a.json.id}` } });
    expect(o.status).toBe(200);
    const f = (await rt.request('GET', `/v1/jobs/${job.id}/files?min_score=1`, { key: buyer.live })).json.data[0];
    for (const k of ['transcript', 'language', 'speaker_count']) {
      expect(f.annotations[k]).toBeNull();
      expect(f.annotations.unavailable[k]).toMatch(/^not transcribed: the file was rejected by a check \(.+\) before its recording was heard$/);
    }
  });

  /** A FAILED job state change, as EventBridge delivers it. */
  const failed = (jobName: string, reason: string) =>
    sqs.send(
      new SendMessageCommand({
        QueueUrl: rt.queues.get('transcription')!.url,
        MessageBody: JSON.stringify({ 'detail-type': 'Transcribe Job State Change', source: 'aws.transcribe', detail: { TranscriptionJobName: jobName, TranscriptionJobStatus: 'FAILED', FailureReason: reason } }),
      }),
    );
  const settled = (subId: string, token: string) =>
    waitFor(
      async () => {
        const r = await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token });
        return r.json.status !== 'pending_score' ? r.json : null;
      },
      { timeoutMs: 60_000, intervalMs: 700 },
    );
  const audioUpload = async (name: string) => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const before = speech.started.length;
    expect((await uploadFile(rt, w.token, a.json.id, audioFixtures.wav(2), 'audio/wav', name)).status).toBe(202);
    await waitFor(() => speech.started.length > before, { timeoutMs: 60_000, intervalMs: 200 });
    return { buyer, job, w, subId: a.json.id as string, jobName: speech.started[before].TranscriptionJobName as string, startedBefore: before };
  };

  it('a file that waited for its transcript is scored by one delivery: the message that waited, coming back while the one its arrival sent asks the model, does not ask again', async () => {
    const t = await audioUpload('asked-once.wav');
    const key = (speech.started[t.startedBefore].Media.MediaFileUri as string).replace(`s3://${rt.bucketName}/`, ''); // the upload's object
    const promptsBefore = speech.prompts.length;
    let answer!: () => void;
    const held = new Promise<void>((r) => (answer = r));
    beforeReply = () => held;
    try {
      await transcribed(t.jobName);
      await waitFor(() => speech.prompts.length > promptsBefore, { timeoutMs: 60_000, intervalMs: 100 });

      // The waiting message comes back while the model is still thinking.
      const again = await scoreObject(key).then((outcome) => outcome, (e: unknown) => e);

      expect(again).toBeInstanceOf(RetryLater);
      expect(speech.prompts.length - promptsBefore).toBe(1);
    } finally {
      answer();
      beforeReply = null;
    }
    expect(await settled(t.subId, t.w.token)).toMatchObject({ status: 'approved' });
    expect(await scoreObject(key)).toBe('ignored'); // decided: a later delivery finds nothing to score
    expect(speech.prompts.length - promptsBefore).toBe(1);
  });

  it('a delivery whose model call fails gives its claim back: the retry scores the file at once, not after the claim would have run out', async () => {
    const t = await audioUpload('fails-once.wav');
    const promptsBefore = speech.prompts.length;
    beforeReply = async () => {
      beforeReply = null;
      throw Object.assign(new Error('Model is not ready'), { name: 'ModelNotReadyException', $fault: 'server', $metadata: { httpStatusCode: 429 } });
    };
    await transcribed(t.jobName);

    expect(await settled(t.subId, t.w.token)).toMatchObject({ status: 'approved' });
    expect(speech.prompts.length - promptsBefore).toBeGreaterThanOrEqual(2); // the failed call, then the retry's
  });

  it('a claim given back while a transaction holds the submission waits that transaction out: the retry still scores the file at once', async () => {
    const t = await audioUpload('fails-during-a-transaction.wav');
    const promptsBefore = speech.prompts.length;
    beforeReply = async () => {
      beforeReply = null;
      throw Object.assign(new Error('Model is not ready'), { name: 'ModelNotReadyException', $fault: 'server', $metadata: { httpStatusCode: 429 } });
    };
    // The release's first attempt meets a transaction on the submission, answered as DynamoDB does.
    let refused = 0;
    const name = 'releaseMeetsATransaction';
    db().middlewareStack.add(
      (next, context) => async (args) => {
        if (refused === 0 && /^Update(Item)?Command$/.test(String(context.commandName)) && JSON.stringify(args.input).includes('REMOVE #p.#f.#c')) {
          refused++;
          throw transactionConflict();
        }
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      await transcribed(t.jobName);
      expect(await settled(t.subId, t.w.token)).toMatchObject({ status: 'approved' });
    } finally {
      db().middlewareStack.remove(name);
    }
    expect(refused).toBe(1);
    expect(speech.prompts.length - promptsBefore).toBeGreaterThanOrEqual(2); // the failed call, then the retry's
  });

  it('audio Transcribe cannot read (its FailureReason names the media) is rejected as unreadable_media with that reason, never scored from its measurements alone', async () => {
    const t = await audioUpload('unreadable.wav');
    const promptsBefore = speech.prompts.length;
    await failed(t.jobName, 'The media format provided does not match the detected media format.');
    const done = await settled(t.subId, t.w.token);
    expect(done).toMatchObject({ status: 'rejected', reason_codes: ['unreadable_media'] });
    expect(speech.prompts).toHaveLength(promptsBefore); // the model was never asked
    expect((await rt.request('GET', `/v1/jobs/${t.job.id}/files`, { key: t.buyer.live })).json.data).toEqual([]);
    const sub = (await rt.request('GET', `/v1/submissions/${t.subId}`, { key: t.buyer.live })).json;
    expect(JSON.stringify(sub)).toContain('Amazon Transcribe could not transcribe the file: The media format provided does not match the detected media format.');
  });

  it('a failure of the service is not held against the file (D66): a new job is started, and the file is scored with its transcript', async () => {
    const t = await audioUpload('internal-failure.wav');
    await failed(t.jobName, 'Internal failure');
    await waitFor(() => speech.started.length > t.startedBefore + 1, { timeoutMs: 60_000, intervalMs: 200 });
    const second = speech.started[t.startedBefore + 1].TranscriptionJobName as string;
    expect(second).toBe(`${t.jobName}.t2`);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.subId}`, { key: t.w.token })).json.status).toBe('pending_score');
    await transcribed(second);
    expect(await settled(t.subId, t.w.token)).toMatchObject({ status: 'approved', ai_star_rating: 4 });
    expect(speech.prompts[speech.prompts.length - 1]).toContain('Two croissants, please.');
  });

  it("a video's sound track failing for the service is not held against it either (D66): a new job is started, and the video is scored once heard", async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['video/mp4'], price_per_file_cents: 40 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const before = speech.started.length;
    expect((await uploadFile(rt, w.token, a.json.id, videoFixtures.mp4(2), 'video/mp4', 'clip.mp4')).status).toBe(202);
    await waitFor(() => speech.started.length > before, { timeoutMs: 60_000, intervalMs: 200 });
    const first = speech.started[before].TranscriptionJobName as string;
    await failed(first, 'Internal failure');
    await waitFor(() => speech.started.some((s) => s.TranscriptionJobName === `${first}.t2`), { timeoutMs: 60_000, intervalMs: 200 });
    expect((await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token })).json.status).toBe('pending_score');
    await transcribed(`${first}.t2`);
    expect(await settled(a.json.id, w.token)).toMatchObject({ status: 'approved' });
    expect(speech.prompts.some((p) => p.includes('Two croissants, please.'))).toBe(true);
  });

  it('after the last job fails for the service, the scoring message fails (to the dead-letter queue) and the file stays pending_score; a redrive an hour later starts a new job', async () => {
    const t = await audioUpload('always-failing.wav');
    let name = t.jobName;
    for (let n = 2; n <= TRANSCRIBE_MAX_JOBS; n++) {
      await failed(name, 'Internal failure');
      await waitFor(() => speech.started.some((s) => s.TranscriptionJobName === `${t.jobName}.t${n}`), { timeoutMs: 60_000, intervalMs: 200 });
      name = `${t.jobName}.t${n}`;
    }
    await failed(name, 'Internal failure');
    const key = (speech.started[t.startedBefore].Media.MediaFileUri as string).replace(`s3://${rt.bucketName}/`, ''); // the upload's object
    const last = await waitFor(async () => {
      const err = await scoreObject(key).then(() => null, (e: unknown) => e as Error);
      return err && !(err instanceof RetryLater) ? err : null;
    }, { timeoutMs: 30_000, intervalMs: 500 });
    expect(last.message).toMatch(/not scored without being heard.*dead-letter queue/);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.subId}`, { key: t.w.token })).json.status).toBe('pending_score');
    // The documented redrive, an hour after the last failure: a new job, the file still waiting for it.
    // The message the queue still redelivers (until it reaches the dead-letter queue) may take that
    // hour too and start the job first: then this call finds it started (RetryLater), never a second.
    clock.advance(TRANSCRIBE_REDRIVE_AFTER_MS + 60_000);
    const redriven = await scoreObject(key).catch((e: unknown) => (e instanceof RetryLater ? 'started by the redelivery' : Promise.reject(e)));
    expect(['deferred', 'started by the redelivery']).toContain(redriven); // deferred: handed over to a fresh scoring message that waits for the new job
    await waitFor(() => speech.started.some((s) => s.TranscriptionJobName === `${t.jobName}.t${TRANSCRIBE_MAX_JOBS + 1}`), { timeoutMs: 30_000, intervalMs: 200 });
    expect(speech.started.filter((s) => s.TranscriptionJobName === `${t.jobName}.t${TRANSCRIBE_MAX_JOBS + 1}`)).toHaveLength(1);
    clock.reset();
    await transcribed(`${t.jobName}.t${TRANSCRIBE_MAX_JOBS + 1}`);
    expect(await settled(t.subId, t.w.token)).toMatchObject({ status: 'approved' });
  });

  it('a job state change that arrives before the scoring stage recorded the job is retried, not dropped', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    let early: unknown = 'not delivered';
    onStart = async (input) => {
      onStart = null;
      const event = {
        'detail-type': 'Transcribe Job State Change',
        source: 'aws.transcribe',
        detail: { TranscriptionJobName: input.TranscriptionJobName, TranscriptionJobStatus: 'FAILED', FailureReason: 'Failed to parse audio file.' },
      };
      // The stage itself, while the job is started but not yet recorded, then the queue as deployed.
      early = await transcriptionDone(parseTranscribeEvent(JSON.stringify(event))).catch((e: unknown) => e);
      await sqs.send(new SendMessageCommand({ QueueUrl: rt.queues.get('transcription')!.url, MessageBody: JSON.stringify(event) }));
    };
    expect((await uploadFile(rt, w.token, a.json.id, audioFixtures.wav(2), 'audio/wav', 'early.wav')).status).toBe(202);
    const done = await waitFor(
      async () => {
        const r = await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token });
        return r.json.status !== 'pending_score' ? r.json : null;
      },
      { timeoutMs: 50_000, intervalMs: 500 },
    );
    expect(early).toBeInstanceOf(RetryLater);
    // The event's outcome was applied: the recording Transcribe could not parse is rejected with its reason.
    expect(done).toMatchObject({ status: 'rejected', reason_codes: ['unreadable_media'] });
    expect(JSON.stringify((await rt.request('GET', `/v1/submissions/${a.json.id}`, { key: buyer.live })).json)).toContain('Failed to parse audio file.');
  });

  describe('a state-change event that never comes (EventBridge delivers Transcribe events best effort)', () => {
    afterEach(() => clock.reset());
    const uploaded = async (name: string) => {
      const buyer = await liveBuyer(rt);
      const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, job.id);
      const before = speech.started.length;
      expect((await uploadFile(rt, w.token, a.json.id, audioFixtures.wav(2), 'audio/wav', name)).status).toBe(202);
      await waitFor(() => speech.started.length > before, { timeoutMs: 60_000, intervalMs: 200 });
      return { buyer, job, w, subId: a.json.id as string, jobName: speech.started[before].TranscriptionJobName as string };
    };
    const verdict = (t: Awaited<ReturnType<typeof uploaded>>) =>
      waitFor(
        async () => {
          const r = await rt.request('GET', `/internal/worker/submissions/${t.subId}`, { key: t.w.token });
          return r.json.status !== 'pending_score' ? r.json : null;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );

    it('the scoring message comes back and, once the job is 10 minutes old, takes the transcript from Transcribe\'s output', async () => {
      const t = await uploaded('lost-event.wav');
      const doc = readFileSync(join(__dirname, '..', 'fixtures', 'transcribe-output.published-format.two-speakers.json'));
      await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: transcriptKeyFor(t.jobName), Body: doc, ContentType: 'application/json' }));
      clock.advance(LATE_TRANSCRIPT_CHECK_MS + 60_000); // no event is sent
      expect(await verdict(t)).toMatchObject({ status: 'approved', ai_star_rating: 4 });
      expect(speech.prompts[speech.prompts.length - 1]).toContain('Two croissants, please.');
      const f = (await rt.request('GET', `/v1/jobs/${t.job.id}/files`, { key: t.buyer.live })).json.data[0];
      expect(f.annotations).toMatchObject({ speaker_count: 2, language: 'en' });
    });

    it('with no output either, after 40 minutes the job counts as lost: a new job is started, and the file is scored with its transcript', async () => {
      const t = await uploaded('no-result.wav');
      const before = speech.started.length;
      clock.advance(LATE_TRANSCRIPT_GIVE_UP_MS + 60_000);
      await waitFor(() => speech.started.slice(before).some((s) => s.TranscriptionJobName === `${t.jobName}.t2`), { timeoutMs: 60_000, intervalMs: 300 });
      expect((await rt.request('GET', `/internal/worker/submissions/${t.subId}`, { key: t.w.token })).json.status).toBe('pending_score');
      // The message that waited for the lost job has spent its receives: a fresh one, delayed, waits for the new job.
      const delayed = async () =>
        Number((await sqs.send(new GetQueueAttributesCommand({ QueueUrl: rt.queues.get('scoring')!.url, AttributeNames: ['ApproximateNumberOfMessagesDelayed'] }))).Attributes?.ApproximateNumberOfMessagesDelayed);
      await waitFor(async () => (await delayed()) >= 1, { timeoutMs: 10_000, intervalMs: 200 });
      await transcribed(`${t.jobName}.t2`);
      expect(await verdict(t)).toMatchObject({ status: 'approved', ai_star_rating: 4 });
      expect(speech.prompts[speech.prompts.length - 1]).toContain('Two croissants, please.');
    });
  });
});
