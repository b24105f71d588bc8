#!/usr/bin/env node
'use strict';
// The command-line tool. Runs the compiled dist/ (`npm run build:client` at the repository root);
// inside the repository without a build, it runs the TypeScript sources through tsx.
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const dist = join(__dirname, '..', 'dist', 'cli.js');
let cli;
if (existsSync(dist)) cli = require(dist);
else {
  require('tsx/cjs');
  cli = require(join(__dirname, '..', 'src', 'cli.ts'));
}
cli.main(process.argv).then((code) => {
  process.exitCode = code;
});
