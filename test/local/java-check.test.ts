import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkJava, javaCommand, JavaMissingError, jvmOptions } from '../../local/dynamodb';

function fakeJava(versionLine: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fake-java-')), 'java');
  writeFileSync(file, `#!/bin/sh\necho '${versionLine}' >&2\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('DynamoDB Local needs Java 17+', () => {
  it('a missing Java is reported in one line that says how to install it', () => {
    let error: unknown;
    try {
      checkJava('/nonexistent/bin/java');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(JavaMissingError);
    const message = (error as Error).message;
    expect(message.split('\n')).toHaveLength(1);
    expect(message).toMatch(/Java 17\+ is required/);
    expect(message).toMatch(/apt-get install -y openjdk-17-jre-headless/);
  });

  it('a Java older than 17 is reported the same way', () => {
    expect(() => checkJava(fakeJava('java version "1.8.0_392"'))).toThrow(/Java 17\+ is required for DynamoDB Local \(found 8\)/);
  });

  it('Java 17 passes', () => {
    expect(checkJava(fakeJava('openjdk version "17.0.15" 2025-04-15'))).toEqual({ major: 17 });
  });

  it('JAVA, then JAVA_HOME, choose the binary', () => {
    expect(javaCommand({ JAVA: '/opt/j/bin/java', JAVA_HOME: '/x' })).toBe('/opt/j/bin/java');
    expect(javaCommand({ JAVA_HOME: '/usr/lib/jvm/17' })).toBe('/usr/lib/jvm/17/bin/java');
    expect(javaCommand({})).toBe('java');
  });
});

describe("DynamoDB Local's JVM options", () => {
  it('default to the serial collector and the client compiler (a short-lived emulator)', () => {
    expect(jvmOptions({})).toEqual(['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1']);
  });

  it('DYNAMODB_LOCAL_JVM_OPTS replaces them; a blank value runs the JVM defaults', () => {
    expect(jvmOptions({ DYNAMODB_LOCAL_JVM_OPTS: ' -Xmx1g  -XX:+UseG1GC ' })).toEqual(['-Xmx1g', '-XX:+UseG1GC']);
    expect(jvmOptions({ DYNAMODB_LOCAL_JVM_OPTS: ' ' })).toEqual([]);
  });
});
