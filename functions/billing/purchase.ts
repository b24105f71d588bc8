import * as z from '../../shared/zod';
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';
import { route, type ApiHandler } from '../../shared/http/route';
import { createCheckoutSession } from '../../shared/billing';
import { PURCHASE_MAX_CENTS, PURCHASE_MIN_CENTS } from '../../shared/billing/checkout';
import { routeById } from '../../shared/manifest/routes';

// D32: any integer amount in 1000..100000; 200 with the checkout session (D43).
const body = z.strictObject({ amount_cents: z.int().check(z.gte(PURCHASE_MIN_CENTS), z.lte(PURCHASE_MAX_CENTS)) });

const build = (id: string) =>
  route(id, { body }, async (req) => ({ body: await createCheckoutSession(req.ctx, req.buyer, req.body.amount_cents) }));

const primary = build('billing.purchase');
const alias = build('billing.purchase_alias');
const aliasPath = routeById('billing.purchase_alias').path;

/** One module serves both manifest entries (D32 alias path): dispatch on the matched resource. */
export const handler: ApiHandler = (event: APIGatewayProxyEvent, context: Context) =>
  (event.resource === aliasPath || event.path === aliasPath ? alias : primary)(event, context);
