import { route } from '../../shared/http/route';
import { refreshFileUrl } from '../../shared/files';

/** D30: a fresh 7-day URL for the primary file only. */
export const handler = route('files.refresh_url', {}, async (req) => ({ body: await refreshFileUrl(req.resource) }));
