/**
 * Jest's Node environment, plus three steps at the end of each test file, after every afterAll hook
 * of the file, when nothing of the file is still running:
 *
 * - The file's OCR worker thread is terminated (test/support/release-models.ts hands the step over
 *   through a global). Left running, it keeps Jest from exiting.
 * - The DynamoDB Local the file's runtimes used (test/support/harness.ts) counts one more file; it is
 *   stopped after FILES_PER_DYNAMO files (below).
 * - Every AsyncLocalStorage made while the file ran is disabled. Jest loads the modules afresh for
 *   every file, its own test runner (jest-circus) included, and each load makes new stores: ours
 *   (the invocation, log scope, secret grants, object budget and local grants) and jest-circus's
 *   one per file. Node keeps every store in use in one process-wide list that each new promise
 *   walks, so without this step promises get slower file after file: 100,000 awaits took 0.09 s
 *   after the first of thirty unit files and 1.2 s after the last (0.02 s throughout with it). A
 *   Lambda instance loads its modules once, so it never has more than its own few stores.
 */
const asyncHooks = require('node:async_hooks');
const { TestEnvironment } = require('jest-environment-node');

// The test files load Node's own modules from this process (Jest does not sandbox them), so every
// store a file makes, directly or inside a library, is made with this class.
const storesOfThisFile = new Set();
const NodeAsyncLocalStorage = asyncHooks.AsyncLocalStorage;
asyncHooks.AsyncLocalStorage = class AsyncLocalStorage extends NodeAsyncLocalStorage {
  constructor(...args) {
    super(...args);
    storesOfThisFile.add(this);
  }
};

/**
 * The DynamoDB Local the test files' runtimes share, handed from one file to the next and replaced
 * by a fresh one after FILES_PER_DYNAMO files. DynamoDB Local serves each request more slowly the
 * more it has done (one suite's emulator CPU: 16 s as the first file, 24 s as the third, 61 s as the
 * eleventh; dropping tables does not undo it), and each start costs about 3.4 s of CPU: a fresh
 * instance per file was 110 starts a run. Each file's runtimes still make tables of their own.
 * Held here, in this process's own realm, because each file's modules are loaded afresh: one per
 * process, so each Jest worker (`npm test` runs two) hands its own from file to file.
 */
const FILES_PER_DYNAMO = Number(process.env.TEST_FILES_PER_DYNAMO || 5);
const dynamoForFiles = {
  /** { ready: Promise<DynamoDbLocal>, files: number, pid: number | null } or null */
  current: null,
  /**
   * The shared instance for a file: the current one, or a fresh one from `start` (a function of the
   * file's own modules) when there is none.
   */
  forFile(start) {
    if (!this.current) {
      const ready = start();
      const entry = { ready, files: 0, pid: null };
      this.current = entry;
      ready.then((d) => {
        entry.pid = d.pid;
        // Held between files, it must not keep a Jest worker alive at the run's end: the worker
        // then exits on its own, and its 'exit' handler (below) kills the JVM.
        d.process.unref();
        d.process.stderr?.unref();
      }, () => {});
      // An instance that failed to start or died is not handed on.
      ready.then((d) => d.onUnexpectedExit(() => this.current === entry && (this.current = null)), () => this.current === entry && (this.current = null));
    }
    return this.current.ready;
  },
  /** A file that used the current instance is done: stops it when it has served its files. */
  async fileDone() {
    const entry = this.current;
    if (!entry || ++entry.files < FILES_PER_DYNAMO) return;
    await this.stop();
  },
  async stop() {
    const entry = this.current;
    this.current = null;
    if (entry) await entry.ready.then((d) => d.stop()).catch(() => {});
  },
};
// global-teardown.ts stops the last one (same process, same realm); nor is one ever left running
// when the process ends some other way.
globalThis.__dynamoForFiles = dynamoForFiles;
process.once('exit', () => {
  const entry = dynamoForFiles.current;
  if (entry?.pid) killQuietly(entry.pid); // no awaiting here: the process is exiting
});
// A Jest worker that does not exit within half a second of the run's end (a JVM's pipes keep its
// event loop alive) gets SIGTERM, whose default ends the process without its 'exit' handlers: the
// JVMs (this one and those local/dynamodb.ts started) would outlive the run. Exiting on SIGTERM runs
// them; 143 is the code a SIGTERM'd process has, which the worker pool takes as a clean stop.
if (process.listenerCount('SIGTERM') === 0) process.once('SIGTERM', () => process.exit(143));

function killQuietly(pid) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

class ProjectEnvironment extends TestEnvironment {
  async setup() {
    await super.setup();
    this.usedDynamo = false;
    this.global.__dynamoForFiles = {
      forFile: (start) => {
        this.usedDynamo = true;
        return dynamoForFiles.forFile(start);
      },
    };
  }

  async teardown() {
    try {
      const shutdown = this.global.__shutdownModels;
      if (typeof shutdown === 'function') await shutdown();
    } finally {
      if (this.usedDynamo) await dynamoForFiles.fileDone();
      for (const store of storesOfThisFile) store.disable();
      storesOfThisFile.clear();
      await super.teardown();
    }
  }
}

module.exports = ProjectEnvironment;
