/**
 * SMS sending behind one interface (phone verification, D7): SNS in AWS, the log in the local
 * runtime (so a developer reads the code from the terminal). SNS cannot run here; the local
 * provider is the real one for the embedded runtime.
 */
// Imported statically (see shared/secrets/sealer.ts): only the route that sends codes reaches it.
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { config } from '../config';
import { logger } from '../logger';
import { checkCall } from '../observability/invocation';
import { traced } from '../observability/tracer';

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

const snsProvider: SmsProvider = {
  async send(phone, text) {
    const client = traced(new SNSClient({ region: config().region }));
    await client.send(new PublishCommand({ PhoneNumber: phone, Message: text }));
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
