/**
 * What the route manifest does not say about each operation: a summary, its tag, the success
 * bodies (response schemas, one module per domain under ./schemas) and the error statuses beyond
 * the ones every route of its kind can answer (see `errorStatuses` in build.ts). A manifest route
 * missing here is reported by test/unit/openapi-coverage.test.ts.
 */
import * as z from 'zod';
import { list } from './schemas/common';
import { job, jobWithSummary, submissionSummary } from './schemas/jobs';
import { file, submission } from './schemas/files';
import { apiKey, auditEvent, me, phoneVerificationConfirmed, phoneVerificationStarted, settings, signup } from './schemas/account';
import { balance, checkoutSession, transaction } from './schemas/billing';
import { endpoint, event } from './schemas/webhooks';
import { presignedUploads, workerJob, workerSignup, workerSubmission } from './schemas/worker';
import { exportObject } from './schemas/exports';

export interface Content {
  /** Media type → zod schema (JSON) or a raw JSON Schema (HTML, CSS, …). */
  [mediaType: string]: z.ZodType | Record<string, unknown>;
}

export interface Success {
  description: string;
  /** Absent for 204. A zod schema means application/json. */
  body?: z.ZodType | Content;
}

export interface OperationDoc {
  summary: string;
  tag: string;
  description?: string;
  /** Success responses by status. */
  success: Record<number, Success>;
  /** Error statuses this operation can answer beyond its kind's defaults, with when. */
  errors?: Record<number, string>;
  /** Request bodies that are not (only) the route's zod JSON body, e.g. multipart uploads. */
  extraRequestContent?: Content;
  /** The body may be left out (the route reads none as `{}`). */
  bodyOptional?: boolean;
}

const ok = (body: z.ZodType, description = 'OK'): Record<number, Success> => ({ 200: { description, body } });

const multipartUpload = {
  'multipart/form-data': {
    type: 'object',
    required: ['file'],
    properties: {
      file: { type: 'array', items: { type: 'string', contentMediaType: 'application/octet-stream' }, description: 'One part per file (field name `file`, repeated up to files_per_submission); at most 4 MiB in total.' },
      captured_at: { type: 'string', description: 'ISO 8601 capture time' },
      device_model: { type: 'string' },
      device_os: { type: 'string' },
      app_version: { type: 'string' },
      latitude: { type: 'string', description: 'Decimal degrees' },
      longitude: { type: 'string', description: 'Decimal degrees' },
    },
  },
};

const uploadSuccess: Record<number, Success> = {
  202: { description: 'Multipart upload stored; the submission is `pending_score`.', body: workerSubmission },
  200: { description: 'JSON `{files:[…]}`: one pre-signed PUT per file; PUT the bytes with the signed headers it lists (Content-Type, Content-Length, If-None-Match: *). A URL writes once: a second PUT is 412.', body: presignedUploads },
};

export const OPERATIONS: Record<string, OperationDoc> = {
  'auth.signup': {
    summary: 'Create an organization with a live and a test API key',
    tag: 'Account',
    description: 'The two secrets are shown only in this response. A second signup with the same email answers 409.',
    success: { 201: { description: 'Created', body: signup } },
    errors: { 409: 'The email is already registered.' },
  },
  'auth.phone_verification.start': {
    summary: 'Send a 6-digit code to a phone number',
    tag: 'Account',
    success: { 202: { description: 'Code sent', body: phoneVerificationStarted } },
    errors: { 503: 'The code could not be sent by SMS (code sms_unavailable); nothing was stored, and a retry (with the same Idempotency-Key or a new one) sends a code.' },
  },
  'auth.phone_verification.confirm': {
    summary: 'Confirm the code and receive the starter credits once',
    tag: 'Account',
    success: ok(phoneVerificationConfirmed),
    errors: { 409: 'Already verified, or the phone number belongs to another organization.' },
  },
  'me.get': { summary: 'The calling key: organization, environment, scopes', tag: 'Account', success: ok(me) },

  'jobs.create': {
    summary: 'Post a job (live keys escrow price × files_needed)',
    tag: 'Jobs',
    success: { 201: { description: 'Created', body: job } },
    errors: {
      402: '`insufficient_credits`: the available balance cannot cover the escrow.',
      403: '`free_tier_job_limit`: a free-tier organization already has an active job.',
      422: 'Fields valid one by one but not together.',
    },
  },
  'jobs.list': { summary: 'List jobs, newest first', tag: 'Jobs', success: ok(list(job)) },
  'jobs.get': {
    summary: 'Get a job with its submission summary; long-poll with `Prefer: wait=N`',
    tag: 'Jobs',
    success: ok(jobWithSummary),
  },
  'jobs.cancel': {
    summary: 'Cancel a job; the unused escrow is refunded once',
    tag: 'Jobs',
    success: ok(job),
    errors: { 409: 'The job is already completed or cancelled.' },
  },
  'jobs.rate': {
    summary: 'Rate a completed job once',
    tag: 'Jobs',
    success: ok(job),
    errors: { 409: 'The job is not completed, or already rated.' },
  },
  'jobs.exports.create': {
    summary: "Export a job's files as one dataset file (JSON Lines, COCO or CSV)",
    tag: 'Exports',
    description:
      'Built in the background: the export starts `pending`; follow it with `GET /v1/exports/{export_id}` (long-poll) or the `export.completed` / `export.failed` events. `min_score` (default 3) keeps the files rated at least that many stars, as the files list does.',
    success: { 202: { description: 'Accepted; the export is pending', body: exportObject } },
  },
  'jobs.exports.list': { summary: "List a job's exports, newest first", tag: 'Exports', success: ok(list(exportObject)) },
  'exports.get': {
    summary: 'Get an export; long-poll with `Prefer: wait=N` until its status changes',
    tag: 'Exports',
    success: ok(exportObject),
  },
  'jobs.files.list': {
    summary: "List a job's approved files with fresh download URLs",
    tag: 'Files',
    success: ok(list(file)),
  },
  'jobs.submissions.list': { summary: "List a job's submissions in every status", tag: 'Submissions', success: ok(list(submission)) },
  'files.refresh_url': {
    summary: "Renew a file's primary download URL",
    tag: 'Files',
    success: ok(
      z.looseObject({ object: z.literal('file_url'), id: z.string(), download_url: z.string(), download_url_expires_at: z.string() }).meta({ id: 'FileUrl' }),
    ),
  },
  'submissions.list': { summary: 'List submissions across jobs', tag: 'Submissions', success: ok(list(submission)) },
  'submissions.summary': { summary: 'Submission counts and ratings', tag: 'Submissions', success: ok(submissionSummary) },
  'submissions.get': { summary: 'Get a submission', tag: 'Submissions', success: ok(submission) },
  'submissions.override': {
    summary: 'Override a verdict within 7 days: approve a rejected or retry_pending submission, or reject an approved one',
    tag: 'Submissions',
    description:
      'Once per submission, within 7 days of scored_at. Approving is a normal approval (Files, charge, payout). Rejecting withdraws the Files (their download URLs stop working), returns the price to the job\'s escrow as a `reversal` transaction, reverses the worker payout and reopens a completed job. See docs/trust.md.',
    success: ok(submission),
    errors: {
      409: '`details[0].code`: `invalid_state` (wrong status, already overridden, or identical bytes already approved), `override_window_closed`, `job_cancelled`, `no_free_slot`.',
    },
  },

  'api_keys.create': { summary: 'Create an API key (the secret is shown once)', tag: 'API keys', success: ok(apiKey) },
  'api_keys.list': { summary: 'List API keys (secrets masked)', tag: 'API keys', success: ok(list(apiKey)) },
  'api_keys.rotate': {
    summary: 'Rotate a key: a new secret; the old one works for 24 hours',
    tag: 'API keys',
    success: ok(apiKey),
    errors: { 409: 'The key is revoked.' },
  },
  'api_keys.revoke': {
    summary: 'Revoke a key, immediately',
    tag: 'API keys',
    success: { 204: { description: 'Revoked' } },
    errors: {},
  },

  'webhook_endpoints.create': {
    summary: 'Register a webhook endpoint (the `whsec_` secret is shown once)',
    tag: 'Webhooks',
    success: { 201: { description: 'Created', body: endpoint } },
    errors: { 409: 'The environment already has 100 endpoints, the most it can have (`details[0].code` `endpoint_limit_reached`): delete one first.' },
  },
  'webhook_endpoints.list': { summary: 'List webhook endpoints', tag: 'Webhooks', success: ok(list(endpoint)) },
  'webhook_endpoints.get': { summary: 'Get a webhook endpoint', tag: 'Webhooks', success: ok(endpoint) },
  'webhook_endpoints.update': {
    summary: 'Change url, description, events or status',
    tag: 'Webhooks',
    success: ok(endpoint),
    errors: { 409: 'The endpoint changed (another update, a secret rotation) or was deleted while this update was applied: fetch it and send the change again.' },
  },
  'webhook_endpoints.delete': { summary: 'Delete a webhook endpoint', tag: 'Webhooks', success: { 204: { description: 'Deleted' } } },
  'webhook_endpoints.rotate_secret': {
    summary: 'New signing secret; both sign for 24 hours',
    tag: 'Webhooks',
    success: ok(endpoint),
    bodyOptional: true,
  },
  'webhook_events.list': { summary: 'List events with their deliveries', tag: 'Webhooks', success: ok(list(event)) },
  'webhook_events.replay': {
    summary: 'Deliver an event again, with the same event id',
    tag: 'Webhooks',
    success: { 202: { description: 'Queued', body: event } },
    bodyOptional: true,
  },

  'billing.credits': { summary: 'The balance of the key’s environment', tag: 'Billing', success: ok(balance) },
  'billing.transactions': { summary: 'Every balance movement, newest first', tag: 'Billing', success: ok(list(transaction)) },
  'billing.purchase': {
    summary: 'Start a credit purchase: a checkout session',
    tag: 'Billing',
    success: ok(checkoutSession),
    errors: { 503: 'Buying credits is not available on this deployment (no payment processor configured; code payments_disabled). Test keys can still buy test credits.' },
  },
  'billing.purchase_alias': {
    summary: 'Start a credit purchase (alias path)',
    tag: 'Billing',
    success: ok(checkoutSession),
    errors: { 503: 'Buying credits is not available on this deployment (no payment processor configured; code payments_disabled). Test keys can still buy test credits.' },
  },
  'billing.stripe_webhook': {
    summary: "Stripe's payment confirmations (called by Stripe, not by integrators)",
    tag: 'Billing',
    description:
      'Receives `checkout.session.completed`, `checkout.session.async_payment_succeeded` and `checkout.session.async_payment_failed` from Stripe, verified with the `Stripe-Signature` header; each is applied once however often Stripe delivers it. Not enabled unless the deployment uses Stripe (404).',
    success: ok(z.looseObject({ received: z.literal(true), outcome: z.string() }), 'Event accepted'),
    errors: { 400: 'The Stripe-Signature header does not match the body.', 404: 'Payments by Stripe are not enabled here.' },
  },

  'organization.settings.get': { summary: 'Auto top-up settings', tag: 'Organization', success: ok(settings) },
  'organization.settings.update': { summary: 'Change auto top-up settings', tag: 'Organization', success: ok(settings) },
  'audit_events.list': { summary: 'The audit trail of mutating actions', tag: 'Organization', success: ok(list(auditEvent)) },

  'worker.signup': {
    summary: 'Create a worker and its token',
    tag: 'Workers',
    success: { 201: { description: 'Created', body: workerSignup } },
    errors: { 409: 'The email is already registered.' },
  },
  'worker.jobs.available': { summary: 'Jobs with free slots, best paid first', tag: 'Workers', success: ok(list(workerJob)) },
  'worker.jobs.accept': {
    summary: 'Reserve files_per_submission slots for 60 minutes',
    tag: 'Workers',
    success: { 201: { description: 'Reserved: upload within the reservation', body: workerSubmission } },
    errors: { 409: 'The worker already holds a reservation on this job, or no slot is free.' },
  },
  'worker.jobs.withdraw': {
    summary: 'Give back a reservation',
    tag: 'Workers',
    success: ok(workerSubmission),
    errors: { 409: 'Nothing to withdraw.' },
  },
  'worker.jobs.flag': { summary: 'Report a job', tag: 'Workers', success: ok(z.looseObject({})), errors: { 409: 'Already flagged by this worker.' } },
  'worker.submissions.upload': {
    summary: 'Upload files (multipart) or ask for pre-signed PUT URLs (JSON)',
    tag: 'Workers',
    success: uploadSuccess,
    extraRequestContent: multipartUpload,
    errors: {
      409: 'The submission is not awaiting an upload, or the reservation expired.',
      413: '`details[0].code = use_presigned_upload`: the multipart body is over 4 MiB.',
      503: '`details[0].code = upload_signing_unavailable`: the pre-signed URLs could not be signed right now; nothing was stored. Send the same request again after `Retry-After` seconds.',
    },
  },
  'worker.submissions.retry': {
    summary: 'Retry a `retry_pending` submission once with a new file',
    tag: 'Workers',
    success: uploadSuccess,
    extraRequestContent: multipartUpload,
    errors: {
      409: 'The submission is not retry_pending, or the retry was used.',
      413: '`details[0].code = use_presigned_upload`: the multipart body is over 4 MiB.',
      503: '`details[0].code = upload_signing_unavailable`: the pre-signed URLs could not be signed right now; nothing was stored. Send the same request again after `Retry-After` seconds.',
    },
  },
  'worker.submissions.get': { summary: "A worker's submission", tag: 'Workers', success: ok(workerSubmission) },
  'worker.submissions.list': { summary: "The worker's submissions", tag: 'Workers', success: ok(list(workerSubmission)) },

  'docs.openapi': {
    summary: 'This OpenAPI 3.1 document',
    tag: 'Reference',
    success: { 200: { description: 'The document', body: { 'application/json': { type: 'object' } } } },
  },
  'docs.page': {
    summary: 'The reference rendered for people',
    tag: 'Reference',
    success: { 200: { description: 'HTML page', body: { 'text/html': { type: 'string' } } } },
  },
  'docs.asset': {
    summary: 'Script and style of the reference page',
    tag: 'Reference',
    errors: { 404: 'No such asset.' },
    success: {
      200: {
        description: 'The asset',
        body: { 'text/css': { type: 'string' }, 'application/javascript': { type: 'string' } },
      },
    },
  },
};
