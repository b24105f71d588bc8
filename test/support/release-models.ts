/**
 * What each test file leaves behind, released: Jest gives each file its own module registry, so a
 * file that annotated images owns its own OCR worker thread (shared/media/annotation/models.ts).
 * Left running, it keeps the test process alive (Jest then never exits), so every file ends by
 * terminating it. This runs in the test environment's teardown (test/support/environment.cjs),
 * after every afterAll hook of the file: an afterAll here would run before the file's own (this
 * file's hooks are declared first), while its runtime still runs consumers, and an annotation that
 * started after it made a new OCR worker that nothing terminated (a CI run that never exited,
 * 2026-11-27).
 */
import { shutdownModels } from '../../shared/media/annotation/models';

Object.assign(globalThis as object, { __shutdownModels: shutdownModels });
