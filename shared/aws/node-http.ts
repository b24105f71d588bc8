/**
 * `http` for the bundles (the house bundling's alias of the bare `http` import; local runs, which
 * are not bundled, import Node's own): Node's built-in module taken as CommonJS
 * (`process.getBuiltinModule`), never through an ES `import`. On Node 22 the ES facade of
 * `node:http` is built by reading every export, and its lazy WebSocket getters load undici (the
 * fetch implementation): 7–11 ms of a cold start in a function that never uses it
 * (docs/benchmarks.md, the Node.js 22 section). The Stripe SDK imports `http` this way
 * (`import * as http_ from 'http'`, then `http_.default`).
 */
const http = process.getBuiltinModule('node:http');

export default http;
export const { Agent, ClientRequest, IncomingMessage, METHODS, STATUS_CODES, Server, ServerResponse, createServer, get, globalAgent, request } = http;
