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

// A message's DelaySeconds must be 0..900 on SQS (InvalidParameterValue otherwise); fauxqs takes
// any value. Checked on SendMessage (the call fails) and on each entry of SendMessageBatch (as SQS
// answers a batch: the other entries are sent, the refused one is listed in `Failed`).
const { SqsRouter } = await import(new URL('./sqs/sqsRouter.js', import.meta.resolve('fauxqs')).href);
const { SqsError } = await import(new URL('./common/errors.js', import.meta.resolve('fauxqs')).href);
if (typeof SqsRouter?.prototype?.register !== 'function' || typeof SqsError !== 'function') {
  throw new Error('fauxqs changed: SqsRouter.register or SqsError not found; revisit local/fauxqs-process.mjs');
}
const checkDelay = (d) => {
  if (d === undefined || d === null) return;
  if (!Number.isInteger(d) || d < 0 || d > 900) {
    const err = new SqsError('InvalidParameterValue', `Value ${d} for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.`);
    // A common error's query code has no AWS.SimpleQueueService prefix (the SDK names the error by it).
    Object.defineProperty(err, 'queryErrorHeader', { value: 'InvalidParameterValue;Sender' });
    throw err;
  }
};
const register = SqsRouter.prototype.register;
SqsRouter.prototype.register = function (action, handler) {
  if (action === 'SendMessage') return register.call(this, action, (body, ...rest) => (checkDelay(body?.DelaySeconds), handler(body, ...rest)));
  if (action === 'SendMessageBatch') {
    return register.call(this, action, async (body, ...rest) => {
      const refused = [];
      const sent = [];
      for (const entry of body?.Entries ?? []) {
        try {
          checkDelay(entry?.DelaySeconds);
          sent.push(entry);
        } catch (err) {
          refused.push({ Id: entry?.Id, SenderFault: true, Code: 'InvalidParameterValue', Message: err.message });
        }
      }
      if (!refused.length) return handler(body, ...rest);
      const result = sent.length ? await handler({ ...body, Entries: sent }, ...rest) : { Successful: [], Failed: [] };
      return { ...result, Failed: [...(result.Failed ?? []), ...refused] };
    });
  }
  return register.call(this, action, handler);
};

const app = buildApp({ logger: false, defaultRegion: process.env.AWS_REGION || 'us-east-1' });
await app.listen({ host: process.env.FAUXQS_BIND || '127.0.0.1', port: Number(process.env.FAUXQS_PORT || 0) });
const { port } = app.server.address();
process.stdout.write(`${JSON.stringify({ port })}\n`);

const stop = () => app.close().finally(() => process.exit(0));
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
process.stdin.on('end', stop);
process.stdin.resume();
