/**
 * Rotate the local runtime's sealing key (the stand-in for the KMS key): a new key becomes
 * current, the older ones stay, so every secret sealed before still opens. Run it while the
 * runtime is stopped; the next `npm start` seals with the new key.
 *
 *   npx tsx scripts/rotate-local-sealing-key.ts [data dir, default DATA_DIR or ./data]
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { rotateLocalSealingKey } from '../local/secrets';

const dir = resolve(process.argv[2] ?? process.env.DATA_DIR ?? 'data');
const file = join(dir, 'secrets.json');
if (!existsSync(file)) {
  console.error(`no ${file}: start the runtime once with this data folder first`);
  process.exit(1);
}
console.log(`sealing key rotated in ${file}: new current key ${rotateLocalSealingKey(file)}`);
