/**
 * The API key scopes. Apart from the route table (routes.ts re-exports them), so that the
 * modules that only need the list (key creation, reached from every bundle that reads the balance)
 * do not load every route's definition.
 */
export const SCOPES = [
  'jobs:write',
  'jobs:read',
  'webhooks:write',
  'webhooks:read',
  'keys:manage',
  'audit:read',
  'usage:read',
  'billing:write',
] as const;
export type Scope = (typeof SCOPES)[number];
