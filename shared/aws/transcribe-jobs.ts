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
import type { StartTranscriptionJobCommandInput } from '@aws-sdk/client-transcribe';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { JsonRpcClient } from './json-rpc';
import type { CallMetadata } from './signed-call';

/**
 * What the reply is read for: the job's name and status. (Its times stay epoch seconds as sent;
 * the SDK would make them Dates. Nothing here reads them.)
 */
export interface StartedJob {
  TranscriptionJob?: { TranscriptionJobName?: string; TranscriptionJobStatus?: string };
  $metadata: CallMetadata;
}

/** Transcribe's own endpoint rules name these two regions' hosts differently (`cn.transcribe.…`). */
const CHINA_HOSTS: Record<string, string> = {
  'cn-north-1': 'cn.transcribe.cn-north-1.amazonaws.com.cn',
  'cn-northwest-1': 'cn.transcribe.cn-northwest-1.amazonaws.com.cn',
};

export class TranscribeJobs {
  private readonly rpc: JsonRpcClient;

  constructor(opts: { region?: string; endpoint?: string; credentials?: AwsCredentialIdentityProvider } = {}) {
    this.rpc = new JsonRpcClient({ service: 'transcribe', targetPrefix: 'Transcribe', version: '1.1', clientName: 'TranscribeClient', hostFor: (r) => CHINA_HOSTS[r], ...opts });
  }

  /** The endpoint the calls go to. */
  get origin(): URL {
    return this.rpc.origin;
  }

  startTranscriptionJob(input: StartTranscriptionJobCommandInput): Promise<StartedJob> {
    return this.rpc.call<Omit<StartedJob, '$metadata'>>('StartTranscriptionJob', input);
  }

  destroy(): void {
    this.rpc.destroy();
  }
}

let shared: TranscribeJobs | undefined;
/** The function's one Transcribe client (connections, credentials and retry budget outlive a message). */
export function transcribeJobs(): TranscribeJobs {
  return (shared ??= new TranscribeJobs());
}
