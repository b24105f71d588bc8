/**
 * The one-off re-seal of webhook endpoint secrets sealed before each sealing purpose had an
 * encryption context of its own (shared/secrets/sealer.ts; D63): every endpoint whose current or
 * previous secret is still in an older sealed form (`s2.…` under the one shared context, or the
 * first round's local `v1:…`) gets it opened and sealed again for the `endpoint-secret` purpose.
 * After it, and once the stored responses of before have expired (24 h), no value the other
 * purposes' roles could open under the shared context is left.
 *
 * Each endpoint is one conditional UpdateItem on the values it read, so a secret rotated meanwhile
 * is never overwritten: that endpoint counts as changed and is left for the next run (its new
 * secret is sealed the new way already; its previous one may not be). The secrets themselves do
 * not change, so deliveries keep their signatures and no event is written. Run by an operator
 * (scripts/reseal-endpoint-secrets.ts), with the sealing key's Decrypt and GenerateDataKey.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { TABLE_DEF } from '../db/table';
import type { Env } from '../types';
import { openEndpointSecret, sealEndpointSecret } from './secrets';

/** The attributes of an endpoint item that hold a sealed secret. */
const SEALED_ATTRIBUTES = ['secret_sealed', 'previous_secret_sealed'] as const;

/** A value sealed the current way: `s3.…` (a purpose's own context). */
const sealedTheCurrentWay = (v: unknown) => typeof v !== 'string' || v.startsWith('s3.');

export interface ResealReport {
  /** Endpoints looked at. */
  endpoints: number;
  /** Endpoints whose secrets were (or, in a dry run, would be) sealed again. */
  resealed: number;
  /** Endpoints changed between the read and the write (a rotation): left for the next run. */
  changedMeanwhile: number;
}

export async function resealEndpointSecrets(opts: { dryRun?: boolean } = {}): Promise<ResealReport> {
  const report: ResealReport = { endpoints: 0, resealed: 0, changedMeanwhile: 0 };
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db().send(
      new ScanCommand({
        TableName: tableName(),
        FilterExpression: 'begins_with(#sk, :we) AND attribute_exists(secret_sealed)',
        ExpressionAttributeNames: { '#sk': TABLE_DEF.sortKey },
        ExpressionAttributeValues: { ':we': keys.webhookEndpointSortKeyPrefix() },
        ExclusiveStartKey: start,
      }),
    );
    start = page.LastEvaluatedKey;
    for (const item of page.Items ?? []) {
      report.endpoints++;
      const stale = SEALED_ATTRIBUTES.filter((a) => !sealedTheCurrentWay(item[a]));
      if (stale.length === 0) continue;
      report.resealed++;
      if (opts.dryRun) continue;
      const id = item.id as string;
      const names: Record<string, string> = {};
      const values: Record<string, unknown> = {};
      const sets: string[] = [];
      const conditions: string[] = [];
      for (const [i, a] of stale.entries()) {
        names[`#a${i}`] = a;
        values[`:old${i}`] = item[a];
        values[`:new${i}`] = await sealEndpointSecret(await openEndpointSecret(item[a] as string, id), id);
        sets.push(`#a${i} = :new${i}`);
        conditions.push(`#a${i} = :old${i}`);
      }
      try {
        await db().send(
          new UpdateCommand({
            TableName: tableName(),
            Key: keys.webhookEndpoint(item.org_id as string, item.environment as Env, id),
            UpdateExpression: `SET ${sets.join(', ')}`,
            ConditionExpression: conditions.join(' AND '),
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
          }),
        );
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
        report.resealed--;
        report.changedMeanwhile++;
      }
    }
  } while (start);
  return report;
}
