import { Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * Acknowledge a cdk-nag finding on a construct (and its children) with a one-line reason; every
 * call sits next to the construct it is about (test/cdk/nag.test.ts runs AwsSolutions).
 */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}
