/**
 * Every test file ends by terminating the OCR worker thread that annotating an image starts
 * (shared/media/annotation/models.ts). Jest gives each file its own module registry, so a file
 * that annotated images owns its own worker; left running, it keeps the test process alive.
 */
import { shutdownModels } from '../../shared/media/annotation/models';

afterAll(async () => {
  await shutdownModels();
});
