/**
 * Capture-point checks (D70). A job with latitude, longitude and radius_km accepts only captures
 * whose GPS point lies within radius_km of its point (great-circle distance on a sphere of the
 * Earth's mean radius, 6371.0088 km). The File's `location_verified` is true for a GPS point inside
 * the radius, false when the file carries no GPS (it is not rejected for that), and null when the
 * job has no point and radius. A position only the worker's app declared (the file has none) can
 * place the capture outside the radius, but inside it verifies nothing: false.
 */
const EARTH_RADIUS_KM = 6371.0088;
const rad = (deg: number) => (deg * Math.PI) / 180;

/** Great-circle distance in kilometres (haversine). */
export function distanceKm(a: { latitude: number; longitude: number }, b: { latitude: number; longitude: number }): number {
  const dLat = rad(b.latitude - a.latitude);
  const dLon = rad(b.longitude - a.longitude);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.latitude)) * Math.cos(rad(b.latitude)) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

export interface JobPoint {
  latitude: number;
  longitude: number;
  radius_km: number;
}

/** The job's capture area, when it has a point and a radius. */
export function jobPoint(location: unknown): JobPoint | null {
  const l = location as Partial<Record<keyof JobPoint, unknown>> | null | undefined;
  if (!l) return null;
  const { latitude, longitude, radius_km } = l;
  if (typeof latitude !== 'number' || typeof longitude !== 'number' || typeof radius_km !== 'number') return null;
  return { latitude, longitude, radius_km };
}

export type LocationCheck =
  | { verified: null }
  | { verified: false }
  | { verified: true; distance_km: number }
  | { mismatch: true; distance_km: number; radius_km: number };

export function checkLocation(point: JobPoint | null, gps: { latitude?: number | null; longitude?: number | null; location_declared?: boolean }): LocationCheck {
  if (!point) return { verified: null };
  if (typeof gps.latitude !== 'number' || typeof gps.longitude !== 'number') return { verified: false };
  const d = distanceKm(point, { latitude: gps.latitude, longitude: gps.longitude });
  if (d > point.radius_km) return { mismatch: true, distance_km: d, radius_km: point.radius_km };
  return gps.location_declared ? { verified: false } : { verified: true, distance_km: d };
}
