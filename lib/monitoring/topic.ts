import { Annotations, aws_iam as iam, aws_sns as sns, aws_sns_subscriptions as subs } from 'aws-cdk-lib';
import type { Construct } from 'constructs';

/**
 * The one topic every alarm notifies, TLS-only (a deny on aws:SecureTransport=false), with an
 * e-mail subscription to the address of context `alarmEmail`. Without an address the topic has no
 * subscriber, and the synth says so.
 */
export function alarmTopic(scope: Construct, id: string, email: string | undefined): sns.Topic {
  const topic = new sns.Topic(scope, id, { displayName: 'Media marketplace alarms', enforceSSL: true });
  if (email) {
    if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) throw new Error(`alarmEmail must be an e-mail address, got ${email}`);
    topic.addSubscription(new subs.EmailSubscription(email));
  } else {
    Annotations.of(topic).addWarningV2(
      'media-marketplace:no-alarm-subscriber',
      'No alarmEmail: alarms go to a topic nobody reads. Deploy with -c alarmEmail=<team address> (docs/deploying.md).',
    );
  }
  // CloudWatch alarms publish with the topic's resource policy (the account's own alarms only).
  topic.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'CloudWatchAlarmsOfThisAccount',
      principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
      actions: ['sns:Publish'],
      resources: [topic.topicArn],
      conditions: { StringEquals: { 'aws:SourceAccount': topic.env.account } },
    }),
  );
  return topic;
}
