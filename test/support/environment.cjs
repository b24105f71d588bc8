/**
 * Jest's Node environment, plus two steps at the end of each test file, after every afterAll hook
 * of the file (test/support/release-models.ts hands them over through globals): the file's OCR
 * worker thread is terminated (left running, it keeps Jest from exiting), and the file's
 * AsyncLocalStorage stores are disabled (shared/context-store.ts). Jest loads the modules afresh for every file,
 * Node keeps every store ever used in one process-wide list that each new promise walks, and
 * without this step code later in a run slows down file after file. It runs after every afterAll
 * hook of the file, when nothing of the file is still running.
 */
const { TestEnvironment } = require('jest-environment-node');

class ProjectEnvironment extends TestEnvironment {
  async teardown() {
    try {
      const shutdown = this.global.__shutdownModels;
      if (typeof shutdown === 'function') await shutdown();
      const release = this.global.__releaseContextStores;
      if (typeof release === 'function') release();
    } finally {
      await super.teardown();
    }
  }
}

module.exports = ProjectEnvironment;
