/**
 * A real local webhook receiver for development, tests and the benchmark: an HTTP server on
 * 127.0.0.1 that keeps every delivery's raw body and headers, and answers with a programmable
 * script per path (e.g. 500, 500, then 200). Not used by the service itself.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: string;
  /** Parsed body (`id` is the event id). */
  event: { id: string; type: string; [k: string]: unknown };
  receivedAt: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
}

export interface DevReceiver {
  url: string;
  received: Received[];
  /** Deliveries to one path. */
  at(path: string): Received[];
  /** Answers for a path, used in order; the last one repeats. Default 200. */
  script(path: string, answers: (number | Answer)[]): void;
  onReceive?: (r: Received) => void;
  close(): Promise<void>;
}

export async function startDevReceiver(): Promise<DevReceiver> {
  const scripts = new Map<string, Answer[]>();
  const received: Received[] = [];
  const self: Partial<DevReceiver> = {};
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const path = (req.url ?? '/').split('?')[0]!;
      let event: Received['event'];
      try {
        event = JSON.parse(rawBody) as Received['event'];
      } catch {
        event = { id: '', type: '' };
      }
      const r: Received = { path, headers: req.headers, rawBody, event, receivedAt: Date.now() };
      received.push(r);
      const script = scripts.get(path);
      const answer = script ? (script.length > 1 ? script.shift()! : script[0]!) : { status: 200 };
      res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
      res.end(answer.status < 300 ? 'ok' : 'nope');
      self.onReceive?.(r);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(self, {
    url: `http://127.0.0.1:${port}`,
    received,
    at: (path: string) => received.filter((r) => r.path === path),
    script: (path: string, answers: (number | Answer)[]) =>
      scripts.set(path, answers.map((a) => (typeof a === 'number' ? { status: a } : a))),
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  }) as DevReceiver;
}
