/**
 * A table's or bucket's reference as cdk-nag names it, for the IAM5 acknowledgements of the grant
 * modules (grants.ts, service-grants.ts, upload-signer.ts).
 */
import { Names, Stack, type CfnElement, aws_dynamodb as dynamodb, aws_s3 as s3 } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * How cdk-nag names a resource reference in an IAM5 finding: `<LogicalId.Arn>` in the resource's
 * own stack, `<referenceto<RootStack><LogicalId>Arn>` from a nested stack (its parameter).
 */
export function nagReference(scope: IConstruct, target: dynamodb.ITable | s3.IBucket): string {
  const owner = Stack.of(target);
  const cfn = target.node.defaultChild as CfnElement;
  if (Stack.of(scope) === owner) return `<${owner.resolve(owner.getLogicalId(cfn)) as string}.Arn>`;
  return `<referenceto${Names.uniqueId(cfn)}Arn>`;
}
