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
// The AWSTraceHeader system attribute, which fauxqs does not keep: SQS takes it from the send's
// MessageSystemAttributes.AWSTraceHeader, else from its X-Amzn-Trace-Id header, keeps it with the
// message (a move to the dead-letter queue included) and returns it on receive when asked for
// (`All` or `AWSTraceHeader`). Lambda's recursive loop detection reads it (local/lineage.ts).
// fauxqs' send actions create their messages synchronously (SqsStore.createMessage), so the
// header is put on each message as it is created, before any receiver can take it.
const { SqsStore: StoreClass } = await import(new URL('./sqs/sqsStore.js', import.meta.resolve('fauxqs')).href);
if (typeof StoreClass?.createMessage !== 'function') throw new Error('fauxqs changed: SqsStore.createMessage not found; revisit local/fauxqs-process.mjs');
const traceHeaderOf = (m, request) => m?.MessageSystemAttributes?.AWSTraceHeader?.StringValue ?? request?.headers?.['x-amzn-trace-id'];
/** The headers of the send being handled, by message body (a batch's entries, in order). */
let pendingHeaders = null;
const createMessage = StoreClass.createMessage;
StoreClass.createMessage = function (body, ...rest) {
  const msg = createMessage.call(this, body, ...rest);
  const header = pendingHeaders?.get(body)?.shift();
  if (header) msg.awsTraceHeader = header;
  return msg;
};
/** Runs a send action (synchronous in fauxqs) with its entries' trace headers pending. */
const withTraceHeaders = (entries, request, run) => {
  pendingHeaders = new Map();
  for (const e of entries) {
    const header = traceHeaderOf(e, request);
    if (header) pendingHeaders.set(e?.MessageBody, [...(pendingHeaders.get(e?.MessageBody) ?? []), header]);
  }
  try {
    return run();
  } finally {
    pendingHeaders = null;
  }
};

const register = SqsRouter.prototype.register;
SqsRouter.prototype.register = function (action, handler) {
  if (action === 'SendMessage') {
    return register.call(this, action, (body, store, request) => {
      checkDelay(body?.DelaySeconds);
      return withTraceHeaders([body], request, () => handler(body, store, request));
    });
  }
  if (action === 'SendMessageBatch') {
    return register.call(this, action, async (body, store, request) => {
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
      const result = sent.length ? await withTraceHeaders(sent, request, () => handler(refused.length ? { ...body, Entries: sent } : body, store, request)) : { Successful: [], Failed: [] };
      return refused.length ? { ...result, Failed: [...(result.Failed ?? []), ...refused] } : result;
    });
  }
  if (action === 'ReceiveMessage') {
    return register.call(this, action, async (body, store, request) => {
      const result = await handler(body, store, request);
      const names = [...(body?.AttributeNames ?? []), ...(body?.MessageSystemAttributeNames ?? [])];
      if (!result?.Messages || !(names.includes('All') || names.includes('AWSTraceHeader'))) return result;
      const queue = store.getQueue(body.QueueUrl);
      for (const m of result.Messages) {
        const header = queue?.inflightMessages.get(m.ReceiptHandle)?.message.awsTraceHeader;
        if (header) m.Attributes = { ...m.Attributes, AWSTraceHeader: header };
      }
      return result;
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
    if (typeof r.traceHeader === 'string') m.awsTraceHeader = r.traceHeader;
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
