/**
 * Resources per CloudFormation template (root and nested stacks), synthesized offline with the
 * stand-in deploy context of the CDK tests: `npx tsx scripts/template-counts.ts [--types]`.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { MarketplaceStack } from '../lib/stack';
import { CDK_CONTEXT } from '../test/cdk/support';
import { DEPLOY_CONTEXT } from '../test/cdk/fixtures/context';

const app = new App({ context: { ...CDK_CONTEXT, ...DEPLOY_CONTEXT, allowMissingFfmpeg: true, 'aws:cdk:bundling-stacks': [] } });
const stack = new MarketplaceStack(app, 'MediaMarketplace');
for (const s of stack.node.findAll().filter(Stack.isStack)) {
  const resources = Object.values<{ Type: string }>(Template.fromStack(s).toJSON().Resources ?? {});
  console.log(`${s.node.path.padEnd(40)} ${resources.length}`);
  if (process.argv.includes('--types')) {
    const counts: Record<string, number> = {};
    for (const r of resources) counts[r.Type] = (counts[r.Type] ?? 0) + 1;
    for (const [t, n] of Object.entries(counts).sort((a, b) => b[1] - a[1])) console.log(`    ${String(n).padStart(4)} ${t}`);
  }
}
