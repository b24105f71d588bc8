/**
 * D72: every manifest route is described in the OpenAPI document. Routes added to
 * shared/manifest/routes.ts need an entry in shared/openapi/operations.ts (then `npm run openapi`).
 */
import { undocumentedRoutes } from '../../shared/openapi/build';

test('D72: no manifest route lacks documentation (shared/openapi/operations.ts)', () => {
  expect(undocumentedRoutes().map((r) => `${r.method} ${r.path} (${r.id})`)).toEqual([]);
});
