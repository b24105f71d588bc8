/**
 * The request schemas of every route, as the handlers pass them to `route()` (shared/http/route.ts).
 * The OpenAPI document is built from these very objects, so what is documented is what validates.
 */
import type { core } from 'zod';

export interface RouteSchemas {
  body?: core.$ZodType;
  query?: core.$ZodType;
}

const registered = new Map<string, RouteSchemas>();

export function registerRouteSchemas(routeId: string, schemas: RouteSchemas): void {
  registered.set(routeId, schemas);
}

export function registeredSchemas(routeId: string): RouteSchemas | undefined {
  return registered.get(routeId);
}
