/**
 * D68: every scorer and every pre-check maps its verdict to reason codes; D67 the content policy;
 * D66 the retry delays. Provider by provider, without the pipeline (the pipeline tests read the
 * same codes in the views and events).
 */
import { measure } from '../../shared/media/metadata';
import {
  BedrockScorer,
  LocalScorer,
  REASON_CODES,
  SandboxScorer,
  parseConverseOutput,
  precheck,
  precheckRejection,
  reasonCodesFromDimensions,
  type ScoringJob,
} from '../../shared/scoring';
import { policyFinding, policyRejection, POLICY_LIMIT } from '../../shared/scoring/policy';
import { retryDelaySeconds } from '../../shared/work/consumer';
import { converseReplies } from '../fixtures/bedrock-converse.published-format';
import { detailedJpeg, flatImage } from '../fixtures/media';

const job: ScoringJob = { type: 'data_collection', description: 'Storefronts in daylight.', accepted_formats: ['image/jpeg', 'image/png'], min_star_rating: 3 };

describe('reason codes by provider (D68)', () => {
  it('the list is the one integrators see, in its documented order', () => {
    expect(REASON_CODES).toEqual([
      'low_relevance',
      'low_quality',
      'instructions_not_followed',
      'resolution_too_low',
      'duration_out_of_bounds',
      'duplicate',
      'near_duplicate',
      'location_mismatch',
      'policy_violation',
      'unreadable_media',
    ]);
  });

  it('dimensions below the threshold become codes; at or above it none', () => {
    expect(reasonCodesFromDimensions({ relevance: 2, quality: 3, instruction_compliance: 1 }, 3)).toEqual(['low_relevance', 'instructions_not_followed']);
    expect(reasonCodesFromDimensions({ relevance: 4, quality: 4, instruction_compliance: 4 }, 3)).toEqual([]);
    expect(reasonCodesFromDimensions({ relevance: 4, quality: 4, instruction_compliance: 4 }, 5)).toEqual(['low_relevance', 'low_quality', 'instructions_not_followed']);
  });

  it('local: a flat image → low_relevance + low_quality; a detailed one → []', async () => {
    const flat = await flatImage(800, 600, '#808080');
    const r = await new LocalScorer().score({ job, file: { content_type: 'image/png', bytes: flat, metadata: await measure(flat, 'image/png') } });
    expect(r.reason_codes).toEqual(['low_relevance', 'low_quality']);
    const good = await detailedJpeg(800, 600);
    const ok = await new LocalScorer().score({ job, file: { content_type: 'image/jpeg', bytes: good, metadata: await measure(good, 'image/jpeg') } });
    expect(ok.ai_star_rating).toBeGreaterThanOrEqual(3);
    expect(ok.reason_codes).toEqual([]);
  });

  it('local: relevance it does not judge (the neutral 3) is never a reason, whatever the threshold', async () => {
    const sharp = (await import('sharp')).default;
    const soft = await sharp(await detailedJpeg(800, 600)).blur(3).jpeg().toBuffer(); // a little soft: 4 stars at most
    const r = await new LocalScorer().score({ job: { ...job, min_star_rating: 5 }, file: { content_type: 'image/jpeg', bytes: soft, metadata: await measure(soft, 'image/jpeg') } });
    expect(r.dimensions!.relevance).toBe(3);
    expect(r.ai_star_rating).toBeLessThan(5);
    expect(r.reason_codes).not.toContain('low_relevance');
  });

  it('local: a format the job does not accept → instructions_not_followed', async () => {
    const good = await detailedJpeg(800, 600);
    const r = await new LocalScorer().score({ job: { ...job, accepted_formats: ['image/png'] }, file: { content_type: 'image/jpeg', bytes: good, metadata: await measure(good, 'image/jpeg') } });
    expect(r.reason_codes).toContain('instructions_not_followed');
  });

  it('bedrock: an off-topic answer → low_relevance + instructions_not_followed; a good one → []', () => {
    expect(parseConverseOutput(converseReplies.offTopic, 'm', 3).reason_codes).toEqual(['low_relevance', 'instructions_not_followed']);
    expect(parseConverseOutput(converseReplies.good, 'm', 3).reason_codes).toEqual([]);
  });

  it('bedrock: the job threshold decides which dimensions fell short', async () => {
    const client = { converse: async () => converseReplies.completenessVariant };
    const r = await new BedrockScorer({ client: client as never }).score({ job: { ...job, min_star_rating: 5 }, file: { content_type: 'image/jpeg', bytes: await detailedJpeg(64, 48), metadata: { content_type: 'image/jpeg', width: 64, height: 48, duration_seconds: null } } });
    expect(r.reason_codes).toEqual(['low_relevance', 'low_quality', 'instructions_not_followed']);
  });

  it('sandbox: 4 stars → []; the "retry" scenario names what to fix', async () => {
    expect((await new SandboxScorer().score({ job, file: { content_type: 'image/jpeg', metadata: { content_type: 'image/jpeg', width: 1, height: 1, duration_seconds: null } } })).reason_codes).toEqual([]);
    const retry = await new SandboxScorer().score({ job, sandboxDirective: 'retry', file: { content_type: 'image/jpeg', metadata: { content_type: 'image/jpeg', width: 1, height: 1, duration_seconds: null } } });
    expect(retry.reason_codes.length).toBeGreaterThan(0);
  });

  it('sandbox "mixed": the retry scores one star below the job\'s threshold, whatever it is (so it is retry_pending)', async () => {
    const file = { content_type: 'image/jpeg', metadata: { content_type: 'image/jpeg', width: 1, height: 1, duration_seconds: null } };
    for (const t of [2, 3, 4, 5]) {
      const r = await new SandboxScorer().score({ job: { ...job, min_star_rating: t }, sandboxDirective: 'retry', file });
      expect([t, r.ai_star_rating]).toEqual([t, t - 1]);
    }
  });

  it('pre-checks: resolution, duration, duplicate, each its code; several at once all listed', () => {
    const md = { content_type: 'video/mp4', width: 320, height: 240, duration_seconds: 90, content_hash: 'sha256:ab' };
    const r = precheck({ ...job, accepted_formats: ['video/mp4'], min_width: 640, max_duration_seconds: 60 }, md, ['sha256:ab'])!;
    expect(r).toMatchObject({ ai_star_rating: 1, precheck_rejected: true, reason_codes: ['resolution_too_low', 'duration_out_of_bounds', 'duplicate'] });
    expect(precheckRejection([{ code: 'unreadable_media', reason: 'the file could not be decoded' }]).reason_codes).toEqual(['unreadable_media']);
  });
});

describe('content policy (D67)', () => {
  it(`an NSFW or violence score at or above ${POLICY_LIMIT} is a finding; below it is not`, () => {
    expect(policyFinding({ type: 'image', safety: { nsfw_score: 0.85, violence_score: null } })).toEqual({ measure: 'nsfw_score', score: 0.85 });
    expect(policyFinding({ type: 'image', safety: { nsfw_score: 0.1, violence_score: 0.9 } })).toEqual({ measure: 'violence_score', score: 0.9 });
    expect(policyFinding({ type: 'image', safety: { nsfw_score: 0.8499, violence_score: null } })).toBeNull();
    expect(policyFinding(null)).toBeNull();
  });

  it('a video is judged by its worst keyframe', () => {
    const kf = (nsfw: number) => ({ annotations: { safety: { nsfw_score: nsfw, violence_score: null } } });
    expect(policyFinding({ type: 'video', keyframes: [kf(0.1), kf(0.92), kf(0.3)] })).toEqual({ measure: 'nsfw_score', score: 0.92 });
  });

  it('the rejection: 1 star, final, policy_violation only', () => {
    expect(policyRejection({ measure: 'nsfw_score', score: 0.97 })).toMatchObject({ ai_star_rating: 1, precheck_rejected: true, reason_codes: ['policy_violation'], ai_reasoning: expect.stringMatching(/content policy/) });
  });
});

describe('retry delays (D66)', () => {
  const env = { ...process.env };
  afterEach(() => {
    process.env = { ...env };
  });
  it('30 s doubling per receive, capped at 15 minutes', () => {
    delete process.env.PIPELINE_RETRY_BASE_SECONDS;
    delete process.env.PIPELINE_RETRY_MAX_SECONDS;
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(retryDelaySeconds)).toEqual([30, 60, 120, 240, 480, 900, 900, 900]);
  });
  it('the curve can be shortened for trying it locally', () => {
    process.env.PIPELINE_RETRY_BASE_SECONDS = '1';
    process.env.PIPELINE_RETRY_MAX_SECONDS = '2';
    expect([1, 2, 3, 4].map(retryDelaySeconds)).toEqual([1, 2, 2, 2]);
  });
});
