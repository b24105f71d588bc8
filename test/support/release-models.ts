/**
 * What each test file leaves behind, released. Jest gives each file its own module registry, so:
 * - a file that annotated images owns its own OCR worker thread (shared/media/annotation/models.ts);
 *   left running, it keeps the test process alive, so every file ends by terminating it;
 * - a file's modules make their own AsyncLocalStorage stores (shared/context-store.ts), released
 *   when the file is done.
 */
import { shutdownModels } from '../../shared/media/annotation/models';
import { disableContextStores } from '../../shared/context-store';

afterAll(async () => {
  await shutdownModels();
});

// The file's context stores are released by the test environment's teardown, after every
// afterAll hook (test/support/environment.cjs): it finds them through this global.
(globalThis as { __releaseContextStores?: () => void }).__releaseContextStores = disableContextStores;
