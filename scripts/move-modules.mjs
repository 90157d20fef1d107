// Moves source files (git mv) and rewrites every relative import that reaches them, and the moved files' own
// relative imports, across src/, test/, bench/, web/, tools/ and scripts/. For layout changes:
//   node scripts/move-modules.mjs old/path.ts=new/path.ts old/folder=new/folder ...
// Specifiers keep their written extension (.js for a .ts file); `import(...)`, `export ... from` and `vi.mock(...)`
// are rewritten too. Paths are relative to the repository root.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SCANNED = ['src', 'test', 'bench', 'web', 'tools', 'scripts', 'vitest.config.ts'];
const SOURCE = /\.(ts|mts|mjs|js)$/;

function walk(path, out = []) {
  if (!existsSync(path)) return out;
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path)) if (name !== 'node_modules' && name !== 'fixtures') walk(join(path, name), out);
  } else if (SOURCE.test(path)) out.push(path);
  return out;
}

/** Every file the moves name, old absolute path -> new absolute path (folders expanded to their files). */
function expandMoves(pairs) {
  const map = new Map();
  for (const [from, to] of pairs) {
    const a = resolve(root, from);
    const b = resolve(root, to);
    if (!existsSync(a)) throw new Error(`no such path: ${from}`);
    if (statSync(a).isDirectory()) {
      const files = [];
      const all = (p) => (statSync(p).isDirectory() ? readdirSync(p).forEach((n) => all(join(p, n))) : files.push(p));
      all(a);
      for (const f of files) map.set(f, join(b, relative(a, f)));
    } else map.set(a, b);
  }
  return map;
}

/** The file a relative specifier names, as written from `fromFile` (`x.js` may be `x.ts`), or undefined. */
function resolveSpecifier(fromFile, spec, exists) {
  const base = resolve(dirname(fromFile), spec);
  const candidates = [base, base.replace(/\.js$/, '.ts'), base.replace(/\.js$/, '.d.ts'), base.replace(/\.mjs$/, '.mts'), `${base}.ts`, join(base, 'index.ts')];
  return candidates.find((c) => exists(c));
}

function rewrite(spec, target, newFrom) {
  // Keep the written form: a '.js' specifier for a '.ts' file stays '.js'.
  let rel = relative(dirname(newFrom), target);
  if (!rel.startsWith('.')) rel = `./${rel}`;
  if (spec.endsWith('.js') && target.endsWith('.ts')) rel = rel.replace(/(\.d)?\.ts$/, '.js');
  else if (!/\.[a-z]+$/.test(spec)) rel = rel.replace(/(\/index)?\.ts$/, '');
  return rel;
}

const IMPORT = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\bvi\.mock\(\s*|\bvi\.importActual\(\s*)(['"])(\.{1,2}\/[^'"]+)\2/g;

export function moveModules(pairs) {
  const moves = expandMoves(pairs);
  const before = new Set(SCANNED.flatMap((p) => walk(join(root, p))).concat([...moves.keys()]));
  const existsBefore = (p) => before.has(p) || existsSync(p);
  const edits = new Map();
  for (const file of before) {
    if (!SOURCE.test(file)) continue;
    const newFile = moves.get(file) ?? file;
    const text = readFileSync(file, 'utf8');
    let changed = false;
    const out = text.replace(IMPORT, (all, lead, quote, spec) => {
      const target = resolveSpecifier(file, spec, existsBefore);
      if (!target) return all;
      const newTarget = moves.get(target) ?? target;
      if (newTarget === target && newFile === file) return all;
      const next = rewrite(spec, newTarget, newFile);
      if (next === spec) return all;
      changed = true;
      return `${lead}${quote}${next}${quote}`;
    });
    if (changed) edits.set(file, out);
  }
  for (const [from, to] of moves) {
    execFileSync('mkdir', ['-p', dirname(to)]);
    execFileSync('git', ['mv', '-k', from, to], { cwd: root });
    if (existsSync(from)) execFileSync('mv', [from, to]);
  }
  for (const [file, text] of edits) writeFileSync(moves.get(file) ?? file, text);
  return { moved: moves.size, rewritten: edits.size };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const pairs = process.argv.slice(2).map((a) => a.split('='));
  if (pairs.length === 0 || pairs.some((p) => p.length !== 2)) {
    console.error('usage: node scripts/move-modules.mjs old=new [old=new ...]');
    process.exit(2);
  }
  const { moved, rewritten } = moveModules(pairs);
  console.log(`moved ${moved} files, rewrote imports in ${rewritten}`);
}
