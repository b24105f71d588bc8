/**
 * The bearer-token providers of the deployed bundles (shared/aws/lambda-token-providers.ts, put in
 * place of the SDK's @aws-sdk/token-providers by the house bundling; issue 15, cold start): the
 * Bedrock runtime client keeps signing with the function's role, and no SSO token provider (with
 * its SSO OIDC client) is bundled.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { houseEsbuildOptions } from '../../lib/constructs/house-function';
import { fromEnvSigningName, nodeProvider } from '../../shared/aws/lambda-token-providers';

const ROOT = resolve(__dirname, '../..');

test('a bundled Bedrock client signs its Converse call with the role’s credentials (Signature V4), and bundles no SSO token provider', async () => {
  const seen: IncomingHttpHeaders[] = [];
  // The Bedrock runtime client speaks HTTP/2 (cleartext here, prior knowledge).
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ output: { message: { role: 'assistant', content: [{ text: 'ok' }] } }, stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, metrics: { latencyMs: 1 } }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-bundle-'));
  try {
    const entry = `import { BedrockRuntimeClient, ConverseCommand } from '@aws-sdk/client-bedrock-runtime';
const client = new BedrockRuntimeClient({ endpoint: process.env.BEDROCK_ENDPOINT });
const out = await client.send(new ConverseCommand({ modelId: 'amazon.nova-lite-v1:0', messages: [{ role: 'user', content: [{ text: 'hi' }] }] }));
console.log(out.output.message.content[0].text);`;
    const result = await build({ ...houseEsbuildOptions(), stdin: { contents: entry, resolveDir: ROOT, loader: 'js' }, outfile: join(dir, 'index.mjs'), metafile: true });
    const inputs = Object.keys(result.metafile!.inputs);
    expect(inputs).toContain('shared/aws/lambda-token-providers.ts');
    expect(inputs.filter((i) => /@aws-sdk\/(token-providers|nested-clients)\//.test(i))).toEqual([]);

    const env = {
      PATH: process.env.PATH ?? '',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'ASIAROLE',
      AWS_SECRET_ACCESS_KEY: 'secret',
      AWS_SESSION_TOKEN: 'session',
      BEDROCK_ENDPOINT: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    };
    // Not spawnSync: the server answering the child runs in this process.
    const r = await promisify(execFile)(process.execPath, [join(dir, 'index.mjs')], { env, encoding: 'utf8', timeout: 20_000 });
    expect(r.stdout.trim()).toBe('ok');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=ASIAROLE\/\d{8}\/us-east-1\/bedrock\/aws4_request, /);
    expect(seen[0]!['x-amz-security-token']).toBe('session');
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await new Promise((r) => server.close(r));
  }
});

test('a bearer token comes only from the environment variable of the signing name, as the SDK reads it', async () => {
  const saved = process.env.AWS_BEARER_TOKEN_BEDROCK;
  try {
    delete process.env.AWS_BEARER_TOKEN_BEDROCK;
    await expect(fromEnvSigningName({ signingName: 'bedrock' })()).rejects.toThrow(/AWS_BEARER_TOKEN_BEDROCK/);
    process.env.AWS_BEARER_TOKEN_BEDROCK = 'key-1';
    await expect(fromEnvSigningName({ signingName: 'bedrock' })()).resolves.toEqual({ token: 'key-1' });
    await expect(nodeProvider()()).rejects.toThrow(/sign their calls with their role/);
  } finally {
    if (saved === undefined) delete process.env.AWS_BEARER_TOKEN_BEDROCK;
    else process.env.AWS_BEARER_TOKEN_BEDROCK = saved;
  }
});
