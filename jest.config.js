/**
 * Jest: swc transforms TypeScript and the ESM-only packages (middy) to CommonJS; every module, the
 * packages' CommonJS files included, gets its global intrinsics bound to module-scope constants
 * (test/support/transform.cjs says why: global reads are slow inside Jest's vm context).
 */
const esmPackages = ['@middy', 'ulid', '@seriousme'].join('|');
const transform = { '^.+\\.(t|j|mj|c)s$': ['<rootDir>/test/support/transform.cjs', { esmPackages }] };
const common = {
  // Node's environment, releasing each file's AsyncLocalStorage stores at its end (see the file).
  testEnvironment: '<rootDir>/test/support/environment.cjs',
  transform,
  transformIgnorePatterns: [],
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
  setupFilesAfterEnv: ['<rootDir>/test/support/release-models.ts'],
};
module.exports = {
  // One in-memory DynamoDB Local for the run (tests that make their own runtime or fixtures use it);
  // each test file's runtimes start one of their own (test/support/harness.ts).
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60000,
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts', '<rootDir>/test/client/webhooks.test.ts', '<rootDir>/test/client/types.test.ts'] },
    { ...common, displayName: 'cdk', testMatch: ['<rootDir>/test/cdk/**/*.test.ts'] },
    { ...common, displayName: 'api', testMatch: ['<rootDir>/test/api/**/*.test.ts', '<rootDir>/test/domain/**/*.test.ts', '<rootDir>/test/pipeline/**/*.test.ts', '<rootDir>/test/local/**/*.test.ts', '<rootDir>/test/sandbox/**/*.test.ts', '<rootDir>/test/client/client.test.ts', '<rootDir>/test/cli/**/*.test.ts', '<rootDir>/test/readme*.test.ts'] },
  ],
};
