// The SQS emulator (fauxqs) in a child process of the local runtime. fauxqs is published as an ES
// module only, which Jest's CommonJS module system cannot load, so tests and `npm start` both run
// it here. Prints `{"port":N}` once listening; exits when the parent closes stdin (parent gone).
import { buildApp } from 'fauxqs';

const app = buildApp({ logger: false, defaultRegion: process.env.AWS_REGION || 'us-east-1' });
await app.listen({ host: process.env.FAUXQS_BIND || '127.0.0.1', port: Number(process.env.FAUXQS_PORT || 0) });
const { port } = app.server.address();
process.stdout.write(`${JSON.stringify({ port })}\n`);

const stop = () => app.close().finally(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
