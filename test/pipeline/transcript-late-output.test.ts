import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { scoreObject } from '../../shared/work/scoring-stage';
import { annotateObject } from '../../shared/work/annotation-stage';
import { RetryLater } from '../../shared/work/stage-message';
import { LATE_TRANSCRIPT_GIVE_UP_MS } from '../../shared/work/transcript-output';
import { clock } from '../../shared/clock';
import { transcriptKeyFor } from '../../shared/speech';
import { audioFixtures } from '../fixtures/media';
import { accept, createJob, liveBuyer, queueClient, signupWorker, standInSpeechProviders, takeMessage, uploadFile, type SpeechStandIns } from './support';

// D65/D66 on the local stack, the stages run by hand (pollers off) so each step is one scoring
// run. Transcribe and Bedrock are stood in for at their SDK clients, as in transcription.test.ts:
// the test writes the output document where Transcribe would, and no state-change event is ever
// sent. A job counted as lost (no event, no output after 40 minutes) is a provider failure; when
// its output lands afterwards, the next scoring run takes it instead of starting another job.
describe('pipeline: a lost Transcribe job whose output is found late', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  let sqs: SQSClient;
  let speech: SpeechStandIns;
  /** While set, StartTranscriptionJob is refused as Transcribe refuses it when throttled. */
  let throttled = false;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false });
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    sqs = queueClient(rt);
    speech = standInSpeechProviders({ refuse: () => throttled });
  });
  afterEach(() => clock.reset());
  afterAll(async () => {
    speech?.restore();
    s3?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  it('a job counted as lost whose output lands afterwards is taken: the audio is scored with that transcript and no new job is started', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30, description: 'Customers ordering at a bakery counter.' });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const subId = a.json.id as string;
    expect((await uploadFile(rt, w.token, subId, audioFixtures.wav(2), 'audio/wav', 'order.wav')).status).toBe(202);
    const key = JSON.parse(await takeMessage(rt, sqs, 'scoring', subId)).detail.object.key as string;
    const status = async () => (await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: w.token })).json;

    // The first scoring run starts the job and waits for its event; the annotation is done meanwhile.
    await expect(scoreObject(key)).rejects.toBeInstanceOf(RetryLater);
    expect(speech.started).toHaveLength(1);
    const jobName = speech.started[0].TranscriptionJobName as string;
    expect(await annotateObject(key)).toBe('stored');

    // 40 minutes on, no event and no output: the job counts as lost (a provider failure, D66), and
    // the next job cannot start (Transcribe throttles), so the run fails and its message comes back.
    throttled = true;
    clock.advance(LATE_TRANSCRIPT_GIVE_UP_MS + 60_000);
    await expect(scoreObject(key)).rejects.toMatchObject({ name: 'ThrottlingException' });
    expect(speech.asked).toEqual([jobName, `${jobName}.t2`]);
    expect(speech.started).toHaveLength(1);
    expect((await status()).status).toBe('pending_score');
    expect(speech.prompts).toHaveLength(0);

    // The lost job finished after all: its output document is under transcripts/. Transcribe
    // accepts jobs again, yet the next run takes that output instead of starting a job.
    const doc = readFileSync(join(__dirname, '..', 'fixtures', 'transcribe-output.published-format.two-speakers.json'));
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: transcriptKeyFor(jobName), Body: doc, ContentType: 'application/json' }));
    throttled = false;
    expect(await scoreObject(key)).toBe('stored');
    expect(speech.started.map((s) => s.TranscriptionJobName)).toEqual([jobName]);
    expect(speech.asked).toEqual([jobName, `${jobName}.t2`]);

    expect(await status()).toMatchObject({ status: 'approved', ai_star_rating: 4, reason_codes: [] });
    expect(speech.prompts).toHaveLength(1);
    expect(speech.prompts[0]).toContain('<<<TRANSCRIPT\nWelcome to the bakery. What would you like? Two croissants, please.\nTRANSCRIPT>>>');
    const f = (await rt.request('GET', `/v1/jobs/${job.id}/files`, { key: buyer.live })).json.data[0];
    expect(f.annotations).toMatchObject({ type: 'audio', speaker_count: 2, language: 'en', topics: ['bakery order'] });
    expect(f.annotations.transcript.segments.map((s: any) => s.speaker)).toEqual(['spk_0', 'spk_1']);
  });
});
