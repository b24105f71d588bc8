/**
 * Seals again, for their own purpose, the webhook endpoint secrets sealed before each sealing
 * purpose had an encryption context of its own (shared/webhooks/reseal.ts says what and why). Run
 * once after deploying the change; running it again finds nothing to do. `--dry-run` only counts.
 *
 *   Local runtime (the DynamoDB endpoint and table are printed by `npm start`; the data folder
 *   holds the keyring that stands in for the KMS key):
 *     RUNTIME=local DATA_DIR=./data DYNAMODB_ENDPOINT=http://127.0.0.1:<port> TABLE_NAME=<table> npx tsx scripts/reseal-endpoint-secrets.ts
 *   Deployed (credentials of an operator allowed kms:Decrypt and kms:GenerateDataKey on the
 *   sealing key; its ARN and the table name from the stack's outputs):
 *     KMS_KEY_ID=<key arn> TABLE_NAME=<table> AWS_REGION=<region> npx tsx scripts/reseal-endpoint-secrets.ts
 */
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { resealEndpointSecrets } from '../shared/webhooks/reseal';

async function main(): Promise<void> {
  const program = new Command()
    .name('reseal-endpoint-secrets')
    .description('Seal webhook endpoint secrets of the older sealed forms again, for their own purpose')
    .option('--dry-run', 'count the endpoints that need it; change nothing')
    .parse();
  const { dryRun } = program.opts<{ dryRun?: boolean }>();
  if (process.env.RUNTIME === 'local') process.env.LOCAL_SECRETS_FILE ??= join(resolve(process.env.DATA_DIR ?? 'data'), 'secrets.json');
  const r = await resealEndpointSecrets({ dryRun });
  console.log(
    `${r.endpoints} endpoint(s) looked at; ${r.resealed} ${dryRun ? 'would be sealed again' : 'sealed again'}` +
      (r.changedMeanwhile ? `; ${r.changedMeanwhile} changed meanwhile (a rotation): run again` : ''),
  );
  if (r.changedMeanwhile) process.exitCode = 3;
}

main().catch((err: Error) => {
  console.error(`reseal-endpoint-secrets failed: ${err.message}`);
  process.exit(1);
});
