/**
 * Every key string of the single table, in one module (see docs/data-model.md for the chart and the
 * access patterns). Nothing outside this file spells `PK`/`SK`/`GSI*` values.
 *
 * Conventions
 * - A tenant is an organization in one environment (D3): `T#<org_id>#<env>`.
 * - Entity ids are `<prefix>_<ULID>` (D1), so sorting by id sorts by creation time; lists query
 *   with ScanIndexForward=false for newest first, and `created_after` becomes a key condition on
 *   the ULID lower bound of that instant.
 * - Each entity with its own life (job, submission, file, event, checkout session) is its own
 *   partition, so one busy buyer does not funnel every write into one partition.
 */
import type { Env } from '../types';
import { ulidFloor, type IdKind } from '../ids';

export type Key = { PK: string; SK: string };
type Gsi = { [k: string]: string };

export const tenant = (org: string, env: Env) => `T#${org}#${env}`;

// ---------------------------------------------------------------- organizations & identity
export const keys = {
  organization: (org: string): Key => ({ PK: `ORG#${org}`, SK: 'ORG' }),
  /** Uniqueness guard for signup e-mails (D7: duplicate e-mail is 409). */
  orgEmail: (email: string): Key => ({ PK: `EMAIL#${email.toLowerCase()}`, SK: 'EMAIL' }),
  settings: (org: string): Key => ({ PK: `ORG#${org}`, SK: 'SETTINGS' }),
  phoneVerification: (org: string): Key => ({ PK: `ORG#${org}`, SK: 'PHONE_VERIFICATION' }),
  /** A phone number grants starter credits once across all organizations (D7, D57). */
  phoneClaim: (phone: string): Key => ({ PK: `PHONE#${phone}`, SK: 'PHONE' }),

  /** API key record; listed per organization (both environments, D3). */
  apiKey: (org: string, keyId: string): Key => ({ PK: `ORG#${org}`, SK: `KEY#${keyId}` }),
  apiKeysPrefix: (org: string) => ({ PK: `ORG#${org}`, SKPrefix: 'KEY#' }),
  /**
   * Secret lookup by SHA-256 (D5, D9): one GetItem authenticates a request. Holds what auth needs
   * (principal, org, env, scopes) and, for a rotated-out secret, `not_after` (D6).
   */
  secret: (sha256hex: string): Key => ({ PK: `SECRET#${sha256hex}`, SK: 'SECRET' }),

  worker: (wkr: string): Key => ({ PK: `WKR#${wkr}`, SK: 'WKR' }),
  workerEmail: (email: string): Key => ({ PK: `WEMAIL#${email.toLowerCase()}`, SK: 'WEMAIL' }),
  workerPayout: (wkr: string, payId: string): Key => ({ PK: `WKR#${wkr}`, SK: `PAY#${payId}` }),

  // ---------------------------------------------------------------- jobs & work
  job: (jobId: string): Key => ({ PK: `JOB#${jobId}`, SK: 'JOB' }),
  /** One active reservation per worker per job (D23, D45). */
  reservation: (jobId: string, wkr: string): Key => ({ PK: `JOB#${jobId}`, SK: `RES#${wkr}` }),
  /** Duplicate-bytes guard per job (D26): written in the approval transaction. */
  jobContentHash: (jobId: string, sha256hex: string): Key => ({ PK: `JOB#${jobId}`, SK: `HASH#${sha256hex}` }),
  /** Rating guard and flag records live on the job partition too. */
  jobFlag: (jobId: string, wkr: string): Key => ({ PK: `JOB#${jobId}`, SK: `FLAG#${wkr}` }),

  /** The sandbox simulator's state for one test-environment job (D40, D53). */
  sandboxState: (jobId: string): Key => ({ PK: `JOB#${jobId}`, SK: 'SANDBOX' }),

  submission: (subId: string): Key => ({ PK: `SUB#${subId}`, SK: 'SUB' }),
  /** D27 retry window of a `retry_pending` submission; swept like reservations (gsi.reservationExpiry). */
  retryWindow: (subId: string): Key => ({ PK: `SUB#${subId}`, SK: 'RETRY' }),
  /**
   * The held long polls of a long-poll route (shared/long-poll-slots.ts): one item for the route
   * (all organizations) and one per organization, each slot `w<i>` holding its lease's end.
   */
  waitSlots: (route: string, orgId?: string): Key => ({ PK: orgId ? `LPW#${route}#${orgId}` : `LPW#${route}`, SK: 'LPW' }),
  /**
   * A round completed after both stages had written (complete-upload.ts): its insert queues the
   * verdict through the table stream (rule `fan-in-due`), so the verdict cannot be lost with the
   * function that committed the completion. Kept a day (ttl).
   */
  fanIn: (subId: string, round: string): Key => ({ PK: `SUB#${subId}`, SK: `FANIN#${round}` }),
  file: (fileId: string): Key => ({ PK: `FILE#${fileId}`, SK: 'FILE' }),
  /** A dataset export of one job (D73); its own partition, listed per job through gsi.export. */
  export: (expId: string): Key => ({ PK: `EXP#${expId}`, SK: 'EXP' }),

  // ---------------------------------------------------------------- trust (D26, D69)
  /**
   * Duplicate-bytes guard per tenant (D26, D69: identical bytes count organization-wide, any job):
   * created in the approval transaction, removed when an override withdraws the file.
   */
  tenantContentHash: (org: string, env: Env, sha256hex: string): Key => ({ PK: `CHASH#${tenant(org, env)}#${sha256hex}`, SK: 'CHASH' }),
  /**
   * One near-duplicate index bucket (D69): the approved images of a tenant whose perceptual hash
   * has the value `bandValueHex` in band `band` (shared/trust/neardup.ts splits the 64 bits into
   * bands). Each image is an attribute of the bucket (`h#<file_id>` = its 16-hex hash), so a check
   * reads a fixed set of buckets with one BatchGetItem, never a scan.
   */
  perceptualHashBucket: (org: string, env: Env, band: number, bandValueHex: string): Key => ({
    PK: `PHASH#${tenant(org, env)}#${band}#${bandValueHex}`,
    SK: 'PHASH',
  }),

  // ---------------------------------------------------------------- money (D31-D34)
  balance: (org: string, env: Env): Key => ({ PK: tenant(org, env), SK: 'BALANCE' }),
  /** Lots sort by expiry so "the lot that expires first" is the first item (D33); never = 9999. */
  creditLot: (org: string, env: Env, expiresAtIso: string | null, lotId: string): Key => ({
    PK: tenant(org, env),
    SK: `LOT#${expiresAtIso ?? '9999-12-31T23:59:59.999Z'}#${lotId}`,
  }),
  creditLotsPrefix: (org: string, env: Env) => ({ PK: tenant(org, env), SKPrefix: 'LOT#' }),
  transaction: (org: string, env: Env, crtxId: string): Key => ({ PK: `TX#${tenant(org, env)}`, SK: crtxId }),
  checkoutSession: (csId: string): Key => ({ PK: `CS#${csId}`, SK: 'CS' }),

  // ---------------------------------------------------------------- events, webhooks, audit
  event: (evtId: string): Key => ({ PK: `EVT#${evtId}`, SK: 'EVT' }),
  delivery: (evtId: string, endpointId: string): Key => ({ PK: `EVT#${evtId}`, SK: `DLV#${endpointId}` }),
  webhookEndpoint: (org: string, env: Env, weId: string): Key => ({ PK: tenant(org, env), SK: `WE#${weId}` }),
  webhookEndpointsPrefix: (org: string, env: Env) => ({ PK: tenant(org, env), SKPrefix: 'WE#' }),
  /** The sort-key prefix of every webhook endpoint, whatever its tenant (an operator's scan: shared/webhooks/reseal.ts). */
  webhookEndpointSortKeyPrefix: () => 'WE#',
  /** How many webhook endpoints the tenant has (the cap's counter, written with each create and delete). */
  webhookEndpointCount: (org: string, env: Env): Key => ({ PK: tenant(org, env), SK: 'WE_COUNT' }),
  audit: (org: string, audId: string): Key => ({ PK: `AUD#${org}`, SK: audId }),

  // ---------------------------------------------------------------- request plumbing
  /** D10: scope organization + environment + key string; the key string is hashed (≤255 chars). */
  idempotency: (scope: string, keyHash: string): Key => ({ PK: `IDEM#${scope}#${keyHash}`, SK: 'IDEM' }),
  /** Local runtime only: the item written after each transaction so DynamoDB Local persists it (shared/db/client). */
  localDurabilityMarker: (): Key => ({ PK: 'LOCAL#DURABILITY', SK: 'FLUSH' }),
  /** Fixed-window counters (D13): one item per principal per hour, holding the hour's and each minute's count. */
  rateWindow: (principal: string, window: 'm' | 'h', windowStart: number): Key => ({
    PK: `RL#${principal}#${window}#${windowStart}`,
    SK: 'RL',
  }),
};

// ---------------------------------------------------------------- GSI attribute builders
/** Secondary-index attributes per entity; each returns the GSI attributes to store on the item. */
/**
 * An index sort key in an id's shape whose time is `at` (not the id's) and whose rest is the id's
 * random part (ties): the item lists by the time the list shows, and range keys (`ulidFloor`) and
 * items keyed by their id before still order with it.
 */
const keyAt = (kind: IdKind, at: string, id: string) => ulidFloor(kind, new Date(at)).slice(0, -16) + id.slice(-16);

export const gsi = {
  /** GSI1: all jobs of a tenant; GSI2: jobs of a tenant by status (status filter, D21). */
  job: (org: string, env: Env, jobId: string, status: string): Gsi => ({
    GSI1PK: `${tenant(org, env)}#JOBS`,
    GSI1SK: jobId,
    GSI2PK: `${tenant(org, env)}#JOBS#${status}`,
    GSI2SK: jobId,
  }),
  /**
   * GSI3 (sparse): jobs workers can see (D23: only while free slots > 0), best paid first (D45).
   * Present only while the job has free slots; removed otherwise.
   */
  availableJob: (env: Env, payoutCents: number, jobId: string): Gsi => ({
    GSI3PK: `AVAILABLE#${env}`,
    GSI3SK: `${String(payoutCents).padStart(10, '0')}#${jobId}`,
  }),
  /**
   * GSI1: a job's submissions; GSI2: a tenant's submissions (the buyer's lists, from the upload: by
   * `submitted_at`, the time the buyer sees, in an id's shape); GSI3: a worker's history (by the
   * accept, the submission's `created_at`: its id).
   */
  submission: (org: string, env: Env, jobId: string, wkr: string, subId: string, submittedAt: string | null = null): Gsi => ({
    GSI1PK: `JOB#${jobId}#SUBS`,
    GSI1SK: submittedAt ? keyAt('submission', submittedAt, subId) : subId,
    GSI2PK: `${tenant(org, env)}#SUBS`,
    GSI2SK: submittedAt ? keyAt('submission', submittedAt, subId) : subId,
    GSI3PK: `WKR#${wkr}#SUBS`,
    GSI3SK: subId,
  }),
  /**
   * GSI1: a job's files, by the File's `created_at` (its approval, which may come days after the
   * upload that minted the id: an override). The sort key has an id's shape: the time part is
   * the approval's, the rest the file id's random part (ties). Files written before it was so
   * sort by their upload time, with the same shape: the two order together.
   */
  file: (jobId: string, fileId: string, createdAt: string): Gsi => ({ GSI1PK: `JOB#${jobId}#FILES`, GSI1SK: keyAt('file', createdAt, fileId) }),
  /** GSI1: a job's exports (D73), newest first. */
  export: (jobId: string, expId: string): Gsi => ({ GSI1PK: `JOB#${jobId}#EXPORTS`, GSI1SK: expId }),
  /** GSI1: a tenant's transactions by type (the `type` filter). */
  transaction: (org: string, env: Env, type: string, crtxId: string): Gsi => ({
    GSI1PK: `TX#${tenant(org, env)}#${type}`,
    GSI1SK: crtxId,
  }),
  /** GSI1 (sparse): lots that will expire, by expiry, for the sweep (D33). */
  expiringLot: (expiresAtIso: string, lotId: string): Gsi => ({ GSI1PK: 'LOTS#EXPIRING', GSI1SK: `${expiresAtIso}#${lotId}` }),
  /** GSI1: a tenant's events; GSI2: by type (D38 filters). */
  event: (org: string, env: Env, type: string, evtId: string): Gsi => ({
    GSI1PK: `${tenant(org, env)}#EVTS`,
    GSI1SK: evtId,
    GSI2PK: `${tenant(org, env)}#EVTS#${type}`,
    GSI2SK: evtId,
  }),
  /** GSI1: an organization's audit events by type; GSI2: by job (D39 filters). */
  audit: (org: string, eventType: string, audId: string, jobId: string | null): Gsi => ({
    GSI1PK: `AUD#${org}#TYPE#${eventType}`,
    GSI1SK: audId,
    ...(jobId ? { GSI2PK: `AUD#${org}#JOB#${jobId}`, GSI2SK: audId } : {}),
  }),
  /** GSI1 (sparse): reservations by expiry, for the sweep (D23). Sharded by worker id tail. */
  reservationExpiry: (reservedUntilIso: string, jobId: string, wkr: string): Gsi => ({
    GSI1PK: `RES#EXPIRY#${wkr.slice(-1)}`,
    GSI1SK: `${reservedUntilIso}#${jobId}#${wkr}`,
  }),
};

/** Index-partition values used by queries (so queries never spell key strings either). */
export const indexKeys = {
  tenantJobs: (org: string, env: Env) => ({ index: 'GSI1' as const, pk: `${tenant(org, env)}#JOBS` }),
  tenantJobsByStatus: (org: string, env: Env, status: string) => ({
    index: 'GSI2' as const,
    pk: `${tenant(org, env)}#JOBS#${status}`,
  }),
  availableJobs: (env: Env) => ({ index: 'GSI3' as const, pk: `AVAILABLE#${env}` }),
  jobSubmissions: (jobId: string) => ({ index: 'GSI1' as const, pk: `JOB#${jobId}#SUBS` }),
  /** A job's active upload reservations (`keys.reservation`), in its own partition. */
  jobReservations: (jobId: string) => ({ index: null, pk: `JOB#${jobId}`, skPrefix: 'RES#' }),
  tenantSubmissions: (org: string, env: Env) => ({ index: 'GSI2' as const, pk: `${tenant(org, env)}#SUBS` }),
  workerSubmissions: (wkr: string) => ({ index: 'GSI3' as const, pk: `WKR#${wkr}#SUBS` }),
  jobFiles: (jobId: string) => ({ index: 'GSI1' as const, pk: `JOB#${jobId}#FILES` }),
  jobExports: (jobId: string) => ({ index: 'GSI1' as const, pk: `JOB#${jobId}#EXPORTS` }),
  tenantTransactions: (org: string, env: Env) => ({ index: null, pk: `TX#${tenant(org, env)}` }),
  tenantTransactionsByType: (org: string, env: Env, type: string) => ({
    index: 'GSI1' as const,
    pk: `TX#${tenant(org, env)}#${type}`,
  }),
  expiringLots: () => ({ index: 'GSI1' as const, pk: 'LOTS#EXPIRING' }),
  tenantEvents: (org: string, env: Env) => ({ index: 'GSI1' as const, pk: `${tenant(org, env)}#EVTS` }),
  tenantEventsByType: (org: string, env: Env, type: string) => ({
    index: 'GSI2' as const,
    pk: `${tenant(org, env)}#EVTS#${type}`,
  }),
  eventDeliveries: (evtId: string) => ({ index: null, pk: `EVT#${evtId}`, skPrefix: 'DLV#' }),
  orgAudit: (org: string) => ({ index: null, pk: `AUD#${org}` }),
  orgAuditByType: (org: string, eventType: string) => ({ index: 'GSI1' as const, pk: `AUD#${org}#TYPE#${eventType}` }),
  orgAuditByJob: (org: string, jobId: string) => ({ index: 'GSI2' as const, pk: `AUD#${org}#JOB#${jobId}` }),
  orgApiKeys: (org: string) => ({ index: null, pk: `ORG#${org}`, skPrefix: 'KEY#' }),
  tenantWebhookEndpoints: (org: string, env: Env) => ({ index: null, pk: tenant(org, env), skPrefix: 'WE#' }),
  tenantCreditLots: (org: string, env: Env) => ({ index: null, pk: tenant(org, env), skPrefix: 'LOT#' }),
  reservationExpiryShard: (shard: string) => ({ index: 'GSI1' as const, pk: `RES#EXPIRY#${shard}` }),
};

/** Base32 Crockford tail characters used for reservation-expiry shards. */
export const RESERVATION_SHARDS = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'.split('');
