// The op table (src/kernels/registry.ts): every op folder under src/kernels/ has its row, every row names an
// implementation for both backends, and runKernel runs the one for the operands' device.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OP_KERNELS, runKernel } from '../../src/kernels/registry.js';
import { tensor } from '../../src/ops/creation.js';
import { wrap } from '../../src/ops/util.js';
import { backendFor } from '../../src/runtime/registry.js';

const KERNELS_DIR = join(import.meta.dirname, '..', '..', 'src', 'kernels');

describe('the op table', () => {
  it('has a row for every op folder, and each row has a CPU and a WebGPU implementation', async () => {
    const folders = readdirSync(KERNELS_DIR).filter((f) => statSync(join(KERNELS_DIR, f)).isDirectory());
    const rows = new Set<unknown>(Object.values(OP_KERNELS));
    for (const folder of folders) {
      const module = (await import(join(KERNELS_DIR, folder, 'index.ts'))) as Record<string, unknown>;
      const exported = Object.entries(module).filter(([name]) => name.endsWith('Kernels'));
      expect(exported.length, `${folder}/index.ts exports its row(s)`).toBeGreaterThan(0);
      for (const [name, row] of exported) expect(rows.has(row), `${folder}: ${name} is in OP_KERNELS`).toBe(true);
    }
    for (const [name, row] of Object.entries(OP_KERNELS)) {
      expect(typeof row.cpu, `${name}.cpu`).toBe('function');
      expect(typeof row.webgpu, `${name}.webgpu`).toBe('function');
    }
  });

  it('runKernel runs the row for the backend it is given', async () => {
    const x = tensor([1, 2, 3], { device: 'cpu' });
    const backend = backendFor('cpu');
    const handle = runKernel('pad', backend, { x: x.operand(), before: [1], outShape: [5], mode: 'constant', value: 9 });
    expect(Array.from(await wrap(backend, handle, 'float32', [5]).toArray())).toEqual([9, 1, 2, 3, 9]);
  });
});
