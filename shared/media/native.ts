/**
 * Loading installed packages with Node's own loader, outside any bundler or test sandbox.
 *
 * Why: Jest runs our sources through swc to CommonJS in a sandboxed module registry that cannot
 * load ESM-only packages (music-metadata 11, nsfwjs' ESM build), and the tfjs family must be ONE
 * module instance for human and nsfwjs to share the registered WASM backend. Node's own
 * `require` (with require(esm), unflagged since Node 20.19) gives both, in Jest, tsx and a Lambda
 * alike. Packages are located by walking up from the working directory and this file's directory
 * to a `node_modules/<name>/package.json` (in a Lambda bundle: /var/task/node_modules, where
 * `bundling.nodeModules` installs them). Nothing here loads at import time.
 */
import { existsSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import path from 'node:path';

const dirs = new Map<string, string | null>();

/** Directory of an installed package, or null. */
export function findPackageDir(name: string): string | null {
  if (dirs.has(name)) return dirs.get(name)!;
  let found: string | null = null;
  const starts = [process.cwd(), typeof __dirname === 'string' ? __dirname : process.cwd()];
  outer: for (const start of starts) {
    let dir = start;
    for (;;) {
      const candidate = path.join(dir, 'node_modules', name);
      if (existsSync(path.join(candidate, 'package.json'))) {
        found = candidate;
        break outer;
      }
      const up = path.dirname(dir);
      if (up === dir) break;
      dir = up;
    }
  }
  dirs.set(name, found);
  return found;
}

export class PackageMissingError extends Error {
  constructor(name: string) {
    super(`package ${name} is not installed (no node_modules/${name} above ${process.cwd()})`);
    this.name = 'PackageMissingError';
  }
}

/** Absolute path of a file inside an installed package (throws PackageMissingError). */
export function packageFile(name: string, rel = ''): string {
  const dir = findPackageDir(name);
  if (!dir) throw new PackageMissingError(name);
  return path.join(dir, rel);
}

/**
 * `require` a file of an installed package (CommonJS, or ESM through require(esm)) with Node's own
 * loader, so every caller shares Node's module cache.
 */
export function nativeRequire<T>(name: string, rel: string): T {
  const file = packageFile(name, rel);
  // Jest replaces `createRequire` with its sandboxed one; Module._load is Node's own loader.
  const load = (Module as unknown as { _load?: (request: string, parent: unknown, isMain: boolean) => unknown })._load;
  return (typeof load === 'function' ? load(file, null, false) : createRequire(file)(file)) as T;
}
