/**
 * Jest's Node environment, plus three steps at the end of each test file, after every afterAll hook
 * of the file, when nothing of the file is still running:
 *
 * - The file's OCR worker thread is terminated (test/support/release-models.ts hands the step over
 *   through a global). Left running, it keeps Jest from exiting.
 * - The file's own DynamoDB Local, if its runtimes started one (test/support/harness.ts), is stopped.
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

class ProjectEnvironment extends TestEnvironment {
  async teardown() {
    try {
      const shutdown = this.global.__shutdownModels;
      if (typeof shutdown === 'function') await shutdown();
    } finally {
      const stopDynamo = this.global.__stopFileDynamo;
      if (typeof stopDynamo === 'function') await stopDynamo().catch(() => {});
      for (const store of storesOfThisFile) store.disable();
      storesOfThisFile.clear();
      await super.teardown();
    }
  }
}

module.exports = ProjectEnvironment;
