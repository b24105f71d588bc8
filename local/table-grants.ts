/**
 * The local grant check on the table (grants.ts): `read` or `write`, the narrow UpdateItem of the
 * request count and the held-wait slots (the stack's `dynamodb:LeadingKeys` and
 * `dynamodb:Attributes` conditions), and a read route's idempotency records (`dynamodb:LeadingKeys`).
 */
import { IDEMPOTENCY_ACTIONS, IDEMPOTENCY_PARTITIONS, REQUEST_COUNT_ATTRIBUTES, REQUEST_COUNT_PARTITIONS, WAIT_SLOT_ATTRIBUTES, WAIT_SLOT_PARTITIONS } from '../shared/manifest/access';
import { AccessDenied, type Grants } from './grants-model';

const TABLE_READS = new Set(['GetItemCommand', 'BatchGetItemCommand', 'QueryCommand', 'ScanCommand', 'TransactGetItemsCommand', 'DescribeTableCommand']);
/**
 * What `write` adds, as the deployed role's grantReadWriteData allows it: the item writes (a
 * transaction needs the actions of its parts). Not the table's own settings (UpdateTable,
 * UpdateTimeToLive, DeleteTable…) nor PartiQL (ExecuteStatement), which the role does not hold.
 */
const TABLE_WRITES = new Set(['PutItemCommand', 'UpdateItemCommand', 'DeleteItemCommand', 'BatchWriteItemCommand', 'TransactWriteItemsCommand']);

/** A key attribute as the document client (a string) or the raw client (`{S: …}`) passes it. */
const keyString = (v: unknown): string | null => (typeof v === 'string' ? v : typeof (v as { S?: unknown })?.S === 'string' ? (v as { S: string }).S : null);

/** Words of the expression grammar (and its functions) that are not attribute names. */
const EXPRESSION_WORDS = new Set(
  ['set', 'remove', 'add', 'delete', 'and', 'or', 'not', 'between', 'in', 'if_not_exists', 'list_append', 'attribute_exists', 'attribute_not_exists', 'attribute_type', 'begins_with', 'contains', 'size'],
);

interface UpdateInput {
  Key?: Record<string, unknown>;
  UpdateExpression?: string;
  ConditionExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  AttributeUpdates?: Record<string, unknown>;
  Expected?: Record<string, unknown>;
}

/**
 * The top-level attribute names an UpdateItem names, as `dynamodb:Attributes` sees them: its key's,
 * those of its update and condition expressions (a `#name` resolved, a path's first element only),
 * and those of the legacy parameters.
 */
export function attributesNamed(input: UpdateInput): Set<string> {
  const names = new Set<string>([...Object.keys(input.Key ?? {}), ...Object.keys(input.AttributeUpdates ?? {}), ...Object.keys(input.Expected ?? {})]);
  const subst = input.ExpressionAttributeNames ?? {};
  for (const expr of [input.UpdateExpression, input.ConditionExpression]) {
    // A name not after a word character, `.`, `]`, `:` or `#`: skips values and nested path parts.
    for (const [, token] of (expr ?? '').matchAll(/(?<![\w.\]:#])(#?[A-Za-z_]\w*)/g)) {
      if (token!.startsWith('#')) names.add(subst[token!] ?? token!);
      else if (!EXPRESSION_WORDS.has(token!.toLowerCase())) names.add(token!);
    }
  }
  return names;
}

export function checkTable(g: Grants, command: string, input: { Key?: { PK?: unknown }; Item?: { PK?: unknown } } & UpdateInput): void {
  if (TABLE_READS.has(command) || (g.table === 'write' && TABLE_WRITES.has(command))) {
    if (!g.table) throw new AccessDenied(`${g.fn} has no access to the table (${command})`);
    return;
  }
  const pk = keyString(input.Key?.PK ?? input.Item?.PK);
  const action = `dynamodb:${command.replace(/Command$/, '')}`;
  if (g.idempotencyRecords && pk && (IDEMPOTENCY_ACTIONS as readonly string[]).includes(action) && IDEMPOTENCY_PARTITIONS.some((p) => pk.startsWith(p.slice(0, -1)))) return;
  if (command === 'UpdateItemCommand' && g.waitSlots && pk && WAIT_SLOT_PARTITIONS.some((p) => pk.startsWith(p.slice(0, -1)))) {
    const other = [...attributesNamed(input)].filter((a) => !WAIT_SLOT_ATTRIBUTES.includes(a));
    if (other.length) throw new AccessDenied(`${g.fn} may write only the wait slots' attributes, not ${other.join(', ')}`);
    return;
  }
  if (command === 'UpdateItemCommand' && g.requestCounting) {
    if (!pk || !REQUEST_COUNT_PARTITIONS.some((p) => pk.startsWith(p.slice(0, -1)))) {
      throw new AccessDenied(`${g.fn} may update only the request-count partitions (${REQUEST_COUNT_PARTITIONS.join(', ')}), not ${pk ?? 'this item'}`);
    }
    const other = [...attributesNamed(input)].filter((a) => !REQUEST_COUNT_ATTRIBUTES.includes(a));
    if (other.length) throw new AccessDenied(`${g.fn} may write only the request counters' attributes, not ${other.join(', ')}`);
    return;
  }
  throw new AccessDenied(`${g.fn} is not authorized to perform dynamodb:${command.replace(/Command$/, '')} (table access: ${g.table ?? 'none'})`);
}
