/**
 * Formats, price floor and the money of a job (D14, D15, D16). Pure functions: the create-job
 * handler's schema and the domain both use them, and they are unit-tested on their own.
 */
import { ApiError } from '../errors';

export type Category = 'image' | 'audio' | 'video';

/** D15: the accepted MIME types and their content category. */
export const FORMAT_CATEGORY: Readonly<Record<string, Category>> = {
  'image/jpeg': 'image',
  'image/png': 'image',
  'image/webp': 'image',
  'image/gif': 'image',
  'audio/mpeg': 'audio',
  'audio/wav': 'audio',
  'audio/mp4': 'audio',
  'video/mp4': 'video',
  'video/quicktime': 'video',
};

/** D15: accepted spellings that are stored under another name. */
const FORMAT_ALIASES: Readonly<Record<string, string>> = { 'audio/x-m4a': 'audio/mp4' };

/** The stored MIME type of an accepted-formats entry, or null when it is not one we accept. */
export function canonicalFormat(entry: string): string | null {
  const t = entry.trim().toLowerCase();
  const c = FORMAT_ALIASES[t] ?? t;
  return c in FORMAT_CATEGORY ? c : null;
}

export function categoryOf(mime: string): Category | null {
  const c = canonicalFormat(mime);
  return c ? FORMAT_CATEGORY[c]! : null;
}

export const PRICE_MIN_CENTS = 10;
export const PRICE_MAX_CENTS = 50_000;
/** D16 */
export const PLATFORM_FEE_PCT = 20;
/** D14: the duration used for the floor when the job sets no bound. */
const DEFAULT_FLOOR_DURATION_SECONDS = 30;

/**
 * D14: the highest floor among the accepted formats' categories. D = max_duration_seconds, else
 * min_duration_seconds, else 30.
 */
export function priceFloorCents(
  formats: readonly string[],
  durations: { min_duration_seconds?: number | null; max_duration_seconds?: number | null },
): number {
  const d = durations.max_duration_seconds ?? durations.min_duration_seconds ?? DEFAULT_FLOOR_DURATION_SECONDS;
  let floor = PRICE_MIN_CENTS;
  for (const f of formats) {
    const cat = categoryOf(f);
    if (cat === 'audio') floor = Math.max(floor, 10 + Math.ceil(d / 2));
    if (cat === 'video') floor = Math.max(floor, 10 + d);
  }
  return floor;
}

/** D14, D41: 400 `pricing_violation` with the bounds inside `error`, the field in `details`. */
export function assertPrice(price: number, floor: number): void {
  if (price >= floor && price <= PRICE_MAX_CENTS) return;
  const message =
    price > PRICE_MAX_CENTS
      ? `price_per_file_cents must be at most ${PRICE_MAX_CENTS}.`
      : `price_per_file_cents must be at least ${floor} for these formats and durations.`;
  throw new ApiError(
    400,
    'pricing_violation',
    message,
    [{ field: 'price_per_file_cents', message, code: price > PRICE_MAX_CENTS ? 'above_maximum' : 'below_floor' }],
    { floor_cents: floor, max_cents: PRICE_MAX_CENTS, provided_cents: price },
  );
}

/** D16: integer cents only; the platform keeps price − payout per file. */
export function jobMoney(price: number, filesNeeded: number) {
  return {
    total_cost_cents: price * filesNeeded,
    platform_fee_pct: PLATFORM_FEE_PCT,
    worker_payout_per_file_cents: Math.floor((price * (100 - PLATFORM_FEE_PCT)) / 100),
  };
}
