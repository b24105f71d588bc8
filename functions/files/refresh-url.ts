import { route } from '../../shared/http/route';
import { refreshFileUrl } from '../../shared/files';
import { responseSealer } from '../../shared/secrets/sealer';

/** D30: a fresh 7-day URL for the primary file only; a replay's stored answer is sealed (the URL opens the file). */
export const handler = route('files.refresh_url', {}, async (req) => ({ body: await refreshFileUrl(req.resource) }), { sealer: responseSealer });
