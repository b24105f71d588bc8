/**
 * The local runtime's model worker threads never keep a process alive while idle (local/model-pool.ts):
 * a process whose pool has a worker and no task in flight exits when its own work is done. (An idle
 * worker's message port stayed referenced, and a test run that left one never exited.)
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const root = resolve(__dirname, '../..');

it('a process with an idle model worker exits on its own', () => {
  const script = `
    const { ModelWorkerPool } = require('./local/model-pool');
    const pool = new ModelWorkerPool({ size: 1 });
    pool.spawn(0); // a started worker, no task
    console.log('running', pool.running);
  `;
  const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], { cwd: root, encoding: 'utf8', timeout: 20_000 });
  expect(r.stdout).toContain('running 1');
  expect({ signal: r.signal, status: r.status }).toEqual({ signal: null, status: 0 }); // a hang ends by the time-out's SIGTERM
});
