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

const { SqsStore } = await import(new URL('./sqs/sqsStore.js', import.meta.resolve('fauxqs')).href);
if (typeof SqsStore !== 'function' || typeof SqsStore.prototype.getQueueByName !== 'function') {
  throw new Error('fauxqs changed: SqsStore.getQueueByName not found; revisit local/fauxqs-process.mjs');
}
const sqsStore = new SqsStore();
const app = buildApp({ logger: false, defaultRegion: process.env.AWS_REGION || 'us-east-1', stores: { sqsStore } });

// A message restored from the runtime's snapshot (local/sqs-snapshot.ts) is the same SQS message
// as before the stop: it keeps its id, its sent time and the receives it already had, so the
// dead-letter queue's maxReceiveCount counts every receive across restarts, as SQS counts them.
// The runtime re-sends the body through SendMessageBatch (SQS's own checks), then names here the
// new message ids and what each had. Not an SQS API: only the local runtime calls it.
app.post('/_local/queues/:queueName/restored', async (request, reply) => {
  const queue = sqsStore.getQueueByName(request.params.queueName);
  if (!queue) {
    reply.status(404);
    return { error: `Queue '${request.params.queueName}' not found` };
  }
  const { ready, delayed } = queue.inspectMessages();
  const byId = new Map([...ready, ...delayed].map((m) => [m.messageId, m]));
  // fauxqs parses every body it has no parser for as bytes.
  const body = Buffer.isBuffer(request.body) ? JSON.parse(request.body.toString('utf8')) : request.body;
  let updated = 0;
  for (const r of body?.messages ?? []) {
    const m = byId.get(r.newMessageId);
    if (!m) continue;
    if (typeof r.messageId === 'string') m.messageId = r.messageId;
    if (Number.isInteger(r.sentTimestamp)) m.sentTimestamp = r.sentTimestamp;
    if (Number.isInteger(r.receiveCount) && r.receiveCount >= 0) m.approximateReceiveCount = r.receiveCount;
    if (Number.isInteger(r.firstReceiveTimestamp)) m.approximateFirstReceiveTimestamp = r.firstReceiveTimestamp;
    updated++;
  }
  return { updated };
});
await app.listen({ host: process.env.FAUXQS_BIND || '127.0.0.1', port: Number(process.env.FAUXQS_PORT || 0) });
const { port } = app.server.address();
process.stdout.write(`${JSON.stringify({ port })}\n`);

const stop = () => app.close().finally(() => process.exit(0));
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
process.stdin.on('end', stop);
process.stdin.resume();
