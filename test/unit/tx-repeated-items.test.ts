import { Tx } from '../../shared/db/tx';

// DynamoDB refuses a transaction naming one item twice (ValidationException); DynamoDB Local
// answered such a transaction with a failed condition, which read as a business outcome (the
// override of a submission with two identical files answered "already approved in this
// organization"). The transaction refuses it before anything is sent, with DynamoDB's own error.
describe('a transaction names each item once', () => {
  it('two actions on one item are refused before sending, naming both labels', async () => {
    const tx = new Tx()
      .create('hash:file_a', { PK: 'JOB#j1', SK: 'HASH#abc' })
      .update('job', { PK: 'JOB#j1', SK: 'JOB' }, 'SET n = :n', { values: { ':n': 1 } })
      .create('hash:file_b', { PK: 'JOB#j1', SK: 'HASH#abc' });
    await expect(tx.commit()).rejects.toMatchObject({ name: 'ValidationException', message: expect.stringMatching(/hash:file_a and hash:file_b/) });
  });

  it('a condition check and a write of the same item are two actions on it too', async () => {
    const tx = new Tx().check('job', { PK: 'JOB#j1', SK: 'JOB' }, { condition: 'attribute_exists(PK)' }).delete('gone', { PK: 'JOB#j1', SK: 'JOB' });
    await expect(tx.commit()).rejects.toMatchObject({ name: 'ValidationException' });
  });
});
