/**
 * A loopback HTTP server for the tests of the small query-protocol clients (STS, SNS): it records
 * each request with its body and answers with `reply` (XML), which each test may set; the record
 * and the reply are reset before every test. Registers its hooks where it is called.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface QueryServer {
  endpoint: string;
  seen: { req: IncomingMessage; body: string }[];
  reply: { status: number; body: string };
}

export function useQueryServer(defaultReply: string): QueryServer {
  let server: Server;
  const wire: QueryServer = { endpoint: '', seen: [], reply: { status: 200, body: defaultReply } };
  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        wire.seen.push({ req, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(wire.reply.status, { 'content-type': 'text/xml', 'x-amzn-requestid': 'REQ' }).end(wire.reply.body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    wire.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    wire.seen = [];
    wire.reply = { status: 200, body: defaultReply };
  });
  afterAll(() => new Promise((r) => server.close(r)));
  return wire;
}
