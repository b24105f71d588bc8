import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { scoreObject } from '../../shared/work/scoring-stage';
import { annotateObject } from '../../shared/work/annotation-stage';
import { RetryLater } from '../../shared/work/stage-message';
import { parseTranscribeEvent, transcriptionDone } from '../../shared/work/transcription';
import { TRANSCRIPT_MAX_BYTES, parseTranscribeOutput, transcriptKeyFor } from '../../shared/speech';
import { EVENT_MAX_BYTES } from '../../shared/manifest/wiring';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { audioFixtures } from '../fixtures/media';
import { longTranscribeOutput } from '../fixtures/transcribe-output.long';
import { accept, createJob, liveBuyer, multipart, queueClient, signupWorker, standInSpeechProviders, takeMessage, type SpeechStandIns } from './support';

/** DynamoDB's item size limit (400 KB). An item's JSON is never smaller than the size DynamoDB counts. */
const ITEM_MAX_BYTES = 400 * 1024;
const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

// D65 with recordings hours long, on the local stack (DynamoDB Local refuses an item over 400 KB as
// DynamoDB does), the stages run by hand (pollers off) as in transcript-late-output.test.ts, with
// Transcribe and Bedrock stood in for at their SDK clients. The output documents are generated in
// Transcribe's published format (test/fixtures/transcribe-output.long.ts). Stored whole, these
// transcripts would not fit the submission's item (the transcription write failed with a
// ValidationException, the message went to the dead-letter queue and the submission stayed
// pending_score); bounded (D65, shared/speech/bound.ts), each keeps its first segments, marked.
describe('pipeline: recordings hours long get a bounded, marked transcript', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  let sqs: SQSClient;
  let speech: SpeechStandIns;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false });
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    sqs = queueClient(rt);
    speech = standInSpeechProviders({ score: () => '{"relevance": 5, "quality": 4, "instruction_compliance": 4, "reasoning": "Customers order at a bakery counter, as asked."}' });
  });
  afterAll(async () => {
    speech?.restore();
    s3?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  it('three long recordings in one submission: every transcription is recorded, the submission is approved, and no item or event is over its limit', async () => {
    // Three hours of conversation, two hours of one speaker without speaker labels, one hour of conversation.
    const recordings = [
      { name: 'morning.wav', bytes: audioFixtures.wav(2), doc: longTranscribeOutput({ seconds: 3 * 3600, speakers: 2, seed: 21 }) },
      { name: 'monologue.wav', bytes: audioFixtures.wav(3), doc: longTranscribeOutput({ seconds: 2 * 3600, speakers: 1, labels: false, seed: 22 }) },
      { name: 'evening.wav', bytes: audioFixtures.wav(4), doc: longTranscribeOutput({ seconds: 3600, speakers: 2, seed: 23 }) },
    ];
    const whole = recordings.map((r) => parseTranscribeOutput(r.doc).transcript);
    // Stored whole, the three transcripts alone are more than the submission's item may hold.
    expect(whole.reduce((n, t) => n + jsonBytes(t), 0)).toBeGreaterThan(ITEM_MAX_BYTES);

    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 3, files_per_submission: 3, accepted_formats: ['audio/wav'], price_per_file_cents: 30, description: 'Customers ordering at a bakery counter.' });
    const w = await signupWorker(rt);
    const subId = (await accept(rt, w.token, job.id)).json.id as string;
    const m = multipart(recordings.map((r) => ({ filename: r.name, contentType: 'audio/wav', data: r.bytes })));
    const up = await rt.request('POST', `/internal/worker/submissions/${subId}/upload`, { key: w.token, body: m.body, headers: { 'Content-Type': m.contentType } });
    expect(up.status).toBe(202);
    const status = async () => (await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: w.token })).json;
    const subItem = async () => (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(subId) }))).Item!;
    const uploads = (await subItem()).uploads as { key: string; filename: string; file_id: string }[];
    expect(uploads.map((u) => u.filename)).toEqual(recordings.map((r) => r.name));
    const recordingOf = (key: string) => recordings.find((r) => r.name === uploads.find((u) => u.key === key)!.filename)!;
    const scoringKeys: string[] = [];
    for (let i = 0; i < recordings.length; i++) scoringKeys.push(JSON.parse(await takeMessage(rt, sqs, 'scoring', subId)).detail.object.key as string);

    // Each file's first scoring run starts its Transcribe job and waits; its annotation is done meanwhile.
    for (const key of scoringKeys) {
      await expect(scoreObject(key)).rejects.toBeInstanceOf(RetryLater);
      expect(await annotateObject(key)).toBe('stored');
    }
    expect(speech.started).toHaveLength(3);

    // Transcribe writes each output document; the transcription stage takes each job's
    // state-change event: every write succeeds (stored whole, the second one failed).
    for (const s of speech.started) {
      const r = recordingOf((s.Media.MediaFileUri as string).replace(`s3://${rt.bucketName}/`, ''));
      await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: transcriptKeyFor(s.TranscriptionJobName), Body: JSON.stringify(r.doc), ContentType: 'application/json' }));
      const event = { 'detail-type': 'Transcribe Job State Change', source: 'aws.transcribe', detail: { TranscriptionJobName: s.TranscriptionJobName, TranscriptionJobStatus: 'COMPLETED' } };
      expect(await transcriptionDone(parseTranscribeEvent(JSON.stringify(event)))).toBe('stored');
    }
    // Topics, keywords and tone were asked of the whole transcripts' beginnings (12,000 characters each).
    expect(speech.derivations).toHaveLength(3);
    for (const d of speech.derivations) expect(d.length).toBeLessThan(12_000 + 200);

    // Scoring resumes with the transcripts; the last file's score takes the verdict.
    for (const key of scoringKeys) expect(await scoreObject(key)).toBe('stored');
    expect(await status()).toMatchObject({ status: 'approved', ai_star_rating: 4, reason_codes: [] });
    expect(speech.prompts).toHaveLength(3);
    for (const p of speech.prompts) {
      const quoted = /<<<TRANSCRIPT\n([\s\S]*)\nTRANSCRIPT>>>/.exec(p)![1]!;
      expect(quoted.length).toBeLessThanOrEqual(8000); // the prompt's own bound
      expect(quoted.length).toBeGreaterThan(5000);
      expect(whole.some((t) => t.full_text.startsWith(quoted))).toBe(true);
    }

    // The Files carry the bounded transcripts, each marked as cut, with the whole transcript's counts.
    const listed = (await rt.request('GET', `/v1/jobs/${job.id}/files`, { key: buyer.live })).json.data as any[];
    expect(listed).toHaveLength(3);
    for (const f of listed) {
      const i = recordings.findIndex((r) => r.name === f.original_filename);
      const t = f.annotations.transcript;
      expect(t).toMatchObject({ truncated: true, total_segments: whole[i]!.segments.length, total_characters: whole[i]!.full_text.length, total_end_seconds: whole[i]!.segments[whole[i]!.segments.length - 1]!.end_seconds });
      expect(jsonBytes(t)).toBeLessThanOrEqual(TRANSCRIPT_MAX_BYTES);
      expect(t.segments.length).toBeGreaterThan(5);
      expect(t.segments).toEqual(whole[i]!.segments.slice(0, t.segments.length));
      expect(t.full_text).toBe(t.segments.map((s: any) => s.text).join(' '));
      expect(f.annotations).toMatchObject({ type: 'audio', language: 'en', topics: ['bakery order'] });
      expect(f.annotations.unavailable?.transcript).toBeUndefined();
      // The File's item is far from DynamoDB's limit.
      const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.file(f.id) }))).Item!;
      expect(jsonBytes(item)).toBeLessThan(TRANSCRIPT_MAX_BYTES + 16 * 1024);
    }

    // The submission's item holds three bounded transcriptions, well under 400 KB.
    const sub = await subItem();
    expect(jsonBytes(sub)).toBeLessThan(ITEM_MAX_BYTES / 2);
    for (const part of Object.values(sub.parts as Record<string, any>)) expect(part.transcription.speech.transcript.truncated).toBe(true);

    // submission.scored carries the first file's annotations with its bounded transcript; its item
    // and the stream record EventBridge receives (the item in DynamoDB JSON) are far from their limits.
    // (The event list reads an index: polled until it lists the event, within the key's rate limit.)
    const scored = await waitFor(async () => ((await rt.request('GET', '/v1/webhook_events?type=submission.scored&limit=100', { key: buyer.live })).json.data as any[]).find((e) => e.data?.submission_id === subId), { intervalMs: 1000 });
    expect(scored.data.annotations.transcript).toMatchObject({ truncated: true, total_segments: whole[0]!.segments.length });
    expect(scored.data.annotations_file_id).toBe(sub.uploads[0].file_id); // which of the three files they are
    const eventItem = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.event(scored.id) }))).Item!;
    expect(jsonBytes(eventItem)).toBeLessThan(TRANSCRIPT_MAX_BYTES + 16 * 1024);
    expect(jsonBytes({ NewImage: marshall(eventItem, { removeUndefinedValues: true }) })).toBeLessThan(Math.min(EVENT_MAX_BYTES, ITEM_MAX_BYTES) / 4);
  });
});
