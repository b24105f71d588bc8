/**
 * Create-job rules: formats (D15), cross-field rules (422, D4, D52) and the price floor (D14). The
 * body schema with every bound of the spec's table is in ./create-body (only the create route
 * loads zod; the job routes without a body do not).
 */
import { errors, ApiError } from '../errors';
import { categoryOf, type Category } from './model';
import type { CreateJobInput } from './create-body';

/** D15: accepted MIME types; audio/x-m4a is accepted and stored as audio/mp4. */
export const FORMATS = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'audio/mpeg', 'audio/wav', 'audio/mp4', 'video/mp4', 'video/quicktime'] as const;
const ALIASES: Record<string, string> = { 'audio/x-m4a': 'audio/mp4' };
export const canonicalFormat = (s: string): string | null => {
  const t = ALIASES[s.trim().toLowerCase()] ?? s.trim().toLowerCase();
  return (FORMATS as readonly string[]).includes(t) ? t : null;
};

export const PRICE_MIN_CENTS = 10;
export const PRICE_MAX_CENTS = 50_000;
export const PLATFORM_FEE_PCT = 20;


/** The stored, normalised creation fields (D15 formats, D17 defaults). */
export function normalise(b: CreateJobInput) {
  const formats = [...new Set(b.accepted_formats.map((f) => canonicalFormat(f)!))];
  const loc = b.location ?? null;
  return {
    type: b.type,
    title: b.title ?? null,
    description: b.description,
    files_needed: b.files_needed,
    files_per_submission: b.files_per_submission ?? 1,
    scoring_criteria: b.scoring_criteria ?? null,
    min_star_rating: b.min_star_rating ?? 3,
    min_duration_seconds: b.min_duration_seconds ?? null,
    max_duration_seconds: b.max_duration_seconds ?? null,
    min_width: b.min_width ?? null,
    min_height: b.min_height ?? null,
    worker_guidelines: b.worker_guidelines ?? null,
    accepted_formats: formats,
    price_per_file_cents: b.price_per_file_cents,
    location: loc
      ? {
          city: loc.city ?? null,
          state: loc.state ?? null,
          latitude: loc.latitude ?? null,
          longitude: loc.longitude ?? null,
          radius_km: loc.radius_km ?? null,
          description: loc.description ?? null,
        }
      : null,
    metadata: b.metadata ?? {},
  };
}
export type JobFields = ReturnType<typeof normalise>;

/** D4/D52: fields valid one by one but not together → 422 validation_error. */
export function checkCombinations(f: JobFields): void {
  const bad = (field: string, message: string) => errors.unprocessable(message, [{ field, message, code: 'invalid_combination' }]);
  if (f.min_duration_seconds !== null && f.max_duration_seconds !== null && f.min_duration_seconds > f.max_duration_seconds) {
    throw bad('min_duration_seconds', 'min_duration_seconds must not exceed max_duration_seconds.');
  }
  if (f.files_per_submission > f.files_needed) throw bad('files_per_submission', 'files_per_submission must not exceed files_needed.');
  const l = f.location;
  if (l) {
    if ((l.latitude === null) !== (l.longitude === null)) throw bad('location', 'latitude and longitude go together.');
    if (l.radius_km !== null && l.latitude === null) throw bad('location.radius_km', 'radius_km needs latitude and longitude.');
    if (l.city === null && l.state === null && l.latitude === null) throw bad('location', 'Give {city, state} and/or {latitude, longitude, radius_km}.');
  }
}

/** D14: the floor is the highest among the accepted formats' categories. */
export function priceFloor(formats: string[], minDuration: number | null, maxDuration: number | null): number {
  const d = maxDuration ?? minDuration ?? 30;
  const floorOf: Record<Category, number> = { image: 10, audio: 10 + Math.ceil(d / 2), video: 10 + d };
  return Math.max(PRICE_MIN_CENTS, ...formats.map((f) => floorOf[categoryOf(f)]));
}

export function checkPrice(f: JobFields): void {
  const floor = priceFloor(f.accepted_formats, f.min_duration_seconds, f.max_duration_seconds);
  const p = f.price_per_file_cents;
  if (p >= floor && p <= PRICE_MAX_CENTS) return;
  const message = p > PRICE_MAX_CENTS ? `price_per_file_cents must be at most ${PRICE_MAX_CENTS}.` : `price_per_file_cents must be at least ${floor} for these formats and durations.`;
  // D41: extras inside `error`; details name the field.
  throw new ApiError(400, 'pricing_violation', message, [{ field: 'price_per_file_cents', message, code: p > PRICE_MAX_CENTS ? 'above_maximum' : 'below_floor' }], {
    floor_cents: floor,
    max_cents: PRICE_MAX_CENTS,
    provided_cents: p,
  });
}

/** D16: the money fields of a job. */
export function money(price: number, filesNeeded: number) {
  return {
    total_cost_cents: price * filesNeeded,
    platform_fee_pct: PLATFORM_FEE_PCT,
    worker_payout_per_file_cents: Math.floor((price * (100 - PLATFORM_FEE_PCT)) / 100),
  };
}
