/**
 * D61 deployed: the web ACL reads Content-Length as a number through a regular expression; it must
 * match exactly the lengths above the limit (leading zeros included), so nothing the local front
 * lets through is refused deployed, and nothing it refuses gets through to Lambda.
 */
import { integerAbove } from '../../lib/edges/waf';
import { MAX_BODY_BYTES } from '../../shared/http/body-limits';

const matches = (n: number, s: string = String(n)) => new RegExp(integerAbove(MAX_BODY_BYTES)).test(s);

test('the lengths around 4 MiB: 4,194,304 passes, 4,194,305 is refused', () => {
  expect(matches(MAX_BODY_BYTES)).toBe(false);
  expect(matches(MAX_BODY_BYTES + 1)).toBe(true);
  expect(matches(MAX_BODY_BYTES - 1)).toBe(false);
});

test('every length agrees with a numeric comparison (each digit position, and 20,000 random lengths)', () => {
  const probes = new Set<number>([0, 1, 9, 10, 999_999, 1_000_000, 9_999_999, 10_000_000, 10 * 1024 * 1024, 2 ** 53 - 1]);
  const d = String(MAX_BODY_BYTES);
  for (let i = 0; i < d.length; i++) {
    for (let v = 0; v <= 9; v++) probes.add(Number(d.slice(0, i) + v + d.slice(i + 1)));
  }
  for (let i = 0; i < 20_000; i++) probes.add(Math.floor(Math.random() * 3 * MAX_BODY_BYTES));
  for (const n of probes) expect([n, matches(n)]).toEqual([n, n > MAX_BODY_BYTES]);
});

test('leading zeros do not hide a length, and what is not a number never matches', () => {
  expect(matches(0, `000${MAX_BODY_BYTES + 1}`)).toBe(true);
  expect(matches(0, `000${MAX_BODY_BYTES}`)).toBe(false);
  for (const s of ['', 'abc', '5e6', '-5000000', '4 194 305']) expect([s, matches(0, s)]).toEqual([s, false]);
  // Whitespace around the value (HTTP's optional whitespace) does not hide it either.
  expect([matches(0, ' 5000000'), matches(0, '5000000 '), matches(0, ` ${MAX_BODY_BYTES} `)]).toEqual([true, true, false]);
});

test('any limit: the expression is exact for every limit up to 5 digits', () => {
  for (let limit = 0; limit < 12_000; limit += 7) {
    const re = new RegExp(integerAbove(limit));
    for (const n of [0, limit - 1, limit, limit + 1, limit * 10, limit + 100].filter((x) => x >= 0)) expect([limit, n, re.test(String(n))]).toEqual([limit, n, n > limit]);
  }
});
