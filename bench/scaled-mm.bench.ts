// Decode GEMV by weight dtype on one adapter: FP8 scaledMm (tensorwise and 128x128 block scales) vs bf16 vs f32
// weights, [1,K] x [N,K]^T. Weight bytes are the point: FP8 must move half of bf16, scales included.
import { quantize, randn, scaledMm, synchronize, Generator, type Tensor } from '../src/index.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

type Variant = 'f32' | 'bf16' | 'fp8 tensor' | 'fp8 block128';
const VARIANTS: readonly Variant[] = ['f32', 'bf16', 'fp8 tensor', 'fp8 block128'];
const name = (v: Variant) => (v.startsWith('fp8') ? `scaledMm ${v}` : `gemv ${v} x@W.T`);
const BASELINE = name('f32');

export function scaledMmCases(quick: boolean): BenchCase[] {
  const shapes: [number, number][] = quick
    ? [[1024, 1024]]
    : [
        [4096, 4096],
        [2048, 768],
      ];
  return shapes.flatMap(([k, n]) => {
    const shape = `[1,${k}]x[${k},${n}]`;
    // One case measures all variants, so the weights are made once and the ratios come from one run.
    return [{ benchmark: 'gemv by weight dtype', shape, run: (ctx: BenchContext) => measure(ctx, k, n, shape) }];
  });
}

async function measure(ctx: BenchContext, k: number, n: number, shape: string): Promise<RowInput[]> {
  if (!ctx.gpu) return VARIANTS.map((v) => ({ benchmark: name(v), shape, backend: 'cpu', note: 'WebGPU only' }));
  const owned: Tensor[] = [];
  const own = (t: Tensor) => (owned.push(t), t);
  try {
    const g = new Generator(7);
    const x = own(randn([1, k], { device: 'webgpu', generator: g }));
    const w0 = own(randn([n, k], { device: 'webgpu', generator: g }));
    const w = own(w0.mul(0.02));
    const rows: RowInput[] = [];
    for (const v of VARIANTS) {
      let op: () => Tensor;
      let weightBytes: number;
      let scaleBytes = 0;
      if (v === 'f32' || v === 'bf16') {
        const xv = own(v === 'f32' ? x : x.to('bfloat16'));
        const wv = own(v === 'f32' ? w : w.to('bfloat16'));
        const wt = own(wv.T);
        op = () => xv.matmul(wt);
        weightBytes = n * k * (v === 'f32' ? 4 : 2);
      } else {
        const block = v === 'fp8 block128';
        const qx = quantize(x, { granularity: block ? 'group128' : 'tensor' });
        const qw = quantize(w, { granularity: block ? 'block128' : 'tensor' });
        for (const t of [qx.data, qx.scale, qw.data, qw.scale]) own(t);
        const wt = own(qw.data.T);
        op = () => scaledMm(qx.data, wt, { scaleA: qx.scale, scaleB: qw.scale, outDtype: 'bfloat16' });
        weightBytes = n * k;
        scaleBytes = qw.scale.numel * 4;
      }
      op().dispose();
      await synchronize();
      ctx.log(`  webgpu ${name(v)} ${shape}`);
      const timing = await timeIt(async () => {
        op().dispose();
        await synchronize();
      }, ctx.time);
      const actBytes = k * (v === 'f32' ? 4 : v === 'bf16' ? 2 : 1);
      const outBytes = n * (v === 'f32' ? 4 : 2);
      rows.push({
        benchmark: name(v),
        shape,
        backend: 'webgpu',
        timing,
        bytes: weightBytes + scaleBytes + actBytes + outBytes,
        baselineBenchmark: v === 'f32' ? undefined : BASELINE,
        note: `weights ${(weightBytes / 2 ** 20).toFixed(2)} MiB${scaleBytes ? ` + scales ${scaleBytes} B (${((100 * scaleBytes) / weightBytes).toFixed(3)}%)` : ''}`,
      });
    }
    return rows;
  } finally {
    for (const t of owned.reverse()) t.dispose();
  }
}
