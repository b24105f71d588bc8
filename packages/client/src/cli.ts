/**
 * `media-marketplace`: the command-line tool on the client. Exit codes (scripts can rely on them):
 *   0 success · 2 usage error · 3 authentication or permission (401, 403) · 4 not found (404)
 *   5 other request error (400, 402, 409, 422, …) · 6 service unreachable or failing (5xx after
 *   retries, connection refused) · 7 a wait timed out · 8 integrity failure (a downloaded file's
 *   hash, or an export's size, did not match) · 1 anything else. `webhooks listen` does not exit
 *   on a delivery whose signature does not match: it answers 400, logs one line and keeps running.
 * Errors are one line on stderr: `error: <message> [<type>, HTTP <status>, request <id>]`.
 */
import { createWriteStream } from 'node:fs';
import { rename } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import * as cliProgress from 'cli-progress';
import { Marketplace, WaitTimeoutError, type File } from './index';
import { ConnectionError, MarketplaceError } from './errors';
import { verifyWebhook, WebhookVerificationError } from './webhooks';
import { downloadFile, ensureDir, IntegrityError, parallel } from './download';

export const EXIT = { ok: 0, failure: 1, usage: 2, auth: 3, notFound: 4, request: 5, unavailable: 6, timeout: 7, integrity: 8 } as const;

class UsageError extends Error {}

function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  if (err instanceof WaitTimeoutError) return EXIT.timeout;
  if (err instanceof IntegrityError || err instanceof WebhookVerificationError) return EXIT.integrity;
  if (err instanceof ConnectionError) return EXIT.unavailable;
  if (err instanceof MarketplaceError) {
    if (err.status === 401 || err.status === 403) return EXIT.auth;
    if (err.status === 404) return EXIT.notFound;
    if (err.status >= 500) return EXIT.unavailable;
    return EXIT.request;
  }
  return EXIT.failure;
}

function oneLine(err: unknown): string {
  if (err instanceof MarketplaceError && err.status > 0) {
    const field = err.details[0]?.field ? ` (${err.details[0].field}: ${err.details[0].message})` : '';
    return `error: ${err.message}${field} [${err.type}, HTTP ${err.status}${err.requestId ? `, request ${err.requestId}` : ''}]`;
  }
  const msg = err instanceof Error ? err.message : String(err);
  return `error: ${msg.split('\n')[0]}`;
}

interface Globals {
  apiKey?: string;
  baseUrl?: string;
  progress: 'auto' | 'always' | 'never';
}

function client(g: Globals): Marketplace {
  const apiKey = g.apiKey ?? process.env.MARKETPLACE_API_KEY;
  if (!apiKey) throw new UsageError('no API key: pass --api-key or set MARKETPLACE_API_KEY');
  return new Marketplace({ apiKey, baseUrl: g.baseUrl ?? process.env.MARKETPLACE_BASE_URL });
}

const print = (x: unknown): void => {
  process.stdout.write(`${JSON.stringify(x, null, 2)}\n`);
};

function progressBar(g: Globals, format: string): cliProgress.SingleBar | null {
  if (g.progress === 'never' || (g.progress === 'auto' && !process.stderr.isTTY)) return null;
  return new cliProgress.SingleBar(
    { format, stream: process.stderr, noTTYOutput: g.progress === 'always', notTTYSchedule: 250, hideCursor: process.stderr.isTTY, etaBuffer: 50 },
    cliProgress.Presets.shades_classic,
  );
}

const mb = (n: number) => `${(n / 1_048_576).toFixed(2)} MB`;

function parseJsonArg(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`${what} is not valid JSON`);
  }
}

/** `--timeout <seconds>`: a number, 0 or more (anything else is a usage error, exit 2). */
function seconds(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError('expected a number of seconds, 0 or more.');
  return n;
}

/**
 * A whole number from `min` to `max` (anything else is a usage error, exit 2, before anything is
 * sent): a count such as `--concurrency`, a price in cents, a star rating or a port. The service
 * checks its own ranges too; this catches what is not a number at all, which would otherwise go out
 * as null.
 */
function wholeNumber(min: number, max = Number.MAX_SAFE_INTEGER): (v: string) => number {
  const expected = max === Number.MAX_SAFE_INTEGER ? `a whole number, ${min} or more.` : `a whole number from ${min} to ${max}.`;
  return (v) => {
    const n = Number(v);
    if (!/^\s*\d+\s*$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`expected ${expected}`);
    return n;
  };
}
const positiveInt = wholeNumber(1);
const starRating = wholeNumber(1, 5);

export function buildProgram(): Command {
  const program = new Command('media-marketplace')
    .description('Command-line tool for the media marketplace API')
    .option('--api-key <key>', 'API key (default: $MARKETPLACE_API_KEY)')
    .option('--base-url <url>', 'service URL (default: $MARKETPLACE_BASE_URL or http://127.0.0.1:3000)')
    .addOption(new Option('--progress <when>', 'progress bars on stderr').choices(['auto', 'always', 'never']).default('auto'))
    .exitOverride();
  const g = () => program.opts<Globals>();

  const jobs = program.command('jobs').description('create, list, inspect, wait for and cancel jobs');
  jobs
    .command('create')
    .description('post a job; the body as JSON (--data) or from flags')
    .option('--data <json>', 'the whole request body as JSON')
    .option('--type <type>', 'data_collection or feedback', 'data_collection')
    .option('--title <title>')
    .option('--description <text>')
    .option('--files-needed <n>', 'files wanted', positiveInt)
    .option('--formats <list>', 'accepted MIME types, comma-separated', 'image/jpeg')
    .option('--price <cents>', 'price per file in cents', wholeNumber(0))
    .option('--idempotency-key <key>', 'reuse a key to make a retried command safe')
    .action(async (o) => {
      const body = o.data
        ? parseJsonArg(o.data, '--data')
        : {
            type: o.type,
            ...(o.title ? { title: o.title } : {}),
            description: o.description,
            files_needed: o.filesNeeded,
            accepted_formats: String(o.formats).split(',').map((s) => s.trim()),
            price_per_file_cents: o.price,
          };
      print(await client(g()).jobs.create(body as never, { idempotencyKey: o.idempotencyKey }));
    });
  jobs
    .command('list')
    .description('list jobs, newest first (every page)')
    .option('--status <status>')
    .option('--max <n>', 'stop after n jobs', wholeNumber(0))
    .action(async (o) => {
      let n = 0;
      for await (const j of client(g()).jobs.list({ ...(o.status ? { status: o.status } : {}) } as never)) {
        if (o.max !== undefined && n++ >= o.max) break;
        process.stdout.write(`${JSON.stringify({ id: j.id, status: j.status, files_approved: j.files_approved, files_needed: j.files_needed, title: j.title })}\n`);
      }
    });
  jobs.command('get <job_id>').description('a job with its submission summary').action(async (id: string) => print(await client(g()).jobs.get(id)));
  jobs
    .command('wait <job_id>')
    .description('long-poll until the job is completed or cancelled, then print it')
    .option('--timeout <seconds>', 'give up after (exit 7)', seconds, 600)
    .action(async (id: string, o) => {
      const bar = progressBar(g(), 'job {status} |{bar}| {value}/{total} files');
      let started = false;
      const job = await client(g()).jobs.waitForJob(id, {
        timeoutMs: o.timeout * 1000,
        onUpdate: (j) => {
          if (!bar) return;
          if (!started) bar.start(j.files_needed, j.files_approved, { status: j.status });
          started = true;
          bar.update(j.files_approved, { status: j.status });
        },
      });
      bar?.stop();
      print(job);
    });
  jobs
    .command('cancel <job_id>')
    .description('cancel a job (refunds the unused escrow)')
    .option('--idempotency-key <key>')
    .action(async (id: string, o) => print(await client(g()).jobs.cancel(id, { idempotencyKey: o.idempotencyKey })));

  const files = program.command('files').description("download a job's files");
  files
    .command('download <job_id>')
    .description('download every approved file into DIR, verified against content_hash; rerun to resume')
    .requiredOption('--out <dir>', 'target folder (created if missing)')
    .option('--concurrency <n>', 'parallel downloads', positiveInt, 4)
    .option('--min-score <n>', 'only files rated at least n stars, 1 to 5 (default: every approved file, 1)', starRating)
    .action(async (jobId: string, o) => {
      const mm = client(g());
      await ensureDir(o.out);
      // The list's own default is min_score 3; every approved file includes those rated 1–2
      // (a job's min_star_rating below 3, or a buyer's override).
      const list: File[] = await mm.jobs.files(jobId, { min_score: o.minScore ?? 1, limit: 100 } as never).toArray();
      const total = list.reduce((s, f) => s + f.size_bytes, 0);
      const bar = progressBar(g(), 'files {files}/{nfiles} |{bar}| {percentage}% | {done} of {size} | skipped {skipped}');
      let bytes = 0;
      let done = 0;
      let skipped = 0;
      const payload = () => ({ files: done, nfiles: list.length, done: mb(bytes), size: mb(total), skipped });
      bar?.start(Math.max(1, total), 0, payload());
      await parallel(list, o.concurrency, async (f) => {
        await downloadFile(f, o.out, {
          onBytes: (n) => {
            bytes += n;
            bar?.update(bytes, payload());
          },
          onFileDone: (_f, outcome) => {
            done++;
            if (outcome === 'skipped') skipped++;
            bar?.update(bytes, payload());
          },
        });
      });
      bar?.update(Math.max(1, total), payload());
      bar?.stop();
      process.stdout.write(`${JSON.stringify({ job_id: jobId, files: list.length, downloaded: list.length - skipped, skipped, bytes: total, out: o.out })}\n`);
    });

  const exportsCmd = program.command('exports').description("export a job's dataset");
  exportsCmd
    .command('create <job_id>')
    .description('create an export, wait for it, and download it to FILE')
    .addOption(new Option('--format <format>', 'jsonl, coco or csv').choices(['jsonl', 'coco', 'csv']).default('jsonl'))
    .requiredOption('--out <file>', 'where to write the export')
    .option('--min-score <n>', 'only files rated at least n stars, 1 to 5', starRating)
    .option('--timeout <seconds>', 'give up waiting after (exit 7)', seconds, 600)
    .action(async (jobId: string, o) => {
      const mm = client(g());
      const created = await mm.exports.create(jobId, { format: o.format, ...(o.minScore ? { min_score: o.minScore } : {}) });
      const done = await mm.exports.wait(created.id, { timeoutMs: o.timeout * 1000 });
      if (done.status !== 'succeeded' || !done.download_url) {
        throw new Error(`export ${done.id} ${done.status}${done.error ? `: ${JSON.stringify(done.error)}` : ''}`);
      }
      const res = await fetch(done.download_url);
      if (!res.ok || !res.body) throw new Error(`download of export ${done.id} answered HTTP ${res.status}`);
      await ensureDir(dirname(o.out));
      const total = done.size_bytes ?? Number(res.headers.get('content-length') ?? 0);
      const bar = progressBar(g(), 'export |{bar}| {percentage}% | {done} of {size}');
      let bytes = 0;
      bar?.start(Math.max(1, total), 0, { done: mb(0), size: mb(total) });
      const part = `${o.out}.part`;
      const body = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
      body.on('data', (c: Buffer) => {
        bytes += c.length;
        bar?.update(bytes, { done: mb(bytes), size: mb(total) });
      });
      await pipeline(body, createWriteStream(part));
      bar?.stop();
      if (done.size_bytes !== null && bytes !== done.size_bytes) throw new IntegrityError(`export ${done.id}: got ${bytes} bytes, expected ${done.size_bytes}`);
      await rename(part, o.out);
      process.stdout.write(`${JSON.stringify({ export_id: done.id, format: done.format, file_count: done.file_count, bytes, out: o.out })}\n`);
    });

  const webhooks = program.command('webhooks').description('receive webhook deliveries locally');
  webhooks
    .command('listen')
    .description('a local receiver: verifies each delivery and prints the event as one JSON line')
    .requiredOption('--port <n>', 'port on 127.0.0.1 (0 picks a free one)', wholeNumber(0, 65_535))
    .option('--secret <whsec>', "the endpoint's signing secret (default: $MARKETPLACE_WEBHOOK_SECRET)")
    .addOption(new Option('--scheme <scheme>', 'signature that must match').choices(['any', 'service', 'standard']).default('standard'))
    .action(async (o) => {
      const secret = o.secret ?? process.env.MARKETPLACE_WEBHOOK_SECRET;
      if (!secret) throw new UsageError('no signing secret: pass --secret or set MARKETPLACE_WEBHOOK_SECRET');
      const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const raw = Buffer.concat(chunks);
          try {
            const event = verifyWebhook(raw, req.headers as Record<string, string>, { secret, scheme: o.scheme });
            process.stdout.write(`${JSON.stringify(event)}\n`);
            res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"received":true}');
          } catch (err) {
            process.stderr.write(`${oneLine(err)}\n`);
            res.writeHead(400, { 'Content-Type': 'application/json' }).end('{"received":false}');
          }
        });
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(o.port, '127.0.0.1', () => resolve());
      });
      const addr = server.address();
      process.stderr.write(`listening on http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : o.port} (Ctrl-C to stop)\n`);
      await new Promise<void>((resolve) => {
        const stop = () => server.close(() => resolve());
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });
  return program;
}

/** Runs the tool; resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) return EXIT.ok;
      return EXIT.usage; // commander already printed the one-line reason
    }
    process.stderr.write(`${oneLine(err)}\n`);
    return exitCodeOf(err);
  }
}
