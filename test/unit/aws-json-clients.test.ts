/**
 * The small clients of Bedrock's Converse (shared/aws/bedrock-converse.ts), Transcribe's
 * StartTranscriptionJob (shared/aws/transcribe-jobs.ts) and SQS's SendMessage,
 * ChangeMessageVisibility and GetQueueUrl (shared/queues.ts), which replaced the SDK clients in every
 * function (issue 15, cold start). They must be the SDK on the wire: the request the SDK client
 * sends for the same input (path, headers, body), signed so that a Signature V4 verifier accepts
 * it, the reply parsed as the SDK parses it, errors named and retried as the SDK names and retries
 * them. Each is compared with the real SDK client against the same loopback server.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BedrockRuntimeClient, ConverseCommand, type ConverseCommandInput } from '@aws-sdk/client-bedrock-runtime';
import { StartTranscriptionJobCommand, TranscribeClient } from '@aws-sdk/client-transcribe';
import { DecryptCommand, KMSClient } from '@aws-sdk/client-kms';
import { ChangeMessageVisibilityCommand, GetQueueUrlCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest } from '@smithy/core/protocols';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { SignatureV4 } from '@smithy/signature-v4';
import { BedrockConverse } from '../../shared/aws/bedrock-converse';
import { jsonPost, readJsonRpcError, SignedClient } from '../../shared/aws/signed-call';
import { kmsClient } from '../../shared/secrets/kms';
import { TranscribeJobs } from '../../shared/aws/transcribe-jobs';
import { sqsClient, sendToQueueUrl } from '../../shared/queues';

const credentials = { accessKeyId: 'ASIAROLE', secretAccessKey: 'role-secret', sessionToken: 'session/token+=' };

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

type Reply = (req: Seen, res: ServerResponse) => void;

let server: Server;
let endpoint: string;
let seen: Seen[] = [];
let reply: Reply;

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const one: Seen = { method: req.method!, url: req.url!, headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(one);
      reply(one, res);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((ok) => server.close(() => ok())));
beforeEach(() => {
  seen = [];
});

const json = (status: number, doc: unknown, headers: Record<string, string> = {}) => (_: Seen, res: ServerResponse) => {
  res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-requestid': 'req-1', ...headers });
  res.end(JSON.stringify(doc));
};

/** Signature V4 as AWS checks it: recomputed from the request as received, at its own date. */
async function verifies(req: Seen, service: string, region: string): Promise<boolean> {
  const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(req.headers.authorization ?? '');
  if (!auth || auth[1] !== credentials.accessKeyId || auth[3] !== region || auth[4] !== service) return false;
  const names = auth[5]!.split(';');
  const headers = Object.fromEntries(names.map((n) => [n, req.headers[n]!]));
  // The signer trusts a payload hash header as the payload's hash: the body must match it.
  const claimed = req.headers['x-amz-content-sha256'];
  if (claimed !== undefined && claimed !== createHash('sha256').update(req.body).digest('hex')) return false;
  const d = req.headers['x-amz-date']!;
  const signingDate = new Date(`${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}T${d.slice(9, 11)}:${d.slice(11, 13)}:${d.slice(13, 15)}Z`);
  const [path, query = ''] = req.url.split('?');
  const signer = new SignatureV4({ credentials, region: auth[3]!, service, sha256: Sha256, uriEscapePath: true, applyChecksum: false });
  const request = new HttpRequest({ method: req.method, hostname: '127.0.0.1', path: path!, query: Object.fromEntries(new URLSearchParams(query)), headers, body: req.body });
  const signed = await signer.sign(request, { signingDate, unsignableHeaders: new Set(), signableHeaders: new Set(names) });
  return signed.headers.authorization === req.headers.authorization;
}

describe('Bedrock Converse', () => {
  const sdk = () => new BedrockRuntimeClient({ region: 'us-east-1', endpoint, credentials, requestHandler: new NodeHttpHandler() });
  const ours = () => new BedrockConverse({ region: 'us-east-1', endpoint, credentials: async () => credentials });
  const input: ConverseCommandInput = {
    // An inference-profile ARN: the path label is escaped (':' and '/'), then escaped again for signing.
    modelId: 'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0',
    system: [{ text: 'You rate media.' }],
    messages: [{ role: 'user', content: [{ image: { format: 'jpeg', source: { bytes: new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a]) } } }, { text: 'Rate this photo: “storefront”.' }] }],
    inferenceConfig: { maxTokens: 600, temperature: 0 },
  };
  const published = {
    output: { message: { role: 'assistant', content: [{ text: '{"relevance": 5}' }] } },
    stopReason: 'end_turn',
    usage: { inputTokens: 1843, outputTokens: 97, totalTokens: 1940 },
    metrics: { latencyMs: 2143 },
  };

  it('sends the request the SDK client sends for the same input: path, content type and body (image bytes as base64)', async () => {
    reply = json(200, published);
    const a = sdk();
    await a.send(new ConverseCommand(input));
    await ours().converse(input);
    a.destroy();
    const [theirs, mine] = seen as [Seen, Seen];
    expect(mine.method).toBe(theirs.method);
    expect(mine.url).toBe(theirs.url);
    expect(mine.url).toBe('/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.amazon.nova-pro-v1%3A0/converse');
    expect(mine.headers['content-type']).toBe(theirs.headers['content-type']);
    expect(JSON.parse(mine.body)).toEqual(JSON.parse(theirs.body));
    expect(JSON.parse(mine.body).messages[0].content[0].image.source.bytes).toBe(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a]).toString('base64'));
  });

  it('signs with the role’s credentials as Signature V4 for the bedrock service, the session token included', async () => {
    reply = json(200, published);
    await ours().converse(input);
    expect(seen[0]!.headers['x-amz-security-token']).toBe(credentials.sessionToken);
    expect(await verifies(seen[0]!, 'bedrock', 'us-east-1')).toBe(true);
    seen[0]!.body = seen[0]!.body.replace('storefront', 'storefrond');
    expect(await verifies(seen[0]!, 'bedrock', 'us-east-1')).toBe(false); // the verifier can refuse
  });

  it('answers what the SDK client answers for the same reply', async () => {
    reply = json(200, published);
    const a = sdk();
    const theirs = await a.send(new ConverseCommand(input));
    const mine = await ours().converse(input);
    a.destroy();
    const { $metadata: m1, ...rest1 } = theirs;
    const { $metadata: m2, ...rest2 } = mine;
    expect(rest2).toEqual(rest1);
    expect({ status: m2.httpStatusCode, requestId: m2.requestId, attempts: m2.attempts }).toEqual({ status: m1.httpStatusCode, requestId: m1.requestId, attempts: m1.attempts });
  });

  it('a model error is named and described as the SDK names it, and a 4xx is not retried', async () => {
    reply = json(400, { message: 'The model returned the following errors: image too large' }, { 'x-amzn-errortype': 'ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/' });
    const a = sdk();
    const theirs = (await a.send(new ConverseCommand(input)).catch((e: unknown) => e)) as Error & { $metadata: { attempts: number } };
    a.destroy();
    seen = [];
    const mine = (await ours().converse(input).catch((e: unknown) => e)) as Error & { $metadata: { attempts: number; httpStatusCode: number }; $fault: string };
    expect({ name: mine.name, message: mine.message }).toEqual({ name: theirs.name, message: theirs.message });
    expect(mine.name).toBe('ValidationException');
    expect({ attempts: mine.$metadata.attempts, status: mine.$metadata.httpStatusCode, fault: mine.$fault }).toEqual({ attempts: 1, status: 400, fault: 'client' });
    expect(seen).toHaveLength(1);
  });

  it('throttling is retried as the SDK retries it (3 attempts in all), then succeeds', async () => {
    let n = 0;
    reply = (req, res) => (++n < 3 ? json(429, { message: 'Too many requests' }, { 'x-amzn-errortype': 'ThrottlingException' })(req, res) : json(200, published)(req, res));
    const out = await ours().converse(input);
    expect(out.$metadata.attempts).toBe(3);
    expect(seen).toHaveLength(3);
  });

  it('the caller’s abort signal ends the call, with no retry', async () => {
    reply = () => undefined; // never answers
    const err = (await ours()
      .converse(input, { abortSignal: AbortSignal.timeout(150) })
      .catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('AbortError');
    expect(seen).toHaveLength(1);
  });
});

describe('Transcribe StartTranscriptionJob', () => {
  const sdk = () => new TranscribeClient({ region: 'eu-west-1', endpoint, credentials, requestHandler: new NodeHttpHandler() });
  const ours = () => new TranscribeJobs({ region: 'eu-west-1', endpoint, credentials: async () => credentials });
  const input = {
    TranscriptionJobName: 'media-sub_01JD0000000000000000000000.r1.file_01JD0000000000000000000000',
    Media: { MediaFileUri: 's3://media/uploads/sub_01JD0000000000000000000000/r1/file_01JD0000000000000000000000.wav' },
    MediaFormat: 'wav' as const,
    IdentifyLanguage: true,
    Settings: { ShowSpeakerLabels: true, MaxSpeakerLabels: 10 },
    OutputBucketName: 'media',
    OutputKey: 'transcripts/x.json',
  };

  it('sends the request the SDK client sends for the same input (JSON 1.1, its target), signed for the transcribe service', async () => {
    reply = json(200, { TranscriptionJob: { TranscriptionJobName: input.TranscriptionJobName, TranscriptionJobStatus: 'IN_PROGRESS' } });
    const a = sdk();
    const theirs = await a.send(new StartTranscriptionJobCommand(input));
    const mine = await ours().startTranscriptionJob(input);
    a.destroy();
    const [t, m] = seen as [Seen, Seen];
    expect([m.method, m.url, m.headers['content-type'], m.headers['x-amz-target']]).toEqual([t.method, t.url, t.headers['content-type'], t.headers['x-amz-target']]);
    expect(JSON.parse(m.body)).toEqual(JSON.parse(t.body));
    expect(await verifies(m, 'transcribe', 'eu-west-1')).toBe(true);
    expect(mine.TranscriptionJob).toEqual(theirs.TranscriptionJob);
  });

  it('a job that already exists is a ConflictException, as the SDK names it (the scorer treats it as started)', async () => {
    reply = (req, res) => {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify({ __type: 'ConflictException', Message: 'The requested job name already exists.' }));
    };
    const a = sdk();
    const theirs = (await a.send(new StartTranscriptionJobCommand(input)).catch((e: unknown) => e)) as Error;
    a.destroy();
    const mine = (await ours()
      .startTranscriptionJob(input)
      .catch((e: unknown) => e)) as Error;
    expect({ name: mine.name, message: mine.message }).toEqual({ name: theirs.name, message: theirs.message });
    expect(mine.name).toBe('ConflictException');
  });
});

describe('SQS SendMessage, ChangeMessageVisibility and GetQueueUrl', () => {
  const sdk = () => new SQSClient({ region: 'eu-west-1', endpoint, credentials, requestHandler: new NodeHttpHandler() });
  const ours = () => sqsClient({ region: 'eu-west-1', endpoint, credentials: async () => credentials });
  const queue = () => `${endpoint}/123456789012/webhooks`;
  const body = JSON.stringify({ kind: 'webhook.attempt', note: 'Boom \u{1F4A5} é' });
  const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

  it('a send is the request the SDK client sends for the same input (JSON 1.0, its target and query-mode header), signed for the sqs service', async () => {
    reply = (req, res) => json(200, { MessageId: 'm-1', MD5OfMessageBody: md5((JSON.parse(req.body) as { MessageBody: string }).MessageBody) })(req, res);
    const a = sdk();
    const theirs = await a.send(new SendMessageCommand({ QueueUrl: queue(), MessageBody: body, DelaySeconds: 900 }));
    a.destroy();
    const mine = await sendToQueueUrl(queue(), body, 900, ours());
    const [t, m] = seen as [Seen, Seen];
    const head = (r: Seen) => [r.method, r.url, r.headers['content-type'], r.headers['x-amz-target'], r.headers['x-amzn-query-mode']];
    expect(head(m)).toEqual(head(t));
    expect(JSON.parse(m.body)).toEqual(JSON.parse(t.body));
    expect(await verifies(m, 'sqs', 'eu-west-1')).toBe(true);
    expect(mine).toBe(theirs.MessageId);
  });

  it('a send whose reply reports the MD5 of another body fails, as the SDK client fails it', async () => {
    reply = json(200, { MessageId: 'm-1', MD5OfMessageBody: md5('something else') });
    const a = sdk();
    const theirs = await a.send(new SendMessageCommand({ QueueUrl: queue(), MessageBody: body })).catch((e: unknown) => e);
    a.destroy();
    const mine = await sendToQueueUrl(queue(), body, 0, ours()).catch((e: unknown) => e);
    expect(theirs).toBeInstanceOf(Error);
    expect(mine).toMatchObject({ name: 'MessageChecksumMismatch' });
  });

  it('ChangeMessageVisibility and GetQueueUrl are the requests the SDK client sends', async () => {
    reply = json(200, { QueueUrl: queue() });
    const a = sdk();
    await a.send(new ChangeMessageVisibilityCommand({ QueueUrl: queue(), ReceiptHandle: 'rh/1+=', VisibilityTimeout: 120 }));
    await a.send(new GetQueueUrlCommand({ QueueName: 'webhooks', QueueOwnerAWSAccountId: '123456789012' }));
    a.destroy();
    const c = ours();
    await c.call('ChangeMessageVisibility', { QueueUrl: queue(), ReceiptHandle: 'rh/1+=', VisibilityTimeout: 120 });
    const got = await c.call<{ QueueUrl: string }>('GetQueueUrl', { QueueName: 'webhooks', QueueOwnerAWSAccountId: '123456789012' });
    const [t1, t2, m1, m2] = seen as [Seen, Seen, Seen, Seen];
    for (const [t, m] of [[t1, m1], [t2, m2]] as const) {
      expect([m.url, m.headers['x-amz-target'], m.headers['x-amzn-query-mode']]).toEqual([t.url, t.headers['x-amz-target'], t.headers['x-amzn-query-mode']]);
      expect(JSON.parse(m.body)).toEqual(JSON.parse(t.body));
    }
    expect(got.QueueUrl).toBe(queue());
  });

  it('a missing queue is named as the SDK names it', async () => {
    reply = (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-query-error': 'AWS.SimpleQueueService.NonExistentQueue;Sender' });
      res.end(JSON.stringify({ __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: 'The specified queue does not exist.' }));
    };
    const a = sdk();
    const theirs = (await a.send(new SendMessageCommand({ QueueUrl: queue(), MessageBody: body })).catch((e: unknown) => e)) as Error;
    a.destroy();
    const mine = (await sendToQueueUrl(queue(), body, 0, ours()).catch((e: unknown) => e)) as Error;
    expect({ name: mine.name, message: mine.message }).toEqual({ name: theirs.name, message: theirs.message });
  });
});

describe('what every small client shares', () => {
  it('an error is named by the JSON RPC protocol’s precedence, as the SDK names it (`__type` before the header)', async () => {
    reply = (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': 'BadRequestException' });
      res.end(JSON.stringify({ __type: 'com.amazonaws.transcribe#ConflictException', message: 'exists' }));
    };
    const a = new TranscribeClient({ region: 'eu-west-1', endpoint, credentials, requestHandler: new NodeHttpHandler() });
    const input = { TranscriptionJobName: 'x', Media: { MediaFileUri: 's3://b/k' }, LanguageCode: 'en-US' as const };
    const theirs = (await a.send(new StartTranscriptionJobCommand(input)).catch((e: unknown) => e)) as Error;
    a.destroy();
    const mine = (await new TranscribeJobs({ region: 'eu-west-1', endpoint, credentials: async () => credentials }).startTranscriptionJob(input).catch((e: unknown) => e)) as Error;
    expect({ name: mine.name, message: mine.message }).toEqual({ name: theirs.name, message: theirs.message });
    expect(mine.name).toBe('ConflictException');
  });

  it('a socket silent past the idle time-out fails the attempt with a TimeoutError, retried as transient (3 attempts)', async () => {
    reply = () => undefined; // never answers
    const client = new SignedClient({ service: 'kms', region: 'us-east-1', credentials: async () => credentials, socketTimeoutMs: 200, readError: readJsonRpcError });
    const err = (await client
      .send({ clientName: 'KMSClient', commandName: 'DecryptCommand', input: {}, request: () => jsonPost(new URL(endpoint), '/', 'application/x-amz-json-1.1', '{}', {}) })
      .catch((e: unknown) => e)) as Error & { $metadata: { attempts: number } };
    client.destroy();
    expect(err.name).toBe('TimeoutError');
    expect(err.$metadata.attempts).toBe(3);
    expect(seen).toHaveLength(3);
  });

  it('in Lambda, the invocation’s trace id goes along, sampled or not, as the SDK client sends it (recursive-loop detection reads it)', async () => {
    reply = json(200, {});
    const env = { AWS_LAMBDA_FUNCTION_NAME: 'scoring', _X_AMZN_TRACE_ID: 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0' };
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      const a = new KMSClient({ region: 'us-east-1', endpoint, credentials });
      await a.send(new DecryptCommand({ CiphertextBlob: new Uint8Array([1]) }));
      a.destroy();
      await kmsClient({ region: 'us-east-1', endpoint, credentials: async () => credentials }).call('Decrypt', { CiphertextBlob: new Uint8Array([1]) });
    } finally {
      for (const k of Object.keys(env)) if (saved[k] === undefined) delete process.env[k];
    }
    const [theirs, mine] = seen as [Seen, Seen];
    expect(theirs.headers['x-amzn-trace-id']).toBe(env._X_AMZN_TRACE_ID);
    expect(mine.headers['x-amzn-trace-id']).toBe(theirs.headers['x-amzn-trace-id']);
  });

  const regions = ['us-east-1', 'eu-west-1', 'cn-north-1', 'cn-northwest-1', 'us-gov-west-1', 'us-iso-east-1', 'eu-isoe-west-1', 'mx-central-1'];
  it.each(regions)('call the endpoint the SDK client resolves for the region (%s)', async (region) => {
    const sdkUrl = async (client: { config: { endpointProvider: (p: Record<string, unknown>) => { url: URL } }; destroy(): void }) => {
      const url = client.config.endpointProvider({ Region: region, UseFIPS: false, UseDualStack: false }).url.href;
      client.destroy();
      return url;
    };
    const c = { region, credentials };
    expect(new BedrockConverse({ region }).origin.href).toBe(await sdkUrl(new BedrockRuntimeClient(c) as never));
    expect(kmsClient({ region }).origin.href).toBe(await sdkUrl(new KMSClient(c) as never));
    expect(new TranscribeJobs({ region }).origin.href).toBe(await sdkUrl(new TranscribeClient(c) as never));
    expect(sqsClient({ region }).origin.href).toBe(await sdkUrl(new SQSClient(c) as never));
  });
});
