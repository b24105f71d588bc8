/**
 * Text an event cannot carry (shared/sendable-text.ts): SQS refuses U+FFFE and U+FFFF in a message
 * body, and an unpaired surrogate is not Unicode. Everything else SQS takes, astral characters
 * included, passes.
 */
import { findUnsendableText, sendable } from '../../shared/sendable-text';
import { emit } from '../../shared/outbox';
import { Tx } from '../../shared/db/tx';

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

describe('text no caller wrote is made sendable instead (the outbox, for model output)', () => {
  test('U+FFFE, U+FFFF and unpaired surrogates become U+FFFD; pairs, astral characters and other values stay', () => {
    const at = new Date(0);
    expect(sendable({ reasoning: 'a\uFFFFb\uD83D', tags: ['\uFFFE', '💥'], n: 1, ok: true, none: null, at, ['k\uDCA5']: 'v' })).toEqual({
      reasoning: 'a\uFFFDb\uFFFD',
      tags: ['\uFFFD', '💥'],
      n: 1,
      ok: true,
      none: null,
      at,
      'k\uFFFD': 'v',
    });
  });

  test('the result is always sendable', () => {
    const messy = { a: ['\uD800\uD800\uDC00', '\uDBFF'], b: { c: 'x\uFFFE\uFFFF' } };
    expect(findUnsendableText(messy)).toBeDefined();
    expect(findUnsendableText(sendable(messy))).toBeUndefined();
  });
});

test("the outbox writes an event's data sendable: a model's U+FFFF arrives as U+FFFD", () => {
  const envelope = emit(new Tx(), { orgId: 'org_x', env: 'live', type: 'submission.scored', data: { ai_reasoning: 'sharp\uFFFF photo' } });
  expect(envelope.data).toEqual({ ai_reasoning: 'sharp\uFFFD photo' });
});
