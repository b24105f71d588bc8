/**
 * The bundles' `node:stream/web` (shared/aws/node-stream-web.ts, the house bundling's alias):
 * Node's own `ReadableStream`, resolved on first use, so @middy/core's streamed-response check
 * behaves as with Node's module.
 */
import * as web from 'node:stream/web';
import { ReadableStream } from '../../shared/aws/node-stream-web';

test('a stream of Node\'s web streams is an instance of the alias, and nothing else is', () => {
  expect(new web.ReadableStream()).toBeInstanceOf(ReadableStream);
  expect({ getReader: () => undefined } as unknown).not.toBeInstanceOf(ReadableStream);
  expect('body' as unknown).not.toBeInstanceOf(ReadableStream);
});

test('constructing the alias constructs Node\'s ReadableStream, with the same source', async () => {
  const s = new ReadableStream({ start: (c: web.ReadableStreamDefaultController<string>) => (c.enqueue('a'), c.close()) }) as unknown as web.ReadableStream<string>;
  expect(s).toBeInstanceOf(web.ReadableStream);
  const got: string[] = [];
  for await (const chunk of s) got.push(chunk);
  expect(got).toEqual(['a']);
});

test('ReadableStream.from is Node\'s', async () => {
  const s = ReadableStream.from(['x', 'y']) as web.ReadableStream<string>;
  expect(s).toBeInstanceOf(web.ReadableStream);
  const got: string[] = [];
  for await (const chunk of s) got.push(chunk);
  expect(got).toEqual(['x', 'y']);
});
