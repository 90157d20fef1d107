// The layering check `npm run lint` runs (scripts/check-layers.mjs): the tree passes, and each rule catches a
// violation in a small tree built here (so the check itself can fail).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { checkLayers } from '../../scripts/check-layers.mjs';

const check = checkLayers as (src?: string) => string[];
let dir = '';
function tree(files: Record<string, string>): string {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-layers-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

describe('scripts/check-layers.mjs', () => {
  it('passes on src/', () => {
    expect(check()).toEqual([]);
  });

  it('catches core importing above it, but not a type-only import', () => {
    expect(check(tree({ 'core/a.ts': "import type { B } from '../ops/b.js';\nexport const a = 1;\n", 'ops/b.ts': 'export type B = number;\n' }))).toEqual([]);
    const problems = check(tree({ 'core/a.ts': "import { b } from '../ops/b.js';\nexport const a = b;\n", 'ops/b.ts': 'export const b = 1;\n' }));
    expect(problems.join('\n')).toMatch(/core imports ops \(.*core\/a\.ts -> .*ops\/b\.ts\)/);
  });

  it('catches the WebGPU runtime importing the CPU runtime, dynamic import() included', () => {
    const problems = check(tree({ 'runtime/webgpu/k.ts': "export const k = () => import('../cpu/r.js');\n", 'runtime/cpu/r.ts': 'export const r = 1;\n' }));
    expect(problems.join('\n')).toMatch(/WebGPU runtime imports the CPU runtime/);
  });

  it('catches a cycle between folders and names its edges', () => {
    const problems = check(
      tree({
        'models/m.ts': "import { g } from '../generate/g.js';\nexport const m = g;\n",
        'generate/g.ts': "export { m } from '../models/m.js';\nexport const g = 1;\n",
      }),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/import cycle between folders generate, models/);
  });
});
