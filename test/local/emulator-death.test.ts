/**
 * A local runtime whose SQS emulator dies cannot keep queued work: it says so and lets its owner
 * stop (`npm start` exits non-zero, leaving the run marker, so the next start re-enqueues from the
 * table), instead of going on with every queue send failing into dead letters.
 */
import { startTestRuntime, waitFor } from '../support/harness';

it('the SQS emulator dying on its own is reported to the runtime\'s owner; stopping it normally is not', async () => {
  const died: string[] = [];
  const rt = await startTestRuntime({ enablePollers: false, onChildExit: (what) => died.push(what) });
  try {
    process.kill(rt.sqsPid, 'SIGKILL');
    await waitFor(() => died.length > 0);
    expect(died).toEqual([expect.stringContaining('SQS emulator')]);
  } finally {
    await rt.stop();
  }
  const calm: string[] = [];
  const other = await startTestRuntime({ enablePollers: false, onChildExit: (what) => calm.push(what) });
  await other.stop();
  await new Promise((r) => setTimeout(r, 200));
  expect(calm).toEqual([]);
});
