/**
 * SMS sending behind one interface (phone verification, D7): SNS in AWS, the log in the local
 * runtime (so a developer reads the code from the terminal). SNS cannot run here; the local
 * provider is the real one for the embedded runtime.
 */
// No SNS SDK client: Publish over SNS's query protocol (shared/aws/sns-publish.ts).
import { SmsPublisher } from '../aws/sns-publish';
import { config } from '../config';
import { logger } from '../logger';
import { checkCall } from '../observability/invocation';

export interface SmsProvider {
  send(phone: string, text: string): Promise<void>;
}

/** Messages sent by the local provider, newest last (read by tests and shown in the log). */
export const localOutbox: { phone: string; text: string; at: string }[] = [];

const localProvider: SmsProvider = {
  async send(phone, text) {
    // Stands in for SNS, so held to the function's grant as its Publish would be (local/grants.ts).
    checkCall('SNSClient', 'PublishCommand', { PhoneNumber: phone });
    localOutbox.push({ phone, text, at: new Date().toISOString() });
    if (localOutbox.length > 100) localOutbox.shift();
    // eslint-disable-next-line no-console
    // The code is shown (the log stands in for the phone); the number only by its last digits.
    if (process.env.NODE_ENV !== 'test') console.log(`[sms] to …${phone.slice(-2)}: ${text}`);
  },
};

let publisher: SmsPublisher | undefined;
const snsProvider: SmsProvider = {
  async send(phone, text) {
    // One publisher per process: its connections, credentials and retry budget outlive a request.
    await (publisher ??= new SmsPublisher({ region: config().region })).publish(phone, text);
    logger.info('sms sent', { phone_tail: phone.slice(-2) });
  },
};

let override: SmsProvider | null = null;
/** Tests: send with this instead (e.g. a provider that fails, as SNS can); null restores the default. */
export function setSmsProvider(provider: SmsProvider | null): void {
  override = provider;
}

export function sms(): SmsProvider {
  return override ?? (config().runtime === 'local' ? localProvider : snsProvider);
}
