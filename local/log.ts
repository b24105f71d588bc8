/** The local runtime's console log: one line per message, filtered by level. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Log {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string, err?: unknown): void;
}

export function createLog(level: LogLevel = 'info', prefix = 'local'): Log {
  const on = (l: LogLevel) => ORDER[l] >= ORDER[level];
  const line = (msg: string) => `[${prefix}] ${msg}`;
  return {
    debug: (msg) => on('debug') && console.debug(line(msg)),
    info: (msg) => on('info') && console.info(line(msg)),
    warn: (msg) => on('warn') && console.warn(line(msg)),
    error: (msg, err) => {
      if (!on('error')) return;
      console.error(line(msg));
      if (err) console.error(err);
    },
  };
}

export const silentLog: Log = createLog('silent');
