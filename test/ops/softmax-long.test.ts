// The long-row softmax paths (softmax-long.wgsl) and the adapter policies that pick them (issue 35): the plan each
// policy makes; then WebGPU against the CPU backend on fresh random inputs through every path under both policies:
// vec4 quads, scalar quads (unaligned rows, vec4 off), rows split over workgroups (forced small pieces, so short
// inputs reach it), one invocation per row up to 1024 (software policy); odd lengths and lengths not a multiple of
// 4 or of the workgroup, offsets, f32/f16/bf16, -Inf/NaN/+Inf entries, empty tensors.
import { afterEach, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { SOFTMAX_POLICIES, softmaxPlan, softmaxTuning, type SoftmaxPolicyName } from '../../src/kernels/softmax/webgpu.js';
import { checkBoth, FLOAT_DTYPES, randomTensor, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Float = (typeof FLOAT_DTYPES)[number];

/** As in softmax.test.ts: f32 math with one output rounding against the f64 reference. */
function tol(dtype: Float, log: boolean): Tolerance {
  if (dtype === 'float32') return log ? { atol: 1e-5, rtol: 5e-7 } : { atol: 1.2e-38, rtol: 2e-5 };
  if (dtype === 'float16') return log ? { atol: 1e-5, rtol: 1e-3 } : { atol: 6e-8, rtol: 1e-3 };
  return log ? { atol: 1e-5, rtol: 8e-3 } : { atol: 1.2e-38, rtol: 8e-3 };
}

const sm = (log: boolean) => (x: Tensor) => (log ? x.logSoftmax(-1) : x.softmax(-1));

/** Runs fn under a policy and path settings, restoring the defaults after. */
async function withPaths<T>(paths: { policy: SoftmaxPolicyName; vec4?: boolean; chunkLen?: number }, fn: () => Promise<T>): Promise<T> {
  softmaxTuning.policy = paths.policy;
  softmaxTuning.vec4 = paths.vec4 ?? true;
  softmaxTuning.chunkLen = paths.chunkLen;
  try {
    return await fn();
  } finally {
    softmaxTuning.policy = undefined;
    softmaxTuning.vec4 = true;
    softmaxTuning.chunkLen = undefined;
  }
}

/** Dispatches by kernel family while fn's result is made and read. */
async function kernelsOf(fn: () => Tensor): Promise<Record<string, number>> {
  await tg.synchronize();
  const before = tg.gpuCounters().byKernel;
  const out = fn();
  const after = tg.gpuCounters().byKernel;
  await out.toArray();
  out.dispose();
  const d: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v !== (before[k] ?? 0)) d[k] = v - (before[k] ?? 0);
  return d;
}

describe('softmax plans per adapter policy', () => {
  it('GPU: one invocation per row up to 64; rows of a small batch split over ~256 workgroups in pieces >= 8192', () => {
    const g = SOFTMAX_POLICIES.gpu;
    expect(softmaxPlan(g, 1000, 64)).toEqual({ kind: 'row-per-invocation' });
    expect(softmaxPlan(g, 1000, 65)).toEqual({ kind: 'long', wg: 64, chunks: 1, chunkLen: 68 });
    expect(softmaxPlan(g, 4, 4097)).toEqual({ kind: 'long', wg: 256, chunks: 1, chunkLen: 4100 });
    // [1,128256]: 15 pieces of 8552 (a multiple of 4), 256 invocations each.
    expect(softmaxPlan(g, 1, 128256)).toEqual({ kind: 'long', wg: 256, chunks: 15, chunkLen: 8552 });
    // [32,128256]: 8 pieces a row, 256 workgroups in all.
    expect(softmaxPlan(g, 32, 128256)).toEqual({ kind: 'long', wg: 256, chunks: 8, chunkLen: 16032 });
    // Enough rows to fill the GPU: one workgroup a row.
    expect(softmaxPlan(g, 256, 128256)).toEqual({ kind: 'long', wg: 256, chunks: 1, chunkLen: 128256 });
    // At most 256 pieces (one reduce merges them).
    expect(softmaxPlan(g, 1, 1 << 24)).toMatchObject({ chunks: 256 });
  });

  it('software: one invocation per row up to 1024 given 64 rows; 16 or 32 invocations a row; never split', () => {
    const s = SOFTMAX_POLICIES.software;
    expect(softmaxPlan(s, 64, 1024)).toEqual({ kind: 'row-per-invocation' });
    expect(softmaxPlan(s, 63, 1024)).toEqual({ kind: 'long', wg: 16, chunks: 1, chunkLen: 1024 });
    expect(softmaxPlan(s, 63, 64)).toEqual({ kind: 'row-per-invocation' });
    expect(softmaxPlan(s, 1, 128256)).toEqual({ kind: 'long', wg: 32, chunks: 1, chunkLen: 128256 });
    expect(softmaxPlan(s, 32, 128256)).toEqual({ kind: 'long', wg: 32, chunks: 1, chunkLen: 128256 });
    expect(softmaxPlan(s, 1, 1 << 24)).toMatchObject({ chunks: 1 });
    // A forced piece length (tests) splits on any policy, rounded up to whole quads.
    expect(softmaxPlan(s, 2, 1000, 99)).toEqual({ kind: 'long', wg: 256, chunks: 10, chunkLen: 100 });
  });
});

describe.skipIf(!gpu.available)(`long-row softmax paths, WebGPU vs CPU ${gpu.skipReason}`, () => {
  afterEach(() => {
    softmaxTuning.policy = undefined;
    softmaxTuning.vec4 = true;
    softmaxTuning.chunkLen = undefined;
  });

  // Lengths: not a multiple of 4 (65, 67, 1025, 4099), of 4 but not of 8 (68, 4100), around a workgroup's worth
  // of quads (1023, 1024). Split paths take fewer (each piece is a 256-invocation workgroup, slow on SwiftShader),
  // chosen to make 2-5 pieces a row, the last one partial.
  const LENGTHS = [65, 67, 68, 1023, 1024, 1025, 4099, 4100];
  type Paths = { policy: SoftmaxPolicyName; vec4?: boolean; chunkLen?: number };
  const PATHS: [string, Paths, number[], boolean][] = [
    ['gpu', { policy: 'gpu' }, LENGTHS, true],
    ['software', { policy: 'software' }, LENGTHS, true],
    ['gpu, scalar quads', { policy: 'gpu', vec4: false }, LENGTHS, true],
    ['split in pieces of 1000', { policy: 'gpu', chunkLen: 1000 }, [1023, 1028, 4099], false],
    ['software, split in pieces of 36, scalar quads', { policy: 'software', chunkLen: 36, vec4: false }, [67, 68, 131], false],
  ];

  it.each(PATHS)('%s: odd and even lengths, f32/f16/bf16, softmax and logSoftmax', async (label, paths, lengths, more) => {
    await withPaths(paths, async () => {
      for (const d of lengths) {
        for (const dtype of FLOAT_DTYPES) {
          const x = randomTensor([3, d], dtype, 'normal', 4);
          for (const log of [false, true]) await checkBoth([x], sm(log), tol(dtype, log), `${label} [3,${d}] ${dtype} log ${log}`);
        }
      }
      if (!more) return;
      // Many short rows (one invocation per row on the software policy), and long rows.
      for (const [shape, dtype] of [
        [[70, 1000], 'float32'],
        [[66, 258], 'bfloat16'],
        [[1, 40003], 'float32'],
        [[2, 32768], 'float16'],
      ] as const) {
        const x = randomTensor([...shape], dtype, 'normal', 4);
        for (const log of [false, true]) await checkBoth([x], sm(log), tol(dtype, log), `${label} ${JSON.stringify(shape)} ${dtype} log ${log}`);
      }
    });
  });

  it.each(PATHS)('%s: rows at offsets (not multiples of 4), from narrow and select', async (_label, paths, _lengths, more) => {
    if (!more) paths = { ...paths, chunkLen: 500 };
    await withPaths(paths, async () => {
      const a = randomTensor([5, 1030], 'float32', 'normal', 3);
      const h = randomTensor([4, 1032], 'float16', 'normal', 3);
      for (const [x, view, label] of [
        [a, (t: Tensor) => t.narrow(0, 1, 3), 'rows 1..3 (offset 1030)'],
        [a, (t: Tensor) => t.select(0, 3).narrow(0, 2, 1024), 'a row at offset 3092'],
        [h, (t: Tensor) => t.narrow(0, 1, 2), 'f16 rows at offset 1032'],
      ] as const) {
        for (const log of [false, true]) await checkBoth([x], (t) => sm(log)(view(t)), tol(x.dtype as Float, log), `${_label}: ${label} log ${log}`);
      }
    });
  });

  it.each(PATHS)('%s: -Inf masks, all -Inf rows, NaN and +Inf entries', async (_label, paths, lengths, more) => {
    await withPaths(paths, async () => {
      for (const d of more ? [67, 1028, 4099] : lengths.slice(1)) {
        for (const dtype of FLOAT_DTYPES) {
          const vals = Array.from({ length: 5 * d }, (_, i) => Math.sin(i * 0.7) * 6);
          for (let j = 0; j < d; j += 3) vals[j] = -Infinity; // row 0: a mask
          for (let j = 0; j < d; j++) vals[d + j] = -Infinity; // row 1: all -Inf
          vals[2 * d + d - 1] = NaN; // row 2: NaN in the last element (the tail or the last quad)
          vals[3 * d + 5] = Infinity; // row 3: +Inf
          // row 4: plain
          const x = tg.tensor(vals, { shape: [5, d], dtype });
          for (const log of [false, true]) {
            const r = await checkBoth([x], sm(log), tol(dtype, log), `${_label} specials d ${d} ${dtype} log ${log}`);
            for (let j = 0; j < d; j += 3) expect(r.gpu[j], `masked entry ${j}`).toBe(log ? -Infinity : 0);
            expect(Array.from(r.gpu.slice(d, 4 * d)).every(Number.isNaN), `rows 1-3 NaN, d ${d} ${dtype} log ${log}`).toBe(true);
            expect(Array.from(r.gpu.slice(4 * d)).every(Number.isFinite), `row 4 finite, d ${d} ${dtype}`).toBe(true);
          }
        }
      }
    });
  });

  it('which kernels run: split is 2 dispatches of softmax-long; software rows up to 1024 one invocation each; empty is none', async () => {
    const x = await randomTensor([2, 1000], 'float32', 'normal', 2).to('webgpu');
    const many = await randomTensor([64, 1000], 'float32', 'normal', 2).to('webgpu');
    const empty = tg.zeros([0, 1000], { device: 'webgpu' });
    const emptyRows = tg.zeros([3, 0], { device: 'webgpu' });
    try {
      expect(await withPaths({ policy: 'gpu' }, () => kernelsOf(() => x.softmax(-1)))).toEqual({ 'softmax-long': 1 });
      expect(await withPaths({ policy: 'gpu', chunkLen: 128 }, () => kernelsOf(() => x.softmax(-1)))).toEqual({ 'softmax-long': 2 });
      expect(await withPaths({ policy: 'software' }, () => kernelsOf(() => many.softmax(-1)))).toEqual({ 'softmax-rows': 1 });
      expect(await withPaths({ policy: 'gpu' }, () => kernelsOf(() => many.softmax(-1)))).toEqual({ 'softmax-long': 1 });
      for (const policy of ['gpu', 'software'] as const) {
        for (const e of [empty, emptyRows]) {
          expect(await withPaths({ policy, chunkLen: 100 }, () => kernelsOf(() => e.softmax(-1)))).toEqual({});
          const r = await withPaths({ policy }, async () => {
            const out = e.logSoftmax(-1);
            const v = await out.toArray();
            out.dispose();
            return v;
          });
          expect(r.length).toBe(0);
        }
      }
    } finally {
      for (const t of [x, many, empty, emptyRows]) t.dispose();
    }
  });
});
