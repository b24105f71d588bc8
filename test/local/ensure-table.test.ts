import { CreateTableCommand, DeleteTableCommand, DescribeTableCommand, DescribeTimeToLiveCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { ensureTable, localDynamoClient, startDynamoDbLocal, type DynamoDbLocal } from '../../local/dynamodb';
import { TABLE_DEF } from '../../shared/db/table';

// A table kept in the data folder by an older version is brought up to the current definition at
// start, as a deploy's CloudFormation update brings the deployed one: indexes added since are
// created, the stream and TTL turned on. Keys that differ cannot change in place (deployed
// neither): start refuses with what differs, instead of failing later on the first query.
// A DynamoDB Local of its own: building an index backfills it, which on the test run's shared
// DynamoDB Local (every suite's tables in one database) can take minutes.
jest.setTimeout(180_000);

describe('a table kept from an earlier start is brought up to the table definition', () => {
  let ddb: DynamoDbLocal;
  let client: DynamoDBClient;
  const names: string[] = [];
  beforeAll(async () => {
    ddb = await startDynamoDbLocal();
    client = localDynamoClient(ddb.endpoint);
  });
  afterAll(async () => {
    for (const TableName of names) await client?.send(new DeleteTableCommand({ TableName })).catch(() => undefined);
    client?.destroy();
    await ddb?.stop();
  });
  const name = () => {
    const n = `ensure-${randomBytes(4).toString('hex')}`;
    names.push(n);
    return n;
  };
  const create = (TableName: string, gsis: { name: string; pk: string; sk: string }[], keys = ['PK', 'SK']) =>
    client.send(
      new CreateTableCommand({
        TableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [...new Set([...keys, ...gsis.flatMap((g) => [g.pk, g.sk])])].map((AttributeName) => ({ AttributeName, AttributeType: 'S' })),
        KeySchema: [
          { AttributeName: keys[0], KeyType: 'HASH' },
          { AttributeName: keys[1], KeyType: 'RANGE' },
        ],
        ...(gsis.length
          ? {
              GlobalSecondaryIndexes: gsis.map((g) => ({
                IndexName: g.name,
                KeySchema: [
                  { AttributeName: g.pk, KeyType: 'HASH' },
                  { AttributeName: g.sk, KeyType: 'RANGE' },
                ],
                Projection: { ProjectionType: 'ALL' },
              })),
            }
          : {}),
      }),
    );

  it('an index added since, the stream and TTL are added to the kept table', async () => {
    const t = name();
    await create(t, [{ name: 'GSI1', pk: 'GSI1PK', sk: 'GSI1SK' }]);
    expect(await ensureTable(client, t)).toBe(false);
    const { Table } = await client.send(new DescribeTableCommand({ TableName: t }));
    expect((Table!.GlobalSecondaryIndexes ?? []).map((g) => g.IndexName).sort()).toEqual(TABLE_DEF.gsis.map((g) => g.name));
    expect(Table!.StreamSpecification).toMatchObject({ StreamEnabled: true, StreamViewType: TABLE_DEF.stream });
    const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: t }));
    expect(ttl.TimeToLiveDescription).toMatchObject({ AttributeName: TABLE_DEF.ttlAttribute });
  });

  it('a table already up to date is left as it is', async () => {
    const t = name();
    expect(await ensureTable(client, t)).toBe(true);
    expect(await ensureTable(client, t)).toBe(false);
  });

  it('a kept table whose index has other keys is refused at start, naming the index', async () => {
    const t = name();
    await create(t, [{ name: 'GSI1', pk: 'GSI1SK', sk: 'GSI1PK' }]);
    await expect(ensureTable(client, t)).rejects.toThrow(/index GSI1 .* other keys/);
  });

  it('a kept table with other keys is refused at start', async () => {
    const t = name();
    await create(t, [], ['pk', 'sk']);
    await expect(ensureTable(client, t)).rejects.toThrow(/has keys .* not PK\/SK/);
  });
});
