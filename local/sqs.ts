/**
 * SQS locally: the fauxqs emulator (child process), the queues of the wiring (each with its
 * `-dlq` and redrive policy), and a sender that puts a message on one of them by name. The poller
 * that invokes each queue's consumer is in sqs-poller.ts.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { resolve } from 'node:path';
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { QueueDef } from '../shared/manifest/wiring';
import { localRegion } from './lambda';

export interface SqsEmulator {
  endpoint: string;
  port: number;
  pid: number;
  /** Calls `cb` if the child exits other than through stop() (it crashed or was killed). */
  onUnexpectedExit(cb: (code: number | null) => void): void;
  stop(): Promise<void>;
}

/**
 * Starts fauxqs in a child process on `host:port` (0 = any free port). The child ignores SIGINT and
 * SIGTERM (a Ctrl-C reaches the whole process group): it stops when stop() closes its stdin, or
 * when this process dies and the pipe closes.
 */
export async function startSqsEmulator(opts: { host?: string; port?: number } = {}): Promise<SqsEmulator> {
  const host = opts.host ?? '127.0.0.1';
  const child = spawn(process.execPath, [resolve(__dirname, 'fauxqs-process.mjs')], {
    cwd: resolve(__dirname, '..'),
    env: { ...process.env, FAUXQS_BIND: host, FAUXQS_PORT: String(opts.port ?? 0) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const port = await new Promise<number>((ok, fail) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once('line', (line) => {
      lines.close();
      ok((JSON.parse(line) as { port: number }).port);
    });
    child.once('exit', (code) => fail(new Error(`SQS emulator (fauxqs) exited with code ${code} before listening`)));
  });
  let stopping = false;
  return {
    endpoint: `http://${host}:${port}`,
    port,
    pid: child.pid!,
    onUnexpectedExit(cb) {
      child.once('exit', (code) => {
        if (!stopping) cb(code);
      });
    },
    async stop() {
      stopping = true;
      if (child.exitCode === null && child.signalCode === null) {
        child.stdin!.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

export function localSqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: localRegion(), credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}

/** The environment variable holding a queue's URL, as `shared/config` reads it. */
export function queueUrlEnvName(queueName: string): string {
  return `QUEUE_URL_${queueName.toUpperCase().replace(/-/g, '_')}`;
}

export interface LocalQueue {
  def: QueueDef;
  url: string;
  arn: string;
  dlqUrl: string;
  dlqArn: string;
}

async function createQueue(client: SQSClient, name: string, attributes: Record<string, string>): Promise<{ url: string; arn: string }> {
  const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  const { Attributes } = await client.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }));
  return { url: QueueUrl!, arn: Attributes!.QueueArn! };
}

/**
 * Creates each queue and its dead-letter queue with the wiring's settings. `delayOverrides` replaces
 * a queue's delivery delay (the sandbox queue follows SANDBOX_DELAY_SECONDS locally).
 */
export async function createQueues(
  client: SQSClient,
  defs: readonly QueueDef[],
  delayOverrides: Record<string, number> = {},
): Promise<Map<string, LocalQueue>> {
  const queues = new Map<string, LocalQueue>();
  for (const def of defs) {
    const dlq = await createQueue(client, `${def.name}-dlq`, { MessageRetentionPeriod: String(14 * 24 * 3600) });
    const delay = delayOverrides[def.name] ?? def.deliveryDelaySeconds ?? 0;
    const main = await createQueue(client, def.name, {
      VisibilityTimeout: String(def.visibilityTimeoutSeconds),
      DelaySeconds: String(delay),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: String(def.maxReceiveCount) }),
    });
    queues.set(def.name, { def, url: main.url, arn: main.arn, dlqUrl: dlq.url, dlqArn: dlq.arn });
  }
  return queues;
}

export type QueueSender = (queueName: string, body: string) => Promise<void>;

export function queueSender(client: SQSClient, queues: Map<string, LocalQueue>): QueueSender {
  return async (queueName, body) => {
    const q = queues.get(queueName);
    if (!q) throw new Error(`unknown queue ${queueName}`);
    await client.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: body }));
  };
}
