/**
 * `node:stream/web` for the bundles (the house bundling's alias; local runs, which are not
 * bundled, import Node's own): its `ReadableStream`, resolved on first use. The one bundled
 * importer, @middy/core, imports it at load for streamed responses only (an `instanceof` check
 * and nothing else), which no route of ours uses; importing the module builds Node's web streams
 * (about 0.7 ms of every route's cold start on Node 22, docs/benchmarks.md). `instanceof`,
 * `new` and `ReadableStream.from` reach Node's own class, so the behaviour is Node's.
 */
type WebStreams = typeof import('node:stream/web');
const web = (): WebStreams => process.getBuiltinModule('node:stream/web') as WebStreams;

export class ReadableStream {
  static [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof web().ReadableStream;
  }
  static from(...args: Parameters<WebStreams['ReadableStream']['from']>) {
    return web().ReadableStream.from(...args);
  }
  constructor(...args: ConstructorParameters<WebStreams['ReadableStream']>) {
    return new (web().ReadableStream)(...args);
  }
}
