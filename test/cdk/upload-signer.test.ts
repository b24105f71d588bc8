/**
 * CDK assertions for the upload-signing role (manifest `access.uploadSigner`,
 * shared/manifest/access.ts): the functions that hand out pre-signed upload URLs assume it and sign
 * with its credentials, so a URL lives its full hour. The expected functions are read from the
 * manifest; resources are collected from every stack of the tree (support.ts `flatten`).
 */
import { checkGrantedCall, withGrants } from '../../local/grants';
import { grantsOf, type EntryAccess } from '../../local/lambda';
import { ROUTES } from '../../shared/manifest/routes';
import { BUCKET_PREFIXES, QUEUES, SCHEDULES } from '../../shared/manifest/wiring';
import { flatten, synthesize, type Resource } from './support';

const resources: Record<string, Resource> = flatten(synthesize());
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
const json = (v: unknown) => JSON.stringify(v);
const list = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

type Statement = { Sid?: string; Effect: string; Action: string | string[]; Resource?: unknown; Principal?: Record<string, unknown>; Condition?: unknown };

function functionBy(match: (description: string) => boolean): string {
  const m = ofType('AWS::Lambda::Function').filter(([, r]) => match(String(r.Properties.Description)));
  expect(m).toHaveLength(1);
  return m[0]![0];
}

/** Every function of the manifest: its name, its access, its logical id. */
const functions: { name: string; access: EntryAccess; id: string }[] = [
  ...ROUTES.map((r) => ({ name: r.id, access: r.access as EntryAccess, id: functionBy((d) => d.endsWith(`(${r.id})`)) })),
  ...QUEUES.map((q) => ({ name: q.name, access: q.access as EntryAccess, id: functionBy((d) => d.includes(`Consumer of the ${q.name} queue`)) })),
  ...SCHEDULES.map((s) => ({ name: s.name, access: s.access as EntryAccess, id: functionBy((d) => d.includes(s.description)) })),
];
const signers = functions.filter((f) => f.access.uploadSigner === true);

const roleIdOf = (fnId: string) => resources[fnId]!.Properties.Role['Fn::GetAtt'][0] as string;
const roleArnOf = (roleId: string) => ({ 'Fn::GetAtt': [roleId, 'Arn'] });

/** Every statement of the policies attached to a role (AWS::IAM::Policy and managed policies). */
function attachedStatements(roleId: string): Statement[] {
  return [...ofType('AWS::IAM::Policy'), ...ofType('AWS::IAM::ManagedPolicy')]
    .filter(([, p]) => list(p.Properties.Roles as unknown[]).some((r) => json(r) === json({ Ref: roleId })))
    .flatMap(([, p]) => p.Properties.PolicyDocument.Statement as Statement[]);
}

const signerRoles = ofType('AWS::IAM::Role').filter(([id]) => id.includes('UploadSigner'));
const [signerRoleId, signerRole] = signerRoles[0] ?? ['', undefined];
const signerArn = roleArnOf(signerRoleId);
const mediaBucket = ofType('AWS::S3::Bucket').find(([, r]) => r.Properties.NotificationConfiguration?.EventBridgeConfiguration)![0];

describe('the upload-signing role', () => {
  test('the manifest names functions that sign uploads, and the stack has one upload-signing role', () => {
    expect(signers.length).toBeGreaterThan(0);
    expect(signerRoles).toHaveLength(1);
  });

  test('its only permission is s3:PutObject under uploads/ of the media bucket', () => {
    const props = signerRole!.Properties;
    expect(props.ManagedPolicyArns ?? []).toEqual([]);
    expect(attachedStatements(signerRoleId)).toEqual([]);
    const statements = (props.Policies as { PolicyDocument: { Statement: Statement[] } }[]).flatMap((p) => p.PolicyDocument.Statement);
    expect(statements).toEqual([
      {
        Sid: 'PutUploads',
        Effect: 'Allow',
        Action: 's3:PutObject',
        Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [mediaBucket, 'Arn'] }, `/${BUCKET_PREFIXES.uploads}*`]] },
      },
    ]);
  });

  test('its trust policy admits exactly the execution roles of the functions whose manifest access says uploadSigner, and no service', () => {
    const trust = signerRole!.Properties.AssumeRolePolicyDocument.Statement as Statement[];
    for (const s of trust) {
      expect(s).toEqual({ Effect: 'Allow', Action: 'sts:AssumeRole', Principal: { AWS: expect.anything() } });
    }
    const admitted = trust.flatMap((s) => list(s.Principal!.AWS)).map(json).sort();
    expect(admitted).toEqual(signers.map((f) => json(roleArnOf(roleIdOf(f.id)))).sort());
  });

  test('its sessions last at most an hour (the life of a pre-signed upload URL)', () => {
    expect(signerRole!.Properties.MaxSessionDuration).toBe(3600);
  });

  test('exactly the functions whose manifest access says uploadSigner get UPLOAD_SIGNER_ROLE_ARN, the role\'s ARN', () => {
    for (const f of functions) {
      const value = resources[f.id]!.Properties.Environment?.Variables?.UPLOAD_SIGNER_ROLE_ARN;
      expect({ fn: f.name, value }).toEqual({ fn: f.name, value: f.access.uploadSigner ? signerArn : undefined });
    }
  });

  test('exactly those functions may call STS, and only sts:AssumeRole on the upload-signing role', () => {
    for (const f of functions) {
      const sts = attachedStatements(roleIdOf(f.id)).filter((s) => list(s.Action).some((a) => a.startsWith('sts:')));
      const expected = f.access.uploadSigner ? [{ Sid: 'AssumeUploadSigner', Effect: 'Allow', Action: 'sts:AssumeRole', Resource: signerArn }] : [];
      expect({ fn: f.name, sts }).toEqual({ fn: f.name, sts: expected });
    }
  });

  test('the local runtime lets exactly the functions the synthesized policies allow assume the role, and no other role (local/grants.ts)', () => {
    const deployedArn = 'arn:aws:iam::123456789012:role/TestStack-UploadSigner';
    const otherArn = 'arn:aws:iam::123456789012:role/SomeOtherRole';
    const saved = process.env.UPLOAD_SIGNER_ROLE_ARN;
    process.env.UPLOAD_SIGNER_ROLE_ARN = deployedArn;
    try {
      let allowedSomewhere = 0;
      for (const f of functions) {
        const statements = attachedStatements(roleIdOf(f.id)).filter((s) => s.Effect === 'Allow');
        for (const [arn, resource] of [[deployedArn, signerArn], [otherArn, otherArn]] as const) {
          const deployed = statements.some((s) => list(s.Action).some((a) => a === 'sts:AssumeRole' || a === 'sts:*') && list(s.Resource).some((r) => r === '*' || json(r) === json(resource)));
          let local = true;
          try {
            withGrants(grantsOf(f.name, f.access), () => checkGrantedCall('STSClient', 'AssumeRoleCommand', { RoleArn: arn }));
          } catch {
            local = false;
          }
          expect({ fn: f.name, arn, allowed: local }).toEqual({ fn: f.name, arn, allowed: deployed });
          if (deployed) allowedSomewhere++;
        }
      }
      // Compared both ways: the role is granted somewhere.
      expect(allowedSomewhere).toBe(signers.length);
    } finally {
      if (saved === undefined) delete process.env.UPLOAD_SIGNER_ROLE_ARN;
      else process.env.UPLOAD_SIGNER_ROLE_ARN = saved;
    }
  });
});
