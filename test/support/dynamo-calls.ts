/**
 * Records every DynamoDB call the process makes through the shared client (tests and bench only):
 * command name, start and end time, and the capacity units DynamoDB reports (the recorder asks for
 * `ReturnConsumedCapacity: TOTAL` on each call). `steps()` counts the sequential steps: a call that
 * starts after every earlier call has ended opens a new step.
 */
import { dynamo } from '../../shared/db/client';

export interface DynamoCall {
  command: string;
  start: number;
  end: number;
  readUnits: number;
  writeUnits: number;
  /** True for the once-a-minute last_used_at write (an UpdateItem on the API key's record). */
  lastUsedWrite: boolean;
  /** What `opts.tag` answered when the call started ('' without one). */
  tag: string;
  /** The command's input as sent (after the recorder's additions). */
  input: Record<string, unknown>;
  /** The error's name when the call failed (e.g. a cancelled transaction). */
  error?: string;
}

const READS = new Set(['GetItemCommand', 'BatchGetItemCommand', 'QueryCommand', 'ScanCommand', 'TransactGetItemsCommand']);

export interface DynamoCallRecorder {
  calls: DynamoCall[];
  reset(): void;
  steps(): number;
  stop(): void;
}

/** `opts.tag` names the work a call belongs to (e.g. the invocation's function), read when the call starts. */
export function recordDynamoCalls(opts: { tag?: () => string } = {}): DynamoCallRecorder {
  const calls: DynamoCall[] = [];
  let on = true;
  const name = `recordDynamoCalls-${Math.random().toString(36).slice(2)}`;
  dynamo().middlewareStack.add(
    (next, context) => async (args) => {
      if (!on) return next(args);
      const input = args.input as Record<string, unknown>;
      input.ReturnConsumedCapacity ??= 'TOTAL';
      const command = String((context as { commandName?: string }).commandName);
      // Keys are plain values or marshalled ({S: …}) depending on where the document client is.
      const sk = (input.Key as { SK?: string | { S?: string } } | undefined)?.SK;
      const lastUsedWrite = command === 'UpdateItemCommand' && String(typeof sk === 'object' ? sk?.S : sk).startsWith('KEY#');
      const tag = opts.tag?.() ?? '';
      const start = performance.now();
      try {
        const out = await next(args);
        const cc = (out.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
        const units = (Array.isArray(cc) ? cc : cc ? [cc] : []).reduce((sum: number, c: { CapacityUnits?: number }) => sum + (c.CapacityUnits ?? 0), 0);
        const read = READS.has(command);
        calls.push({ command, start, end: performance.now(), readUnits: read ? units : 0, writeUnits: read ? 0 : units, lastUsedWrite, tag, input });
        return out;
      } catch (e) {
        calls.push({ command, start, end: performance.now(), readUnits: 0, writeUnits: 0, lastUsedWrite, tag, input, error: (e as Error).name });
        throw e;
      }
    },
    { step: 'initialize', name },
  );
  return {
    calls,
    reset: () => void calls.splice(0),
    steps() {
      const sorted = [...calls].sort((a, b) => a.start - b.start);
      let steps = 0;
      let lastEnd = -Infinity;
      for (const c of sorted) {
        if (c.start >= lastEnd) steps++;
        lastEnd = Math.max(lastEnd, c.end);
      }
      return steps;
    },
    stop() {
      on = false;
      dynamo().middlewareStack.remove(name);
    },
  };
}
