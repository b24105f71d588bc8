/**
 * The injectable clock. Domain code reads time only through `now()`, so tests can move time
 * (rotation overlaps, idempotency expiry, credit lots) without sleeping.
 */
let offsetMs = 0;
let fixed: number | null = null;

export function now(): Date {
  return new Date(fixed ?? Date.now() + offsetMs);
}

export function nowIso(): string {
  return now().toISOString();
}

export function nowEpochSeconds(): number {
  return Math.floor(now().getTime() / 1000);
}

/** Test hooks. */
export const clock = {
  advance(ms: number) {
    if (fixed !== null) fixed += ms;
    else offsetMs += ms;
  },
  set(date: Date) {
    fixed = date.getTime();
  },
  reset() {
    offsetMs = 0;
    fixed = null;
  },
};

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;

export function addMs(d: Date, ms: number): Date {
  return new Date(d.getTime() + ms);
}
