/**
 * The single table's physical definition: read by the CDK stack and by the local runtime / tests
 * when they create the table in DynamoDB Local. Key *values* live in `./keys.ts`.
 */
export const TABLE_DEF = {
  partitionKey: 'PK',
  sortKey: 'SK',
  /** Epoch seconds; DynamoDB TTL only cleans up, expiry is always checked in code (D11). */
  ttlAttribute: 'ttl',
  /** The outbox and the sandbox pipe read the stream (D35). */
  stream: 'NEW_AND_OLD_IMAGES',
  gsis: [
    { name: 'GSI1', partitionKey: 'GSI1PK', sortKey: 'GSI1SK' },
    { name: 'GSI2', partitionKey: 'GSI2PK', sortKey: 'GSI2SK' },
    { name: 'GSI3', partitionKey: 'GSI3PK', sortKey: 'GSI3SK' },
  ],
} as const;

export type GsiName = (typeof TABLE_DEF.gsis)[number]['name'];
