/**
 * X-Ray tracing of AWS SDK calls (Powertools Tracer): every client factory passes its client
 * through `traced()`, so each DynamoDB, S3, SQS, SNS, Bedrock, KMS or Transcribe call is a
 * subsegment of the function's trace (the functions run with active tracing, lib/constructs).
 * Outside Lambda (the local runtime, tests) the client is returned as it is.
 */
import { Tracer } from '@aws-lambda-powertools/tracer';

let tracer: Tracer | null = null;

function tracingOn(): boolean {
  return process.env.RUNTIME !== 'local' && Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME) && process.env.POWERTOOLS_TRACE_ENABLED !== 'false';
}

export function traced<T>(client: T): T {
  if (!tracingOn()) return client;
  tracer ??= new Tracer({ serviceName: 'media-marketplace' });
  return tracer.captureAWSv3Client(client as never) as T;
}
