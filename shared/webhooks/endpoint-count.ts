/**
 * How many webhook endpoints a tenant (organization and environment) has: a counter item written
 * in the same transaction as each create and delete, so the cap holds under concurrent creates.
 *
 * Environments that had endpoints before the counter existed have none: counting from zero there
 * would let them go past the cap by the number they already had, and a delete would take the
 * count below zero. So before its transaction a create or a delete makes sure the counter exists,
 * seeding it once from a consistent count of the tenant's endpoints. Concurrent seeders all put the
 * same kind of value and only the first put lands (the others find it and go on); every count they
 * made was taken before any create or delete that did not itself seed first, so the counter
 * always includes every endpoint whose transaction came before it and none after.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { db, tableName } from '../db/client';
import { indexKeys, keys } from '../db/keys';
import { partitionPages } from '../db/query';
import type { Tx } from '../db/tx';
import type { BuyerPrincipal } from '../types';

/**
 * Endpoints per organization and environment. Every event lists a delivery per endpoint on one
 * item and in the events list: past a few hundred, a page of events would outgrow a function's
 * 6 MB answer, and past about 1,900 an event's item would outgrow DynamoDB's 400 KB.
 */
export const MAX_ENDPOINTS = 100;

/** Counts the endpoint in (only while the tenant has fewer than MAX_ENDPOINTS) or out. Call `ensureEndpointCount` first. */
export function countEndpoint(tx: Tx, p: BuyerPrincipal, delta: 1 | -1) {
  tx.update('endpoint_count', keys.webhookEndpointCount(p.orgId, p.env), 'ADD endpoints :d', {
    ...(delta > 0 ? { condition: 'attribute_not_exists(endpoints) OR endpoints < :max' } : {}),
    values: { ':d': delta, ...(delta > 0 ? { ':max': MAX_ENDPOINTS } : {}) },
  });
}

/** The tenant's endpoints, counted with a consistent read. */
async function countExisting(p: BuyerPrincipal): Promise<number> {
  let n = 0;
  for await (const page of partitionPages(indexKeys.tenantWebhookEndpoints(p.orgId, p.env), { count: true })) n += page.count;
  return n;
}

/** Seeds the tenant's counter from its endpoints when it has none yet (see above). */
export async function ensureEndpointCount(p: BuyerPrincipal): Promise<void> {
  const key = keys.webhookEndpointCount(p.orgId, p.env);
  const { Item } = await db().send(new GetCommand({ TableName: tableName(), Key: key, ConsistentRead: true, ProjectionExpression: 'endpoints' }));
  if (Item?.endpoints !== undefined) return;
  const endpoints = await countExisting(p);
  try {
    await db().send(new PutCommand({ TableName: tableName(), Item: { ...key, endpoints }, ConditionExpression: 'attribute_not_exists(endpoints)' }));
  } catch (e) {
    if (!(e instanceof ConditionalCheckFailedException)) throw e; // another request seeded it first
  }
}
