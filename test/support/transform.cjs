/**
 * Jest's transform: @swc/jest, plus one declaration at the top of every transformed module that
 * binds the global intrinsics (`Math`, `Infinity`, `Object`, `JSON`, …) to module-scope constants.
 *
 * Why: Jest runs every module inside a `vm` context, and there each read of a global name goes
 * through the context's interceptor, which V8 cannot optimise: a 640 × 480 pixel loop calling
 * `Math.round` takes ~1 s in a test file and ~20 ms in plain Node (measured on this machine; the
 * same loop with `const M = Math` inside the context takes 7 ms; a loop comparing with `Infinity`, 870 ms against
 * 22 ms; `Object.keys` and `JSON.stringify` calls, 4–12× slower). The image analysis the local
 * runtime runs, and the test fixtures that draw images and audio, spent a third of the pipeline
 * suites' CPU there. A module-scope constant is a closure variable, read at full speed.
 *
 * Only intrinsics that no test replaces are bound (never `Date`, timers, `fetch` or `console`,
 * which Jest's fake timers and spies swap on the global), so the binding changes no behaviour.
 * The declaration goes on the line where the code starts, after `"use strict";`, so line numbers
 * stay true.
 */
const { createTransformer } = require('@swc/jest');
const crypto = require('node:crypto');
const vm = require('node:vm');
const { readFileSync } = require('node:fs');

// In every cache key: a change to this file transforms every module again.
const THIS_FILE = readFileSync(__filename);

const INTRINSICS = [
  ...['Infinity', 'NaN', 'Math', 'Number', 'BigInt', 'String', 'Symbol', 'Object', 'Array', 'JSON', 'Reflect', 'Map', 'Set', 'WeakMap', 'Buffer'],
  ...['Uint8Array', 'Uint16Array', 'Uint32Array', 'Int8Array', 'Int16Array', 'Int32Array', 'Float32Array', 'Float64Array'],
];
// The leading `;` ends a directive written without one (`'use strict'` then a new line).
const PRELUDE = `;const { ${INTRINSICS.join(', ')} } = globalThis;`;
// Where the prelude goes: after a shebang, leading comments and a "use strict" directive, so the
// directive still opens the file (the prelude before it would turn a strict file sloppy).
const HEAD = /^(?:#![^\n]*\n)?(?:\s|\/\/[^\n]*|\/\*[\s\S]*?\*\/)*(?:(["'])use strict\1;?)?/;

// A file that declares one of these names itself (a polyfill, `const { Buffer } = require('buffer')`) is
// left as it is: with the prelude it would not compile, which is how it is found. One that
// assigns one (sloppy code writing a global) is left too: the constant would refuse the write.
const NAMES = INTRINSICS.join('|');
const ASSIGNS = new RegExp(`(?<![.\\w$])(?:${NAMES})\\s*=(?![=>])`);

/** Whether `code` compiles as Jest runs it: inside a function, a shebang line blanked. */
function compiles(code) {
  try {
    new vm.Script(`(function () {${code.replace(/^#!.*/, '')}\n})`);
    return true;
  } catch (e) {
    if (e && e.name === 'SyntaxError') return false; // by name: this module may run in another realm
    throw e;
  }
}

function withPrelude(code) {
  if (ASSIGNS.test(code)) return code;
  const at = HEAD.exec(code)[0].length;
  const out = `${code.slice(0, at)}${PRELUDE}${code.slice(at)}`;
  return compiles(out) ? out : code;
}

/** A CommonJS file (a package's, or any `.cjs`): already what Jest runs, so only the prelude is added. */
const isCommonJsPackageFile = (filename, esmPackages) => filename.endsWith('.cjs') || (filename.includes('/node_modules/') && !esmPackages.test(filename));

module.exports = {
  /** `options.esmPackages`: the packages (a RegExp source) that are ES modules and need swc. */
  createTransformer({ esmPackages, ...options } = {}) {
    const swc = createTransformer(options);
    const esm = new RegExp(`/node_modules/(?:${esmPackages ?? '(?!)'})/`);
    return {
      ...swc,
      process(src, filename, jestOptions) {
        if (isCommonJsPackageFile(filename, esm)) return { code: withPrelude(src) };
        const out = swc.process(src, filename, jestOptions);
        return { ...out, code: withPrelude(out.code) };
      },
      async processAsync(src, filename, jestOptions) {
        if (isCommonJsPackageFile(filename, esm)) return { code: withPrelude(src) };
        const out = await swc.processAsync(src, filename, jestOptions);
        return { ...out, code: withPrelude(out.code) };
      },
      getCacheKey(...args) {
        return crypto.createHash('sha1').update(swc.getCacheKey(...args)).update(THIS_FILE).update(esm.source).digest('hex');
      },
    };
  },
};
