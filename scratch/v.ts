import { Validator } from '@seriousme/openapi-schema-validator';
import doc from '../shared/openapi/openapi.json';
(async () => { const v = new Validator(); const r = await v.validate(doc as any); console.log(r.valid, JSON.stringify(r.errors)?.slice(0, 2000)); console.log(v.version); })();
