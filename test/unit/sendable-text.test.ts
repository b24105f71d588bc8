/**
 * Text an event cannot carry (shared/http/text.ts): SQS refuses U+FFFE and U+FFFF in a message
 * body, and an unpaired surrogate is not Unicode. Everything else SQS takes, astral characters
 * included, passes.
 */
import { findUnsendableText } from '../../shared/http/text';

describe('text that cannot travel through SQS', () => {
  test('astral characters, U+FFFD, private use and control characters pass (JSON escapes the controls)', () => {
    expect(findUnsendableText({ a: '💥 𝕏 \u{10FFFD} \uFFFD \uE000 \u0000 \u0007 \t\n\r', b: ['ok', 1, null, true] })).toBeUndefined();
  });

  test('U+FFFE and U+FFFF are refused, with the field named', () => {
    expect(findUnsendableText({ title: 'a\uFFFF' })).toEqual({ field: 'title', message: expect.stringContaining('U+FFFF') });
    expect(findUnsendableText({ title: '\uFFFEb' })).toEqual({ field: 'title', message: expect.stringContaining('U+FFFE') });
  });

  test('a high or low surrogate without its other half is refused; a pair is one character and passes', () => {
    expect(findUnsendableText('\uD83D\uDCA5')).toBeUndefined();
    expect(findUnsendableText('x\uD83D')).toEqual({ field: undefined, message: expect.stringContaining('unpaired surrogate (\\uD83D)') });
    expect(findUnsendableText('\uDCA5x')).toEqual({ field: undefined, message: expect.stringContaining('unpaired surrogate (\\uDCA5)') });
  });

  test('nested values are named by their path, array items by their index, and object keys are checked too', () => {
    expect(findUnsendableText({ files: [{ filename: 'ok' }, { filename: 'bad\uFFFF' }] })).toMatchObject({ field: 'files.1.filename' });
    expect(findUnsendableText({ metadata: { 'k\uFFFF': 1 } })).toEqual({ field: 'metadata.k\uFFFF', message: expect.stringMatching(/^The field name contains U\+FFFF/) });
    expect(findUnsendableText({ filename: 'x\uFFFF' }, 'file')).toMatchObject({ field: 'file.filename' });
  });
});
