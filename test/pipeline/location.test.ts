/**
 * D70 capture-point checks: a job with latitude, longitude and radius_km rejects captures whose GPS
 * lies farther than radius_km (great-circle distance) before scoring, with 1 star and no charge;
 * Files carry `location_verified` (true inside, false without GPS, null when the job has no point).
 */
import { distanceKm, checkLocation, jobPoint } from '../../shared/trust/location';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { accept, createJob, detailedJpeg, liveBuyer, multipart, signupWorker, uploadFile, waitForVerdict } from './support';

// End to end through the real pipeline (models load on first use) on a shared machine: generous time.
jest.setTimeout(240_000);

const EIFFEL = { latitude: 48.8584, longitude: 2.2945 };
const LOUVRE = { latitude: 48.8606, longitude: 2.3376 };
const LONDON = { latitude: 51.5074, longitude: -0.1278 };

describe('D70: great-circle distance', () => {
  it('Paris to London is about 340 km; the Eiffel Tower to the Louvre about 3.2 km', () => {
    expect(distanceKm(EIFFEL, LONDON)).toBeGreaterThan(335);
    expect(distanceKm(EIFFEL, LONDON)).toBeLessThan(345);
    expect(distanceKm(EIFFEL, LOUVRE)).toBeCloseTo(3.16, 1);
  });

  it('across the antimeridian the short way round counts', () => {
    expect(distanceKm({ latitude: 0, longitude: 179.9 }, { latitude: 0, longitude: -179.9 })).toBeLessThan(25);
  });

  it('inside the radius: verified; outside: a mismatch; no GPS: not verified; no job point: null', () => {
    const point = jobPoint({ ...EIFFEL, radius_km: 5, city: 'Paris' })!;
    expect(checkLocation(point, LOUVRE)).toMatchObject({ verified: true });
    expect(checkLocation(point, LONDON)).toMatchObject({ mismatch: true, radius_km: 5 });
    expect(checkLocation(point, { latitude: null, longitude: null })).toEqual({ verified: false });
    expect(checkLocation(jobPoint({ city: 'Paris', state: null, latitude: null, longitude: null, radius_km: null }), LONDON)).toEqual({ verified: null });
    expect(checkLocation(jobPoint(null), LONDON)).toEqual({ verified: null });
  });
});

/** EXIF GPS for sharp's withExif (degrees, minutes, hundredths of seconds). */
function gpsExif(p: { latitude: number; longitude: number }) {
  const dms = (v: number) => {
    const a = Math.abs(v);
    const d = Math.floor(a);
    const m = Math.floor((a - d) * 60);
    const s = Math.round(((a - d) * 60 - m) * 60 * 100);
    return `${d}/1 ${m}/1 ${s}/100`;
  };
  return {
    IFD3: {
      GPSLatitudeRef: p.latitude >= 0 ? 'N' : 'S',
      GPSLatitude: dms(p.latitude),
      GPSLongitudeRef: p.longitude >= 0 ? 'E' : 'W',
      GPSLongitude: dms(p.longitude),
    },
  };
}

describe('D70 end to end: the job\'s capture area', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const verdictOf = (token: string, subId: string) => waitForVerdict(rt, token, subId, 60_000);
  const submit = async (jobId: string, bytes: Buffer) => {
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, jobId);
    expect(a.status).toBe(201);
    expect((await uploadFile(rt, w.token, a.json.id, bytes)).status).toBe(202);
    return verdictOf(w.token, a.json.id);
  };
  const fileOf = async (key: string, jobId: string, subId: string) =>
    ((await rt.request('GET', `/v1/jobs/${jobId}/files`, { key })).json.data as { submission_id: string; location_verified: boolean | null }[]).find(
      (f) => f.submission_id === subId,
    );

  it('a capture inside the radius is approved with location_verified true; outside is rejected with 1 star and no charge; without GPS it is approved with location_verified false', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 3, location: { ...EIFFEL, radius_km: 5 } });

    const inside = await submit(job.id, await detailedJpeg(101, 640, 480, gpsExif(LOUVRE)));
    expect(inside.status).toBe('approved');
    expect((await fileOf(buyer.live, job.id, inside.id))?.location_verified).toBe(true);

    const outside = await submit(job.id, await detailedJpeg(102, 640, 480, gpsExif(LONDON)));
    expect(outside).toMatchObject({ status: 'rejected', ai_star_rating: 1 });
    expect(outside.ai_reasoning).toMatch(/capture point is 3\d\d\.\d km from the job's location, outside its 5 km radius/);
    const deductions = (await rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key: buyer.live })).json.data as { submission_id: string }[];
    expect(deductions.filter((d) => d.submission_id === outside.id)).toEqual([]);

    const noGps = await submit(job.id, await detailedJpeg(103));
    expect(noGps.status).toBe('approved');
    expect((await fileOf(buyer.live, job.id, noGps.id))?.location_verified).toBe(false);
  });

  it('a position only the worker app declared verifies nothing: inside the radius location_verified is false; outside it is still rejected', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 2, location: { ...EIFFEL, radius_km: 5 } });
    const declared = async (seed: number, at: { latitude: number; longitude: number }) => {
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, job.id);
      const m = multipart([
        { filename: 'photo.jpg', contentType: 'image/jpeg', data: await detailedJpeg(seed) },
        { field: 'latitude', data: String(at.latitude) },
        { field: 'longitude', data: String(at.longitude) },
      ]);
      expect((await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body: m.body, headers: { 'Content-Type': m.contentType } })).status).toBe(202);
      return verdictOf(w.token, a.json.id);
    };
    const inside = await declared(105, LOUVRE);
    expect(inside.status).toBe('approved');
    expect((await fileOf(buyer.live, job.id, inside.id))?.location_verified).toBe(false);
    expect(await declared(106, LONDON)).toMatchObject({ status: 'rejected', ai_star_rating: 1 });
  });

  it('a job without a point and radius does not check: location_verified is null', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, location: { city: 'Paris', state: 'IDF' } });
    const sub = await submit(job.id, await detailedJpeg(104, 640, 480, gpsExif(LONDON)));
    expect(sub.status).toBe('approved');
    expect((await fileOf(buyer.live, job.id, sub.id))?.location_verified).toBeNull();
  });
});
