/** One structured logger per process (Powertools), JSON lines with the request id appended. */
import { Logger } from '@aws-lambda-powertools/logger';

export const logger = new Logger({
  serviceName: 'media-marketplace',
  logLevel: (process.env.LOG_LEVEL as 'INFO' | 'DEBUG' | 'WARN' | 'ERROR' | 'SILENT' | undefined) ??
    (process.env.NODE_ENV === 'test' ? 'SILENT' : 'INFO'),
});
