/**
 * `npm run openapi`: writes shared/openapi/openapi.json from the handlers' schemas; with `--check`
 * fails when the checked-in file differs (test/api/openapi-document.test.ts does the same).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildOpenApi, loadAllHandlers } from './build';

export const DOCUMENT_PATH = resolve(__dirname, 'openapi.json');

export async function renderDocument(): Promise<string> {
  await loadAllHandlers();
  return `${JSON.stringify(buildOpenApi(), null, 2)}\n`;
}

if (require.main === module) {
  renderDocument()
    .then((text) => {
      if (process.argv.includes('--check')) {
        if (readFileSync(DOCUMENT_PATH, 'utf8') !== text) {
          console.error('shared/openapi/openapi.json is out of date: run npm run openapi');
          process.exit(1);
        }
        return;
      }
      writeFileSync(DOCUMENT_PATH, text);
      console.log(`wrote ${DOCUMENT_PATH}`);
    })
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
