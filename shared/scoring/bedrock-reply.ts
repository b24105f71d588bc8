/**
 * The Bedrock Converse basics shared by scoring, annotation and speech (no media code here, so
 * light consumers stay light): the client shape, the default model, the time-out, and the one
 * parser of Converse replies, for scoring, image annotation and the speech
 * derivations alike: the text blocks of the answer → the JSON object inside (fenced ```json
 * block first, else the outermost `{…}`) → a zod schema. Any failure is a BedrockOutputError that
 * keeps the raw text for the logs.
 */
import type { ConverseCommandInput, ConverseCommandOutput } from '@aws-sdk/client-bedrock-runtime';
import * as z from '../zod';
import { sendable } from '../sendable-text';

export const DEFAULT_BEDROCK_MODEL_ID = 'amazon.nova-pro-v1:0';

/**
 * What makes a Converse call: shared/aws/bedrock-converse.ts deployed (the wire format without the
 * SDK client), a stub answering in the published format in tests.
 */
export interface ConverseClient {
  converse(input: ConverseCommandInput, options?: { abortSignal?: AbortSignal }): Promise<ConverseCommandOutput>;
}

/**
 * A Converse call that has not answered after this long is abandoned (D66): the stage fails,
 * the message comes back with backoff, and the submission stays pending_score meanwhile.
 * Env BEDROCK_TIMEOUT_MS overrides; the consumer's own time-out is longer.
 */
export function bedrockTimeoutMs(): number {
  const n = Number(process.env.BEDROCK_TIMEOUT_MS);
  return Number.isFinite(n) && n > 0 ? n : 60_000;
}

export class BedrockOutputError extends Error {
  constructor(
    message: string,
    readonly rawText: string,
  ) {
    super(message);
    this.name = 'BedrockOutputError';
  }
}

/** The JSON object inside a model answer: fenced block first, else the outermost {...}. */
export function extractJson(text: string): unknown {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(text);
  const candidate = fenced ? fenced[1]!.trim() : text.trim();
  const start = candidate.indexOf('{');
  const end = candidate.lastIndexOf('}');
  if (start < 0 || end <= start) throw new Error('no JSON object in the answer');
  return JSON.parse(candidate.slice(start, end + 1));
}

/** The text blocks of a Converse answer, joined. */
export function replyText(out: ConverseCommandOutput): string {
  return (out.output?.message?.content ?? [])
    .map((b) => ('text' in b && typeof b.text === 'string' ? b.text : ''))
    .join('\n')
    .trim();
}

/** A Converse answer validated against `schema` (throws BedrockOutputError). */
export function parseModelReply<S extends z.core.$ZodType>(out: ConverseCommandOutput, schema: S): z.output<S> {
  const text = replyText(out);
  if (!text) throw new BedrockOutputError(`model returned no text (stopReason ${out.stopReason ?? 'unknown'})`, '');
  let json: unknown;
  try {
    // A model may write `\uffff` or half a surrogate pair as a JSON escape: such a character could
    // be neither stored as written nor sent in an event, so it becomes U+FFFD (shared/sendable-text.ts).
    json = sendable(extractJson(text));
  } catch (e) {
    throw new BedrockOutputError(`model answer is not JSON: ${(e as Error).message}`, text);
  }
  const parsed = z.safeParse(schema, json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new BedrockOutputError(`model answer failed validation: ${issues}`, text);
  }
  return parsed.data;
}
