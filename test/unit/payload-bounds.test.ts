/**
 * The local API Gateway measures an event or a result as JSON only when a cheap bound says it could
 * be above Lambda's 6 MB (issue 15: most requests are far below it). The bound must never let an
 * oversized payload through, whatever its characters cost in JSON.
 */
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { LAMBDA_PAYLOAD_BYTES, eventMayExceed, eventPayloadBytes, resultMayExceed } from '../../local/http-limits';

const event = (body: string | null): APIGatewayProxyEvent =>
  ({ resource: '/v1/jobs', path: '/v1/jobs', httpMethod: 'POST', headers: { 'Content-Type': 'application/json' }, multiValueHeaders: {}, body, isBase64Encoded: false }) as unknown as APIGatewayProxyEvent;

test('a body of control characters (6 bytes each in JSON) just above the limit is caught', () => {
  const body = '\u0001'.repeat(Math.ceil(LAMBDA_PAYLOAD_BYTES / 6) + 10);
  expect(eventPayloadBytes(event(body))).toBeGreaterThan(LAMBDA_PAYLOAD_BYTES);
  expect(eventMayExceed(event(body), LAMBDA_PAYLOAD_BYTES)).toBe(true);
});

test('a plain body just below the limit passes, and one just above is caught', () => {
  const fixed = eventPayloadBytes(event(''));
  expect(eventMayExceed(event('a'.repeat(LAMBDA_PAYLOAD_BYTES - fixed - 10)), LAMBDA_PAYLOAD_BYTES)).toBe(false);
  expect(eventMayExceed(event('a'.repeat(LAMBDA_PAYLOAD_BYTES)), LAMBDA_PAYLOAD_BYTES)).toBe(true);
});

test('a result whose body escapes above the limit is caught; a small one is not', () => {
  const big = { statusCode: 200, body: '"'.repeat(Math.ceil(LAMBDA_PAYLOAD_BYTES / 2)), headers: {} };
  expect(Buffer.byteLength(JSON.stringify(big))).toBeGreaterThan(LAMBDA_PAYLOAD_BYTES);
  expect(resultMayExceed(big, LAMBDA_PAYLOAD_BYTES)).toBe(true);
  expect(resultMayExceed({ statusCode: 200, body: '{"ok":true}', headers: { 'X-Request-Id': 'req_1' } }, LAMBDA_PAYLOAD_BYTES)).toBe(false);
});

test('a result whose body is not a string is measured as it is, never passed on the bound', () => {
  const items = Array.from({ length: 200_000 }, (_, i) => ({ id: `item_${i}`, note: 'x'.repeat(20) }));
  const malformed = { statusCode: 200, body: items as unknown as string, headers: {} };
  expect(resultMayExceed(malformed, LAMBDA_PAYLOAD_BYTES)).toBe(true);
});
