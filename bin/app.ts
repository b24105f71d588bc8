#!/usr/bin/env node
import { App } from 'aws-cdk-lib';
import { MarketplaceStack } from '../lib/stack';

/**
 * Environment-agnostic: account and region come from the deploying credentials.
 * Context (cdk.json or `-c key=value`):
 *   longPollSeconds              D20 long-poll budget, 1..60 (default 25; 60 needs the
 *                                API Gateway integration-timeout quota increase, see lib/api.ts)
 *   workerPriorityWindowSeconds  D45: 0, the only value (no ranking of workers to favour)
 *   publicBaseUrl                base URL for links when a custom domain fronts the API
 *   ffmpegLayerArn               arm64 layer version with /opt/bin/ffmpeg and ffprobe (required
 *                                for the scoring and annotation consumers; docs/deploying.md)
 *   allowMissingFfmpeg           true: deploy without that layer, with a warning
 */
const app = new App();

const numberContext = (key: string): number | undefined => {
  const v = app.node.tryGetContext(key);
  if (v === undefined || v === null || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`context ${key} must be a number, got ${v}`);
  return n;
};

new MarketplaceStack(app, 'MediaMarketplace', {
  description: 'Crowdsourced media-collection marketplace: API, single table, media pipeline',
  longPollSeconds: numberContext('longPollSeconds'),
  workerPriorityWindowSeconds: numberContext('workerPriorityWindowSeconds'),
  publicBaseUrl: app.node.tryGetContext('publicBaseUrl') || undefined,
});
