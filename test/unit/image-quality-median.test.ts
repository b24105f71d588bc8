import fc from 'fast-check';
import { selectKth } from '../../shared/media/pixel-statistics';

// The noise estimate takes the median residual by selection instead of a full sort (faster, the
// same value): selectKth(a, k) must equal a.sort()[k] for every array and k.
describe('image quality: the median residual by selection', () => {
  it('selectKth gives the element a full sort puts at k, for any values (duplicates included)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.float({ min: 0, max: 255, noNaN: true }), fc.integer({ min: 0, max: 3 })), { minLength: 1, maxLength: 300 }),
        fc.nat(),
        (values, kSeed) => {
          const a = Float32Array.from(values);
          const k = kSeed % a.length;
          const expected = Float32Array.from(a).sort()[k];
          expect(selectKth(a, k)).toBe(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('selectKth on a large mostly-zero array (a clean graphic) gives 0 at the middle', () => {
    const a = new Float32Array(100_001);
    for (let i = 0; i < 40_000; i++) a[(i * 7919) % a.length] = (i % 13) + 0.5;
    expect(selectKth(a, 50_000)).toBe(0);
  });
});
