/**
 * The local grant check on the queues and every other service (grants.ts): SendMessage to the
 * queues of `access.sendTo`; the sealing key, Bedrock, Transcribe, SNS and STS as the stack grants
 * them; any other service refused.
 */
import { TRANSCRIBE_JOB_PREFIX } from '../shared/manifest/wiring';
import { DEFAULT_BEDROCK_MODEL_ID } from '../shared/scoring/bedrock-reply';
import { config } from '../shared/config';
import { encryptionContext, LEGACY_ENCRYPTION_CONTEXT, SEALING_PURPOSES, type EncryptionContext } from '../shared/secrets/kms';
import { kmsAllows } from '../shared/manifest/access';
import { AccessDenied, type Grants } from './grants-model';
import { deployedLegacySealedValues } from './deployed-settings';

/** `ctx` has each pair of `context`, as the IAM condition on the sealing key requires. */
const hasContext = (ctx: Record<string, string> | undefined, context: EncryptionContext): boolean => !!ctx && Object.entries(context).every(([k, v]) => ctx[k] === v);

/**
 * The sealing key as lib/constructs/key-access.ts grants it: GenerateDataKey or Decrypt with the
 * context of a purpose the function may seal or open; Decrypt with the context all purposes
 * shared before, when it may open any, unless the deployment says `legacySealedValues=false`
 * (local/deployed-settings.ts).
 */
function kmsAllowed(g: Grants, command: string, ctx: Record<string, string> | undefined): boolean {
  const use = command === 'GenerateDataKeyCommand' ? 'encrypt' : command === 'DecryptCommand' ? 'decrypt' : null;
  if (!use) return false;
  if (SEALING_PURPOSES.some((p) => kmsAllows(g.kms, p, use) && hasContext(ctx, encryptionContext(p)))) return true;
  return use === 'decrypt' && deployedLegacySealedValues() && hasContext(ctx, LEGACY_ENCRYPTION_CONTEXT) && SEALING_PURPOSES.some((p) => kmsAllows(g.kms, p, 'decrypt'));
}

function queueName(url: unknown): string {
  const known = Object.entries(config().queueUrls).find(([, u]) => u === url)?.[0];
  return known ?? String(url).split('/').pop() ?? '';
}

export function checkQueue(g: Grants, command: string, input: { QueueUrl?: string; QueueName?: string }): void {
  const name = input.QueueName ?? queueName(input.QueueUrl);
  if ((command === 'SendMessageCommand' || command === 'SendMessageBatchCommand' || command === 'GetQueueUrlCommand') && g.sendTo?.includes(name)) return;
  if ((command === 'ChangeMessageVisibilityCommand' || command === 'GetQueueUrlCommand') && g.consumes === name) return;
  throw new AccessDenied(`${g.fn} is not authorized to perform sqs:${command.replace(/Command$/, '')} on queue ${name || '(unknown)'}`);
}

/** The models the stack grants (context `bedrockModelId`, `annotationModelId`), as the code resolves them here. */
function grantedModels(): string[] {
  const scoring = process.env.BEDROCK_MODEL_ID ?? DEFAULT_BEDROCK_MODEL_ID;
  return [scoring, process.env.ANNOTATION_MODEL_ID ?? scoring];
}

interface ServiceInput {
  EncryptionContext?: Record<string, string>;
  modelId?: string;
  TranscriptionJobName?: string;
  RoleArn?: string;
  PhoneNumber?: string;
  TopicArn?: string;
  TargetArn?: string;
}

/**
 * Per client: the operations a grant allows (as lib/constructs/service-grants.ts and key-access.ts grant them, resources
 * included: the configured models, our transcription job names), and whether this function has it.
 */
const SERVICE_GRANTS: Record<string, { service: string; allowed: (g: Grants, command: string, input: ServiceInput) => boolean }> = {
  KMSClient: {
    service: 'kms',
    // GenerateDataKey and Decrypt only, each with the encryption context of a granted purpose (the IAM condition).
    allowed: (g, c, i) => kmsAllowed(g, c, i.EncryptionContext),
  },
  BedrockRuntimeClient: {
    service: 'bedrock',
    allowed: (g, c, i) => g.bedrock === true && /^(Converse|ConverseStream|InvokeModel|InvokeModelWithResponseStream)Command$/.test(c) && grantedModels().includes(i.modelId ?? ''),
  },
  TranscribeClient: {
    service: 'transcribe',
    allowed: (g, c, i) => g.transcribe === true && c === 'StartTranscriptionJobCommand' && (i.TranscriptionJobName ?? '').startsWith(TRANSCRIBE_JOB_PREFIX),
  },
  // To a phone number only: the stack denies Publish on every SNS ARN (topics, platform endpoints).
  SNSClient: { service: 'sns', allowed: (g, c, i) => g.sms === true && c === 'PublishCommand' && !!i.PhoneNumber && !i.TopicArn && !i.TargetArn },
  STSClient: {
    service: 'sts',
    allowed: (g, c, i) => g.uploadSigner === true && c === 'AssumeRoleCommand' && !!i.RoleArn && i.RoleArn === process.env.UPLOAD_SIGNER_ROLE_ARN,
  },
};

export function checkService(g: Grants, client: string, command: string, input: ServiceInput): void {
  const s = SERVICE_GRANTS[client];
  if (!s) throw new AccessDenied(`${g.fn}: ${client.replace(/Client$/, '')} is not a service any function of the stack is granted (${command})`);
  if (!s.allowed(g, command, input)) throw new AccessDenied(`${g.fn} is not authorized to perform ${s.service}:${command.replace(/Command$/, '')}${input.modelId ? ` on model ${input.modelId}` : ''}${input.TranscriptionJobName ? ` on job ${input.TranscriptionJobName}` : ''}`);
}
