import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROUTES, matchRoute, routeLogicalName } from '../../shared/manifest/routes';
import { QUEUES, RULES, STREAM_RULES, SCHEDULES, TABLE_STREAM, matchesPattern, queueByName, streamRecordOf } from '../../shared/manifest/wiring';
import { PRESIGNED_GRACE_MS } from '../../shared/work/release-reservation';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';

const root = join(__dirname, '..', '..');

describe('route manifest', () => {
  test('every route id, method+path and logical name is unique', () => {
    expect(new Set(ROUTES.map((r) => r.id)).size).toBe(ROUTES.length);
    expect(new Set(ROUTES.map((r) => `${r.method} ${r.path}`)).size).toBe(ROUTES.length);
    expect(new Set(ROUTES.map(routeLogicalName)).size).toBe(ROUTES.length);
  });

  test('every buyer POST requires an Idempotency-Key except refresh_url (D10)', () => {
    for (const r of ROUTES.filter((x) => x.principal === 'api_key' && x.method === 'POST')) {
      expect([r.id, r.idempotency]).toEqual([r.id, r.id === 'files.refresh_url' ? 'optional' : 'required']);
    }
  });

  test('the three /v1/submissions read routes need jobs:read (D8); the override needs jobs:write (D71)', () => {
    const reads = ROUTES.filter((x) => x.path.startsWith('/v1/submissions') && x.method === 'GET');
    expect(reads).toHaveLength(3);
    for (const r of reads) expect(r.scope).toBe('jobs:read');
    const writes = ROUTES.filter((x) => x.path.startsWith('/v1/submissions') && x.method !== 'GET');
    expect(writes.map((r) => [r.id, r.scope, r.idempotency])).toEqual([['submissions.override', 'jobs:write', 'required']]);
  });

  test('the organization settings routes accept any key', () => {
    for (const r of ROUTES.filter((x) => x.path === '/v1/organization/settings')) expect(r.scope).toBe('any');
  });

  test('only GET /v1/jobs/{job_id} and GET /v1/exports/{export_id} long-poll (D20, D73)', () => {
    expect(ROUTES.filter((r) => r.longPoll).map((r) => r.id)).toEqual(['jobs.get', 'exports.get']);
  });

  test('a literal segment wins over a parameter', () => {
    const m = matchRoute('GET', '/v1/submissions/summary');
    expect(m.route?.id).toBe('submissions.summary');
    expect(matchRoute('GET', '/v1/submissions/sub_01ARZ3NDEKTSV4RRFFQ69G5FAV').route?.id).toBe('submissions.get');
  });

  test('path parameters are extracted', () => {
    const m = matchRoute('POST', '/v1/jobs/job_123/cancel');
    expect(m.route?.id).toBe('jobs.cancel');
    expect('params' in m && m.params).toEqual({ job_id: 'job_123' });
  });

  test('an unknown path matches nothing', () => {
    expect(matchRoute('GET', '/v1/nope').route).toBeNull();
  });
});

describe('event wiring', () => {
  const uploadEvent = (key: string) => ({
    source: 'aws.s3',
    'detail-type': 'Object Created',
    detail: { bucket: { name: 'b' }, object: { key, size: 1 } },
  });

  test('every queue lets a message be received at least 5 times before its dead-letter queue (AWS guidance for a Lambda event source: a throttled invocation returns the message unrun and still counts)', () => {
    for (const q of QUEUES) expect({ queue: q.name, maxReceiveCount: q.maxReceiveCount >= 5 }).toEqual({ queue: q.name, maxReceiveCount: true });
  });

  test('every schedule times out before its next tick, so a tick never finds the previous run still going', () => {
    for (const s of SCHEDULES) expect(s.timeoutSeconds).toBeLessThan(s.everyMinutes * 60);
  });

  test('S3 ObjectCreated under uploads/ fans out to scoring and annotation (D54)', () => {
    const rule = RULES.find((r) => r.name === 'upload-created')!;
    expect(matchesPattern(rule.pattern, uploadEvent('uploads/job_1/sub_1/a.jpg'))).toBe(true);
    expect(rule.targets.sort()).toEqual(['annotation', 'scoring']);
  });

  test('objects outside uploads/ (keyframes) do not start the pipeline', () => {
    const rule = RULES.find((r) => r.name === 'upload-created')!;
    expect(matchesPattern(rule.pattern, uploadEvent('keyframes/file_1/0.png'))).toBe(false);
  });

  test('the outbox pipe takes inserted events only', () => {
    const pipe = STREAM_RULES.find((p) => p.name === 'outbox-to-webhooks')!;
    const rec = (eventName: string, entity: string) => ({ eventName, dynamodb: { NewImage: { entity: { S: entity } } } });
    expect(matchesPattern(pipe.filter, rec('INSERT', 'event'))).toBe(true);
    expect(matchesPattern(pipe.filter, rec('MODIFY', 'event'))).toBe(false);
    expect(matchesPattern(pipe.filter, rec('INSERT', 'job'))).toBe(false);
  });

  test('the sandbox pipe takes test-environment job.created events only (D40)', () => {
    const pipe = STREAM_RULES.find((p) => p.name === 'sandbox-jobs')!;
    const rec = (type: string, environment: string) => ({
      eventName: 'INSERT',
      dynamodb: { NewImage: { entity: { S: 'event' }, type: { S: type }, environment: { S: environment } } },
    });
    expect(matchesPattern(pipe.filter, rec('job.created', 'test'))).toBe(true);
    expect(matchesPattern(pipe.filter, rec('job.created', 'live'))).toBe(false);
    expect(matchesPattern(pipe.filter, rec('job.completed', 'test'))).toBe(false);
  });

  test('the exports pipe takes inserted exports only: an export is queued by the commit that accepts it (D73)', () => {
    const pipe = STREAM_RULES.find((p) => p.name === 'exports-requested')!;
    const rec = (eventName: string, entity: string) => ({ eventName, dynamodb: { NewImage: { entity: { S: entity }, id: { S: 'exp_1' } } } });
    expect(pipe.target).toBe('exports');
    expect(matchesPattern(pipe.filter, rec('INSERT', 'export'))).toBe(true);
    expect(matchesPattern(pipe.filter, rec('MODIFY', 'export'))).toBe(false); // claim and finish do not queue it again
    expect(matchesPattern(pipe.filter, rec('INSERT', 'event'))).toBe(false);
  });

  test('the withdrawals pipe takes the overrides that withdraw Files: their deletion is queued by the commit that withdraws them (D71)', () => {
    const pipe = STREAM_RULES.find((p) => p.name === 'files-withdrawn')!;
    const rec = (eventName: string, type: string, decision: string) => ({
      eventName,
      dynamodb: { NewImage: { entity: { S: 'event' }, type: { S: type }, envelope: { M: { data: { M: { submission_id: { S: 'sub_1' }, decision: { S: decision } } } } } } },
    });
    expect(pipe.target).toBe('withdrawals');
    expect(matchesPattern(pipe.filter, rec('INSERT', 'submission.overridden', 'reject'))).toBe(true);
    expect(matchesPattern(pipe.filter, rec('INSERT', 'submission.overridden', 'approve'))).toBe(false); // nothing to delete
    expect(matchesPattern(pipe.filter, rec('MODIFY', 'submission.overridden', 'reject'))).toBe(false); // delivery bookkeeping
    expect(matchesPattern(pipe.filter, rec('INSERT', 'submission.rejected', 'reject'))).toBe(false);
  });

  test('the auto top-up pipe takes the crossings with auto top-up on: the commit that crosses the threshold queues the top-up (D34)', () => {
    const pipe = STREAM_RULES.find((p) => p.name === 'auto-top-up')!;
    const rec = (eventName: string, type: string, enabled: boolean) => ({
      eventName,
      dynamodb: { NewImage: { entity: { S: 'event' }, type: { S: type }, envelope: { M: { data: { M: { balance_cents: { N: '900' }, auto_top_up_enabled: { BOOL: enabled } } } } } } },
    });
    expect(pipe.target).toBe('top-ups');
    expect(matchesPattern(pipe.filter, rec('INSERT', 'credits.low_balance', true))).toBe(true);
    expect(matchesPattern(pipe.filter, rec('INSERT', 'credits.low_balance', false))).toBe(false); // only the event
    expect(matchesPattern(pipe.filter, rec('MODIFY', 'credits.low_balance', true))).toBe(false); // delivery bookkeeping
    expect(matchesPattern(pipe.filter, rec('INSERT', 'credits.expired', true))).toBe(false);
  });

  test('the sweep leaves a pre-signed plan long enough for a crashed first check of its landed files to come back once', () => {
    expect(PRESIGNED_GRACE_MS).toBeGreaterThanOrEqual((queueByName('scoring').visibilityTimeoutSeconds + 120) * 1000);
  });

  test('every queue consumer times out before its visibility timeout', () => {
    for (const q of QUEUES) expect(q.consumerTimeoutSeconds).toBeLessThan(q.visibilityTimeoutSeconds);
  });

  test('every queue hides a received message for at least 6 × its consumer timeout (AWS guidance for Lambda event sources)', () => {
    for (const q of QUEUES) expect([q.name, q.visibilityTimeoutSeconds >= 6 * q.consumerTimeoutSeconds]).toEqual([q.name, true]);
  });

  test('every rule and stream rule targets a defined queue', () => {
    const names = new Set(QUEUES.map((q) => q.name));
    for (const r of RULES) for (const t of r.targets) expect(names.has(t)).toBe(true);
    for (const p of STREAM_RULES) expect(names.has(p.target)).toBe(true);
  });

  test('the table stream has one reader, whose filter keeps every record some stream rule takes', () => {
    const rec = (entity: string) => ({ eventName: 'INSERT', dynamodb: { NewImage: { entity: { S: entity } } } });
    for (const r of STREAM_RULES) {
      const entities = ((r.filter.dynamodb as { NewImage: { entity: { S: string[] } } }).NewImage.entity.S);
      expect(r.filter.eventName).toEqual(['INSERT']);
      for (const e of entities) expect([r.name, e, matchesPattern(TABLE_STREAM.filter, rec(e))]).toEqual([r.name, e, true]);
    }
    expect(matchesPattern(TABLE_STREAM.filter, rec('submission'))).toBe(false); // nothing routes it: not put on the bus
    expect(matchesPattern(TABLE_STREAM.filter, { eventName: 'MODIFY', dynamodb: { NewImage: { entity: { S: 'event' } } } })).toBe(false);
  });

  test('a stream record moved back from a stream rule\'s dead-letter queue as the whole bus event is unwrapped to the record', () => {
    const record = { eventName: 'INSERT', dynamodb: { NewImage: { entity: { S: 'event' } } } };
    expect(streamRecordOf(record)).toBe(record);
    expect(streamRecordOf({ version: '0', source: TABLE_STREAM.source, 'detail-type': TABLE_STREAM.detailType, detail: record })).toBe(record);
    const other = { source: 'aws.s3', 'detail-type': 'Object Created', detail: { x: 1 } };
    expect(streamRecordOf(other)).toBe(other);
  });

  test('every handler module named by the manifest and the wiring exists', () => {
    const modules = [...ROUTES.map((r) => r.handler), ...QUEUES.map((q) => q.consumer), ...SCHEDULES.map((s) => s.handler)];
    const missing = modules.filter((m) => !existsSync(join(root, m)));
    expect(missing).toEqual([]);
  });
});

describe('how a handler is built follows its manifest entry', () => {
  test('a route that takes an Idempotency-Key cannot be built without the idempotency middleware', () => {
    expect(() => routeWithoutIdempotencyKey('jobs.create', {}, async () => ({ body: {} }))).toThrow(/takes an Idempotency-Key \(required\)/);
    expect(() => routeWithoutIdempotencyKey('jobs.get', {}, async () => ({ body: {} }))).not.toThrow();
  });
});
