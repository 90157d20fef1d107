// The layering rules of src/ (docs/architecture.md), checked by `npm run lint`: data flows one way, so the folders
// of src/ import each other without cycles, core imports nothing above it, and the WebGPU runtime imports nothing from
// the CPU runtime. Only imports that exist at run time count: `import type` and type-only specifiers are erased by
// the compiler, so a folder may name a type from above it (Tensor's method signatures name the ops' option types).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The unit a file belongs to: its top-level folder under src/, with runtime/ split into its parts (the Backend
 * contract, the device registry that picks a backend, cpu/, webgpu/), since the contract sits below both runtimes
 * and the registry above them.
 */
export function unitOf(file, src = join(root, 'src')) {
  const parts = relative(src, file).split('/');
  if (parts.length === 1) return '(entry)';
  if (parts[0] === 'runtime') return `runtime/${parts[1].replace(/\.ts$/, '')}`;
  return parts[0];
}

/** Run-time relative imports of one file (static, re-exports, dynamic import()). */
function runtimeImports(file) {
  const text = readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false);
  const out = [];
  const visit = (node) => {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      const typeOnly =
        clause &&
        (clause.isTypeOnly ||
          (!clause.name &&
            clause.namedBindings &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      if (!typeOnly) out.push(node.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier) {
      const typeOnly = node.isTypeOnly || (node.exportClause && ts.isNamedExports(node.exportClause) && node.exportClause.elements.every((e) => e.isTypeOnly));
      if (!typeOnly) out.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && ts.isStringLiteral(node.arguments[0])) {
      out.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out.filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

function sources(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** unit -> unit -> one example import (file -> file). */
export function unitGraph(src = join(root, 'src')) {
  const graph = new Map();
  for (const file of sources(src)) {
    const from = unitOf(file, src);
    for (const target of runtimeImports(file)) {
      const to = unitOf(target, src);
      if (to === from) continue;
      if (!graph.has(from)) graph.set(from, new Map());
      if (!graph.get(from).has(to)) graph.get(from).set(to, `${relative(root, file)} -> ${relative(root, target)}`);
    }
  }
  return graph;
}

/** Strongly connected components with more than one unit (Tarjan). */
function cycles(graph) {
  let index = 0;
  const stack = [];
  const info = new Map();
  const found = [];
  const connect = (v) => {
    info.set(v, { index, low: index, onStack: true });
    index++;
    stack.push(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!info.has(w)) {
        connect(w);
        info.get(v).low = Math.min(info.get(v).low, info.get(w).low);
      } else if (info.get(w).onStack) info.get(v).low = Math.min(info.get(v).low, info.get(w).index);
    }
    if (info.get(v).low === info.get(v).index) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        info.get(w).onStack = false;
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!info.has(v)) connect(v);
  return found;
}

/** The rules broken in the tree under `src` (src/ by default), one line each. */
export function checkLayers(src = join(root, 'src')) {
  const graph = unitGraph(src);
  const problems = [];
  for (const [to, example] of graph.get('core') ?? []) problems.push(`core imports ${to} (${example}): core imports nothing above it`);
  const cpu = graph.get('runtime/webgpu')?.get('runtime/cpu');
  if (cpu) problems.push(`the WebGPU runtime imports the CPU runtime (${cpu})`);
  for (const component of cycles(graph)) {
    const edges = component.flatMap((a) => component.filter((b) => graph.get(a)?.has(b)).map((b) => `    ${graph.get(a).get(b)}`));
    problems.push(`import cycle between folders ${component.join(', ')}:\n${edges.join('\n')}`);
  }
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = checkLayers();
  if (problems.length > 0) {
    console.error(`layering (scripts/check-layers.mjs):\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  console.log('layering: no cycles between folders, core imports nothing above it, webgpu imports nothing from cpu');
}
