#!/usr/bin/env node
// Keeps package-lock.json acceptable to `npm ci` on this workplace's registry mirror.
//
// The mirror serves only the Linux builds of platform-specific optional packages
// (@swc/core-darwin-arm64, @unrs/resolver-binding-win32-x64-msvc, ... answer 404). `npm install`
// therefore writes a lockfile without their entries, and `npm ci` then rejects that lockfile as
// "not in sync" ("Missing: @swc/core-darwin-arm64@ from lock file"). A lockfile written against the
// public registry holds an entry for every such optional package, tagged with its os/cpu so that
// installs on other platforms skip it. This script adds those entries back, with os/cpu/libc read
// from the package name, and changes nothing else. Run it after every `npm install` that rewrites
// the lockfile:
//
//   npm install && node scripts/lock-platform-optionals.mjs
//
// Usage: node scripts/lock-platform-optionals.mjs [--check]   (--check: exit 1 if entries are missing)
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const lockPath = join(dirname(fileURLToPath(import.meta.url)), '..', 'package-lock.json');
const check = process.argv.includes('--check');
const lock = JSON.parse(readFileSync(lockPath, 'utf8'));
const packages = lock.packages;

const OS = ['darwin', 'linux', 'win32', 'freebsd', 'android', 'openharmony', 'sunos', 'openbsd', 'netbsd', 'aix'];
const CPU = {
  arm64: 'arm64', aarch64: 'arm64', x64: 'x64', 'x86_64': 'x64', ia32: 'ia32', arm: 'arm', 'arm-eabi': 'arm',
  armv7: 'arm', ppc64: 'ppc64', ppc64le: 'ppc64', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64',
  wasm32: 'wasm32', universal: null,
};

/** os/cpu/libc of a platform package, from its name (e.g. core-linux-arm-gnueabihf). */
function platformOf(name) {
  const base = name.split('/').pop();
  const parts = base.split('-');
  const osIndex = parts.findIndex((p) => OS.includes(p));
  if (osIndex < 0) return null;
  const os = parts[osIndex];
  const rest = parts.slice(osIndex + 1);
  let cpu = null;
  for (let n = Math.min(2, rest.length); n >= 1 && cpu === null; n--) {
    const key = rest.slice(0, n).join('-');
    if (key in CPU) cpu = CPU[key] ?? undefined;
  }
  const libc = rest.some((p) => p.startsWith('musl')) ? 'musl' : rest.some((p) => p.startsWith('gnu')) ? 'glibc' : null;
  return { os, cpu: cpu ?? null, libc };
}

/** Where node resolution would find `dep` from the package at `from` (a lockfile key). */
function resolves(from, dep) {
  let base = from;
  for (;;) {
    const candidate = (base ? `${base}/` : '') + `node_modules/${dep}`;
    if (packages[candidate]) return true;
    if (!base) return false;
    const i = base.lastIndexOf('/node_modules/');
    base = i < 0 ? '' : base.slice(0, i);
  }
}

const added = [];
for (const [key, entry] of Object.entries(packages)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    if (resolves(key, dep)) continue;
    const platform = platformOf(dep);
    if (!platform) continue; // not a platform build: leave it to npm
    const target = `node_modules/${dep}`;
    const row = { version };
    if (entry.dev) row.dev = true;
    row.optional = true;
    if (platform.cpu) row.cpu = [platform.cpu];
    if (platform.libc && platform.os === 'linux') row.libc = [platform.libc];
    row.os = [platform.os];
    packages[target] = row;
    added.push(`${dep}@${version}`);
  }
}

if (check) {
  if (added.length) {
    console.error(`package-lock.json lacks ${added.length} platform optional entries; run node scripts/lock-platform-optionals.mjs`);
    process.exit(1);
  }
  process.exit(0);
}

// Keep npm's ordering: "" first, then keys sorted as npm sorts them (localeCompare, 'en').
const sorted = { '': packages[''] };
for (const k of Object.keys(packages).filter((k) => k !== '').sort((a, b) => a.localeCompare(b, 'en'))) sorted[k] = packages[k];
lock.packages = sorted;
writeFileSync(lockPath, JSON.stringify(lock, null, 2) + '\n');
console.log(added.length ? `added ${added.length} entries:\n  ${added.join('\n  ')}` : 'nothing to add');
