/**
 * Synthesize the app once per test file, as `cdk deploy` would with the platform team's context
 * (fixtures/context.ts), and give every template: the root stack and each nested stack.
 * Bundling is skipped (`aws:cdk:bundling-stacks: []`).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { MarketplaceStack, type MarketplaceStackProps } from '../../lib/stack';
import { DEPLOY_CONTEXT } from './fixtures/context';

export type Resource = { Type: string; Properties: Record<string, any>; [k: string]: unknown };

const ROOT = path.resolve(__dirname, '..', '..');
export const CDK_CONTEXT = JSON.parse(fs.readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')).context as Record<string, unknown>;
export const FFMPEG_LAYER_ARN = 'arn:aws:lambda:eu-west-1:123456789012:layer:ffmpeg-arm64:3';

export interface Synthesized {
  stack: MarketplaceStack;
  /** Every template by stack node path (`TestStack`, `TestStack/Api`, ...). */
  templates: Map<string, { template: Template; resources: Record<string, Resource> }>;
  /** [template path, logical id, resource] of every resource of every template. */
  all(): [string, string, Resource][];
  ofType(type: string): [string, string, Resource][];
}

export function synthesize(context: Record<string, unknown> = {}, props: MarketplaceStackProps = {}): Synthesized {
  const merged: Record<string, unknown> = { ...CDK_CONTEXT, ...DEPLOY_CONTEXT, ffmpegLayerArn: FFMPEG_LAYER_ARN, ...context, 'aws:cdk:bundling-stacks': [] };
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  const app = new App({ context: merged });
  const stack = new MarketplaceStack(app, 'TestStack', props);
  const templates = new Map<string, { template: Template; resources: Record<string, Resource> }>();
  for (const c of stack.node.findAll()) {
    if (!Stack.isStack(c)) continue;
    const template = Template.fromStack(c);
    templates.set(c.node.path, { template, resources: (template.toJSON().Resources ?? {}) as Record<string, Resource> });
  }
  const all = (): [string, string, Resource][] =>
    [...templates].flatMap(([name, t]) => Object.entries(t.resources).map(([id, r]) => [name, id, r] as [string, string, Resource]));
  return { stack, templates, all, ofType: (type) => all().filter(([, , r]) => r.Type === type) };
}

/** Every Allow statement of the policies attached to a function's role (same template). */
export function statementsOfFunction(resources: Record<string, Resource>, fnLogicalId: string): { Action: string | string[]; Resource: unknown; Condition?: unknown }[] {
  const roleId = resources[fnLogicalId]!.Properties.Role['Fn::GetAtt'][0] as string;
  return Object.values(resources)
    .filter((p) => p.Type === 'AWS::IAM::Policy')
    .filter((p) => (p.Properties.Roles as unknown[]).some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleId })))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown; Condition?: unknown; Effect: string }[])
    .filter((s) => s.Effect === 'Allow');
}

/**
 * All templates as one: the resources of every stack in one map, with each nested stack's
 * parameters replaced by what the parent passes in, so a `Ref` or `Fn::GetAtt` names the logical
 * id of the resource it means wherever that lives. Logical ids are unique across templates (checked).
 */
export function flatten(s: Synthesized): Record<string, Resource> {
  const out: Record<string, Resource> = {};
  const root = s.stack;
  const rootResources = s.templates.get(root.node.path)!.resources;
  for (const [tplPath, t] of s.templates) {
    let params: Record<string, unknown> = {};
    if (tplPath !== root.node.path) {
      const nested = root.node.findAll().find((c) => c.node.path === tplPath) as unknown as { nestedStackResource?: { logicalId: string } };
      const logicalId = root.resolve(nested.nestedStackResource!.logicalId) as string;
      params = (rootResources[logicalId]!.Properties.Parameters ?? {}) as Record<string, unknown>;
    }
    const substitute = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(substitute);
      if (v && typeof v === 'object') {
        const o = v as Record<string, unknown>;
        if (Object.keys(o).length === 1 && typeof o.Ref === 'string' && o.Ref in params) return params[o.Ref];
        return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, substitute(x)]));
      }
      return v;
    };
    for (const [id, r] of Object.entries(t.resources)) {
      if (id in out) throw new Error(`logical id ${id} appears in two templates`);
      out[id] = substitute(r) as Resource;
    }
  }
  return out;
}
