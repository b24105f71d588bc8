/**
 * An STS emulator for the one call the functions make (shared/aws/sts.ts): AssumeRole of the
 * upload-signing role, whose credentials sign pre-signed upload URLs (shared/storage/
 * upload-signer.ts). It answers as STS does on the query protocol, and the credentials it issues
 * behave as STS's: the S3 front (s3-front.ts) accepts them only with their session token and
 * refuses them once expired (400 `ExpiredToken`), so a URL outliving its credentials fails here as
 * it fails on S3.
 *
 * - The caller's request is verified as STS verifies it (Signature V4, service `sts`, the local
 *   credentials); the local grant check (local/grants.ts) has already refused functions without
 *   `access.uploadSigner`.
 * - Only the configured role may be assumed (403 `AccessDenied` otherwise); `DurationSeconds` is
 *   900..3600 (a role assumed by a role: role chaining caps a session at one hour), else 400
 *   `ValidationError`; the session name is checked as STS checks it.
 * - Expiry follows the app's clock (shared/clock), as the S3 front's checks do, so tests move it.
 * - Issued credentials persist in the data folder (a restart keeps URLs signed before it valid
 *   until their credentials expire); expired ones are dropped.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { now } from '../shared/clock';
import { readAll, xmlEscape } from './s3-front';
import { verifySigV4, type Credentials, type CredentialLookup, type TemporaryCredentials } from './s3-sigv4';

const MIN_SECONDS = 900;
/** Role chaining: a role assumed with another role's credentials gets at most one hour. */
const MAX_CHAINED_SECONDS = 3600;

/** The temporary credentials issued, by access key id; persisted when given a file. */
export class IssuedCredentials {
  private readonly byId = new Map<string, TemporaryCredentials>();
  private readonly listeners: ((c: TemporaryCredentials) => void)[] = [];

  constructor(private readonly file?: string) {
    if (file && existsSync(file)) {
      const saved = JSON.parse(readFileSync(file, 'utf8')) as (Omit<TemporaryCredentials, 'expiration'> & { expiration: string })[];
      for (const c of saved) this.byId.set(c.accessKeyId, { ...c, expiration: new Date(c.expiration) });
    }
  }

  get(accessKeyId: string): TemporaryCredentials | undefined {
    return this.byId.get(accessKeyId);
  }

  add(c: TemporaryCredentials): void {
    const t = now().getTime();
    for (const [id, old] of this.byId) if (old.expiration.getTime() < t) this.byId.delete(id);
    this.byId.set(c.accessKeyId, c);
    for (const l of this.listeners) l(c);
    if (!this.file) return;
    const tmp = `${this.file}.tmp`;
    writeFileSync(tmp, JSON.stringify([...this.byId.values()]));
    renameSync(tmp, this.file);
  }

  /** Told of every credential issued, those issued before included (s3rver's own key registry). */
  onIssue(listener: (c: TemporaryCredentials) => void): void {
    this.listeners.push(listener);
    for (const c of this.byId.values()) listener(c);
  }

  /** The lookup the S3 front uses: the emulator's own credentials, then the issued ones. */
  lookup(own: Credentials): CredentialLookup {
    return (id) => (id === own.accessKeyId ? own : this.get(id));
  }
}

export interface StsEmulatorOptions {
  host: string;
  region: string;
  account: string;
  /** The one role that may be assumed (UPLOAD_SIGNER_ROLE_ARN). */
  roleArn: string;
  /** The credentials callers sign with. */
  credentials: Credentials;
  issued: IssuedCredentials;
}

const requestId = () => `${randomBytes(4).toString('hex')}-${randomBytes(2).toString('hex')}-${randomBytes(2).toString('hex')}-${randomBytes(2).toString('hex')}-${randomBytes(6).toString('hex')}`;

function answer(res: ServerResponse, status: number, xml: string): void {
  res.writeHead(status, { 'Content-Type': 'text/xml', 'Content-Length': String(Buffer.byteLength(xml)), 'x-amzn-RequestId': requestId() });
  res.end(xml);
}

function error(res: ServerResponse, status: number, code: string, message: string): void {
  const type = status >= 500 ? 'Receiver' : 'Sender';
  answer(res, status, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>${type}</Type><Code>${code}</Code><Message>${xmlEscape(message)}</Message></Error><RequestId>${requestId()}</RequestId></ErrorResponse>`);
}


/** `ASIA` + 16 characters, as STS's temporary access key ids. */
const accessKeyId = () => `ASIA${[...randomBytes(16)].map((b) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'[b % 32]).join('')}`;

async function assumeRole(opts: StsEmulatorOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readAll(req);
  const verdict = await verifySigV4({ method: req.method ?? 'POST', url: req.url ?? '/', rawHeaders: req.rawHeaders }, opts.credentials, opts.region, now(), 'sts');
  if (!verdict.ok) return error(res, verdict.status, verdict.code, verdict.message);
  if (verdict.payloadSha256 && createHash('sha256').update(body).digest('hex') !== verdict.payloadSha256) {
    return error(res, 400, 'IncompleteSignature', 'The request signature does not match the body.');
  }
  const form = new URLSearchParams(body.toString('utf8'));
  if (form.get('Action') !== 'AssumeRole') return error(res, 400, 'InvalidAction', `Could not find operation ${form.get('Action') ?? '(none)'} for version ${form.get('Version') ?? '(none)'}`);
  const roleArn = form.get('RoleArn') ?? '';
  const session = form.get('RoleSessionName') ?? '';
  const duration = Number(form.get('DurationSeconds') ?? MAX_CHAINED_SECONDS);
  if (!/^[\w+=,.@-]{2,64}$/.test(session)) {
    return error(res, 400, 'ValidationError', "1 validation error detected: Value at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*");
  }
  if (!Number.isInteger(duration) || duration < MIN_SECONDS) {
    return error(res, 400, 'ValidationError', `1 validation error detected: Value '${form.get('DurationSeconds')}' at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to ${MIN_SECONDS}`);
  }
  if (duration > MAX_CHAINED_SECONDS) return error(res, 400, 'ValidationError', 'The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining.');
  if (roleArn !== opts.roleArn) {
    return error(res, 403, 'AccessDenied', `User: arn:aws:sts::${opts.account}:assumed-role/local/function is not authorized to perform: sts:AssumeRole on resource: ${roleArn}`);
  }
  // Whole seconds, as STS gives them.
  const expiration = new Date(Math.floor(now().getTime() / 1000) * 1000 + duration * 1000);
  const issued: TemporaryCredentials = {
    accessKeyId: accessKeyId(),
    secretAccessKey: randomBytes(30).toString('base64'),
    sessionToken: randomBytes(96).toString('base64'),
    expiration,
  };
  opts.issued.add(issued);
  const roleName = roleArn.split('/').pop();
  answer(
    res,
    200,
    `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><SourceIdentity></SourceIdentity><AssumedRoleUser><AssumedRoleId>AROA${randomBytes(8).toString('hex').toUpperCase()}:${xmlEscape(session)}</AssumedRoleId><Arn>arn:aws:sts::${opts.account}:assumed-role/${xmlEscape(roleName ?? '')}/${xmlEscape(session)}</Arn></AssumedRoleUser><Credentials><AccessKeyId>${issued.accessKeyId}</AccessKeyId><SecretAccessKey>${xmlEscape(issued.secretAccessKey)}</SecretAccessKey><SessionToken>${xmlEscape(issued.sessionToken)}</SessionToken><Expiration>${expiration.toISOString().replace(/\.\d{3}Z$/, 'Z')}</Expiration></Credentials></AssumeRoleResult><ResponseMetadata><RequestId>${requestId()}</RequestId></ResponseMetadata></AssumeRoleResponse>`,
  );
}

export interface StsEmulator {
  endpoint: string;
  stop(): Promise<void>;
}

export async function startStsEmulator(opts: StsEmulatorOptions): Promise<StsEmulator> {
  const server = createServer((req, res) => {
    if (req.method !== 'POST') return error(res, 405, 'InvalidAction', 'STS takes POST requests (query protocol).');
    assumeRole(opts, req, res).catch((err: Error) => {
      if (!res.headersSent) error(res, 500, 'InternalFailure', err.message);
      else res.destroy();
    });
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, opts.host, () => ok());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://${opts.host}:${port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
