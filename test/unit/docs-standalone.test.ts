/**
 * D74: the documentation stands alone. User-facing text (README, docs, error messages and other
 * string literals of the service) cites no rule number and no file outside the repository, and
 * docs/decisions.md explains every rule number that code comments and tests cite.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const RULE = /\bD([1-9][0-9]?)\b/g;

function walk(dir: string, keep: (f: string) => boolean, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'cdk.out' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, keep, out);
    else if (keep(p)) out.push(p);
  }
  return out;
}

const rel = (p: string) => relative(ROOT, p);
const userDocs = () => [join(ROOT, 'README.md'), join(ROOT, 'local/README.md'), ...walk(join(ROOT, 'docs'), (f) => f.endsWith('.md'))].filter((f) => !f.endsWith('docs/decisions.md'));
const sources = () => ['functions', 'shared', 'local', 'lib', 'bin', 'test', 'bench', 'scripts', 'packages'].flatMap((d) => walk(join(ROOT, d), (f) => /\.(ts|js|mjs)$/.test(f)));

/** String literals on lines that are not comments (a rough but strict cut: no D-number inside quotes). */
function stringLiteralsCiting(src: string): string[] {
  const hits: string[] = [];
  for (const line of src.split('\n')) {
    const t = line.trim();
    if (t.startsWith('//') || t.startsWith('*') || t.startsWith('/*')) continue;
    const code = line.replace(/\/\/.*$/, '');
    for (const m of code.matchAll(/(['"`])((?:\\.|(?!\1).)*)\1/g)) if (/\bD[1-9][0-9]?\b/.test(m[2]!)) hits.push(m[0]);
  }
  return hits;
}

test('D74: README and docs cite no rule number and no file outside the repository', () => {
  const found: string[] = [];
  for (const f of userDocs()) {
    readFileSync(f, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const outside = [...line.matchAll(/\]\(([^)#\s]+)/g)].some((m) => !/^[a-z]+:/.test(m[1]!) && !resolve(dirname(f), m[1]!).startsWith(`${ROOT}/`));
        if (RULE.test(line) || outside || /DECISIONS\.md|buyer-interface\.md|\/work\/shared/.test(line)) found.push(`${rel(f)}:${i + 1}: ${line.trim()}`);
        RULE.lastIndex = 0;
      });
  }
  expect(found).toEqual([]);
});

test("D74: the service's string literals (error messages, descriptions, logs) cite no rule number", () => {
  const found: string[] = [];
  for (const f of sources().filter((p) => /^(functions|shared|local|lib|bin|packages)\//.test(rel(p)))) {
    for (const hit of stringLiteralsCiting(readFileSync(f, 'utf8'))) found.push(`${rel(f)}: ${hit}`);
  }
  expect(found).toEqual([]);
});

test('D74: docs/decisions.md explains every rule number that code comments and tests cite', () => {
  const glossary = readFileSync(join(ROOT, 'docs/decisions.md'), 'utf8');
  const explained = new Set([...glossary.matchAll(/^- \*\*D(\d+)\*\* \S/gm)].map((m) => Number(m[1])));
  const cited = new Map<number, string>();
  for (const f of sources()) for (const m of readFileSync(f, 'utf8').matchAll(RULE)) if (!cited.has(Number(m[1]))) cited.set(Number(m[1]), rel(f));
  const missing = [...cited].filter(([n]) => !explained.has(n)).map(([n, f]) => `D${n} (cited in ${f})`);
  expect(missing).toEqual([]);
  expect(cited.size).toBeGreaterThan(50);
});
