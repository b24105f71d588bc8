/** D37 retry schedule with jitter, Retry-After, and the local scale factor. */
import { MAX_ATTEMPTS, parseRetryAfter, RETRY_DELAYS_MS, retryDelayMs } from '../../shared/webhooks/schedule';

describe('retry schedule (D37)', () => {
  it('D37: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then failed (8 attempts)', () => {
    expect(RETRY_DELAYS_MS.map((ms) => ms / 1000)).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(MAX_ATTEMPTS).toBe(8);
    expect(retryDelayMs(7)).toBeNull();
  });
  it('D37: jitter stays within ±10 %', () => {
    expect(retryDelayMs(1, { random: () => 0 })).toBe(270_000);
    expect(retryDelayMs(1, { random: () => 0.999999 })).toBeLessThanOrEqual(330_000);
  });
  it('D37: Retry-After pushes the next attempt later, never earlier', () => {
    expect(retryDelayMs(0, { random: () => 0.5, retryAfterMs: 120_000 })).toBe(120_000);
    expect(retryDelayMs(3, { random: () => 0.5, retryAfterMs: 1_000 })).toBe(7_200_000);
    const at = new Date('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('30', at)).toBe(30_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', at)).toBe(60_000);
    expect(parseRetryAfter('soon', at)).toBeNull();
  });
  it('the local scale factor shrinks every delay', () => {
    expect(retryDelayMs(0, { random: () => 0.5, scale: 0.001 })).toBe(5);
    expect(retryDelayMs(0, { random: () => 0.5, scale: 0.001, retryAfterMs: 2000 })).toBe(2000);
  });
});
