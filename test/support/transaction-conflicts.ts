/**
 * DynamoDB's own answer when other transactions hold the items a TransactWriteItems names (a
 * TransactionCanceledException with TransactionConflict reasons, local/dynamodb-conflicts.ts),
 * injected into the shared client's TransactWriteItems calls while `when(input)` says so, before
 * anything is sent. Returns the function that takes the injection out again.
 */
import { db } from '../../shared/db/client';
import { transactionCanceled } from '../../local/dynamodb-conflicts';

export function cancelTransactionsWhile(when: (input: unknown) => boolean, name = 'injectedTransactionConflict'): () => void {
  db().middlewareStack.add(
    (next, context) => async (args) => {
      if (/^TransactWrite(Items)?Command$/.test(String(context.commandName)) && when(args.input)) {
        const items = (args.input as { TransactItems?: unknown[] }).TransactItems ?? [];
        throw transactionCanceled(items.map(() => true));
      }
      return next(args);
    },
    { step: 'initialize', name },
  );
  return () => db().middlewareStack.remove(name);
}

/**
 * Another writer between a read and its commit: `action` runs once, just before the first
 * TransactWriteItems of the shared client whose input `when` matches is sent (the commit then meets
 * what `action` changed). Returns whether it ran and the function that takes it out again.
 */
export function beforeFirstTransaction(when: (input: unknown) => boolean, action: () => Promise<unknown>, name = 'writerInBetween'): { fired(): boolean; remove(): void } {
  let fired = false;
  db().middlewareStack.add(
    (next, context) => async (args) => {
      if (!fired && /^TransactWrite(Items)?Command$/.test(String(context.commandName)) && when(args.input)) {
        fired = true;
        await action();
      }
      return next(args);
    },
    { step: 'initialize', name },
  );
  return { fired: () => fired, remove: () => db().middlewareStack.remove(name) };
}
