import * as z from 'zod';
const q = z.strictObject({ limit: z.coerce.number().int().min(1).max(100).default(20), ts: z.iso.datetime({offset:true}).optional(), n: z.number().nullable() });
console.log(JSON.stringify(z.toJSONSchema(q, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' })));
console.log(JSON.stringify(z.toJSONSchema(z.object({a: z.string()}), { io: 'output' })));
console.log(JSON.stringify(z.toJSONSchema(z.looseObject({a: z.string()}), { io: 'output' })));
