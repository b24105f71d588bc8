/**
 * The test transform (test/support/transform.cjs): every module gets the global intrinsics bound to
 * module-scope constants, and nothing else about it changes.
 */
import { runInNewContext } from 'node:vm';

const { createTransformer } = require('../support/transform.cjs') as {
  createTransformer(o: { esmPackages: string }): { process(src: string, filename: string, o: object): { code: string } };
};
const transformer = createTransformer({ esmPackages: '@middy' });
const packageFile = (src: string) => transformer.process(src, '/app/node_modules/some-package/index.js', {}).code;
const ownFile = (src: string) => transformer.process(src, '/app/shared/example.ts', { supportsStaticESM: false }).code;

/**
 * Runs `code` as Jest does, inside a function in a vm context (a shebang line blanked, as Node's
 * loader does); returns what it assigned to `module.exports`.
 */
function run(code: string): unknown {
  const module = { exports: {} as unknown };
  runInNewContext(`(function (module, exports) {${code.replace(/^#!.*/, '')}\n})`, {})(module, module.exports);
  return module.exports;
}

describe('the test transform', () => {
  it('binds Math, Infinity and the other intrinsics to module-scope constants', () => {
    const code = packageFile('module.exports = () => [typeof Math, Infinity];');
    const binding = /const \{([^}]*)\} = globalThis;/.exec(code)?.[1]?.split(',').map((n) => n.trim());
    expect(binding).toEqual(expect.arrayContaining(['Math', 'Infinity', 'Number', 'Object', 'JSON', 'Buffer', 'Float32Array']));
  });

  it('keeps a strict file strict, its directive written with or without a semicolon', () => {
    for (const directive of ["'use strict'\n", '"use strict";\n', '#!/usr/bin/env node\n// a comment\n"use strict"\n']) {
      const strictness = run(packageFile(`${directive}module.exports = (function () { return this === undefined; })();`));
      expect(strictness).toBe(true);
    }
  });

  it('keeps every line where it was, so stack traces stay true', () => {
    const src = '"use strict";\nconst a = 1;\n\nmodule.exports = new Error("here").stack;';
    const code = packageFile(src);
    expect(code.split('\n')).toHaveLength(src.split('\n').length);
    expect(code.split('\n').slice(1)).toEqual(src.split('\n').slice(1));
  });

  it('leaves alone a file that declares or assigns one of the names itself', () => {
    for (const src of ['var Map = require("./map");', 'function Symbol() {}', "const { Buffer } = require('buffer');", 'Object = shim;']) {
      expect(packageFile(src)).toBe(src);
    }
  });

  it('compiles our own TypeScript with swc and adds the same binding', () => {
    const code = ownFile('export const clamp = (v: number): number => Math.max(0, Math.min(255, Math.round(v)));');
    expect(code).toContain('= globalThis;');
    expect(code).not.toContain(': number');
  });
});
