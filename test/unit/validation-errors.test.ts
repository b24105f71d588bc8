/**
 * The error envelope recognises zod's validation errors by their shape (name and issues), so that
 * a route without request schemas does not load zod for an `instanceof` (issue 15, cold start).
 */
import * as classic from 'zod';
import * as z from '../../shared/zod';
import { toApiError } from '../../shared/http/middlewares/envelope';
import { ConditionFailed } from '../../shared/errors';

const thrown = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
};

test.each([
  ['a ZodError thrown by the full API', () => classic.strictObject({ name: classic.string() }).parse({ name: 3 })],
  ['a $ZodError thrown by zod/mini', () => z.strictObject({ name: z.string() }).parse({ name: 3 })],
])('%s is a 400 validation_error naming the field, in zod’s words', (_what, parse) => {
  const err = toApiError(thrown(parse));
  expect({ status: err.status, type: err.type, details: err.details }).toEqual({
    status: 400,
    type: 'validation_error',
    details: [{ field: 'name', message: 'Invalid input: expected string, received number', code: 'invalid_type' }],
  });
});

test('an ordinary Error that merely has `issues` is not taken for a validation error', () => {
  const err = toApiError(Object.assign(new Error('boom'), { issues: [] }));
  expect(err.status).toBe(500);
});

test('D11: a 409 that says "retry" (an unmapped failed condition) carries Retry-After, so the idempotency key is released for the retry', () => {
  const err = toApiError(new ConditionFailed(['job']));
  expect([err.status, err.message, err.headers?.['Retry-After']]).toEqual([409, expect.stringMatching(/retry/), '1']);
});
