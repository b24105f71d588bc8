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
