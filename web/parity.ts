// The op parity suite the browser runs (the harness page for the tests, ops.html for people): each op on fresh
// random inputs on WebGPU and on the CPU backend in the same page, and the largest relative difference.
import * as tg from '../src/browser.js';

export interface ParityResult {
  op: string;
  maxDiff: number;
  tolerance: number;
  size: number;
}

type Op = { name: string; tolerance: number; run: (device: 'cpu' | 'webgpu') => Promise<Float32Array | Int32Array | Uint8Array> };

/** Fresh random inputs (same seed on both backends), the op on each backend, the largest difference. */
export async function parity(seed: number, onResult?: (r: ParityResult) => void): Promise<{ adapter: string; results: ParityResult[] }> {
  await tg.initDevice('webgpu');
  const inputs = (device: 'cpu' | 'webgpu', shapes: number[][]) => {
    const g = new tg.Generator(seed);
    return shapes.map((s) => tg.randn(s, { generator: g, device }));
  };
  const on = async (device: 'cpu' | 'webgpu', shapes: number[][], f: (...x: tg.Tensor[]) => tg.Tensor) => {
    const xs = inputs(device, shapes);
    const y = f(...xs);
    const out = await y.toArray();
    for (const t of [...xs, y]) t.dispose();
    return out;
  };
  const ops: Op[] = [
    { name: 'add [1001] (odd size)', tolerance: 1e-6, run: (d) => on(d, [[1001], [1001]], (a, b) => a.add(b)) },
    { name: 'mul by a scalar [257]', tolerance: 1e-6, run: (d) => on(d, [[257]], (a) => a.mul(0.5)) },
    { name: 'exp [3, 333]', tolerance: 1e-5, run: (d) => on(d, [[3, 333]], (a) => a.exp()) },
    { name: 'silu [513]', tolerance: 1e-5, run: (d) => on(d, [[513]], (a) => a.silu()) },
    { name: 'sum over rows [37, 129]', tolerance: 1e-4, run: (d) => on(d, [[37, 129]], (a) => a.sum(1)) },
    {
      name: 'matmul [33, 65] x [65, 47]',
      tolerance: 1e-4,
      run: (d) =>
        on(
          d,
          [
            [33, 65],
            [65, 47],
          ],
          (a, b) => tg.matmul(a, b),
        ),
    },
    {
      name: 'gemv [1, 300] x [300, 77]',
      tolerance: 1e-4,
      run: (d) =>
        on(
          d,
          [
            [1, 300],
            [300, 77],
          ],
          (a, b) => tg.matmul(a, b),
        ),
    },
    { name: 'softmax [5, 4099] (long rows)', tolerance: 1e-6, run: (d) => on(d, [[5, 4099]], (a) => tg.softmax(a, -1)) },
    { name: 'rmsNorm [7, 96]', tolerance: 1e-5, run: (d) => on(d, [[7, 96], [96]], (a, w) => tg.rmsNorm(a, w, 1e-6)) },
    { name: 'sampleToken greedy [1000]', tolerance: 0, run: (d) => on(d, [[1000]], (a) => tg.sampleToken(a, { temperature: 0 })) },
  ];
  const results: ParityResult[] = [];
  for (const op of ops) {
    const [gpu, cpu] = [await op.run('webgpu'), await op.run('cpu')];
    let maxDiff = gpu.length === cpu.length ? 0 : Infinity;
    for (let i = 0; i < cpu.length; i++) maxDiff = Math.max(maxDiff, Math.abs(gpu[i]! - cpu[i]!) / Math.max(1, Math.abs(cpu[i]!)));
    const r = { op: op.name, maxDiff, tolerance: op.tolerance, size: cpu.length };
    results.push(r);
    onResult?.(r);
  }
  const diagnosis = await tg.diagnose();
  return { adapter: diagnosis.adapter ? `${diagnosis.adapter.vendor}/${diagnosis.adapter.architecture}` : 'none', results };
}
