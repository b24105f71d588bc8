import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { attributesNamed, checkGrantedCall, withGrants } from '../../local/grants';
import { grantedTo, routeGrants } from '../../local/lambda';
import { traced } from '../../shared/observability/tracer';
import { BedrockConverse } from '../../shared/aws/bedrock-converse';
import { TranscribeJobs } from '../../shared/aws/transcribe-jobs';
import { encryptionContext, kmsClient, LEGACY_ENCRYPTION_CONTEXT } from '../../shared/secrets/kms';
import { DEFAULT_BEDROCK_MODEL_ID } from '../../shared/scoring/bedrock-reply';
import { resetSealer, sealer } from '../../shared/secrets/sealer';
import { localOutbox, sms } from '../../shared/sms';
import { db, dynamo, tableName } from '../../shared/db/client';
import { ExecuteStatementCommand, UpdateTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { queueUrl, sendToQueueUrl } from '../../shared/queues';
import { routeById } from '../../shared/manifest/routes';
import { queueByName, SCHEDULES, TRANSCRIBE_JOB_PREFIX } from '../../shared/manifest/wiring';
import { deleteObjects, getObjectBytes, headObject, presignPut, putObject, tagVerdict } from '../../shared/storage/s3';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// Deployed, each function's role allows only the S3 operations of its manifest entry's bucket
// access (lib/constructs/grants.ts). Locally one set of emulator credentials serves every handler,
// so the runtime's S3 client refuses, per invocation, what the deployed role could not do: a
// handler that calls S3 beyond its grant fails locally first (test/cdk/stack.test.ts checks
// that the local rules and the synthesized policies agree).
describe('local runtime: a function makes only the calls its manifest entry grants', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    await db().send(new PutCommand({ TableName: tableName(), Item: { PK: 'JOB#grants', SK: 'JOB' } }));
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const key = (name: string) => `uploads/sub_grants/r1/${name}.jpg`;
  const asRoute = <T>(id: string, fn: () => Promise<T>) =>
    grantedTo(id, routeById(id).access, fn, routeGrants(routeById(id)))({}, {} as never) as Promise<T>;
  const asQueue = <T>(name: string, fn: () => Promise<T>) => grantedTo(name, queueByName(name).access, fn, { consumes: name })({}, {} as never) as Promise<T>;

  it('the upload route puts, pre-signs and tags upload objects', async () => {
    await asRoute('worker.submissions.upload', async () => {
      await putObject(key('a'), Buffer.from('bytes'), 'image/jpeg');
      await presignPut(key('b'), 'image/jpeg', 5);
      await tagVerdict([key('a')], 'rejected');
    });
    expect(await headObject(key('a'))).toMatchObject({ size: 5 });
  });

  it('the upload route may not delete, read, or write outside uploads/', async () => {
    await putObject(key('c'), Buffer.from('bytes'), 'image/jpeg'); // outside any invocation: unchecked
    await expect(asRoute('worker.submissions.upload', () => deleteObjects([key('c')]))).rejects.toThrow(/not authorized to perform s3:DeleteObject/);
    await expect(asRoute('worker.submissions.upload', () => getObjectBytes(key('c')))).rejects.toThrow(/s3:GetObject/);
    await expect(asRoute('worker.submissions.upload', () => putObject('exports/x.jsonl', Buffer.from('{}'), 'application/json'))).rejects.toThrow(/s3:PutObject on exports\/x.jsonl/);
    expect(await headObject(key('c'))).not.toBeNull();
  });

  it('a pre-signed upload URL carries the signer’s grant: a function that may not put the object may not pre-sign it', async () => {
    await expect(asRoute('worker.submissions.upload', () => presignPut('exports/x.jsonl', 'application/json', 2))).rejects.toThrow(/s3:PutObject on exports\/x.jsonl/);
    await expect(asRoute('jobs.get', () => presignPut(key('d'), 'image/jpeg', 5))).rejects.toMatchObject({ name: 'AccessDenied' });
  });

  it('a missing object answers 404 only to a function that may list the bucket, and 403 to any other, as S3 answers', async () => {
    const missing = key('never-landed');
    // Scoring may list the bucket: the object is missing.
    await expect(asQueue('scoring', () => getObjectBytes(missing))).rejects.toMatchObject({ name: 'NoSuchKey', $metadata: { httpStatusCode: 404 } });
    expect(await asQueue('scoring', () => tagVerdict([missing], 'rejected'))).toEqual([missing]);
    // Annotation may not: S3 does not tell it whether the key exists.
    await expect(asQueue('annotation', () => getObjectBytes(missing))).rejects.toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
    await expect(asQueue('annotation', () => tagVerdict([missing], 'rejected'))).rejects.toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
    // A HEAD's 403 has no body: the object client names it by its status, as deployed.
    expect(await asQueue('scoring', () => headObject(missing))).toBeNull();
    await expect(asQueue('annotation', () => headObject(missing))).rejects.toMatchObject({ name: 'Forbidden', $metadata: { httpStatusCode: 403 } });
    // An object that exists answers the same to both.
    await putObject(key('landed'), Buffer.from('bytes'), 'image/jpeg');
    expect((await asQueue('annotation', () => getObjectBytes(key('landed')))).toString()).toBe('bytes');
  });

  it('a function without bucket access makes no S3 call', async () => {
    await expect(asRoute('jobs.get', () => headObject(key('a')))).rejects.toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
    const sweep = SCHEDULES.find((s) => s.name === 'credit-expiry-sweep')!;
    await expect(grantedTo(sweep.name, sweep.access, () => headObject(key('a')))({}, {} as never)).rejects.toThrow(/bucket access: none/);
  });

  it('the reservation sweep tags the bytes of an ended reservation, and reads nothing', async () => {
    const sweep = SCHEDULES.find((s) => s.name === 'reservation-sweep')!;
    await grantedTo(sweep.name, sweep.access, () => tagVerdict([key('a')], 'rejected'))({}, {} as never);
    await expect(grantedTo(sweep.name, sweep.access, () => headObject(key('a')))({}, {} as never)).rejects.toThrow(/s3:GetObject/);
  });

  it('a consumer granted only tagging tags upload objects and nothing else', async () => {
    await asQueue('cancellations', () => tagVerdict([key('a')], 'rejected'));
    await expect(asQueue('cancellations', () => deleteObjects([key('a')]))).rejects.toThrow(/s3:DeleteObject/);
  });

  it('a consumer granted only deletion deletes, and reads nothing', async () => {
    await expect(asQueue('withdrawals', () => getObjectBytes(key('a')))).rejects.toThrow(/s3:GetObject/);
    await asQueue('withdrawals', () => deleteObjects([key('a')]));
    expect(await headObject(key('a'))).toBeNull();
  });

  it('a read route reads the table and counts its request, and writes nothing else', async () => {
    const update = (pk: string) => db().send(new UpdateCommand({ TableName: tableName(), Key: { PK: pk, SK: 'X' }, UpdateExpression: 'ADD n :one', ExpressionAttributeValues: { ':one': 1 } }));
    await asRoute('jobs.get', async () => {
      await db().send(new GetCommand({ TableName: tableName(), Key: { PK: 'JOB#grants', SK: 'JOB' } }));
      await update('SECRET#grants');
      await update('RL#grants');
    });
    await expect(asRoute('jobs.get', () => update('JOB#grants'))).rejects.toThrow(/may update only the request-count partitions/);
    await expect(asRoute('jobs.get', () => db().send(new PutCommand({ TableName: tableName(), Item: { PK: 'JOB#grants2', SK: 'JOB' } })))).rejects.toMatchObject({ name: 'AccessDenied' });
    await expect(asRoute('jobs.create', () => db().send(new PutCommand({ TableName: tableName(), Item: { PK: 'JOB#grants3', SK: 'JOB' } })))).resolves.toBeDefined();
  });

  it("a write route may write items, not change the table itself (the deployed role's grantReadWriteData)", async () => {
    await expect(
      asRoute('jobs.create', () => dynamo().send(new UpdateTimeToLiveCommand({ TableName: tableName(), TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true } }))),
    ).rejects.toThrow(/not authorized to perform dynamodb:UpdateTimeToLive/);
    await expect(asRoute('jobs.create', () => dynamo().send(new ExecuteStatementCommand({ Statement: `SELECT * FROM "${tableName()}" WHERE PK = 'JOB#grants'` })))).rejects.toThrow(
      /not authorized to perform dynamodb:ExecuteStatement/,
    );
  });

  it('a long-poll route updates its wait slots, naming nothing else; another read route may not touch them', async () => {
    const slot = (expr: string, names: Record<string, string>) =>
      db().send(new UpdateCommand({ TableName: tableName(), Key: { PK: 'LPW#jobs.get#org_grants', SK: 'LPW' }, UpdateExpression: expr, ExpressionAttributeNames: names, ExpressionAttributeValues: { ':v': 1 } }));
    await asRoute('jobs.get', () => slot('SET #w = :v', { '#w': 'w3' }));
    await expect(asRoute('jobs.get', () => slot('SET #w = :v, #x = :v', { '#w': 'w3', '#x': 'tier' }))).rejects.toThrow(/may write only the wait slots' attributes, not tier$/);
    await expect(asRoute('jobs.list', () => slot('SET #w = :v', { '#w': 'w3' }))).rejects.toThrow(/may update only the request-count partitions/);
  });

  it('a read route\'s request count names only the counters: a secret\'s scopes or an organization\'s balance is refused (D63 least privilege)', async () => {
    const set = (pk: string, expr: string, names?: Record<string, string>) =>
      db().send(new UpdateCommand({ TableName: tableName(), Key: { PK: pk, SK: 'X' }, UpdateExpression: expr, ExpressionAttributeValues: { ':v': 1 }, ...(names ? { ExpressionAttributeNames: names } : {}) }));
    await asRoute('jobs.get', async () => {
      await set('SECRET#grants-attr', 'SET #n = :v, #m = :v, rl_hour = :v', { '#n': 'rl_n', '#m': 'rl_m59' });
      await set('RL#grants-attr', 'ADD n :v, m0 :v SET #t = if_not_exists(#t, :v)', { '#t': 'ttl' });
      await set('ORG#grants-attr', 'SET last_used_at = :v');
    });
    await expect(asRoute('jobs.get', () => set('SECRET#grants-attr', 'SET scopes = :v'))).rejects.toThrow(/may write only the request counters' attributes, not scopes/);
    await expect(asRoute('jobs.get', () => set('SECRET#grants-attr', 'SET #n = :v, #s = :v', { '#n': 'rl_n', '#s': 'principal' }))).rejects.toThrow(/not principal$/);
    await expect(asRoute('jobs.get', () => set('ORG#grants-attr', 'SET last_used_at = :v REMOVE available_cents'))).rejects.toMatchObject({ name: 'AccessDenied' });
    // A condition names attributes too.
    await expect(asRoute('jobs.get', () => db().send(new UpdateCommand({ TableName: tableName(), Key: { PK: 'ORG#grants-attr', SK: 'X' }, UpdateExpression: 'SET last_used_at = :v', ConditionExpression: 'tier = :v', ExpressionAttributeValues: { ':v': 1 } })))).rejects.toThrow(/not tier$/);
    // A route that writes is not narrowed.
    await expect(asRoute('jobs.create', () => set('ORG#grants-attr', 'SET scopes = :v'))).resolves.toBeDefined();
  });

  it('a read route that takes an Idempotency-Key writes its idempotency records and nothing else', async () => {
    const idem = { PK: 'IDEM#files.refresh_url#grants', SK: 'IDEM' };
    await asRoute('files.refresh_url', async () => {
      await db().send(new PutCommand({ TableName: tableName(), Item: { ...idem, status: 'in_progress' } }));
      await db().send(new UpdateCommand({ TableName: tableName(), Key: idem, UpdateExpression: 'SET #s = :v', ExpressionAttributeNames: { '#s': 'status' }, ExpressionAttributeValues: { ':v': 'done' } }));
      await db().send(new DeleteCommand({ TableName: tableName(), Key: idem }));
    });
    await expect(asRoute('files.refresh_url', () => db().send(new PutCommand({ TableName: tableName(), Item: { PK: 'FILE#grants', SK: 'FILE' } })))).rejects.toMatchObject({ name: 'AccessDenied' });
    await expect(asRoute('files.refresh_url', () => db().send(new DeleteCommand({ TableName: tableName(), Key: { PK: 'JOB#grants', SK: 'JOB' } })))).rejects.toMatchObject({ name: 'AccessDenied' });
    // A read route that takes no key holds no such grant.
    await expect(asRoute('jobs.get', () => db().send(new PutCommand({ TableName: tableName(), Item: { ...idem, status: 'in_progress' } })))).rejects.toMatchObject({ name: 'AccessDenied' });
  });

  it('the attributes an update names are read as dynamodb:Attributes reads them', () => {
    expect([...attributesNamed({ Key: { PK: 'a', SK: 'b' }, UpdateExpression: 'SET a.b[0].c = :x, #d = if_not_exists(#d, :y) REMOVE e', ConditionExpression: 'attribute_exists(PK) AND size(f) > :z', ExpressionAttributeNames: { '#d': 'd' } })].sort()).toEqual(
      ['PK', 'SK', 'a', 'd', 'e', 'f'].sort(),
    );
  });

  it('a function sends only to the queues its entry names', async () => {
    const send = (queue: string) => sendToQueueUrl(queueUrl(queue), '{}');
    await asQueue('transcription', () => send('scoring')); // transcription → scoring (its sendTo)
    await expect(asQueue('transcription', () => send('webhooks'))).rejects.toThrow(/not authorized to perform sqs:SendMessage on queue webhooks/);
    await expect(asRoute('jobs.create', () => send('sandbox'))).rejects.toMatchObject({ name: 'AccessDenied' });
  });

  describe('the other services: the sealing key, Bedrock, Transcribe, SNS', () => {
    // Real SDK clients, traced as the app's are, pointed at a closed port: a granted call gets past
    // the check and fails on the network; a refused one never leaves the process.
    const nowhere = { region: 'us-east-1', endpoint: 'http://127.0.0.1:9', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 1 };
    const refused = (p: Promise<unknown>) => expect(p).rejects.toMatchObject({ name: 'AccessDenied' });
    const granted = (p: Promise<unknown>) => expect(p).rejects.toThrow(/ECONNREFUSED/);

    it('data keys need the key’s encrypt grant and decryption its decrypt grant, each with the encryption context of a purpose the function is granted', async () => {
      // The app's own KMS client (no SDK client: shared/secrets/kms.ts over shared/aws/json-rpc.ts).
      const kms = kmsClient({ endpoint: nowhere.endpoint, credentials: async () => nowhere.credentials });
      const responses = encryptionContext('stored-response');
      const endpointSecrets = encryptionContext('endpoint-secret');
      const dataKey = (EncryptionContext: Record<string, string>) => () => kms.call('GenerateDataKey', { KeyId: 'alias/sealing', KeySpec: 'AES_256', EncryptionContext });
      const decrypt = (EncryptionContext: Record<string, string>) => () => kms.call('Decrypt', { CiphertextBlob: new Uint8Array([1]), EncryptionContext });
      await granted(asRoute('api_keys.create', dataKey(responses))); // stored responses: encrypt-decrypt
      await granted(asRoute('api_keys.create', decrypt(responses)));
      await granted(asRoute('webhook_endpoints.create', dataKey(endpointSecrets))); // seals the new endpoint secret
      await granted(asQueue('webhooks', decrypt(endpointSecrets))); // decrypt only: opens endpoint secrets to sign
      await refused(asQueue('webhooks', dataKey(endpointSecrets)));
      await refused(asRoute('jobs.get', decrypt(responses)));
      // D63: one purpose's grant does not reach another's data keys.
      await refused(asRoute('api_keys.create', decrypt(endpointSecrets)));
      await refused(asRoute('api_keys.create', dataKey(endpointSecrets)));
      await refused(asRoute('webhook_endpoints.create', decrypt(endpointSecrets)));
      await refused(asQueue('webhooks', decrypt(responses)));
      // Values sealed under the one context all purposes shared before: decrypt only, by a function that opens values.
      await granted(asQueue('webhooks', decrypt(LEGACY_ENCRYPTION_CONTEXT)));
      await granted(asRoute('api_keys.create', decrypt(LEGACY_ENCRYPTION_CONTEXT)));
      await refused(asRoute('api_keys.create', dataKey(LEGACY_ENCRYPTION_CONTEXT)));
      await refused(asRoute('jobs.get', decrypt(LEGACY_ENCRYPTION_CONTEXT)));
      // The IAM condition: another context, or none, is refused even with the grant.
      await refused(asRoute('api_keys.create', dataKey({ purpose: 'something-else', service: 'media-marketplace' })));
      await refused(asRoute('api_keys.create', decrypt({})));
      kms.destroy();
    });

    it('after the re-seal, as deployed with legacySealedValues=false, nothing opens a value under the context all purposes shared before', async () => {
      const kms = kmsClient({ endpoint: nowhere.endpoint, credentials: async () => nowhere.credentials });
      const decrypt = (EncryptionContext: Record<string, string>) => () => kms.call('Decrypt', { CiphertextBlob: new Uint8Array([1]), EncryptionContext });
      process.env.LOCAL_LEGACY_SEALED_VALUES = 'false';
      try {
        await refused(asQueue('webhooks', decrypt(LEGACY_ENCRYPTION_CONTEXT)));
        await refused(asRoute('api_keys.create', decrypt(LEGACY_ENCRYPTION_CONTEXT)));
        await granted(asQueue('webhooks', decrypt(encryptionContext('endpoint-secret')))); // its own purpose still opens
        process.env.LOCAL_LEGACY_SEALED_VALUES = 'maybe';
        await expect(asQueue('webhooks', decrypt(LEGACY_ENCRYPTION_CONTEXT))).rejects.toThrow('LOCAL_LEGACY_SEALED_VALUES (or cdk.json\'s legacySealedValues) must be true or false; got maybe');
      } finally {
        delete process.env.LOCAL_LEGACY_SEALED_VALUES;
        kms.destroy();
      }
    });

    it('model calls only where the entry grants Bedrock and only to the configured models, transcription jobs only where it grants Transcribe and only ours, SMS only where it grants SNS', async () => {
      // The app's own Converse client (no SDK client: shared/aws/bedrock-converse.ts).
      const bedrock = new BedrockConverse({ endpoint: nowhere.endpoint, credentials: async () => nowhere.credentials });
      const converse = (modelId = DEFAULT_BEDROCK_MODEL_ID) => () => bedrock.converse({ modelId, messages: [{ role: 'user', content: [{ text: 'hi' }] }] });
      await granted(asQueue('scoring', converse()));
      await refused(asQueue('scoring', converse('anthropic.claude-opus-4-v1:0')));
      await refused(asQueue('webhooks', converse()));
      const transcribe = new TranscribeJobs({ endpoint: nowhere.endpoint, credentials: async () => nowhere.credentials });
      const start = (name: string) => () => transcribe.startTranscriptionJob({ TranscriptionJobName: name, Media: { MediaFileUri: 's3://b/k' }, LanguageCode: 'en-US' });
      await granted(asQueue('scoring', start(`${TRANSCRIBE_JOB_PREFIX}file_1`)));
      await refused(asQueue('scoring', start('someone-elses-job')));
      await refused(asQueue('annotation', start(`${TRANSCRIBE_JOB_PREFIX}file_1`)));
      const sns = traced(new SNSClient(nowhere));
      const sms = () => sns.send(new PublishCommand({ PhoneNumber: '+15555550100', Message: 'code' }));
      await granted(asRoute('auth.phone_verification.start', sms));
      await refused(asRoute('auth.signup', sms));
      // Phone numbers only: the stack denies Publish on every SNS ARN.
      await refused(asRoute('auth.phone_verification.start', () => sns.send(new PublishCommand({ TopicArn: 'arn:aws:sns:us-east-1:123456789012:ops', Message: 'x' }))));
      for (const c of [bedrock, transcribe, sns]) c.destroy();
    });

    it('locally the keyring stands in for the sealing key and the outbox for SNS, and both are held to the same grants', async () => {
      resetSealer();
      const secret = await asRoute('webhook_endpoints.create', () => sealer('endpoint-secret').seal('secret', 'aad'));
      await expect(asQueue('webhooks', () => sealer('endpoint-secret').open(secret, 'aad'))).resolves.toBe('secret'); // decrypt only
      await refused(asQueue('webhooks', () => sealer('endpoint-secret').seal('secret', 'aad')));
      await refused(asRoute('jobs.get', () => sealer('endpoint-secret').open(secret, 'aad')));
      // A route that replays stored responses cannot open an endpoint secret, nor the dispatcher a stored response.
      await refused(asRoute('api_keys.create', () => sealer('endpoint-secret').open(secret, 'aad')));
      const response = await asRoute('api_keys.create', () => sealer('stored-response').seal('{"key":"sk_test_x"}', 'idem'));
      await refused(asQueue('webhooks', () => sealer('stored-response').open(response, 'idem')));
      await expect(asRoute('auth.phone_verification.start', () => sms().send('+15555550100', 'code 1'))).resolves.toBeUndefined();
      await refused(asRoute('auth.signup', () => sms().send('+15555550100', 'code 2')));
      expect(localOutbox.map((m) => m.text)).toContain('code 1');
      expect(localOutbox.map((m) => m.text)).not.toContain('code 2');
    });

    it('a service no function of the stack is granted is refused to every function', () => {
      expect(() => withGrants({ fn: 'JobsGet', table: 'read' }, () => checkGrantedCall('LambdaClient', 'InvokeCommand', {}))).toThrow(/Lambda is not a service any function of the stack is granted/);
    });
  });
});

