/**
 * Endpoint health (D37): a 410 disables the endpoint at once; five days of only failures disable
 * it too. Disabling is a system action, audited.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { now } from '../clock';
import { audit } from '../audit';
import { systemContext } from '../context';
import { FAILING_DISABLE_MS } from './schedule';
import { ifCondition, type Item } from './delivery-store';
import type { Env } from '../types';

const endpointKey = (ep: Item) => keys.webhookEndpoint(ep.org_id as string, ep.environment as Env, ep.id as string);

export async function disableEndpoint(ep: Item, reason: 'gone' | 'failing_for_5_days'): Promise<void> {
  const tx = new Tx();
  const at = now().toISOString();
  // Five days of only failures are judged on the failure window read: a delivery that succeeded
  // (or a re-enable) since has closed or restarted it, and the endpoint stays enabled.
  const window = reason === 'failing_for_5_days';
  tx.update('webhook_endpoint', endpointKey(ep), 'SET #st = :d, disabled_reason = :r, updated_at = :u', {
    condition: `attribute_exists(PK) AND #st = :e${window ? ' AND failing_since = :fs' : ''}`,
    names: { '#st': 'status' },
    values: { ':d': 'disabled', ':r': reason, ':u': at, ':e': 'enabled', ...(window ? { ':fs': ep.failing_since ?? null } : {}) },
  });
  audit(tx, {
    orgId: ep.org_id as string,
    eventType: 'webhook_endpoint.disabled',
    actor: systemContext('webhook-dispatcher').actor,
    env: ep.environment as Env,
    resource: { type: 'webhook_endpoint', id: ep.id as string },
    requestId: null,
    data: { reason },
  });
  await ifCondition(tx.commit());
}

/** Tracks "only failures since" on the endpoint; returns true when the 5-day rule now applies. */
export async function trackHealth(ep: Item, ok: boolean, at: Date): Promise<boolean> {
  if (ok && ep.failing_since) {
    await ifCondition(
      db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: endpointKey(ep),
          UpdateExpression: 'SET failing_since = :n',
          ConditionExpression: 'attribute_exists(PK)',
          ExpressionAttributeValues: { ':n': null },
        }),
      ),
    );
  } else if (!ok && !ep.failing_since) {
    await ifCondition(
      db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: endpointKey(ep),
          UpdateExpression: 'SET failing_since = :t',
          ConditionExpression: 'attribute_exists(PK) AND (attribute_not_exists(failing_since) OR failing_since = :n)',
          ExpressionAttributeValues: { ':t': at.toISOString(), ':n': null },
        }),
      ),
    );
  }
  return !ok && !!ep.failing_since && at.getTime() - Date.parse(ep.failing_since as string) >= FAILING_DISABLE_MS;
}
