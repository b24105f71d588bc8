/**
 * cdk-nag AwsSolutions over the whole app (root and nested stacks), as CI runs it: every finding is
 * either fixed or acknowledged next to its construct with a one-line reason (lib/constructs/nag.ts);
 * none may remain.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { MarketplaceStack } from '../../lib/stack';
import { DEPLOY_CONTEXT, STRIPE_SECRET_ARN } from './fixtures/context';
import { CDK_CONTEXT, FFMPEG_LAYER_ARN } from './support';

type Violation = { ruleName: string; severity: string; violatingConstructs: { constructPath: string }[] };

const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'nag-'));
afterAll(() => fs.rmSync(outdir, { recursive: true, force: true }));

function nagFindings(): { findings: string[]; acknowledged: number } {
  const app = new App({
    outdir,
    context: { ...CDK_CONTEXT, ...DEPLOY_CONTEXT, stripeSecretArn: STRIPE_SECRET_ARN, ffmpegLayerArn: FFMPEG_LAYER_ARN, 'aws:cdk:bundling-stacks': [] },
  });
  const stack = new MarketplaceStack(app, 'Nag');
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  try {
    app.synth();
  } catch {
    // A failed validation throws after writing the report, which lists the findings.
  }
  const acknowledged = stack.node
    .findAll()
    .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)).length;
  const reportFile = path.join(outdir, 'validation-report.json');
  if (!fs.existsSync(reportFile)) return { findings: [], acknowledged };
  const report = JSON.parse(fs.readFileSync(reportFile, 'utf8')) as { pluginReports: { pluginName: string; violations: Violation[] }[] };
  const findings = report.pluginReports
    .filter((p) => p.pluginName === 'AwsSolutions')
    .flatMap((p) => p.violations.flatMap((v) => v.violatingConstructs.map((c) => `${v.severity} ${v.ruleName} at ${c.constructPath}`)));
  return { findings, acknowledged };
}

test('AwsSolutions reports no unacknowledged finding, error or warning, in any template', () => {
  const { findings, acknowledged } = nagFindings();
  expect(findings).toEqual([]);
  // The acknowledgements exist (an empty nag run would pass too): one per construct they sit on.
  expect(acknowledged).toBeGreaterThan(0);
});
