/**
 * The zod the request schemas are written with: zod/mini, the functional, tree-shakable build of
 * zod 4 (the same core, checks, issues and JSON Schema output as the full API), with zod's English
 * messages. A route's bundle then carries only the checks its schemas use (about 25 KB minified)
 * instead of the whole chainable API (about 95 KB), which every request schema used to load at a
 * cold start. Every schema a handler runs (request bodies and queries, the upload form, model and
 * Transcribe replies in the pipeline) uses it; the full API stays in the OpenAPI response schemas,
 * which no handler loads (test/cdk/request-bundles.test.ts).
 *
 * `config(en())` is what the full `zod` entry does when it is imported; the mini entry leaves the
 * messages to the caller, so the issues a client reads are the same words either way.
 */
import { config, refine } from 'zod/mini';
import { en } from 'zod/locales';

config(en());

// Re-exported name by name (`export *`), never as one namespace object, so a bundle keeps only
// what a module uses. Import it as `import * as z from '…/shared/zod'`.
export * from 'zod/mini';

/**
 * DynamoDB stores no non-zero number closer to zero than 1e-130 ("Number underflow"): such a
 * value is refused on its field, never left to fail the write as a 500.
 */
export const storable = () => refine<number>((n) => n === 0 || Math.abs(n) >= 1e-130, { message: 'This number is too close to zero to store; send 0 instead.' });
