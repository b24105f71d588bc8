/**
 * Amazon Transcribe's StartTranscriptionJob without the Transcribe SDK client (json-rpc.ts,
 * awsJson1_1, target `Transcribe.StartTranscriptionJob`).
 *
 * Why: the scoring consumer starts a job for every audio or video file and makes no other
 * Transcribe call; the SDK client (schemas and commands for the whole service, about 53 KB) was
 * parsed at every cold start of that consumer (docs/benchmarks.md). The input is the SDK command's
 * input; a job name already taken answers ConflictException, as the SDK names it. Held by
 * test/unit/aws-json-clients.test.ts against the SDK client.
 */
import type { StartTranscriptionJobCommandInput, StartTranscriptionJobCommandOutput } from '@aws-sdk/client-transcribe';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { JsonRpcClient } from './json-rpc';

export class TranscribeJobs {
  private readonly rpc: JsonRpcClient;

  constructor(opts: { region?: string; endpoint?: string; credentials?: AwsCredentialIdentityProvider } = {}) {
    this.rpc = new JsonRpcClient({ service: 'transcribe', targetPrefix: 'Transcribe', version: '1.1', clientName: 'TranscribeClient', ...opts });
  }

  startTranscriptionJob(input: StartTranscriptionJobCommandInput): Promise<StartTranscriptionJobCommandOutput> {
    return this.rpc.call<Omit<StartTranscriptionJobCommandOutput, '$metadata'>>('StartTranscriptionJob', input);
  }

  destroy(): void {
    this.rpc.destroy();
  }
}
