/**
 * Loads the resource named by the path (D42: after scope, before body validation). Unknown ids,
 * malformed ids (D43), other organizations' and the other environment's resources (D3) are all the
 * same 404.
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../db/client';
import { keys, type Key } from '../../db/keys';
import { errors } from '../../errors';
import { isId, type IdKind } from '../../ids';
import { now } from '../../clock';
import { state, type ApiState } from '../state';
import { decodePathParam } from '../params';
import type { ResourceKind, RouteDef } from '../../manifest/routes';
import type { BuyerPrincipal, Principal, WorkerPrincipal } from '../../types';
import { WORKER_ONLY_STATUSES } from '../../work/model';

type Item = Record<string, unknown>;

interface Loader {
  idKind: IdKind;
  noun: string;
  key: (id: string, p: Principal) => Key;
  visible: (item: Item, p: Principal) => boolean;
}

const sameTenant = (item: Item, p: Principal) => {
  const b = p as BuyerPrincipal;
  return item.org_id === b.orgId && item.environment === b.env;
};

const LOADERS: Record<ResourceKind, Loader> = {
  job: { idKind: 'job', noun: 'job', key: (id) => keys.job(id), visible: sameTenant },
  file: { idKind: 'file', noun: 'file', key: (id) => keys.file(id), visible: sameTenant },
  submission: {
    idKind: 'submission',
    noun: 'submission',
    key: (id) => keys.submission(id),
    // D24: buyer routes never show a worker-only submission (awaiting its upload, or ended without one).
    visible: (item, p) => sameTenant(item, p) && !(WORKER_ONLY_STATUSES as readonly unknown[]).includes(item.status),
  },
  export: { idKind: 'export', noun: 'export', key: (id) => keys.export(id), visible: sameTenant },
  // D38: kept 30 days; past its `ttl` an event is gone, whether or not DynamoDB has deleted it yet.
  webhook_event: { idKind: 'event', noun: 'event', key: (id) => keys.event(id), visible: (item, p) => sameTenant(item, p) && !(Number(item.ttl) * 1000 <= now().getTime()) },
  webhook_endpoint: {
    idKind: 'webhookEndpoint',
    noun: 'webhook endpoint',
    key: (id, p) => keys.webhookEndpoint((p as BuyerPrincipal).orgId, (p as BuyerPrincipal).env, id),
    visible: () => true,
  },
  // D3: API keys are per organization (both environments).
  api_key: {
    idKind: 'apiKey',
    noun: 'API key',
    key: (id, p) => keys.apiKey((p as BuyerPrincipal).orgId, id),
    visible: () => true,
  },
  // Workers see jobs of their own environment (the sandbox simulator is a test-environment worker).
  worker_job: {
    idKind: 'job',
    noun: 'job',
    key: (id) => keys.job(id),
    visible: (item, p) => item.environment === (p as WorkerPrincipal).env,
  },
  worker_submission: {
    idKind: 'submission',
    noun: 'submission',
    key: (id) => keys.submission(id),
    visible: (item, p) => item.worker_id === (p as WorkerPrincipal).workerId,
  },
};

/** Where the path's resource lives, or null when the path names none (no route resource, bad id). */
export function resourceKey(route: RouteDef, s: Pick<ApiState, 'params' | 'principal'>): Key | null {
  if (!route.resource || !s.principal) return null;
  const l = LOADERS[route.resource.kind];
  const id = decodePathParam(s.params[route.resource.param] ?? '');
  if (id === null || !isId(l.idKind, id)) return null;
  return l.key(id, s.principal);
}

function visibleOrNotFound(l: Loader, id: string, item: Item | undefined, p: Principal): Item {
  if (!item || !l.visible(item, p)) throw errors.notFound(l.noun, id);
  return item;
}

export async function loadResource(kind: ResourceKind, id: string, p: Principal): Promise<Item> {
  const l = LOADERS[kind];
  if (!isId(l.idKind, id)) throw errors.notFound(l.noun, id);
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: l.key(id, p), ConsistentRead: true }));
  return visibleOrNotFound(l, id, out.Item as Item | undefined, p);
}

export function resource(route: RouteDef): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> {
  return {
    before: async (request) => {
      if (!route.resource) return;
      const s = state(request.event);
      // The raw segment, decoded once; a malformed escape names nothing: 404 (D43), never a 500.
      const raw = s.params[route.resource.param] ?? '';
      const id = decodePathParam(raw);
      const l = LOADERS[route.resource.kind];
      if (id === null) throw errors.notFound(l.noun, raw.slice(0, 100));
      // Read already (strongly consistent) beside the tier and balance: same visibility rules.
      const pre = s.prefetched;
      const key = isId(l.idKind, id) ? l.key(id, s.principal!) : null;
      if (pre && key && pre.PK === key.PK && pre.SK === key.SK) {
        s.resource = visibleOrNotFound(l, id, pre.item, s.principal!);
        return;
      }
      s.resource = await loadResource(route.resource.kind, id, s.principal!);
    },
  };
}
