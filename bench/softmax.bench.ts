// Softmax and token sampling on one adapter, each against the design it replaces:
// - softmax: the fused one-dispatch kernel (online max/sum, then the output: the row is read twice, written once)
//   vs a three-pass softmax built from existing ops (max, sum of exp(x - max), exp(x - max) / sum: the TF.js / ORT
//   design). With no fused sub-exp op the baseline is 5 dispatches: max, sub, exp, sum, div.
// - sample: sample() with the logits kept on the device (one dispatch, a 4-byte read) vs reading the logits back
//   and sampling on the host with the reference sampler (src/kernels/sample/cpu.ts).
// Dispatches per call, sync reads per call and bytes moved are machine-independent; times on a software adapter are not.
import { Generator, gpuCounters, randn, sample, synchronize, type Tensor } from '../src/index.js';
import type { SamplingParams } from '../src/runtime/backend.js';
import { sampleReference } from '../src/kernels/sample/cpu.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const F32 = 4;
const FUSED = 'softmax f32 fused';
const THREE_PASS = 'softmax f32 3-pass (max, sub, exp, sum, div)';
const SAMPLE = 'sample f32 topK50 topP0.9 on device';
const READBACK = 'sample f32 topK50 topP0.9 toArray + CPU reference';

export function softmaxCases(quick: boolean): BenchCase[] {
  const v = quick ? 32768 : 128256;
  const shapes: [number, number][] = quick
    ? [
        [1, v],
        [8, v],
      ]
    : [
        [1, v],
        [32, v],
      ];
  return [
    ...shapes.map(([rows, d]): BenchCase => {
      const shape = `[${rows},${d}]`;
      return { benchmark: 'softmax f32', shape, run: (ctx) => measureSoftmax(ctx, rows, d, shape) };
    }),
    { benchmark: 'sample f32', shape: `[1,${v}]`, run: (ctx) => measureSample(ctx, v, `[1,${v}]`) },
  ];
}

/** The baseline: three logical passes over the row from existing ops (5 dispatches), intermediates disposed. */
function threePass(x: Tensor): Tensor {
  const m = x.max(-1, { keepdim: true });
  const d = x.sub(m);
  const e = d.exp();
  const s = e.sum(-1, { keepdim: true });
  const out = e.div(s);
  for (const t of [m, d, e, s]) t.dispose();
  return out;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

async function measureSoftmax(ctx: BenchContext, rows: number, d: number, shape: string): Promise<RowInput[]> {
  if (!ctx.gpu) return [FUSED, THREE_PASS].map((benchmark) => ({ benchmark, shape, backend: 'cpu', note: 'WebGPU only' }));
  const n = rows * d;
  // Minimum traffic: read the input once, write the output once.
  const minimum = 2 * n * F32;
  // Fused: pass 1 reads the row (online max and sum), pass 2 reads it again and writes the output.
  const fusedMoved = 3 * n * F32;
  // 3-pass from ops: max reads N, writes R; sub reads N + R, writes N; exp reads N, writes N; sum reads N, writes R;
  // div reads N + R, writes N: 8N + 4R elements.
  const threePassMoved = (8 * n + 4 * rows) * F32;
  const r = randn([rows, d], { device: 'webgpu', generator: new Generator(3) });
  const x = r.mul(4);
  r.dispose();
  try {
    // Compile both pipelines and check the baseline computes the same thing.
    const [a, b] = [x.softmax(-1), threePass(x)];
    const diff = maxAbsDiff(await a.toArray(), await b.toArray());
    a.dispose();
    b.dispose();
    const rowsOut: RowInput[] = [];
    for (const [benchmark, op, moved] of [
      [FUSED, (t: Tensor) => t.softmax(-1), fusedMoved],
      [THREE_PASS, threePass, threePassMoved],
    ] as const) {
      ctx.log(`  webgpu ${benchmark} ${shape}`);
      const timing = await timeIt(async () => {
        op(x).dispose();
        await synchronize();
      }, ctx.time);
      rowsOut.push({
        benchmark,
        shape,
        backend: 'webgpu',
        timing,
        bytes: minimum,
        baselineBenchmark: benchmark === FUSED ? THREE_PASS : undefined,
        note:
          `moves ~${(moved / 2 ** 20).toFixed(1)} MiB = ${(moved / minimum).toFixed(2)}x the minimum (1 read + 1 write, ${(minimum / 2 ** 20).toFixed(1)} MiB)` +
          (benchmark === THREE_PASS ? `; max |fused - 3-pass| ${diff.toExponential(1)}` : ''),
      });
    }
    return rowsOut;
  } finally {
    x.dispose();
  }
}

async function measureSample(ctx: BenchContext, v: number, shape: string): Promise<RowInput[]> {
  if (!ctx.gpu) return [SAMPLE, READBACK].map((benchmark) => ({ benchmark, shape, backend: 'cpu', note: 'WebGPU only' }));
  const r = randn([1, v], { device: 'webgpu', generator: new Generator(5) });
  const x = r.mul(3);
  r.dispose();
  const options = { topK: 50, topP: 0.9 };
  // The same parameters sample() resolves for these options (temperature 1, no penalties), with the seed's uniform.
  const params = (seed: number): SamplingParams => ({
    invTemperature: 1,
    topK: 50,
    topP: Math.fround(0.9),
    minP: 0,
    u: new Generator(seed).uniform(),
    repetition: 1,
    invRepetition: 1,
    presence: 0,
    frequency: 0,
  });
  const readback = async (seed: number) => sampleReference(Float64Array.from(await x.toArray()), [], params(seed));
  try {
    // Compile, and check both pick the same token for a few seeds (they share the uniform).
    let same = 0;
    for (let s = 0; s < 3; s++) if ((await sample(x, { ...options, seed: s })) === (await readback(s))) same++;
    let seed = 0;
    const rows: RowInput[] = [];
    for (const [benchmark, draw, bytesBack] of [
      [SAMPLE, (s: number) => sample(x, { ...options, seed: s }), 4],
      [READBACK, readback, v * F32],
    ] as const) {
      ctx.log(`  webgpu ${benchmark} ${shape}`);
      const reads0 = gpuCounters().reads;
      let calls = 0;
      const timing = await timeIt(async () => {
        await draw(seed++);
        calls++;
      }, ctx.time);
      const readsPerCall = (gpuCounters().reads - reads0) / calls;
      rows.push({
        benchmark,
        shape,
        backend: 'webgpu',
        timing,
        baselineBenchmark: benchmark === SAMPLE ? READBACK : undefined,
        note:
          `${readsPerCall} read/call, ${bytesBack} B read back` +
          (benchmark === READBACK ? ` (${(bytesBack / 4).toFixed(0)}x the on-device path); same token as on device for ${same}/3 seeds` : ''),
      });
    }
    return rows;
  } finally {
    x.dispose();
  }
}
