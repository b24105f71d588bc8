// The SQS emulator (fauxqs) in a child process of the local runtime. fauxqs is published as an ES
// module only, which Jest's CommonJS module system cannot load, so tests and `npm start` both run
// it here. Prints `{"port":N}` once listening.
//
// Stopping: the parent closes stdin (or dies, which closes it too) and this process exits. SIGINT
// and SIGTERM are ignored: a terminal's Ctrl-C reaches the whole process group, and the queued
// messages must outlive that signal until the parent has saved them (local/sqs-snapshot.ts).
import { buildApp } from 'fauxqs';

// Real SQS accepts every Unicode character of #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
// #x10000-#x10FFFF; fauxqs 1.9 omits the last range and refuses any emoji (a character outside the
// Basic Multilingual Plane). Its own check is one shared RegExp object: make it test the AWS rule,
// so the consumer sees exactly the body real SQS would deliver. Fail loudly if fauxqs changes.
const types = await import(new URL('./sqs/sqsTypes.js', import.meta.resolve('fauxqs')).href);
if (!(types.INVALID_MESSAGE_BODY_CHAR instanceof RegExp)) {
  throw new Error('fauxqs changed: INVALID_MESSAGE_BODY_CHAR not found; revisit local/fauxqs-process.mjs');
}
const SQS_INVALID_CHAR = /[^\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
types.INVALID_MESSAGE_BODY_CHAR.test = (s) => SQS_INVALID_CHAR.test(s);

const app = buildApp({ logger: false, defaultRegion: process.env.AWS_REGION || 'us-east-1' });
await app.listen({ host: process.env.FAUXQS_BIND || '127.0.0.1', port: Number(process.env.FAUXQS_PORT || 0) });
const { port } = app.server.address();
process.stdout.write(`${JSON.stringify({ port })}\n`);

const stop = () => app.close().finally(() => process.exit(0));
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
process.stdin.on('end', stop);
process.stdin.resume();
