/**
 * Redrive: moves the messages waiting in a queue's dead-letter queue back to the queue, so the
 * consumer processes them again (scoring after a provider outage, D66). Each message is sent to the
 * queue first and deleted from the dead-letter queue only after, so a crash in between duplicates
 * at worst (the consumers are idempotent) and never loses one.
 *
 *   Local runtime (the SQS endpoint is printed by `npm start`):
 *     npx tsx scripts/redrive.ts --endpoint http://127.0.0.1:<port> scoring
 *   Deployed (queue URLs from the stack; or `aws sqs start-message-move-task --source-arn <DLQ ARN>`):
 *     npx tsx scripts/redrive.ts --queue-url <scoring queue URL> --dlq-url <its DLQ URL>
 */
import { DeleteMessageBatchCommand, GetQueueUrlCommand, ReceiveMessageCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { Command } from 'commander';

/** Moves every message of `dlqUrl` to `queueUrl`; returns how many moved. */
export async function redriveMessages(client: SQSClient, dlqUrl: string, queueUrl: string): Promise<number> {
  let moved = 0;
  for (;;) {
    const { Messages = [] } = await client.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60 }));
    if (!Messages.length) return moved;
    const sent = await client.send(
      new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: Messages.map((m, i) => ({ Id: String(i), MessageBody: m.Body ?? '' })) }),
    );
    const ok = new Set((sent.Successful ?? []).map((s) => s.Id));
    const done = Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })).filter((e) => ok.has(e.Id));
    if (done.length) {
      // A message sent back but not deleted stays in the dead-letter queue: the next run sends it
      // again (a duplicate the consumers absorb, never a loss); it is not counted as moved.
      const deleted = await client.send(new DeleteMessageBatchCommand({ QueueUrl: dlqUrl, Entries: done }));
      moved += deleted.Successful?.length ?? 0;
    }
    if (sent.Failed?.length) throw new Error(`${sent.Failed.length} messages could not be sent back: ${sent.Failed.map((f) => f.Message).join('; ')}`);
  }
}

async function main(): Promise<void> {
  const program = new Command()
    .name('redrive')
    .description('Move the messages of a dead-letter queue back to its queue')
    .argument('[queue]', 'queue name of the wiring (local runtime: its DLQ is <queue>-dlq)')
    .option('--endpoint <url>', 'SQS endpoint (the local runtime prints it)')
    .option('--queue-url <url>', 'the queue to send the messages back to')
    .option('--dlq-url <url>', 'the dead-letter queue to empty')
    .parse();
  const opts = program.opts<{ endpoint?: string; queueUrl?: string; dlqUrl?: string }>();
  const [name] = program.args;
  const client = new SQSClient(opts.endpoint ? { endpoint: opts.endpoint, region: process.env.AWS_REGION ?? 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {});
  const urlOf = async (q: string) => (await client.send(new GetQueueUrlCommand({ QueueName: q }))).QueueUrl!;
  const queueUrl = opts.queueUrl ?? (name ? await urlOf(name) : undefined);
  const dlqUrl = opts.dlqUrl ?? (name ? await urlOf(`${name}-dlq`) : undefined);
  if (!queueUrl || !dlqUrl) program.error('give a queue name, or --queue-url and --dlq-url');
  const n = await redriveMessages(client, dlqUrl!, queueUrl!);
  console.log(`redrive: ${n} message(s) moved from ${dlqUrl} to ${queueUrl}`);
}

if (require.main === module) {
  main().catch((err: Error) => {
    console.error(`redrive failed: ${err.message}`);
    process.exit(1);
  });
}
