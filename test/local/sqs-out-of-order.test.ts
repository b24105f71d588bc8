import { ChangeMessageVisibilityBatchCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import type { LocalQueue } from '../../local/sqs';
import { seededRandom } from '../../local/seeded-random';
import type { OutOfOrderOptions } from '../../local/sqs-records';
import { waitFor } from '../support/harness';
import { useSqsEmulator } from '../support/sqs-queues';

const def = { consumer: 'unused.ts', visibilityTimeoutSeconds: 1, maxReceiveCount: 5, batchSize: 5, consumerTimeoutSeconds: 1, consumerMemoryMb: 128, dlqAlarmThreshold: 1, access: { table: 'read' as const } };

// A standard queue's ordering is best effort: messages may arrive, and a batch may hold them, in
// another order than they were sent. fauxqs hands them out in send order; the runtime's
// `outOfOrderDeliveries` shuffles each batch and holds some messages back behind later ones, so
// tests can prove a consumer assumes no order. Held back, a message has been received (its count
// goes up, as on SQS), but it is never lost and never spends the receive that would send it to the
// dead-letter queue.
describe('out-of-order deliveries: batches shuffled, some messages overtaken, none lost', () => {
  const { sqs, newQueue, depth: count, poll: startPoller } = useSqsEmulator(def);
  const depth = (url: string) => count(url, ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed']);
  /** Sends m00, m01, … in that order (batches of 10, each in order). */
  const sendAll = async (queue: LocalQueue, n: number) => {
    const bodies = Array.from({ length: n }, (_, i) => `m${String(i).padStart(2, '0')}`);
    for (let i = 0; i < n; i += 10) {
      await sqs().send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: bodies.slice(i, i + 10).map((b, j) => ({ Id: String(j), MessageBody: b })) }));
    }
    return bodies;
  };
  const poll = (queue: LocalQueue, handler: (e: SQSEvent) => unknown, outOfOrderDeliveries: boolean | OutOfOrderOptions, concurrency = 1) =>
    startPoller(queue, handler, { concurrency, outOfOrderDeliveries });
  type Seen = { body: string; receives: string };
  const recorder = (seen: Seen[], batches: string[][] = []) => (e: SQSEvent) => {
    batches.push(e.Records.map((r) => r.body));
    for (const r of e.Records) seen.push({ body: r.body, receives: r.attributes.ApproximateReceiveCount });
  };
  const inversions = (order: string[]) => order.reduce((n, b, i) => n + order.slice(i + 1).filter((later) => later < b).length, 0);

  it('off (the default), fauxqs and the poller deliver strictly in send order: the gap this option closes', async () => {
    const queue = await newQueue('in-order');
    const bodies = await sendAll(queue, 20);
    const seen: Seen[] = [];
    poll(queue, recorder(seen), false);
    await waitFor(async () => seen.length === 20 && (await depth(queue.url)) === 0);
    expect(seen.map((s) => s.body)).toEqual(bodies);
  });

  it('on (seeded), messages are delivered out of send order, each exactly once, none lost, and a held-back message comes back with its receive counted', async () => {
    const queue = await newQueue('shuffled');
    const bodies = await sendAll(queue, 20);
    const seen: Seen[] = [];
    const p = poll(queue, recorder(seen), { random: seededRandom(7), holdBackProbability: 0.3, maxHoldBackSeconds: 1 });
    await waitFor(async () => seen.length >= 20 && (await depth(queue.url)) === 0, { timeoutMs: 15_000 });
    await new Promise((r) => setTimeout(r, 1_500)); // past the visibility timeout: nothing else comes back

    const order = seen.map((s) => s.body);
    // Every message exactly once (as without the option: the consumer succeeds), none lost.
    expect([...order].sort()).toEqual(bodies);
    expect(await count(queue.dlqUrl, ['ApproximateNumberOfMessages'])).toBe(0);
    // Out of send order, and not just a little.
    expect(order).not.toEqual(bodies);
    expect(inversions(order)).toBeGreaterThan(10);
    // Held back: received once unrun, so delivered at its second receive; the others at their first.
    expect(p.heldBackReceives).toBeGreaterThan(0);
    expect(seen.filter((s) => s.receives === '2')).toHaveLength(p.heldBackReceives);
    expect(seen.filter((s) => s.receives !== '1' && s.receives !== '2')).toEqual([]);
    // A held-back message was overtaken by messages sent after it.
    const held = seen.find((s) => s.receives === '2')!;
    expect(order.slice(0, order.indexOf(held.body)).some((before) => before > held.body)).toBe(true);
  });

  it('a batch reaches the consumer shuffled (no message held back)', async () => {
    const queue = await newQueue('batch-shuffled');
    const bodies = await sendAll(queue, 5);
    const seen: Seen[] = [];
    const batches: string[][] = [];
    poll(queue, recorder(seen, batches), { random: seededRandom(3), holdBackProbability: 0 });
    await waitFor(async () => seen.length === 5 && (await depth(queue.url)) === 0);
    expect(batches).toHaveLength(1);
    expect([...batches[0]!].sort()).toEqual(bodies);
    expect(batches[0]).not.toEqual(bodies);
    expect(seen.every((s) => s.receives === '1')).toBe(true);
  });

  it('at least once as without it: a message its consumer fails comes back, and each is delivered as often as with the option off', async () => {
    const deliveries = async (name: string, ooo: boolean | OutOfOrderOptions) => {
      const queue = await newQueue(name);
      await sendAll(queue, 15);
      const seen: Seen[] = [];
      // m00, m03, m06 … fail on their first delivery to the consumer, whatever their receive count.
      const failedOnce = new Set<string>();
      poll(
        queue,
        (e: SQSEvent) => {
          const failures = [];
          for (const r of e.Records) {
            seen.push({ body: r.body, receives: r.attributes.ApproximateReceiveCount });
            if (Number(r.body.slice(1)) % 3 === 0 && !failedOnce.has(r.body)) {
              failedOnce.add(r.body);
              failures.push({ itemIdentifier: r.messageId });
            }
          }
          return { batchItemFailures: failures };
        },
        ooo,
        2,
      );
      await waitFor(async () => seen.length >= 20 && (await depth(queue.url)) === 0, { timeoutMs: 20_000 });
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await count(queue.dlqUrl, ['ApproximateNumberOfMessages'])).toBe(0);
      const times: Record<string, number> = {};
      for (const s of seen) times[s.body] = (times[s.body] ?? 0) + 1;
      return times;
    };
    const off = await deliveries('retried-in-order', false);
    const on = await deliveries('retried-out-of-order', { random: seededRandom(11), holdBackProbability: 0.5, maxHoldBackSeconds: 1 });
    expect(Object.values(off).reduce((a, b) => a + b)).toBe(20);
    expect(on).toEqual(off);
  });

  it('a message that cannot be handed back is delivered at once, not hidden for the visibility timeout', async () => {
    const queue = await newQueue('hand-back-fails', { visibilityTimeoutSeconds: 60 });
    const bodies = await sendAll(queue, 5);
    const seen: Seen[] = [];
    // The emulator refuses every ChangeMessageVisibilityBatch (as an SQS outage would).
    const refusing = Object.create(sqs()) as SQSClient;
    refusing.send = ((cmd: unknown, ...rest: unknown[]) =>
      cmd instanceof ChangeMessageVisibilityBatchCommand ? Promise.reject(new Error('ServiceUnavailable')) : (sqs().send as (...a: unknown[]) => unknown)(cmd, ...rest)) as never;
    const p = startPoller(queue, recorder(seen), { client: refusing, concurrency: 1, outOfOrderDeliveries: { random: seededRandom(9), holdBackProbability: 1 } });
    await waitFor(async () => seen.length === 5 && (await depth(queue.url)) === 0, { timeoutMs: 5_000 });
    expect(seen.map((s) => s.body).sort()).toEqual(bodies);
    expect(seen.every((s) => s.receives === '1')).toBe(true);
    expect(p.heldBackReceives).toBe(0);
  });

  it('a held-back receive never sends a message to its dead-letter queue: only on the first receive, and only when maxReceiveCount leaves another', async () => {
    const once = await newQueue('one-receive', { maxReceiveCount: 1 });
    const twice = await newQueue('two-receives', { maxReceiveCount: 2 });
    await sendAll(once, 5);
    await sendAll(twice, 5);
    const seenOnce: Seen[] = [];
    const seenTwice: Seen[] = [];
    // Every first receive is held back where it may be; the consumer fails everything it gets.
    const failAll = (seen: Seen[]) => (e: SQSEvent) => {
      recorder(seen)(e);
      return { batchItemFailures: e.Records.map((r) => ({ itemIdentifier: r.messageId })) };
    };
    const pOnce = poll(once, failAll(seenOnce), { random: seededRandom(5), holdBackProbability: 1, maxHoldBackSeconds: 0 });
    const pTwice = poll(twice, failAll(seenTwice), { random: seededRandom(5), holdBackProbability: 1, maxHoldBackSeconds: 0 });
    await waitFor(async () => (await count(once.dlqUrl, ['ApproximateNumberOfMessages'])) === 5 && (await count(twice.dlqUrl, ['ApproximateNumberOfMessages'])) === 5, { timeoutMs: 20_000 });
    // maxReceiveCount 1: never held back; each message reached the consumer at its one receive.
    expect(pOnce.heldBackReceives).toBe(0);
    expect(seenOnce.map((s) => s.receives)).toEqual(['1', '1', '1', '1', '1']);
    // maxReceiveCount 2: each held back once, then delivered at its second (last) receive.
    expect(pTwice.heldBackReceives).toBe(5);
    expect(seenTwice.map((s) => s.receives)).toEqual(['2', '2', '2', '2', '2']);
  });
});
