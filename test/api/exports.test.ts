/**
 * Dataset exports (D73) on the local stack: the create route queues the export, the `exports`
 * consumer streams it to the local S3, the export object and its events tell the outcome. Files
 * are seeded in the table (as the approval transaction writes them); the detections of the COCO
 * job come from the real local detector run on a real photo.
 */
import { readFileSync } from 'node:fs';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { idemKey, signupBuyer, type TestBuyer } from '../support/buyers';
import { Tx } from '../../shared/db/tx';
import { keys, gsi } from '../../shared/db/keys';
import { idTime, newId } from '../../shared/ids';
import { config } from '../../shared/config';
import { ObjectClient } from '../../shared/storage/object-client';
import { AwsServiceError } from '../../shared/aws/signed-call';
import { putObject, getObjectBytes } from '../../shared/storage/s3';
import { annotateImage } from '../../shared/media';
import { LocalAnnotationProvider } from '../../shared/media/annotation/local';
import { packageFile } from '../../shared/media/native';
import { CSV_COLUMNS } from '../../shared/exports/formats';
import { EXPORT_RETENTION_DAYS, getExportItem } from '../../shared/exports/model';
import { db, dynamo } from '../../shared/db/client';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';

let rt: TestRuntime;
let a: TestBuyer;
let b: TestBuyer;

beforeAll(async () => {
  // Test-key jobs here hold seeded Files only: the sandbox's simulated worker arrives after the run.
  rt = await startTestRuntime({ sandboxDelaySeconds: 900 });
  [a, b] = await Promise.all([signupBuyer(rt, 'Exporter'), signupBuyer(rt, 'Other org')]);
});
afterAll(() => rt?.stop());

const post = (key: string, path: string, body?: unknown) => rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });

async function newJob(key: string): Promise<string> {
  const r = await post(key, '/v1/jobs', {
    type: 'data_collection',
    description: 'Photos of storefronts in daylight',
    files_needed: 50,
    accepted_formats: ['image/jpeg', 'video/mp4'],
    price_per_file_cents: 40,
  });
  if (r.status !== 201) throw new Error(`job: ${r.status} ${r.text}`);
  return r.json.id;
}

interface SeedFile {
  stars?: number;
  filename?: string;
  contentType?: string;
  width?: number | null;
  height?: number | null;
  /** EXIF orientation as measured (fileItem keeps it, the File does not show it) */
  orientation?: number | null;
  annotations?: unknown;
}

/** A File item as the approval transaction writes it (shared/files fileItem), with its bytes in S3. */
async function seedFiles(jobId: string, orgId: string, env: 'live' | 'test', files: SeedFile[]): Promise<string[]> {
  const ids: string[] = [];
  const tx = new Tx();
  for (const f of files) {
    const id = newId('file');
    const subId = newId('submission');
    const createdAt = idTime(id).toISOString(); // the File approved as its id was minted
    const key = `uploads/${subId}/r1/${id}.jpg`;
    ids.push(id);
    tx.put('file', {
      ...keys.file(id),
      ...gsi.file(jobId, id, createdAt),
      entity: 'file',
      id,
      org_id: orgId,
      environment: env,
      job_id: jobId,
      submission_id: subId,
      worker_id: 'wkr_01ARZ3NDEKTSV4RRFFQ69G5FAV',
      object_key: key,
      original_filename: f.filename ?? `${id}.jpg`,
      content_type: f.contentType ?? 'image/jpeg',
      size_bytes: 1234,
      duration_seconds: f.contentType?.startsWith('video/') ? 12.5 : null,
      width: f.width === undefined ? 640 : f.width,
      height: f.height === undefined ? 480 : f.height,
      orientation: f.orientation ?? null,
      content_hash: `sha256:${'ab'.repeat(32)}`,
      captured_at: '2026-11-20T10:00:00.000Z',
      device_info: { device_model: 'Pixel 8', device_os: 'Android 15', app_version: null },
      worker_region: 'US-CA',
      ai_star_rating: f.stars ?? 4,
      annotations: f.annotations ?? null,
      keyframes: null,
      created_at: createdAt,
    });
  }
  // The approval transaction counts its Files on the job (the export checks its index against it).
  tx.update('job', keys.job(jobId), 'ADD files_approved :n', { values: { ':n': files.length } });
  await tx.commit();
  return ids;
}

async function exportAndWait(key: string, jobId: string, body: Record<string, unknown>) {
  const created = await post(key, `/v1/jobs/${jobId}/exports`, body);
  expect(created.status).toBe(202);
  return waitFor(
    async () => {
      const r = await rt.request('GET', `/v1/exports/${created.json.id}`, { key });
      return ['succeeded', 'failed'].includes(r.json.status) ? r.json : null;
    },
    { timeoutMs: 30_000 },
  );
}

const download = async (url: string) => {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return res.text();
};

/** RFC 4180 reader for the test (quoted cells, doubled quotes, CRLF). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (cell += '"'), i++;
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(cell), (cell = '');
    else if (c === '\r' && text[i + 1] === '\n') row.push(cell), rows.push(row), (row = []), (cell = ''), i++;
    else cell += c;
  }
  if (cell || row.length) row.push(cell), rows.push(row);
  return rows;
}

const withoutUrls = (f: Record<string, any>) => {
  const { download_url: _u, download_url_expires_at: _e, ...rest } = f;
  return rest;
};

describe('formats', () => {
  let jobId: string;
  beforeAll(async () => {
    jobId = await newJob(a.test);
    await seedFiles(jobId, a.orgId, 'test', [
      { stars: 5, filename: 'plain.jpg' },
      { stars: 4, filename: 'comma, "quote"\nnewline.jpg' },
      { stars: 3, filename: '=HYPERLINK("http://x")', width: null, height: null },
      { stars: 2, filename: 'below-min-score.jpg' },
      { stars: 4, filename: 'clip.mp4', contentType: 'video/mp4', width: 1920, height: 1080 },
    ]);
  });

  test('JSONL: one line per File, each the File object of the files list (min_score 3 by default)', async () => {
    const exp = await exportAndWait(a.test, jobId, { format: 'jsonl' });
    expect(exp).toMatchObject({ object: 'export', job_id: jobId, format: 'jsonl', status: 'succeeded', file_count: 4, error: null });
    const text = await download(exp.download_url);
    expect(exp.size_bytes).toBe(Buffer.byteLength(text));
    const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l));
    const listed = (await rt.request('GET', `/v1/jobs/${jobId}/files?limit=100`, { key: a.test })).json.data;
    expect(lines.map(withoutUrls).sort((x, y) => x.id.localeCompare(y.id))).toEqual(listed.map(withoutUrls).sort((x: any, y: any) => x.id.localeCompare(y.id)));
    for (const l of lines) expect(l.download_url).toMatch(/^http/);
  });

  test('JSONL with min_score 5 keeps only the five-star Files', async () => {
    const exp = await exportAndWait(a.test, jobId, { format: 'jsonl', min_score: 5 });
    expect(exp.file_count).toBe(1);
    const lines = (await download(exp.download_url)).trimEnd().split('\n');
    expect(JSON.parse(lines[0]!).original_filename).toBe('plain.jpg');
  });

  test('CSV: a header and one row per File of its scalar fields, quoted, formulas defused', async () => {
    const exp = await exportAndWait(a.test, jobId, { format: 'csv' });
    expect(exp.status).toBe('succeeded');
    const rows = parseCsv(await download(exp.download_url));
    expect(rows[0]).toEqual(CSV_COLUMNS.map((c) => c.name));
    expect(rows).toHaveLength(1 + 4);
    const col = (name: string) => rows[0]!.indexOf(name);
    const names = rows.slice(1).map((r) => r[col('original_filename')]);
    expect(names).toContain('comma, "quote"\nnewline.jpg');
    expect(names).toContain(`'=HYPERLINK("http://x")`);
    const unsized = rows.find((r) => r[col('original_filename')]!.includes('HYPERLINK'))!;
    expect(unsized[col('width')]).toBe(''); // null is an empty cell
    for (const r of rows.slice(1)) {
      expect(r).toHaveLength(CSV_COLUMNS.length);
      expect(r[col('device_info.device_model')]).toBe('Pixel 8');
      expect(r[col('ai_star_rating')]).toMatch(/^[3-5]$/);
    }
  });

  test('a File the job index does not list yet (DynamoDB\'s index lags a moment) is in the export all the same: the build is made again', async () => {
    // A buyer of its own: the second build takes a second of polling out of a buyer's request budget.
    const c = await signupBuyer(rt, 'Lagging index');
    const jobId = await newJob(c.test);
    await seedFiles(jobId, c.orgId, 'test', [{ stars: 5, filename: 'one.jpg' }, { stars: 4, filename: 'two.jpg' }, { stars: 4, filename: 'three.jpg' }, { stars: 3, filename: 'four.jpg' }]);
    // The first reading of this job's index misses one File, as an eventually consistent index
    // may just after an approval; DynamoDB Local's is always current, so its answer is cut here.
    let cut = false;
    const name = 'laggingJobIndex';
    dynamo().middlewareStack.add(
      (next, context) => async (args) => {
        const out = await next(args);
        const input = args.input as { IndexName?: string; ExpressionAttributeValues?: Record<string, unknown> };
        const pk = JSON.stringify(input.ExpressionAttributeValues ?? {});
        if (!cut && (context as { commandName?: string }).commandName === 'QueryCommand' && input.IndexName === 'GSI1' && pk.includes(`JOB#${jobId}#FILES`)) {
          const o = out.output as { Items?: unknown[]; Count?: number; ScannedCount?: number };
          if (o.Items?.length) {
            cut = true;
            o.Items = o.Items.slice(0, -1);
            o.Count = (o.Count ?? 1) - 1;
            o.ScannedCount = (o.ScannedCount ?? 1) - 1;
          }
        }
        return out;
      },
      { step: 'initialize', name },
    );
    try {
      const exp = await exportAndWait(c.test, jobId, { format: 'jsonl' });
      expect(cut).toBe(true);
      expect(exp).toMatchObject({ status: 'succeeded', file_count: 4 });
      expect((await download(exp.download_url)).trimEnd().split('\n')).toHaveLength(4);
    } finally {
      dynamo().middlewareStack.remove(name);
    }
  });

  test('a job without Files exports an empty, valid file', async () => {
    const empty = await newJob(a.test);
    const exp = await exportAndWait(a.test, empty, { format: 'coco' });
    expect(exp).toMatchObject({ status: 'succeeded', file_count: 0 });
    expect(JSON.parse(await download(exp.download_url))).toMatchObject({ images: [], annotations: [], categories: [] });
  });
});

describe('COCO from object detections', () => {
  let jobId: string;
  let annotations: any;
  beforeAll(async () => {
    // Real detections: the local detector on the photo shipped with @vladmandic/human.
    annotations = await annotateImage(readFileSync(packageFile('@vladmandic/human', 'assets/samples.jpg')), undefined, { provider: new LocalAnnotationProvider() });
    jobId = await newJob(a.test);
    await seedFiles(jobId, a.orgId, 'test', [
      { stars: 5, filename: 'people.jpg', width: annotations.width, height: annotations.height, annotations },
      { stars: 4, filename: 'no-objects.jpg', annotations: { ...annotations, objects: [] } },
      { stars: 4, filename: 'not-analysed.jpg', annotations: { ...annotations, objects: null, unavailable: { objects: 'the detector did not load' } } },
      { stars: 4, filename: 'clip.mp4', contentType: 'video/mp4' },
    ]);
  }, 120_000);

  test('images, categories and annotations with bbox [x, y, width, height] in pixels', async () => {
    expect(annotations.objects.length).toBeGreaterThan(0);
    const exp = await exportAndWait(a.test, jobId, { format: 'coco' });
    expect(exp).toMatchObject({ status: 'succeeded', file_count: 3 }); // image Files only
    const coco = JSON.parse(await download(exp.download_url));
    expect(coco.images.map((i: any) => i.file_name).sort()).toEqual(['no-objects.jpg', 'not-analysed.jpg', 'people.jpg']);
    // An image no detector ran on says so: its missing annotations are not "nothing found".
    expect(Object.fromEntries(coco.images.map((i: any) => [i.file_name, i.objects_detected]))).toEqual({ 'people.jpg': true, 'no-objects.jpg': true, 'not-analysed.jpg': false });
    const people = coco.images.find((i: any) => i.file_name === 'people.jpg');
    expect(people).toMatchObject({ width: annotations.width, height: annotations.height });
    expect(coco.annotations).toHaveLength(annotations.objects.length);
    const catName = new Map(coco.categories.map((c: any) => [c.id, c.name]));
    expect([...catName.values()]).toContain('person');
    for (const [i, ann] of coco.annotations.entries()) {
      const obj = annotations.objects[i];
      expect(ann.image_id).toBe(people.id);
      expect(catName.get(ann.category_id)).toBe(obj.label);
      expect(ann.bbox).toEqual(obj.bbox);
      const [x, y, w, h] = ann.bbox;
      expect(x).toBeGreaterThanOrEqual(0);
      expect(y).toBeGreaterThanOrEqual(0);
      expect(w).toBeGreaterThan(0);
      expect(h).toBeGreaterThan(0);
      expect(x + w).toBeLessThanOrEqual(people.width + 0.01);
      expect(y + h).toBeLessThanOrEqual(people.height + 0.01);
      expect(ann.area).toBeCloseTo(w * h, 1);
      expect(ann.iscrowd).toBe(0);
    }
  });

  test('a photo stored sideways with EXIF orientation 6: its COCO size is upright, as its boxes are', async () => {
    const sharp = (await import('sharp')).default;
    const upright = readFileSync(packageFile('@vladmandic/human', 'assets/samples.jpg'));
    // Stored turned a quarter to the left; orientation 6 tells viewers to turn it back.
    const sideways = await sharp(upright).rotate(-90).withMetadata({ orientation: 6 }).jpeg().toBuffer();
    const meta = await sharp(sideways).metadata();
    const turned = await annotateImage(sideways, undefined, { provider: new LocalAnnotationProvider() });
    expect(turned.objects!.length).toBeGreaterThan(0);
    // Another organization's key, so the jobs these tests add stay within the first one's rate limit.
    const job = await newJob(b.test);
    await seedFiles(job, b.orgId, 'test', [{ stars: 5, filename: 'sideways.jpg', width: meta.width!, height: meta.height!, orientation: meta.orientation!, annotations: turned }]);
    const coco = JSON.parse(await download((await exportAndWait(b.test, job, { format: 'coco' })).download_url));
    const [image] = coco.images;
    expect([image.width, image.height]).toEqual([meta.height, meta.width]);
    for (const ann of coco.annotations) {
      const [x, y, w, h] = ann.bbox;
      expect(x + w).toBeLessThanOrEqual(image.width + 0.01);
      expect(y + h).toBeLessThanOrEqual(image.height + 0.01);
    }
  });
});

describe('COCO reads the files twice (images, then their annotations)', () => {
  test('a File the job index lists only from the second reading on is not left out of images: the build is made again', async () => {
    const job = await newJob(b.test);
    await seedFiles(job, b.orgId, 'test', [{ stars: 5, filename: 'first.jpg' }]);
    const [lateId] = await seedFiles(job, b.orgId, 'test', [{ stars: 5, filename: 'late.jpg' }]);
    // The index lags: the late File (already counted on the job) is not listed yet ...
    await db().send(new UpdateCommand({ TableName: config().tableName, Key: keys.file(lateId!), UpdateExpression: 'REMOVE GSI1PK, GSI1SK' }));
    // ... until the second reading of the job's files begins.
    const pk = gsi.file(job, lateId!, new Date().toISOString()).GSI1PK as string;
    let readings = 0;
    const name = 'indexCatchesUpBetweenReadings';
    db().middlewareStack.add(
      (next, context) => async (args) => {
        if (String(context.commandName) === 'QueryCommand' && JSON.stringify(args.input).includes(pk) && ++readings === 2) {
          await db().send(new UpdateCommand({ TableName: config().tableName, Key: keys.file(lateId!), UpdateExpression: 'SET GSI1PK = :pk, GSI1SK = :sk', ExpressionAttributeValues: { ':pk': pk, ':sk': lateId } }));
        }
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      const exp = await exportAndWait(b.test, job, { format: 'coco' });
      expect(exp).toMatchObject({ status: 'succeeded', file_count: 2 });
      const coco = JSON.parse(await download(exp.download_url));
      expect(coco.images.map((i: { file_name: string }) => i.file_name).sort()).toEqual(['first.jpg', 'late.jpg']);
    } finally {
      db().middlewareStack.remove(name);
    }
    expect(readings).toBeGreaterThan(2); // built again
  });
});

describe('JSONL lines stay whole', () => {
  test('a line separator in a worker\'s file name is escaped: one record per line for every line reader', async () => {
    const job = await newJob(b.test);
    await seedFiles(job, b.orgId, 'test', [{ stars: 4, filename: 'shop\u2028front\u2029\u0085.jpg' }]);
    const text = await download((await exportAndWait(b.test, job, { format: 'jsonl' })).download_url);
    expect(/[\u2028\u2029\u0085]/.test(text)).toBe(false);
    const lines = text.trimEnd().split(/\r\n|[\n\r\u2028\u2029\u0085]/);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!).original_filename).toBe('shop\u2028front\u2029\u0085.jpg');
  });
});

describe('reading exports', () => {
  let jobId: string;
  beforeAll(async () => {
    jobId = await newJob(a.test);
    await seedFiles(jobId, a.orgId, 'test', [{ stars: 4 }]);
  });

  test('202 with the export object exactly as documented, URL fields null until succeeded', async () => {
    const r = await post(a.test, `/v1/jobs/${jobId}/exports`, { format: 'csv' });
    expect(r.status).toBe(202);
    expect(Object.keys(r.json).sort()).toEqual(
      ['object', 'id', 'job_id', 'format', 'status', 'file_count', 'size_bytes', 'download_url', 'download_url_expires_at', 'error', 'created_at', 'completed_at'].sort(),
    );
    expect(r.json).toMatchObject({ object: 'export', job_id: jobId, format: 'csv', status: 'pending', download_url: null, download_url_expires_at: null, error: null, completed_at: null });
    expect(r.json.id).toMatch(/^exp_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  test('D60: no link outlives the file: near the end of its retention the link expires with it, and after it the URL fields are null', async () => {
    // Its own organization: the requests here do not count against the other tests' rate limit.
    const c = await signupBuyer(rt, 'Retention');
    const ownJob = await newJob(c.test);
    await seedFiles(ownJob, c.orgId, 'test', [{ stars: 4 }]);
    const exp = await exportAndWait(c.test, ownJob, { format: 'csv' });
    expect(exp.status).toBe('succeeded');
    const backdate = async (ms: number) => {
      const createdAt = new Date(Date.now() - ms).toISOString();
      await db().send(new UpdateCommand({ TableName: config().tableName, Key: keys.export(exp.id), UpdateExpression: 'SET created_at = :c', ExpressionAttributeValues: { ':c': createdAt } }));
      return createdAt;
    };
    const fresh = (await rt.request('GET', `/v1/exports/${exp.id}`, { key: c.test })).json;
    expect(Date.parse(fresh.download_url_expires_at) - Date.now()).toBeGreaterThan(6.9 * 86_400_000); // the usual 7 days
    const createdAt = await backdate((EXPORT_RETENTION_DAYS - 1) * 86_400_000);
    const late = (await rt.request('GET', `/v1/exports/${exp.id}`, { key: c.test })).json;
    expect(late.download_url_expires_at).toBe(new Date(Math.floor((Date.parse(createdAt) + EXPORT_RETENTION_DAYS * 86_400_000) / 1000) * 1000).toISOString());
    expect(new URL(late.download_url).searchParams.get('Expires')).toBe(String(Date.parse(late.download_url_expires_at) / 1000));
    await backdate((EXPORT_RETENTION_DAYS + 1) * 86_400_000);
    const gone = (await rt.request('GET', `/v1/exports/${exp.id}`, { key: c.test })).json;
    expect(gone).toMatchObject({ status: 'succeeded', download_url: null, download_url_expires_at: null });
  });

  test('a long-poll answers when the status changes, and says what wait it applied', async () => {
    const created = await post(a.test, `/v1/jobs/${jobId}/exports`, { format: 'jsonl' });
    let status = created.json.status as string;
    // Each answer comes when the status moved from where it was (pending → running → succeeded),
    // long before the 60 seconds asked for; a wait that timed out would return the same status.
    while (!['succeeded', 'failed'].includes(status)) {
      const r = await rt.request('GET', `/v1/exports/${created.json.id}`, { key: a.test, headers: { Prefer: 'wait=60' } });
      expect(r.status).toBe(200);
      expect(r.headers['preference-applied']).toBe('wait=25'); // clamped to the default deployment's budget
      expect(r.json.status).not.toBe(status);
      status = r.json.status;
    }
    expect(status).toBe('succeeded');
    const done = await rt.request('GET', `/v1/exports/${created.json.id}`, { key: a.test, headers: { Prefer: 'wait=60' } });
    expect(done.json.status).toBe('succeeded'); // a finished export answers at once
    expect(done.json.download_url_expires_at).toEqual(expect.any(String));
  });

  test("the job's exports list is newest first, paginated with tamper-evident cursors", async () => {
    const job = await newJob(a.test);
    const ids: string[] = [];
    for (const format of ['jsonl', 'csv', 'coco']) ids.push((await post(a.test, `/v1/jobs/${job}/exports`, { format })).json.id);
    // The list reads an index, which leaves out an export while its build updates it: the subject
    // here is the order and paging, so the builds end and the index takes in their last writes first.
    // (Read from the table, not the API: the suite's requests stay within the key's rate limit.)
    await waitFor(async () => (await Promise.all(ids.map((id) => getExportItem(id, true)))).every((e) => ['succeeded', 'failed'].includes(String(e?.status))), { timeoutMs: 60_000 });
    await indexesCaughtUp();
    const first = await rt.request('GET', `/v1/jobs/${job}/exports?limit=2`, { key: a.test });
    expect(first.json).toMatchObject({ object: 'list', has_more: true });
    expect(first.json.data.map((e: any) => e.id)).toEqual([ids[2], ids[1]]);
    const second = await rt.request('GET', `/v1/jobs/${job}/exports?limit=2&cursor=${encodeURIComponent(first.json.next_cursor)}`, { key: a.test });
    expect(second.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.json.data.map((e: any) => e.id)).toEqual([ids[0]]);
    const tampered = first.json.next_cursor.slice(0, -2) + (first.json.next_cursor.endsWith('A') ? 'BB' : 'AA');
    const bad = await rt.request('GET', `/v1/jobs/${job}/exports?cursor=${encodeURIComponent(tampered)}`, { key: a.test });
    expect(bad.status).toBe(400);
    expect(bad.json.error.type).toBe('validation_error');
  });

  test("another organization's or the other environment's key gets 404 for the export and the job's list", async () => {
    const exp = (await post(a.test, `/v1/jobs/${jobId}/exports`, { format: 'csv' })).json;
    for (const key of [b.test, b.live, a.live]) {
      const get = await rt.request('GET', `/v1/exports/${exp.id}`, { key });
      expect(get.status).toBe(404);
      expect(get.json.error.type).toBe('not_found');
      expect((await rt.request('GET', `/v1/jobs/${jobId}/exports`, { key })).status).toBe(404);
      expect((await post(key, `/v1/jobs/${jobId}/exports`, { format: 'csv' })).status).toBe(404);
    }
    expect((await rt.request('GET', '/v1/exports/exp_01ARZ3NDEKTSV4RRFFQ69G5FAV', { key: a.test })).status).toBe(404);
    expect((await rt.request('GET', '/v1/exports/%E0%A4%A', { key: a.test })).status).toBe(404);
  });

  test('an unknown format or min_score out of 1..5 is a validation_error; the Idempotency-Key is required', async () => {
    const xml = await post(a.test, `/v1/jobs/${jobId}/exports`, { format: 'xml' });
    expect(xml.status).toBe(400);
    expect(xml.json.error.details[0].field).toBe('format');
    const score = await post(a.test, `/v1/jobs/${jobId}/exports`, { format: 'csv', min_score: 9007199254740993 });
    expect(score.status).toBe(400);
    expect(score.json.error.details[0].field).toBe('min_score');
    const noKey = await rt.request('POST', `/v1/jobs/${jobId}/exports`, { key: a.test, body: { format: 'csv' } });
    expect(noKey.status).toBe(400);
    expect(noKey.json.error.details[0].field).toBe('Idempotency-Key');
  });
});

describe('events', () => {
  const eventsOf = async (key: string, type: string) => (await rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key })).json.data as any[];
  /** The event of `type` for the export, once the event list (an index its delivery bookkeeping updates) shows it. */
  const eventFor = (key: string, type: string, exportId: string) =>
    waitFor(async () => (await eventsOf(key, type)).find((e) => e.data.export_id === exportId), { intervalMs: 1000 }); // within the key's rate limit (D13)

  test('export.completed carries export_id, job_id, format and file_count', async () => {
    const jobId = await newJob(a.test);
    await seedFiles(jobId, a.orgId, 'test', [{}, {}]);
    const exp = await exportAndWait(a.test, jobId, { format: 'jsonl' });
    const evt = await eventFor(a.test, 'export.completed', exp.id);
    expect(evt).toMatchObject({ type: 'export.completed', environment: 'test', data: { export_id: exp.id, job_id: jobId, format: 'jsonl', file_count: 2 } });
  });

  test('a failure while writing marks the export failed and emits export.failed', async () => {
    const jobId = await newJob(a.test);
    await seedFiles(jobId, a.orgId, 'test', [{}]);
    // The bucket refuses every write under exports/ (as S3 would with a broken bucket policy).
    const denied = () => Promise.reject(new AwsServiceError('AccessDenied', 'Access Denied', { httpStatusCode: 403 }));
    const refuse = <M extends 'putObject' | 'createMultipartUpload' | 'uploadPart'>(method: M) => {
      const original = ObjectClient.prototype[method] as (...args: unknown[]) => Promise<unknown>;
      return jest.spyOn(ObjectClient.prototype, method).mockImplementation(function (this: ObjectClient, ...args: unknown[]) {
        return String(args[0]).startsWith('exports/') ? denied() : original.apply(this, args);
      } as never);
    };
    const spies = [refuse('putObject'), refuse('createMultipartUpload'), refuse('uploadPart')];
    try {
      const exp = await exportAndWait(a.test, jobId, { format: 'csv' });
      expect(exp).toMatchObject({ status: 'failed', download_url: null, file_count: null, error: { code: 'export_failed' } });
      expect(exp.error.message).toEqual(expect.any(String));
      expect(exp.completed_at).toEqual(expect.any(String));
      const evt = await eventFor(a.test, 'export.failed', exp.id);
      expect(evt).toMatchObject({ data: { export_id: exp.id, job_id: jobId, format: 'csv', file_count: null } });
      expect(spies[0]!.mock.calls.some(([k]) => String(k).startsWith('exports/'))).toBe(true);
    } finally {
      for (const s of spies) s.mockRestore();
    }
    // The bucket itself still works for other writes (the failure was the injected one).
    await putObject('probe/ok.txt', Buffer.from('ok'), 'text/plain');
    expect((await getObjectBytes('probe/ok.txt')).toString()).toBe('ok');
  });
});
