/**
 * The credentials that sign pre-signed upload URLs (D24; manifest `access.uploadSigner`).
 *
 * A pre-signed URL lives only as long as the credentials that signed it: S3 refuses it once they
 * expire, whatever its `X-Amz-Expires`. A function's own role credentials may expire sooner than
 * the hour an upload URL promises (Lambda does not keep its execution role's credentials to the
 * role's session duration), so each plan assumes the stack's upload-signing role afresh for an
 * hour (role chaining allows no more) and signs with those credentials; the URL's `expires_at` is
 * capped at their expiry, so it is never later than the moment S3 stops accepting the URL.
 *
 * Locally the runtime's STS emulator (local/sts.ts) issues the credentials and its S3 front
 * refuses a URL whose credentials expired, as S3 does. Without a configured role (a unit test
 * outside the runtime) URLs are signed with the process's own credentials, expiry unknown.
 */
import { randomBytes } from 'node:crypto';
import { config } from '../config';
import { StsClient, type AssumedCredentials } from '../aws/sts';

/** Role chaining (a function's role assuming another) caps a session at one hour. */
export const SIGNER_SESSION_SECONDS = 3600;

let sts: StsClient | null = null;

export async function uploadSigningCredentials(): Promise<AssumedCredentials | null> {
  const c = config();
  if (!c.uploadSignerRoleArn) return null;
  sts ??= new StsClient({
    region: c.region,
    ...(c.stsEndpoint ? { endpoint: c.stsEndpoint, credentials: async () => ({ accessKeyId: 'local', secretAccessKey: 'local' }) } : {}),
  });
  // The session name shows in CloudTrail beside each upload the URL lets in.
  return sts.assumeRole(c.uploadSignerRoleArn, `upload-plan-${randomBytes(6).toString('hex')}`, SIGNER_SESSION_SECONDS);
}

/** For the local runtime and tests after changing endpoints. */
export function resetUploadSigner(): void {
  sts?.destroy();
  sts = null;
}
