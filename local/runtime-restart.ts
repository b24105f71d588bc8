/**
 * What carries the local runtime's work from one run to the next (startRuntime, local/runtime.ts):
 * the queued messages saved at a clean stop and restored at start (fauxqs keeps them in memory), the
 * run marker that tells a start the last run was killed, and the start-up reconcilers that then
 * re-enqueue unfinished work from the table.
 */
import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { EventRouter } from './eventbridge';
import { LOCAL_ACCOUNT_ID } from './lambda';
import { registerReconciler, runMarker, runReconcilers } from './reconcilers';
import { UNFINISHED_WORK, webhooksReconciler } from './reconcile-unfinished';
import type { LocalQueue, QueueSender, SqsEmulator } from './sqs';
import { countMessages, readSnapshot, removeSnapshot, restoreSnapshot, takeSnapshot, writeSnapshot } from './sqs-snapshot';
import type { StartContext } from './runtime-options';

/** What a start found of the last run, and whether this one's reconcilers failed. */
export interface RunState {
  /** The last run did not stop cleanly: its run marker was still there. */
  uncleanBefore: boolean;
  killedRunStartedAt: string | undefined;
  /** A reconciler failed: the marker stays through a clean stop, so the next start runs them again. */
  reconcileFailed: boolean;
}

/**
 * With a data folder: restores the queued messages the last clean stop saved, takes the run marker,
 * and pushes the stops that save the queues and then release the marker. Without one, a fresh run.
 */
export async function carryQueuesAcrossRestarts(ctx: StartContext, sqs: SQSClient, sqsEmulator: SqsEmulator, queues: Map<string, LocalQueue>): Promise<RunState> {
  const { log, dataDir, stops } = ctx;
  const run: RunState = { uncleanBefore: false, killedRunStartedAt: undefined, reconcileFailed: false };
  if (dataDir) {
    // fauxqs keeps messages in memory: carry them across restarts (local/sqs-snapshot.ts).
    const snapshotFile = join(dataDir, 'sqs-snapshot.json');
    const urls = new Map<string, string>();
    for (const q of queues.values()) urls.set(q.def.name, q.url).set(`${q.def.name}-dlq`, q.dlqUrl);
    // Held while running; removed last in a clean stop, once the queues are saved. Found at
    // start, it means the last run was killed: the reconcilers then re-enqueue unfinished work.
    // Taken before the saved queues are restored, so a kill from here on is seen as one.
    const marker = runMarker(join(dataDir, 'runtime.running'));
    run.uncleanBefore = marker.uncleanBefore;
    run.killedRunStartedAt = marker.startedAt ?? undefined;
    const snapshot = readSnapshot(snapshotFile);
    if (snapshot) {
      const n = await restoreSnapshot(sqs, sqsEmulator.endpoint, (name) => urls.get(name), snapshot, (name, count) =>
        log.warn(`sqs: ${count} saved messages of queue ${name}, which no longer exists, left in ${snapshotFile}.unrestored`),
      );
      const unknown = Object.keys(snapshot.queues).filter((name) => !urls.has(name));
      if (unknown.length) writeSnapshot(`${snapshotFile}.unrestored`, { ...snapshot, queues: Object.fromEntries(unknown.map((k) => [k, snapshot.queues[k]!])) });
      // The file stays until this run's clean stop replaces it: fauxqs holds the restored messages
      // in memory only, so a kill before then restores them again at the next start (delivery is
      // at least once, and every consumer absorbs a repeat) instead of losing them, the
      // dead-letter queues' included.
      log.info(`sqs: restored ${n} queued messages saved at ${snapshot.takenAt}`);
    }
    let snapshotSaved = false;
    stops.push(() => {
      if (snapshotSaved && !run.reconcileFailed) marker.release();
    });
    // Runs after the pollers, stream pipes and scheduler have stopped (stops run in reverse).
    stops.push(async () => {
      const saved = await takeSnapshot(sqsEmulator.endpoint, [...urls.keys()]);
      const n = countMessages(saved);
      if (n) {
        writeSnapshot(snapshotFile, saved);
        log.info(`sqs: saved ${n} queued messages to ${snapshotFile}`);
      } else removeSnapshot(snapshotFile); // the one restored at start is consumed

      snapshotSaved = true;
    });
  }
  return run;
}

/**
 * The start-up reconcilers, once the table is there and before the pollers and stream pipes start:
 * after a killed run, every re-enqueueing of unfinished work; after a clean one (data folder only),
 * the webhooks' fan-out. Records in `run` whether one failed.
 */
export async function reconcileAtStart(ctx: StartContext, run: RunState, send: QueueSender, router: EventRouter): Promise<void> {
  const { log, dataDir, bucketName, region } = ctx;
  if (run.uncleanBefore) {
    // Before the pollers and stream pipes start: what they would redo is claimed in the table.
    log.warn('the last run did not stop cleanly (killed?): re-enqueueing unfinished work');
    for (const r of UNFINISHED_WORK) registerReconciler(r);
    run.reconcileFailed = !(await runReconcilers({ send, route: (event) => router.route(event), bucketName, account: LOCAL_ACCOUNT_ID, region, log, killedRunStartedAt: run.killedRunStartedAt }));
  } else if (dataDir) {
    // Even after a clean stop: an event committed by a batch that finished while the runtime was
    // stopping (after the stream pipes had stopped) may never have been fanned out, and the stream
    // position does not survive a restart of DynamoDB Local. Fan-outs claim their deliveries, so
    // an event fanned out twice is still delivered once per endpoint (D64).
    registerReconciler(webhooksReconciler);
    run.reconcileFailed = !(await runReconcilers({ send, route: (event) => router.route(event), bucketName, account: LOCAL_ACCOUNT_ID, region, log }));
  }
}
