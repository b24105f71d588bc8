/**
 * Sets or removes an organization's rate-limit override (the enterprise tier): on the organization
 * and on both of its balance items, in one transaction, so every request sees it at once
 * (shared/orgs/rate-tier.ts). Writing `rate_limits` on the organization item by hand is not
 * enough: a paying organization's requests read their tier from the balance.
 *
 *   Local runtime (the DynamoDB endpoint and table are printed by `npm start`):
 *     DYNAMODB_ENDPOINT=http://127.0.0.1:<port> npx tsx scripts/rate-limit-override.ts org_… 500 20000
 *   Deployed (credentials of an operator; the table name from the stack's outputs):
 *     TABLE_NAME=<table> AWS_REGION=<region> npx tsx scripts/rate-limit-override.ts org_… 500 20000
 *   Remove it (back to the free or standard tier):
 *     … npx tsx scripts/rate-limit-override.ts org_… --clear
 */
import { Command } from 'commander';
import { setRateLimitOverride } from '../shared/orgs/rate-tier';

async function main(): Promise<void> {
  const program = new Command()
    .name('rate-limit-override')
    .description("Set or remove an organization's rate-limit override")
    .argument('<org_id>', 'the organization (org_…)')
    .argument('[per_minute]', 'requests per minute, per API key')
    .argument('[per_hour]', 'requests per hour, per API key')
    .option('--clear', 'remove the override')
    .parse();
  const [orgId, perMinute, perHour] = program.args;
  const { clear } = program.opts<{ clear?: boolean }>();
  if (!orgId?.startsWith('org_')) program.error('the first argument is an organization id (org_…)');
  if (clear) {
    if (perMinute || perHour) program.error('--clear takes no limits');
    await setRateLimitOverride(orgId!, null);
    console.log(`rate-limit override removed from ${orgId}`);
    return;
  }
  const limits = { perMinute: Number(perMinute), perHour: Number(perHour) };
  if (!perMinute || !perHour) program.error('give per_minute and per_hour, or --clear');
  await setRateLimitOverride(orgId!, limits);
  console.log(`rate-limit override of ${orgId}: ${limits.perMinute} per minute, ${limits.perHour} per hour`);
}

main().catch((err: Error) => {
  console.error(`rate-limit-override failed: ${err.message}`);
  process.exit(1);
});
