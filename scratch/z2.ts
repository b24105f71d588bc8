import * as z from 'zod';
import { balance } from '../shared/openapi/schemas/billing';
import { list } from '../shared/openapi/schemas/common';
console.log(JSON.stringify(z.toJSONSchema(balance, { target: 'draft-2020-12', io: 'output' })).slice(0, 300));
console.log(JSON.stringify(z.toJSONSchema(list(balance), { target: 'draft-2020-12', io: 'output' })).slice(0, 400));
