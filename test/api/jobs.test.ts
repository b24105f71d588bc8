/** Job routes over HTTP (spec "Jobs", D12-D22, D31, D42, D46, D57) on the local runtime. */
import { newId } from '../../shared/ids';
import { approve } from '../domain/ledger-fixtures';
import { Tx } from '../../shared/db/tx';
import { keys } from '../../shared/db/keys';
import { getJobItem } from '../../shared/jobs';
import { summaryClauses } from '../../shared/jobs/view';
import { addApprovalCharges, approvalAllowed } from '../../shared/ledger/escrow';
import { jobBody, newBuyer, newKey, post, startBillingRuntime, type Buyer } from './billing-support';
import { indexesCaughtUp, type TestRuntime } from '../support/harness';
import { createKey } from '../support/buyers';
import { cancelTransactionsWhile } from '../support/transaction-conflicts';

let rt: TestRuntime & { stopAll(): Promise<void> };
beforeAll(async () => {
  rt = await startBillingRuntime();
});
afterAll(() => rt?.stopAll());

const credits = async (k: string) => (await rt.request('GET', '/v1/billing/credits', { key: k })).json;

describe('create', () => {
  let b: Buyer;
  beforeAll(async () => {
    b = await newBuyer(rt, { purchaseCents: 10_000 });
  });

  test('a JSON body sent with a binary Content-Type is read as UTF-8 (API Gateway base64-encodes it): its text arrives intact', async () => {
    const r = await rt.request('POST', '/v1/jobs', {
      key: b.test,
      headers: { 'Content-Type': 'application/octet-stream', 'Idempotency-Key': `ct-${Date.now()}` },
      body: Buffer.from(JSON.stringify(jobBody({ title: 'Café façades in Zürich' })), 'utf8'),
    });
    expect(r.status).toBe(201);
    expect(r.json.title).toBe('Café façades in Zürich');
  });

  test('a multipart form on a JSON route is 400 invalid_request, not an empty body', async () => {
    const boundary = 'x1';
    const form = `--${boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--${boundary}--\r\n`;
    const r = await rt.request('POST', '/v1/jobs', { key: b.test, headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Idempotency-Key': `mp-${Date.now()}` }, body: form });
    expect(r.status).toBe(400);
    expect(r.json.error.type).toBe('invalid_request');
  });

  test('D17/D16: the job echoes every creation field, with the money fields, and escrows price × files_needed (D31)', async () => {
    const before = await credits(b.live);
    const body = jobBody({
      title: 'Storefronts',
      files_per_submission: 2,
      scoring_criteria: 'Sharp',
      min_star_rating: 4,
      min_width: 640,
      min_height: 480,
      worker_guidelines: 'Daylight only',
      price_per_file_cents: 33,
      location: { city: 'Austin', state: 'TX' },
      metadata: { batch: 7, tag: 'a', ok: true, none: null },
    });
    const r = await post(rt, b.live, '/v1/jobs', body);
    expect(r.status).toBe(201);
    expect(r.json).toMatchObject({
      object: 'job',
      status: 'open',
      environment: 'live',
      organization_id: b.orgId,
      files_approved: 0,
      files_remaining: 10,
      total_cost_cents: 330,
      platform_fee_pct: 20,
      worker_payout_per_file_cents: 26,
      title: 'Storefronts',
      scoring_criteria: 'Sharp',
      min_star_rating: 4,
      min_duration_seconds: null,
      max_duration_seconds: null,
      location: { city: 'Austin', state: 'TX', latitude: null, longitude: null, radius_km: null, description: null },
      metadata: { batch: 7, tag: 'a', ok: true, none: null },
      completed_at: null,
      cancelled_at: null,
    });
    const after = await credits(b.live);
    expect(after.available_cents).toBe(before.available_cents - 330);
    expect(after.held_cents).toBe(before.held_cents + 330);
  });

  test('D15: audio/x-m4a is stored as audio/mp4 and duplicates are removed', async () => {
    const r = await post(rt, b.test, '/v1/jobs', jobBody({ accepted_formats: ['audio/x-m4a', 'audio/mp4', 'image/png', 'image/png'], price_per_file_cents: 40 }));
    expect(r.status).toBe(201);
    expect(r.json.accepted_formats).toEqual(['audio/mp4', 'image/png']);
  });

  test('D14: a 30-second video below its 40-cent floor is pricing_violation with floor, max and provided', async () => {
    const r = await post(rt, b.test, '/v1/jobs', jobBody({ accepted_formats: ['video/mp4'], max_duration_seconds: 30, price_per_file_cents: 39 }));
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'pricing_violation', floor_cents: 40, max_cents: 50000, provided_cents: 39 });
    expect(r.json.error.details[0].field).toBe('price_per_file_cents');
  });

  test('D14: the audio floor is 10 + ceil(D/2) and the price maximum is 50000', async () => {
    const audio = await post(rt, b.test, '/v1/jobs', jobBody({ accepted_formats: ['audio/wav'], min_duration_seconds: 31, price_per_file_cents: 25 }));
    expect(audio.json.error).toMatchObject({ type: 'pricing_violation', floor_cents: 26 });
    const high = await post(rt, b.test, '/v1/jobs', jobBody({ price_per_file_cents: 50_001 }));
    expect(high.json.error).toMatchObject({ type: 'pricing_violation', provided_cents: 50_001 });
    // However far above: still the pricing rule with its limits, not a number-range error.
    const huge = await post(rt, b.test, '/v1/jobs', jobBody({ price_per_file_cents: 1e16 }));
    expect(huge.json.error).toMatchObject({ type: 'pricing_violation', max_cents: 50000, provided_cents: 1e16 });
    for (const price of [30.5, 100.00000000000001]) {
      const fraction = await post(rt, b.test, '/v1/jobs', jobBody({ price_per_file_cents: price }));
      expect(fraction.json.error).toMatchObject({ type: 'validation_error', details: [expect.objectContaining({ field: 'price_per_file_cents' })] });
    }
  });

  const long = (n: number) => 'x'.repeat(n);
  const bounds: [string, Record<string, unknown>, string][] = [
    ['type', { type: 'survey' }, 'type'],
    ['title', { title: long(101) }, 'title'],
    ['description short', { description: long(9) }, 'description'],
    ['description long', { description: long(5001) }, 'description'],
    ['files_needed 0', { files_needed: 0 }, 'files_needed'],
    ['files_needed 10001', { files_needed: 10_001 }, 'files_needed'],
    ['files_needed fraction', { files_needed: 1.5 }, 'files_needed'],
    ['files_per_submission 0', { files_per_submission: 0 }, 'files_per_submission'],
    ['files_per_submission 6', { files_per_submission: 6 }, 'files_per_submission'],
    ['scoring_criteria', { scoring_criteria: long(1001) }, 'scoring_criteria'],
    ['min_star_rating 0', { min_star_rating: 0 }, 'min_star_rating'],
    ['min_star_rating 6', { min_star_rating: 6 }, 'min_star_rating'],
    ['min_duration_seconds 0', { min_duration_seconds: 0 }, 'min_duration_seconds'],
    ['min_duration_seconds 601', { min_duration_seconds: 601 }, 'min_duration_seconds'],
    ['max_duration_seconds 0', { max_duration_seconds: 0 }, 'max_duration_seconds'],
    ['max_duration_seconds 601', { max_duration_seconds: 601 }, 'max_duration_seconds'],
    ['min_width', { min_width: 0 }, 'min_width'],
    ['min_height', { min_height: 0 }, 'min_height'],
    ['worker_guidelines', { worker_guidelines: long(2001) }, 'worker_guidelines'],
    ['accepted_formats empty', { accepted_formats: [] }, 'accepted_formats'],
    ['accepted_formats 9 entries', { accepted_formats: Array(9).fill('image/png') }, 'accepted_formats'],
    ['accepted_formats extension', { accepted_formats: ['image/png', '.jpg'] }, 'accepted_formats.1'],
    ['price_per_file_cents fraction', { price_per_file_cents: 10.5 }, 'price_per_file_cents'],
    ['location latitude', { location: { latitude: 91, longitude: 0 } }, 'location.latitude'],
    ['location longitude', { location: { latitude: 0, longitude: -181 } }, 'location.longitude'],
    ['location radius_km', { location: { latitude: 0, longitude: 0, radius_km: 501 } }, 'location.radius_km'],
    ['metadata 51 keys', { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) }, 'metadata'],
    ['metadata nested value', { metadata: { a: { b: 1 } } }, 'metadata.a'],
    ['metadata long value', { metadata: { a: long(501) } }, 'metadata.a'],
    ['unknown field', { colour: 'red' }, 'colour'],
  ];
  test('D4: a metadata key "__proto__" (plain or escaped) is 400 naming it, never silently dropped', async () => {
    for (const key of ['__proto__', '\\u005f_proto__', '__pr\\u006fto__']) {
      const text = JSON.stringify(jobBody({ metadata: { keep: 1 } })).replace('"keep"', `"${key}"`);
      const r = await rt.request('POST', '/v1/jobs', { key: b.test, headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `proto-${key.length}-${Date.now()}` }, body: text });
      expect(r.status).toBe(400);
      expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'metadata.__proto__', code: 'reserved_key' })]);
    }
  });

  test('D4: a metadata key "constructor" (plain or escaped) is 400 naming it, never a 500 at the write', async () => {
    for (const [i, metadata] of [{ constructor: 1 }, { constructor: 'x', keep: 1 }, { constructor: null }].entries()) {
      const r = await post(rt, b.test, '/v1/jobs', jobBody({ metadata }), `ctor-${i}-${Date.now()}`);
      expect([r.status, r.json.error.details]).toEqual([400, [expect.objectContaining({ field: 'metadata.constructor', code: 'reserved_key' })]]);
    }
    const text = JSON.stringify(jobBody({ metadata: { keep: 1 } })).replace('"keep"', '"constru\\u0063tor"');
    const r = await rt.request('POST', '/v1/jobs', { key: b.test, headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `ctor-esc-${Date.now()}` }, body: text });
    expect([r.status, r.json.error.details]).toEqual([400, [expect.objectContaining({ field: 'metadata.constructor', code: 'reserved_key' })]]);
  });

  test('D4: a deeply nested body (with an escape in it) is a 400, never a 500', async () => {
    const depth = 200_000;
    const text = `{"title":"\\u0041","deep":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    const r = await rt.request('POST', '/v1/jobs', { key: b.test, headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `deep-${Date.now()}` }, body: text });
    expect(r.status).toBe(400);
    const plain = await rt.request('POST', '/v1/jobs', { key: b.test, headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `deep2-${Date.now()}` }, body: text.replace('\\u0041', 'A') });
    expect(plain.status).toBe(400);
  });

  test.each(bounds)('D4: %s is rejected with 400 naming the field', async (_name, over, field) => {
    const r = await post(rt, b.test, '/v1/jobs', jobBody(over));
    expect(r.status).toBe(400);
    expect(r.json.error.type).toBe('validation_error');
    expect(r.json.error.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  test('D4/D52: fields valid alone but not together are 422 (durations, files_per_submission > files_needed)', async () => {
    const d = await post(rt, b.test, '/v1/jobs', jobBody({ accepted_formats: ['audio/wav'], min_duration_seconds: 60, max_duration_seconds: 30, price_per_file_cents: 100 }));
    expect([d.status, d.json.error.details[0].field]).toEqual([422, 'min_duration_seconds']);
    const f = await post(rt, b.test, '/v1/jobs', jobBody({ files_needed: 2, files_per_submission: 3 }));
    expect([f.status, f.json.error.details[0].field]).toEqual([422, 'files_per_submission']);
  });

  test('D10: a missing Idempotency-Key is 400 on the header', async () => {
    const r = await post(rt, b.live, '/v1/jobs', jobBody(), null);
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].field).toBe('Idempotency-Key');
  });

  test('D11: the same Idempotency-Key replays the job and escrows once', async () => {
    const k = newKey();
    const before = await credits(b.live);
    const one = await post(rt, b.live, '/v1/jobs', jobBody(), k);
    const two = await post(rt, b.live, '/v1/jobs', jobBody(), k);
    expect(two.json.id).toBe(one.json.id);
    expect(two.headers['idempotent-replayed']).toBe('true');
    expect((await credits(b.live)).available_cents).toBe(before.available_cents - 200);
  });

  test('D3: a test-environment job never touches money', async () => {
    const r = await post(rt, b.test, '/v1/jobs', jobBody());
    expect(r.status).toBe(201);
    expect(await credits(b.test)).toMatchObject({ available_cents: 0, held_cents: 0 });
  });
});

describe('free tier and credits', () => {
  test('D19: 402 insufficient_credits carries balance, required, shortfall, purchase_url and the variant names', async () => {
    const b = await newBuyer(rt);
    const r = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 15 }));
    expect(r.status).toBe(402);
    expect(r.json.error).toMatchObject({
      type: 'insufficient_credits',
      current_balance_cents: 250,
      required_cents: 300,
      shortfall_cents: 50,
      balance_cents: 250,
      needed_cents: 300,
    });
    expect(r.json.error.purchase_url).toMatch(/^http/);
  });

  test('D18/D57: a free-tier second job while one is open is 403 free_tier_job_limit, before 402', async () => {
    const b = await newBuyer(rt);
    expect((await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 5 }))).status).toBe(201);
    const second = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 500 }));
    expect([second.status, second.json.error.type]).toEqual([403, 'free_tier_job_limit']);
    expect((await post(rt, b.test, '/v1/jobs', jobBody())).status).toBe(201); // test environment exempt
  });

  test('D31: 20 concurrent creations that together exceed the balance never escrow more than was available', async () => {
    const b = await newBuyer(rt, { purchaseCents: 1000 }); // 1250 available
    const rs = await Promise.all(Array.from({ length: 20 }, () => post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 5, price_per_file_cents: 30 }))));
    const created = rs.filter((r) => r.status === 201).length;
    expect(rs.filter((r) => r.status !== 201 && r.status !== 402).map((r) => r.text)).toEqual([]);
    expect(created).toBe(Math.floor(1250 / 150));
    const c = await credits(b.live);
    expect(c).toMatchObject({ held_cents: created * 150, available_cents: 1250 - created * 150 });
  });

  test('D31: a creation whose balance stays contended past one commit\'s retries rebuilds on a fresh read and escrows once', async () => {
    const b = await newBuyer(rt, { purchaseCents: 1000 }); // 1250 available
    // Every transaction naming the balance is cancelled, as DynamoDB cancels one that meets another
    // in progress, for 6 s: longer than one commit's contention budget, shorter than the rebuild budget.
    const balance = keys.balance(b.orgId, 'live');
    const names = (input: unknown) => JSON.stringify(input).includes(JSON.stringify(balance).slice(1, -1));
    const until = Date.now() + 6_000;
    const remove = cancelTransactionsWhile((input) => Date.now() < until && names(input));
    let r;
    try {
      r = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 5, price_per_file_cents: 30 }));
    } finally {
      remove();
    }
    expect([r.status, r.text]).toEqual([201, expect.any(String)]);
    expect(await credits(b.live)).toMatchObject({ held_cents: 150, available_cents: 1100 });
  }, 30_000);
});

describe('list and get', () => {
  let b: Buyer;
  const ids: string[] = [];
  beforeAll(async () => {
    b = await newBuyer(rt, { verified: false });
    for (const type of ['data_collection', 'feedback', 'data_collection']) ids.push((await post(rt, b.test, '/v1/jobs', jobBody({ type }))).json.id);
    await post(rt, b.test, `/v1/jobs/${ids[0]}/cancel`);
    await indexesCaughtUp();
  });

  test('D12: lists newest first with an exact has_more and a cursor', async () => {
    const p1 = await rt.request('GET', '/v1/jobs?limit=2', { key: b.test });
    expect(p1.json.data.map((j: { id: string }) => j.id)).toEqual([ids[2], ids[1]]);
    expect(p1.json.has_more).toBe(true);
    const p2 = await rt.request('GET', `/v1/jobs?limit=2&cursor=${encodeURIComponent(p1.json.next_cursor)}`, { key: b.test });
    expect([p2.json.data.map((j: { id: string }) => j.id), p2.json.has_more]).toEqual([[ids[0]], false]);
  });

  test('D21: status, type and created_after filter the list', async () => {
    const cancelled = await rt.request('GET', '/v1/jobs?status=cancelled', { key: b.test });
    expect(cancelled.json.data.map((j: { id: string }) => j.id)).toEqual([ids[0]]);
    const feedback = await rt.request('GET', '/v1/jobs?type=feedback', { key: b.test });
    expect(feedback.json.data.map((j: { id: string }) => j.id)).toEqual([ids[1]]);
    expect((await rt.request('GET', '/v1/jobs?status=filled', { key: b.test })).json.data).toEqual([]);
    const created = (await rt.request('GET', `/v1/jobs/${ids[1]}`, { key: b.test })).json.created_at;
    const after = await rt.request('GET', `/v1/jobs?created_after=${encodeURIComponent(created)}`, { key: b.test });
    expect(after.json.data.map((j: { id: string }) => j.id)).toEqual([ids[2]]);
    expect((await rt.request('GET', '/v1/jobs?status=done', { key: b.test })).status).toBe(400);
  });

  test('an instant before 1970 is a valid lower bound: every job comes after it (not a 500, not an empty list)', async () => {
    const r = await rt.request('GET', '/v1/jobs?created_after=1969-12-31T00:00:00Z', { key: b.test });
    expect(r.status).toBe(200);
    expect(r.json.data.map((j: { id: string }) => j.id)).toEqual(expect.arrayContaining(ids));
    const subs = await rt.request('GET', '/v1/submissions?start_date=1969-12-31T00:00:00Z', { key: b.test });
    expect(subs.status).toBe(200);
    expect((await rt.request('GET', '/v1/submissions/summary?start_date=0000-01-01T00:00:00Z', { key: b.test })).status).toBe(200);
  });

  test('a query parameter on a route that takes none is 400 naming it; an empty job_id filter is 400, not "no filter"', async () => {
    const r = await rt.request('GET', `/v1/jobs/${ids[1]}?foo=1&bar=2`, { key: b.test });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'validation_error', details: [expect.objectContaining({ field: 'foo', code: 'unknown_field' }), expect.objectContaining({ field: 'bar', code: 'unknown_field' })] });
    const empty = await rt.request('GET', '/v1/submissions?job_id=', { key: b.test });
    expect(empty.status).toBe(400);
    expect(empty.json.error.details[0].field).toBe('job_id');
  });

  test('D4: a body field sent to a route that takes no body is 400 naming it; a body that is not an object is 400 unexpected_body', async () => {
    const job = await post(rt, b.test, '/v1/jobs', jobBody());
    const r = await post(rt, b.test, `/v1/jobs/${job.json.id}/cancel`, { reason: 'x' });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'validation_error', details: [{ field: 'reason', code: 'unknown_field', message: expect.any(String) }] });
    const list = await post(rt, b.test, `/v1/jobs/${job.json.id}/cancel`, ['x']);
    expect(list.status).toBe(400);
    expect(list.json.error.details).toEqual([expect.objectContaining({ code: 'unexpected_body' })]);
    expect((await rt.request('GET', `/v1/jobs/${job.json.id}`, { key: b.test })).json.status).toBe('open');
  });

  test('D4/D11: a body with 100,000 unknown fields is 400 listing the first 49 and a count (no 502); the same Idempotency-Key replays that 400', async () => {
    const body: Record<string, unknown> = jobBody();
    for (let i = 0; i < 100_000; i++) body[`k${i}`] = 0;
    body['x'.repeat(5_000)] = 0; // a field name longer than any detail shows
    const idem = newKey();
    const r = await post(rt, b.test, '/v1/jobs', body, idem);
    expect(r.status).toBe(400);
    expect(r.headers['x-request-id']).toEqual(expect.any(String));
    expect(r.json.error.details).toHaveLength(50);
    expect(r.json.error.details.slice(0, 2)).toEqual([expect.objectContaining({ field: 'k0', code: 'unknown_field' }), expect.objectContaining({ field: 'k1', code: 'unknown_field' })]);
    expect(r.json.error.details[49]).toEqual({ message: '99952 more errors are not listed.', code: 'more_errors' });
    const again = await post(rt, b.test, '/v1/jobs', body, idem);
    expect([again.status, again.json.error.details]).toEqual([400, r.json.error.details]);
    const long = await post(rt, b.test, '/v1/jobs', { ...jobBody(), ['y'.repeat(5_000)]: 0 });
    expect(long.json.error.details[0].field.length).toBeLessThanOrEqual(300);
  });

  test('a coordinate too close to zero for the table (1e-300) is 400 on its field, never a 500 at the write', async () => {
    const r = await post(rt, b.test, '/v1/jobs', jobBody({ location: { latitude: 1e-300, longitude: 2 } }));
    expect(r.status).toBe(400);
    expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'location.latitude' })]);
    expect((await post(rt, b.test, '/v1/jobs', jobBody({ location: { latitude: 0, longitude: 2 } }))).status).toBe(201);
  });

  test('a query parameter given twice is 400 naming it, never silently the last value', async () => {
    const r = await rt.request('GET', '/v1/jobs?limit=1&limit=2', { key: b.test });
    expect(r.status).toBe(400);
    expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'limit', code: 'repeated_parameter' })]);
  });

  test('D20: a wait of any length clamps to the budget (a seven-digit one too)', async () => {
    const r = await rt.request('GET', `/v1/jobs/${ids[0]}`, { key: b.test, headers: { Prefer: 'wait=1000000' } });
    expect([r.status, r.headers['preference-applied']]).toEqual([200, 'wait=25']);
  });

  test('D3/D17: get adds the submission summary; the other environment and other organizations get 404', async () => {
    const r = await rt.request('GET', `/v1/jobs/${ids[1]}`, { key: b.test });
    expect(r.json.submission_summary).toEqual({
      object: 'submission_summary',
      total_submissions: 0,
      approved: 0,
      rejected: 0,
      approval_rate: null,
      avg_ai_star_rating: null,
      by_type: [{ type: 'image', total: 0, approved: 0, avg_ai_star_rating: null }],
    });
    expect((await rt.request('GET', `/v1/jobs/${ids[1]}`, { key: b.live })).status).toBe(404);
    const other = await newBuyer(rt, { verified: false });
    expect((await rt.request('GET', `/v1/jobs/${ids[1]}`, { key: other.test })).status).toBe(404);
  });

  test('D20: Prefer: wait answers as soon as the status changes, with Preference-Applied', async () => {
    const waiting = rt.request('GET', `/v1/jobs/${ids[2]}`, { key: b.test, headers: { Prefer: 'wait=20' } });
    await post(rt, b.test, `/v1/jobs/${ids[2]}/cancel`);
    const r = await waiting;
    expect(r.json.status).toBe('cancelled');
    expect(r.headers['preference-applied']).toBe('wait=20');
  });

  test('D20: a long-poll on a job whose status does not change answers open after the wait, with Preference-Applied', async () => {
    const r = await rt.request('GET', `/v1/jobs/${ids[1]}`, { key: b.test, headers: { Prefer: 'wait=1' } });
    expect([r.status, r.json.status, r.headers['preference-applied']]).toEqual([200, 'open', 'wait=1']);
  });

  test('D6: a key revoked while its long-poll waits gets 401 when the wait ends, not the job', async () => {
    const k = await createKey(rt, b.test, { name: 'revoked while waiting', environment: 'test' });
    // A wait of 5 s: the revoke, sent 0.3 s in, has the rest to commit even on a loaded machine.
    const waiting = rt.request('GET', `/v1/jobs/${ids[1]}`, { key: k.secret, headers: { Prefer: 'wait=5' } });
    await new Promise((r) => setTimeout(r, 300));
    expect((await post(rt, b.test, `/v1/api_keys/${k.id}/revoke`)).status).toBe(204);
    const r = await waiting;
    expect(r.status).toBe(401);
    expect(r.json.error.type).toBe('authentication_error');
    expect(r.text).not.toContain(ids[1]);
  });

  test('D50/D56: the submission summary comes from the counters on the job; retry_pending counts in the total only', async () => {
    const job = (await post(rt, b.test, '/v1/jobs', jobBody({ files_needed: 5, accepted_formats: ['image/png', 'audio/wav'], price_per_file_cents: 30 }))).json;
    const bump = async (c: ReturnType<typeof summaryClauses>) => {
      if (!c.add.length) return;
      const tx = new Tx();
      tx.update('job', keys.job(job.id), `ADD ${c.add.join(', ')}`, { names: c.names, values: c.values });
      await tx.commit();
    };
    for (let i = 0; i < 4; i++) await bump(summaryClauses(i < 3 ? 'image' : 'audio', 'submitted'));
    await bump(summaryClauses('image', 'rejected', 2));
    await bump(summaryClauses('image', 'retry_pending', 2));
    const item = (await getJobItem(job.id))!;
    expect(approvalAllowed(item, 1)).toBe(true);
    const tx = new Tx();
    addApprovalCharges(tx, { job: item, submissionId: newId('submission'), files: 1, pendingReleased: 0, jobUpdate: summaryClauses('audio', 'approved', 5) });
    await tx.commit();
    const r = await rt.request('GET', `/v1/jobs/${job.id}`, { key: b.test });
    expect(r.json.status).toBe('in_progress');
    expect(r.json.submission_summary).toEqual({
      object: 'submission_summary',
      total_submissions: 4,
      approved: 1,
      rejected: 1,
      approval_rate: 0.5,
      avg_ai_star_rating: 3.5,
      by_type: [
        { type: 'image', total: 3, approved: 0, avg_ai_star_rating: 2 },
        { type: 'audio', total: 1, approved: 1, avg_ai_star_rating: 5 },
      ],
    });
  });

  test('D46/D57/D20: a cancelled job answers a long-poll at once, still with Preference-Applied; wait is clamped to the budget a default deployment has (25 s, as deployed)', async () => {
    const r = await rt.request('GET', `/v1/jobs/${ids[0]}`, { key: b.test, headers: { Prefer: 'wait=600' } });
    expect([r.status, r.json.status, r.headers['preference-applied']]).toEqual([200, 'cancelled', 'wait=25']);
  });
});

describe('cancel and rate', () => {
  let b: Buyer;
  beforeAll(async () => {
    b = await newBuyer(rt, { purchaseCents: 5000 });
  });

  test('cancel rule 2: the refund is price × (files_needed − files_approved) and other jobs keep their escrow', async () => {
    const other = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 4, price_per_file_cents: 15 }))).json;
    const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 10, price_per_file_cents: 25 }))).json;
    expect(await approve(job.id, newId('submission'), 3)).toBe(true);
    const before = await credits(b.live);
    const r = await post(rt, b.live, `/v1/jobs/${job.id}/cancel`);
    expect([r.status, r.json.status]).toEqual([200, 'cancelled']);
    const after = await credits(b.live);
    expect(after.available_cents - before.available_cents).toBe(25 * 7);
    expect(after.held_cents).toBe(before.held_cents - 25 * 7);
    expect(after.held_cents).toBeGreaterThanOrEqual(60); // the other job's escrow is untouched
    await indexesCaughtUp();
    const refunds = await rt.request('GET', '/v1/billing/transactions?type=refund', { key: b.live });
    expect(refunds.json.data.filter((t: { job_id: string }) => t.job_id === job.id).map((t: { amount_cents: number }) => t.amount_cents)).toEqual([175]);
    expect(other.status).toBe('open');
  });

  test('cancel rules 2, 4, 5: 20 concurrent cancels with distinct keys give one 200, one refund row, one job.cancelled', async () => {
    const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 6, price_per_file_cents: 10 }))).json;
    const rs = await Promise.all(Array.from({ length: 20 }, () => post(rt, b.live, `/v1/jobs/${job.id}/cancel`)));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(rs.filter((r) => r.status === 409 && r.json.error.type === 'conflict')).toHaveLength(19);
    await indexesCaughtUp();
    const refunds = await rt.request('GET', '/v1/billing/transactions?type=refund&limit=100', { key: b.live });
    expect(refunds.json.data.filter((t: { job_id: string }) => t.job_id === job.id)).toHaveLength(1);
    const events = await rt.request('GET', '/v1/webhook_events?type=job.cancelled&limit=100', { key: b.live });
    expect(events.json.data.filter((e: { data: { job_id: string } }) => e.data.job_id === job.id)).toHaveLength(1);
  });

  test('cancel rules 3, 4: the same key replays the first response; another key on a cancelled job is 409', async () => {
    const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 2 }))).json;
    const k = newKey();
    const first = await post(rt, b.live, `/v1/jobs/${job.id}/cancel`, undefined, k);
    const before = await credits(b.live);
    const again = await post(rt, b.live, `/v1/jobs/${job.id}/cancel`, undefined, k);
    expect([again.status, again.json, again.headers['idempotent-replayed']]).toEqual([200, first.json, 'true']);
    expect(await credits(b.live)).toEqual(before);
    const other = await post(rt, b.live, `/v1/jobs/${job.id}/cancel`);
    expect([other.status, other.json.error.type]).toEqual([409, 'conflict']);
  });

  test('cancel rule 5: exactly one job.cancelled event with job_id, files and refund_cents (D35)', async () => {
    const c = await newBuyer(rt, { verified: false });
    const job = (await post(rt, c.test, '/v1/jobs', jobBody())).json;
    await post(rt, c.test, `/v1/jobs/${job.id}/cancel`);
    await post(rt, c.test, `/v1/jobs/${job.id}/cancel`);
    await indexesCaughtUp();
    const ev = await rt.request('GET', '/v1/webhook_events?type=job.cancelled', { key: c.test });
    expect(ev.json.data).toHaveLength(1);
    expect(ev.json.data[0].data).toEqual({ job_id: job.id, files_approved: 0, files_needed: 10, refund_cents: 0 });
  });

  test('cancel rule 6 and D42: missing key 400, unknown job or other organization 404, completed 409', async () => {
    const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 1 }))).json;
    expect((await post(rt, b.live, `/v1/jobs/${job.id}/cancel`, undefined, null)).status).toBe(400);
    expect((await post(rt, b.live, `/v1/jobs/${newId('job')}/cancel`)).status).toBe(404);
    const other = await newBuyer(rt, { verified: false });
    expect((await post(rt, other.live, `/v1/jobs/${job.id}/cancel`)).status).toBe(404);
    expect(await approve(job.id, newId('submission'), 1)).toBe(true);
    const done = await post(rt, b.live, `/v1/jobs/${job.id}/cancel`);
    expect([done.status, done.json.error.type]).toEqual([409, 'conflict']);
  });

  test('D29: an approval beyond files_needed is refused with no charge', async () => {
    const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 2 }))).json;
    expect(await approve(job.id, newId('submission'), 3)).toBe(false);
    expect((await rt.request('GET', `/v1/jobs/${job.id}`, { key: b.live })).json.files_approved).toBe(0);
  });

  test('D22: only a completed job can be rated, once', async () => {
    const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 1 }))).json;
    expect((await post(rt, b.live, `/v1/jobs/${job.id}/rate`, { rating: 5 })).status).toBe(409);
    await approve(job.id, newId('submission'), 1);
    const r = await post(rt, b.live, `/v1/jobs/${job.id}/rate`, { rating: 4, feedback: 'Good' });
    expect([r.status, r.json.buyer_rating, r.json.buyer_feedback, r.json.status]).toEqual([200, 4, 'Good', 'completed']);
    expect((await post(rt, b.live, `/v1/jobs/${job.id}/rate`, { rating: 5 })).status).toBe(409);
    expect((await post(rt, b.live, `/v1/jobs/${job.id}/rate`, { rating: 6 })).status).toBe(400);
  });
});
