/**
 * Endpoint signing secrets (D36): `whsec_` + base64 of 32 random bytes, shown once (create and
 * rotate_secret). Unlike API keys they must be recoverable to sign each delivery, so they are
 * stored sealed (envelope encryption under the KMS key deployed, the data folder's keyring
 * locally; see shared/secrets/sealer.ts and docs/webhooks.md, "Secrets at rest"). The sealed
 * value is bound to its endpoint id.
 */
import { randomBytes } from 'node:crypto';
import { sealer } from '../secrets/sealer';

export const SECRET_PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

export function sealEndpointSecret(secret: string, endpointId: string): Promise<string> {
  return sealer('endpoint-secret').seal(secret, `webhook_endpoint:${endpointId}`);
}

export function openEndpointSecret(sealed: string, endpointId: string): Promise<string> {
  // Values of the first round (`v1:`, local data folders) were bound to the bare endpoint id.
  return sealer('endpoint-secret').open(sealed, sealed.startsWith('v1:') ? endpointId : `webhook_endpoint:${endpointId}`);
}
