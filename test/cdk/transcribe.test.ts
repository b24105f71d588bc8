/**
 * CDK assertions for the speech wiring (D65): the Transcribe grant of the function that starts
 * jobs, the EventBridge rule for Transcribe job state changes, its queue and dead-letter queue.
 * Resources are collected from every stack of the tree (nested stacks included), so the checks
 * hold however lib/ splits the app.
 */
import { QUEUES, RULES, queueByName } from '../../shared/manifest/wiring';
import { flatten, synthesize, type Resource } from './support';

const resources: Record<string, Resource> = flatten(synthesize());
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
const json = (v: unknown) => JSON.stringify(v);

function consumer(queue: string): [string, Resource] {
  const m = ofType('AWS::Lambda::Function').filter(([, r]) => String(r.Properties.Description).includes(`Consumer of the ${queue} queue`));
  expect(m).toHaveLength(1);
  return m[0]!;
}

function statementsOf(fnId: string): { Sid?: string; Action: string | string[]; Resource: unknown; Effect: string }[] {
  const roleRef = json({ Ref: resources[fnId]!.Properties.Role['Fn::GetAtt'][0] });
  return ofType('AWS::IAM::Policy')
    .filter(([, p]) => (p.Properties.Roles as unknown[]).some((r) => json(r) === roleRef))
    .flatMap(([, p]) => p.Properties.PolicyDocument.Statement);
}

const actions = (s: { Action: string | string[] }) => (Array.isArray(s.Action) ? s.Action : [s.Action]);

describe('Transcribe wiring (D65)', () => {
  test('the scoring consumer may start transcription jobs only under our job-name prefix', () => {
    const [id] = consumer('scoring');
    const start = statementsOf(id).filter((s) => actions(s).some((a) => a.startsWith('transcribe:')));
    expect(start).toHaveLength(1);
    expect(actions(start[0]!)).toEqual(['transcribe:StartTranscriptionJob']);
    expect(json(start[0]!.Resource)).toContain(':transcription-job/media-*');
    expect(json(start[0]!.Resource)).not.toMatch(/"\*"/);
  });

  test('Transcribe reads media only under uploads/ and writes output only under transcripts/', () => {
    const [id] = consumer('scoring');
    const st = statementsOf(id);
    const read = st.find((s) => s.Sid === 'TranscribeReadsMedia')!;
    const write = st.find((s) => s.Sid === 'TranscribeWritesOutput')!;
    expect(actions(read)).toEqual(['s3:GetObject']);
    expect(json(read.Resource)).toContain('/uploads/*');
    expect(actions(write)).toEqual(['s3:PutObject']);
    expect(json(write.Resource)).toContain('/transcripts/*');
  });

  test('no other function may start transcription jobs', () => {
    const starters = ofType('AWS::Lambda::Function').filter(([id]) => statementsOf(id).some((s) => actions(s).some((a) => a.startsWith('transcribe:'))));
    expect(starters.map(([, r]) => r.Properties.Description)).toEqual(['Consumer of the scoring queue']);
    expect(QUEUES.filter((q) => q.access.transcribe).map((q) => q.name)).toEqual(['scoring']);
  });

  test('an EventBridge rule sends completed and failed Transcribe jobs of ours to the transcription queue', () => {
    const def = RULES.find((r) => r.name === 'transcription-done')!;
    expect(def.source).toBe('transcribe');
    const rules = ofType('AWS::Events::Rule').filter(([, r]) => json(r.Properties.EventPattern?.source) === json(['aws.transcribe']));
    expect(rules).toHaveLength(1);
    const rule = rules[0]![1];
    expect(rule.Properties.EventPattern).toEqual({
      source: ['aws.transcribe'],
      'detail-type': ['Transcribe Job State Change'],
      detail: { TranscriptionJobStatus: ['COMPLETED', 'FAILED'], TranscriptionJobName: [{ prefix: 'media-' }] },
    });
    const targets = rule.Properties.Targets as { Arn: unknown; DeadLetterConfig?: { Arn: unknown } }[];
    expect(targets).toHaveLength(1);
    const queueId = (targets[0]!.Arn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    expect(queueId).toMatch(/TranscriptionQueue/);
    // Failed deliveries from EventBridge to the queue have their own dead-letter queue.
    expect(targets[0]!.DeadLetterConfig?.Arn).toBeDefined();
  });

  test('the transcription queue has a dead-letter queue after maxReceiveCount, with an alarm', () => {
    const def = queueByName('transcription');
    const [qid, q] = ofType('AWS::SQS::Queue').find(([id]) => /TranscriptionQueue/.test(id))!;
    expect(q.Properties.RedrivePolicy.maxReceiveCount).toBe(def.maxReceiveCount);
    const dlqId = q.Properties.RedrivePolicy.deadLetterTargetArn['Fn::GetAtt'][0] as string;
    expect(resources[dlqId]!.Type).toBe('AWS::SQS::Queue');
    const alarms = ofType('AWS::CloudWatch::Alarm').filter(([, a]) => json(a.Properties.Dimensions ?? []).includes(dlqId));
    expect(alarms.length).toBeGreaterThanOrEqual(1);
    expect(qid).toBeTruthy();
  });

  test('its consumer reads transcripts (and only them), may use Bedrock and send to the scoring queue, and starts nothing', () => {
    const [id, fn] = consumer('transcription');
    const all = statementsOf(id).flatMap(actions);
    expect(all).toEqual(expect.arrayContaining(['s3:GetObject', 'bedrock:InvokeModel', 'sqs:SendMessage']));
    const gets = statementsOf(id).filter((s) => actions(s).includes('s3:GetObject'));
    expect(gets.map((s) => json(s.Resource))).toEqual([expect.stringContaining('/transcripts/*')]);
    expect(all.some((a) => a.startsWith('transcribe:'))).toBe(false);
    expect(all.some((a) => a.startsWith('s3:Put'))).toBe(false);
    expect(Object.keys(fn.Properties.Environment.Variables)).toContain('QUEUE_URL_SCORING');
  });
});
