/**
 * The client's types are generated from the OpenAPI document (openapi-typescript): the checked-in
 * packages/client/src/schema.ts equals a fresh generation (`npm run client:types`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');

test('D72: packages/client/src/schema.ts is what openapi-typescript generates from shared/openapi/openapi.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'client-types-'));
  try {
    const out = join(dir, 'schema.ts');
    execFileSync(process.execPath, [join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), join(ROOT, 'shared/openapi/openapi.json'), '-o', out], { stdio: 'pipe' });
    expect(readFileSync(join(ROOT, 'packages/client/src/schema.ts'), 'utf8')).toBe(readFileSync(out, 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
