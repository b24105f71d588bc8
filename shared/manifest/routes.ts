/**
 * The route manifest: the one table of every HTTP route of the service.
 *
 * Read by the CDK stack (one Lambda + one API Gateway method per entry, IAM grants from `access`)
 * and by the local runtime (the HTTP server routes to the same handler modules). Handlers read their
 * own entry (scope, idempotency, long-poll, resource) through `routeById`, so the policy of a route
 * is written here once.
 */

import type { BucketAccess, KeyAccess } from './access';
import type { NativeDeps } from './wiring';

import { SCOPES, type Scope } from './scopes';

export { SCOPES, type Scope };

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** Who may call a route: a buyer API key, a worker token (D9), or anyone (signups). */
export type Principal = 'api_key' | 'worker' | 'none';

/**
 * Path parameters that name a resource. The resource middleware loads it and answers 404 for an
 * unknown id, a malformed id, another organization's or the other environment's resource, before
 * the body is validated (D42, D43).
 */
export type ResourceKind =
  | 'job'
  | 'file'
  | 'submission'
  | 'api_key'
  | 'webhook_endpoint'
  | 'webhook_event'
  | 'worker_job'
  | 'worker_submission'
  | 'export';

/** Least-privilege access a handler needs; the stack turns it into grants through helpers. */
export interface RouteAccess extends KeyAccess {
  /** `none`: the function reads nothing of the table (its name is still set for the middlewares' configuration). */
  table: 'none' | 'read' | 'write';
  /** `tag`: set the verdict tag of upload objects only (shared/manifest/access.ts). */
  bucket?: Exclude<BucketAccess, 'delete'>;
  /** SMS sending for phone verification (SNS in the stack, the log in the local runtime). */
  sms?: boolean;
  /** Queues (wiring names) the handler sends to. */
  sendTo?: string[];
}

export interface RouteDef {
  /** Stable identifier, also the handler's lookup key: `<area>.<action>`. */
  id: string;
  method: HttpMethod;
  /** API Gateway style path with `{param}` segments. */
  path: string;
  /** Handler module, relative to the project root; it exports `handler`. */
  handler: string;
  principal: Principal;
  /** Required scope; 'any' = any valid key of the organization; null when principal is not a key. */
  scope: Scope | 'any' | null;
  /** D10: required on authenticated mutating POSTs (except refresh_url), optional elsewhere. */
  idempotency: 'required' | 'optional' | 'none';
  /** D20: honours `Prefer: wait=N`. */
  longPoll?: boolean;
  /** Takes a multipart/form-data body (the uploads); every other route takes JSON only. */
  multipart?: boolean;
  /** Path parameter resolved by the resource middleware, by name of the parameter. */
  resource?: { param: string; kind: ResourceKind };
  /** Rate-limit bucket: per API key (D13) or per source IP for signups (D13, D44). */
  rateLimit: 'key' | 'worker' | 'signup_buyer' | 'signup_worker' | 'none';
  access: RouteAccess;
  /**
   * Tenant items the domain function needs, read beside the rate-limit decision (one batch with
   * the balance; a live key's credit lots by a query in parallel) instead of a step of their own.
   * `org`: the organization item, which every route reads otherwise only until the balance is
   * known to carry its rate tier (shared/orgs/rate-tier.ts).
   */
  reads?: ('org' | 'settings' | 'live_credit_lots')[];
  /** Success status when not 200 (D43). */
  successStatus?: 200 | 201 | 202 | 204;
  /** Packages or files the handler reads from outside its bundle (lib/constructs/native.ts). */
  native?: NativeDeps;
}

const R = (d: RouteDef): RouteDef => d;

/** D63: list routes sign and check cursors with the `cursor` secret. */
const LIST: RouteAccess = { table: 'read', secrets: ['cursor'] };
/** Issue 11.1: the response holds a one-time secret or a signed URL (download or upload), stored sealed for replays (KMS). */
const SEALS: Pick<RouteAccess, 'kms'> = { kms: { 'stored-response': 'encrypt-decrypt' } };
/** …and it seals a new webhook endpoint secret (D36, D63). */
const SEALS_ENDPOINT_SECRET: Pick<RouteAccess, 'kms'> = { kms: { 'stored-response': 'encrypt-decrypt', 'endpoint-secret': 'encrypt' } };
/** D62/D34: may charge or confirm a payment through the provider (the `stripe` secret). */
const PAYS: Pick<RouteAccess, 'secrets'> = { secrets: ['stripe'] };

const buyer = (
  id: string,
  method: HttpMethod,
  path: string,
  handler: string,
  scope: Scope | 'any',
  extra: Partial<RouteDef> = {},
): RouteDef =>
  R({
    id,
    method,
    path,
    handler,
    principal: 'api_key',
    scope,
    idempotency: method === 'POST' ? 'required' : 'none',
    rateLimit: 'key',
    access: { table: method === 'GET' ? 'read' : 'write' },
    ...extra,
  });

const worker = (
  id: string,
  method: HttpMethod,
  path: string,
  handler: string,
  extra: Partial<RouteDef> = {},
): RouteDef =>
  R({
    id,
    method,
    path,
    handler,
    principal: 'worker',
    scope: null,
    // D45: optional on worker routes, honoured when sent.
    idempotency: method === 'POST' ? 'optional' : 'none',
    rateLimit: 'worker',
    access: { table: method === 'GET' ? 'read' : 'write' },
    ...extra,
  });

export const ROUTES: readonly RouteDef[] = [
  // --- Authentication and identity (D7, D8) ---
  R({
    id: 'auth.signup',
    method: 'POST',
    path: '/v1/auth/signup',
    handler: 'functions/auth/signup.ts',
    principal: 'none',
    scope: null,
    idempotency: 'optional',
    rateLimit: 'signup_buyer',
    access: { table: 'write', ...SEALS },
    successStatus: 201,
  }),
  buyer('auth.phone_verification.start', 'POST', '/v1/auth/phone_verification', 'functions/auth/phone-verification-start.ts', 'any', {
    access: { table: 'write', sms: true },
    successStatus: 202,
  }),
  buyer('auth.phone_verification.confirm', 'POST', '/v1/auth/phone_verification/confirm', 'functions/auth/phone-verification-confirm.ts', 'any'),
  buyer('me.get', 'GET', '/v1/me', 'functions/auth/me.ts', 'any'),

  // --- Jobs ---
  buyer('jobs.create', 'POST', '/v1/jobs', 'functions/jobs/create.ts', 'jobs:write', {
    successStatus: 201,
    // A crossing of the low-balance threshold emits credits.low_balance, whose INSERT record queues
    // the auto top-up (D34, stream rule auto-top-up): the route never talks to the payment processor.
    access: { table: 'write' },
    // The free-tier rule (D18), the low-balance threshold (D34) and, for a live job's escrow, the
    // credit lots (D33).
    reads: ['org', 'settings', 'live_credit_lots'],
  }),
  buyer('jobs.list', 'GET', '/v1/jobs', 'functions/jobs/list.ts', 'jobs:read', { access: LIST }),
  buyer('jobs.get', 'GET', '/v1/jobs/{job_id}', 'functions/jobs/get.ts', 'jobs:read', {
    longPoll: true,
    resource: { param: 'job_id', kind: 'job' },
  }),
  buyer('jobs.cancel', 'POST', '/v1/jobs/{job_id}/cancel', 'functions/jobs/cancel.ts', 'jobs:write', {
    resource: { param: 'job_id', kind: 'job' },
  }),
  buyer('jobs.rate', 'POST', '/v1/jobs/{job_id}/rate', 'functions/jobs/rate.ts', 'jobs:write', {
    resource: { param: 'job_id', kind: 'job' },
  }),
  buyer('jobs.files.list', 'GET', '/v1/jobs/{job_id}/files', 'functions/files/list-for-job.ts', 'jobs:read', {
    resource: { param: 'job_id', kind: 'job' },
    access: { ...LIST, cdnSign: true },
  }),
  buyer('jobs.submissions.list', 'GET', '/v1/jobs/{job_id}/submissions', 'functions/submissions/list-for-job.ts', 'jobs:read', {
    resource: { param: 'job_id', kind: 'job' },
    access: { ...LIST, cdnSign: true }, // signs file_url (a CDN URL: no bucket access)
  }),
  // --- Dataset exports (D73) ---
  buyer('jobs.exports.create', 'POST', '/v1/jobs/{job_id}/exports', 'functions/exports/create.ts', 'jobs:read', {
    resource: { param: 'job_id', kind: 'job' },
    // No queue access: the table stream queues the new export (stream rule exports-requested).
    access: { table: 'write' },
    successStatus: 202,
  }),
  buyer('jobs.exports.list', 'GET', '/v1/jobs/{job_id}/exports', 'functions/exports/list.ts', 'jobs:read', {
    resource: { param: 'job_id', kind: 'job' },
    access: { ...LIST, cdnSign: true }, // signs download_url (a CDN URL: no bucket access)
  }),
  buyer('exports.get', 'GET', '/v1/exports/{export_id}', 'functions/exports/get.ts', 'jobs:read', {
    longPoll: true,
    resource: { param: 'export_id', kind: 'export' },
    access: { table: 'read', cdnSign: true }, // signs download_url (a CDN URL: no bucket access)
  }),
  buyer('files.refresh_url', 'POST', '/v1/files/{file_id}/refresh_url', 'functions/files/refresh-url.ts', 'jobs:read', {
    idempotency: 'optional',
    resource: { param: 'file_id', kind: 'file' },
    // The answer is a signed download URL: stored sealed for replays, never as a usable URL. It
    // writes nothing but its idempotency record (lib/constructs/grants.ts bindIdempotencyRecords).
    access: { table: 'read', cdnSign: true, ...SEALS },
  }),

  // --- Submissions (D8: scope jobs:read) ---
  buyer('submissions.list', 'GET', '/v1/submissions', 'functions/submissions/list.ts', 'jobs:read', {
    access: { ...LIST, cdnSign: true }, // signs file_url (a CDN URL: no bucket access)
  }),
  buyer('submissions.summary', 'GET', '/v1/submissions/summary', 'functions/submissions/summary.ts', 'jobs:read'),
  buyer('submissions.get', 'GET', '/v1/submissions/{submission_id}', 'functions/submissions/get.ts', 'jobs:read', {
    resource: { param: 'submission_id', kind: 'submission' },
    access: { table: 'read', cdnSign: true }, // signs file_url (a CDN URL: no bucket access)
  }),
  // D71: the buyer's override of a verdict (scope jobs:write); tags the bytes of an approval and
  // signs file_url. The withdrawn objects of a rejection are deleted by the `withdrawals` queue,
  // which the table stream feeds from the same commit (stream rule files-withdrawn).
  buyer('submissions.override', 'POST', '/v1/submissions/{submission_id}/override', 'functions/submissions/override.ts', 'jobs:write', {
    resource: { param: 'submission_id', kind: 'submission' },
    // An approval's answer carries a signed download URL (file_url): stored sealed for replays.
    access: { table: 'write', bucket: 'tag', cdnSign: true, ...SEALS },
  }),

  // --- API keys (D5, D6) ---
  buyer('api_keys.create', 'POST', '/v1/api_keys', 'functions/api-keys/create.ts', 'keys:manage', { access: { table: 'write', ...SEALS } }),
  buyer('api_keys.list', 'GET', '/v1/api_keys', 'functions/api-keys/list.ts', 'keys:manage', { access: LIST }),
  buyer('api_keys.rotate', 'POST', '/v1/api_keys/{key_id}/rotate', 'functions/api-keys/rotate.ts', 'keys:manage', {
    resource: { param: 'key_id', kind: 'api_key' },
    access: { table: 'write', ...SEALS },
  }),
  buyer('api_keys.revoke', 'POST', '/v1/api_keys/{key_id}/revoke', 'functions/api-keys/revoke.ts', 'keys:manage', {
    resource: { param: 'key_id', kind: 'api_key' },
    successStatus: 204,
  }),

  // --- Webhook endpoints and events (D36-D38) ---
  buyer('webhook_endpoints.create', 'POST', '/v1/webhook_endpoints', 'functions/webhooks/endpoint-create.ts', 'webhooks:write', {
    successStatus: 201,
    access: { table: 'write', ...SEALS_ENDPOINT_SECRET },
  }),
  buyer('webhook_endpoints.list', 'GET', '/v1/webhook_endpoints', 'functions/webhooks/endpoint-list.ts', 'webhooks:read', { access: LIST }),
  buyer('webhook_endpoints.get', 'GET', '/v1/webhook_endpoints/{endpoint_id}', 'functions/webhooks/endpoint-get.ts', 'webhooks:read', {
    resource: { param: 'endpoint_id', kind: 'webhook_endpoint' },
  }),
  buyer('webhook_endpoints.update', 'PATCH', '/v1/webhook_endpoints/{endpoint_id}', 'functions/webhooks/endpoint-update.ts', 'webhooks:write', {
    resource: { param: 'endpoint_id', kind: 'webhook_endpoint' },
  }),
  buyer('webhook_endpoints.delete', 'DELETE', '/v1/webhook_endpoints/{endpoint_id}', 'functions/webhooks/endpoint-delete.ts', 'webhooks:write', {
    resource: { param: 'endpoint_id', kind: 'webhook_endpoint' },
    successStatus: 204,
  }),
  buyer('webhook_endpoints.rotate_secret', 'POST', '/v1/webhook_endpoints/{endpoint_id}/rotate_secret', 'functions/webhooks/endpoint-rotate-secret.ts', 'webhooks:write', {
    resource: { param: 'endpoint_id', kind: 'webhook_endpoint' },
    access: { table: 'write', ...SEALS_ENDPOINT_SECRET },
  }),
  buyer('webhook_events.list', 'GET', '/v1/webhook_events', 'functions/webhooks/event-list.ts', 'webhooks:read', { access: LIST }),
  buyer('webhook_events.replay', 'POST', '/v1/webhook_events/{event_id}/replay', 'functions/webhooks/event-replay.ts', 'webhooks:write', {
    resource: { param: 'event_id', kind: 'webhook_event' },
    access: { table: 'write', sendTo: ['webhooks'] },
    successStatus: 202,
  }),

  // --- Billing (D31-D34) ---
  // `updated_at` falls back on the organization's creation while it has no balance.
  buyer('billing.credits', 'GET', '/v1/billing/credits', 'functions/billing/credits.ts', 'usage:read', { reads: ['org'] }),
  buyer('billing.transactions', 'GET', '/v1/billing/transactions', 'functions/billing/transactions.ts', 'usage:read', { access: LIST }),
  buyer('billing.purchase', 'POST', '/v1/billing/credits/purchase', 'functions/billing/purchase.ts', 'billing:write', {
    access: { table: 'write', ...PAYS },
  }),
  // D32: alias path of the purchase route, same handler module, its own Lambda.
  buyer('billing.purchase_alias', 'POST', '/v1/billing/purchase', 'functions/billing/purchase.ts', 'billing:write', {
    access: { table: 'write', ...PAYS },
  }),
  // D62: Stripe's confirmation of a payment (`checkout.session.completed`, and the async payment
  // outcome of a delayed method), verified by its signature.
  R({
    id: 'billing.stripe_webhook',
    method: 'POST',
    path: '/v1/billing/stripe/webhook',
    handler: 'functions/billing/stripe-webhook.ts',
    principal: 'none',
    scope: null,
    idempotency: 'none',
    rateLimit: 'none',
    access: { table: 'write', ...PAYS },
  }),

  // --- Organization settings (D34) and audit (D39) ---
  buyer('organization.settings.get', 'GET', '/v1/organization/settings', 'functions/organization/settings-get.ts', 'any'),
  buyer('organization.settings.update', 'PATCH', '/v1/organization/settings', 'functions/organization/settings-update.ts', 'any'),
  buyer('audit_events.list', 'GET', '/v1/audit-events', 'functions/audit/list.ts', 'audit:read', { access: LIST }),

  // --- Worker routes (D9, D23-D25, D45) ---
  R({
    id: 'worker.signup',
    method: 'POST',
    path: '/internal/worker/auth/signup',
    handler: 'functions/worker/signup.ts',
    principal: 'none',
    scope: null,
    idempotency: 'optional',
    rateLimit: 'signup_worker',
    access: { table: 'write', ...SEALS },
    successStatus: 201,
  }),
  worker('worker.jobs.available', 'GET', '/internal/worker/jobs/available', 'functions/worker/jobs-available.ts', { access: LIST }),
  // tag: accepting again ends the worker's expired reservation, and withdrawing ends it; bytes that
  // landed in it are tagged for the lifecycle rule.
  worker('worker.jobs.accept', 'POST', '/internal/worker/jobs/{job_id}/accept', 'functions/worker/job-accept.ts', {
    resource: { param: 'job_id', kind: 'worker_job' },
    successStatus: 201,
    access: { table: 'write', bucket: 'tag' },
  }),
  worker('worker.jobs.withdraw', 'POST', '/internal/worker/jobs/{job_id}/withdraw', 'functions/worker/job-withdraw.ts', {
    resource: { param: 'job_id', kind: 'worker_job' },
    access: { table: 'write', bucket: 'tag' },
  }),
  worker('worker.jobs.flag', 'POST', '/internal/worker/jobs/{job_id}/flag', 'functions/worker/job-flag.ts', {
    resource: { param: 'job_id', kind: 'worker_job' },
  }),
  worker('worker.submissions.upload', 'POST', '/internal/worker/submissions/{submission_id}/upload', 'functions/worker/submission-upload.ts', {
    resource: { param: 'submission_id', kind: 'worker_submission' },
    // SEALS: the JSON plan's answer holds pre-signed PUT URLs (each opens its object for a write).
    access: { table: 'write', bucket: 'write', uploadSigner: true, ...SEALS },
    successStatus: 202,
    multipart: true,
  }),
  worker('worker.submissions.retry', 'POST', '/internal/worker/submissions/{submission_id}/retry', 'functions/worker/submission-retry.ts', {
    resource: { param: 'submission_id', kind: 'worker_submission' },
    access: { table: 'write', bucket: 'write', uploadSigner: true, ...SEALS }, // the retry carries a new upload (D27); its plan holds pre-signed URLs
    successStatus: 202,
    multipart: true,
  }),
  worker('worker.submissions.get', 'GET', '/internal/worker/submissions/{submission_id}', 'functions/worker/submission-get.ts', {
    resource: { param: 'submission_id', kind: 'worker_submission' },
  }),
  worker('worker.submissions.list', 'GET', '/internal/worker/submissions', 'functions/worker/submission-list.ts', { access: LIST }),

  // --- The API reference (D72): public, no key ---
  ...(
    [
      ['docs.openapi', '/v1/openapi.json', 'functions/docs/openapi.ts'],
      ['docs.page', '/docs', 'functions/docs/page.ts'],
      ['docs.asset', '/docs/assets/{asset}', 'functions/docs/asset.ts'],
    ] as const
  ).map(([id, path, handler]) =>
    R({
      id,
      method: 'GET',
      path,
      handler,
      principal: 'none',
      scope: null,
      idempotency: 'none',
      rateLimit: 'none',
      access: { table: 'none' }, // public pages: nothing of the table is read (TABLE_NAME is still set)
      // The page's script and style are read from the package at run time.
      ...(id === 'docs.asset' ? { native: { packages: ['swagger-ui-dist'] } } : {}),
      // The document is read from a file shipped beside the bundle (shared/openapi/document.ts).
      ...(id === 'docs.openapi' ? { native: { packages: [], files: [{ from: 'shared/openapi/openapi.json', to: 'openapi.json', env: 'OPENAPI_DOCUMENT' }] } } : {}),
    }),
  ),
];

/**
 * Not a route: the function behind every request no route above takes, i.e. an unknown path or a
 * method a known path does not declare (D4: 404 `not_found`, with a request id in the body and in
 * X-Request-Id). Deployed it is the ANY method of every API resource and of a root `{proxy+}`
 * (lib/api.ts; a method a route declares takes precedence over ANY); locally the HTTP front runs it
 * for every request `matchRoute` does not match. Kept out of ROUTES: it has no method, path,
 * schema or OpenAPI operation of its own, and it is granted nothing (no table, bucket, secret or
 * key: it reads nothing but the request's method and path).
 */
export interface UnknownRouteDef {
  id: string;
  /** Handler module, relative to the project root; it exports `handler`. */
  handler: string;
  method: 'ANY';
  /** The resource API Gateway reports for it when no manifest resource matches. */
  path: '/{proxy+}';
  principal: 'none';
  access: Record<string, never>;
}

export const UNKNOWN_ROUTE: UnknownRouteDef = {
  id: 'edge.not_found',
  handler: 'functions/edge/not-found.ts',
  method: 'ANY',
  path: '/{proxy+}',
  principal: 'none',
  access: {},
};

const byId = new Map(ROUTES.map((r) => [r.id, r]));

export function routeById(id: string): RouteDef {
  const r = byId.get(id);
  if (!r) throw new Error(`unknown route id ${id}`);
  return r;
}

/** Lambda-safe logical name for a route, e.g. `jobs.files.list` -> `JobsFilesList`. */
export function routeLogicalName(r: Pick<RouteDef, 'id'>): string {
  return r.id
    .split(/[._-]/)
    .filter(Boolean)
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join('');
}

/**
 * Match a concrete path against a manifest path template. Literal segments win over parameters,
 * so `/v1/submissions/summary` is not taken for `/v1/submissions/{submission_id}`. Parameters are
 * the raw segments, still percent-encoded, as API Gateway hands them over: the handler side
 * decodes them once, defensively (shared/http/params.ts), so a malformed escape is a 404 there.
 */
export function matchRoute(
  method: string,
  path: string,
): { route: RouteDef; params: Record<string, string> } | { route: null; allowed: HttpMethod[] } {
  const segs = path.split('/').filter(Boolean);
  let best: { route: RouteDef; params: Record<string, string>; literals: number } | null = null;
  const allowed = new Set<HttpMethod>();
  for (const { route: r, segments } of templatesOfLength(segs.length)) {
    const params: Record<string, string> = {};
    let literals = 0;
    let ok = true;
    for (let i = 0; i < segments.length; i++) {
      const t = segments[i]!;
      const s = segs[i]!;
      if (t.param !== null) {
        params[t.param] = s;
      } else if (t.literal === s) {
        literals++;
      } else {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (r.method !== method) {
      allowed.add(r.method);
      continue;
    }
    if (!best || literals > best.literals) best = { route: r, params, literals };
  }
  if (best) return { route: best.route, params: best.params };
  return { route: null, allowed: [...allowed] };
}

type Template = { route: RouteDef; segments: { literal: string; param: string | null }[] };
let templates: Map<number, Template[]> | null = null;

/**
 * The route templates split into segments once, grouped by segment count (the local front matches
 * every request; a deployed function never calls this, so nothing is built at its module load).
 */
function templatesOfLength(n: number): Template[] {
  if (!templates) {
    templates = new Map();
    for (const route of ROUTES) {
      const segments = route.path
        .split('/')
        .filter(Boolean)
        .map((t) => ({ literal: t, param: t.startsWith('{') && t.endsWith('}') ? t.slice(1, -1) : null }));
      const list = templates.get(segments.length) ?? [];
      list.push({ route, segments });
      templates.set(segments.length, list);
    }
  }
  return templates.get(n) ?? [];
}
