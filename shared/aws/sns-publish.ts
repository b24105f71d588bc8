/**
 * SNS's Publish of an SMS to a phone number, over SNS's query protocol (shared/aws/query-protocol.ts),
 * without the SNS SDK client: the phone-verification route sends one message per request and makes
 * no other SNS call, and the SDK client with its query-protocol serializer was parsed at every cold
 * start of that route (docs/benchmarks.md). Held by test/unit/sns-publish.test.ts against the SDK
 * client.
 */
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { QueryClient } from './query-protocol';
import { xmlField } from './xml';

export class SmsPublisher {
  private readonly query: QueryClient;

  constructor(opts: { region: string; endpoint?: string; credentials?: AwsCredentialIdentityProvider }) {
    this.query = new QueryClient({ service: 'sns', version: '2010-03-31', clientName: 'SNSClient', ...opts });
  }

  /** The endpoint the calls go to. */
  get origin(): URL {
    return this.query.origin;
  }

  /** Publishes `message` to `phoneNumber` (E.164) as an SMS; answers SNS's message id. */
  async publish(phoneNumber: string, message: string): Promise<string | undefined> {
    const { xml } = await this.query.call('Publish', { PhoneNumber: phoneNumber, Message: message });
    return xmlField(xml, 'MessageId');
  }

  destroy(): void {
    this.query.destroy();
  }
}
