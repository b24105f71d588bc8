/**
 * Text that cannot travel. Whatever a caller writes may end up in an event, and every event goes
 * through SQS: the table stream's pipes and the webhook queue send it as a JSON message body. JSON
 * escapes the control characters, but SQS refuses a body holding U+FFFE or U+FFFF (its allowed
 * characters are #x9, #xA, #xD, #x20–#xD7FF, #xE000–#xFFFD and #x10000–#x10FFFF), so the event
 * would be dead-lettered and never delivered. An unpaired surrogate is not Unicode at all: it cannot
 * be written as UTF-8, so it would be stored as U+FFFD or refused by DynamoDB.
 *
 * - A caller's text holding either is refused at the edge with a 400 naming the field
 *   (`assertSendableText`, in the validation middleware and the upload form).
 * - Text no caller wrote (a model's reasoning or labels, a transcript) is not refused: the outbox
 *   writes it into an event with each such character replaced by U+FFFD (`sendable`), so the event
 *   is always deliverable.
 */
import { errors, type ApiError } from './errors';

/** U+FFFE, U+FFFF, or a surrogate that is not half of a pair (with the `u` flag a pair is one code point). */
const UNSENDABLE = /[\uFFFE\uFFFF]|[\uD800-\uDFFF]/u;
const UNSENDABLE_ALL = new RegExp(UNSENDABLE.source, 'gu');

export interface UnsendableText {
  /** Dotted path of the field (array indexes as numbers), `undefined` for the body itself. */
  field?: string;
  message: string;
}

function describe(ch: string): string {
  const hex = ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
  return ch >= '\uD800' && ch <= '\uDFFF'
    ? `an unpaired surrogate (\\u${hex}); send well-formed Unicode text`
    : `U+${hex}, a Unicode noncharacter that cannot be delivered in events; remove it`;
}

/**
 * The first string (or object key) in `value` holding such a character, depth first, or
 * `undefined`. `prefix` names where `value` sits.
 */
export function findUnsendableText(value: unknown, prefix?: string): UnsendableText | undefined {
  const at = (k: string | number) => (prefix === undefined ? String(k) : `${prefix}.${k}`);
  if (typeof value === 'string') {
    const m = UNSENDABLE.exec(value);
    return m ? { field: prefix, message: `Contains ${describe(m[0])}.` } : undefined;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const bad = findUnsendableText(value[i], at(i));
      if (bad) return bad;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const m = UNSENDABLE.exec(k);
      if (m) return { field: at(k), message: `The field name contains ${describe(m[0])}.` };
      const bad = findUnsendableText(v, at(k));
      if (bad) return bad;
    }
  }
  return undefined;
}

/** Throws 400 `validation_error` naming the field when `value` holds text that cannot travel. */
export function assertSendableText(value: unknown, prefix?: string): void {
  const bad = findUnsendableText(value, prefix);
  if (bad) throw unsendable(bad);
}

function unsendable(bad: UnsendableText): ApiError {
  return errors.validation('The request contains a character that cannot be stored and delivered.', [
    { ...(bad.field === undefined ? {} : { field: bad.field }), message: bad.message, code: 'invalid_character' },
  ]);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(v));

/**
 * `value` with every such character in its strings (and plain objects' keys) replaced by U+FFFD.
 * Arrays and plain objects are copied; anything else is kept as it is.
 */
export function sendable<T>(value: T): T {
  if (typeof value === 'string') return (UNSENDABLE.test(value) ? value.replace(UNSENDABLE_ALL, '\uFFFD') : value) as T;
  if (Array.isArray(value)) return value.map(sendable) as T;
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [sendable(k), sendable(v)])) as T;
  return value;
}
