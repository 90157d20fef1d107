// f32 matmul, WebGPU against the CPU reference backend: square GEMMs and the decode-time GEMV (one token's
// activation row through a weight matrix), with the weight in both layouts; and the tiled GEMM with its subgroup
// variant (A shared by subgroupShuffle) against the workgroup-memory tile on the same adapter.
import { linear, matmul, randn, synchronize, Generator, type Tensor } from '../src/index.js';
import { quantizeInt4 } from '../src/ops/int4.js';
import { webgpuBackend } from '../src/runtime/registry.js';
import { gemmShareWidth, gemmTuning } from '../src/kernels/matmul/gemm.js';
import { gemvKnTuning } from '../src/kernels/matmul/gemv-kn.js';
import { gemvTuning } from '../src/kernels/matmul/gemv.js';
import { primeGpu, timeIt, type BenchCase, type BenchContext, type RowInput, type TimeOptions } from './harness.js';

/** A CPU run predicted to take longer than this is skipped (the CPU backend is a plain-JS oracle, not a BLAS). */
const CPU_RUN_LIMIT_MS = 3000;

interface CpuRate {
  /** The CPU GEMM rate (GFLOP/s) measured at the previous size: predicts whether the next one finishes in time. */
  gflops: number | undefined;
}

interface MatmulSpec {
  benchmark: string;
  m: number;
  k: number;
  n: number;
  /**
   * 'kn': the right operand is a contiguous [K, N] tensor. 'nk': it is stored [N, K] and used transposed
   * (`x @ w.T`), the layout of nn.Linear weights and checkpoints, which the decode GEMV kernel reads.
   */
  weight: 'kn' | 'nk';
  time: TimeOptions;
  cpu: CpuRate;
}

export function matmulCases(quick: boolean): BenchCase[] {
  const squareRate: CpuRate = { gflops: undefined };
  const square = (n: number): BenchCase =>
    // On a software adapter a 1024 GEMM takes seconds: a warm-up run there buys nothing that primeGpu (the
    // pipeline compile) has not bought already, so big sizes go straight to timed runs.
    matmulCase({ benchmark: 'matmul f32', m: n, k: n, n, weight: 'kn', time: n >= 1024 ? { warmup: 0 } : {}, cpu: squareRate });
  const gemv = (k: number, n: number, weight: 'kn' | 'nk'): BenchCase =>
    matmulCase({
      benchmark: weight === 'nk' ? 'gemv f32 x@W.T' : 'gemv f32 x@W',
      m: 1,
      k,
      n,
      weight,
      time: k * n >= 1 << 24 ? { warmup: 0 } : {},
      cpu: { gflops: undefined },
    });
  return quick
    ? [
        square(128),
        square(256),
        gemv(1024, 1024, 'nk'),
        gemv(1024, 1024, 'kn'),
        subgroupCase(256, 256, 256, 'kn'),
        gemvKnCase(1, 1024, 1024),
        gemvNkCase(1, 1024, 1024, 'bfloat16'),
      ]
    : [
        square(256),
        square(512),
        square(1024),
        gemv(4096, 4096, 'nk'),
        gemv(4096, 4096, 'kn'),
        subgroupCase(256, 256, 256, 'kn'),
        subgroupCase(64, 2048, 768, 'nk'),
        gemvKnCase(1, 4096, 4096),
        gemvKnCase(4, 4096, 1024),
        gemvKnCase(1, 4096, 256),
        gemvNkCase(1, 4096, 4096, 'float32'),
        gemvNkCase(1, 4096, 4096, 'bfloat16'),
        gemvNkCase(4, 4096, 1024, 'bfloat16'),
        gemvNkCase(1, 4096, 4096, 'int4'),
      ];
}

const TILE_GEMM = 'gemm f32 workgroup tile';
const SUBGROUP_GEMM = 'gemm f32 subgroup shuffle';

/** The tiled GEMM with subgroups off (the baseline) and on, one case so both rows share inputs and run. */
function subgroupCase(m: number, k: number, n: number, weight: 'kn' | 'nk'): BenchCase {
  const shape = `[${m},${k}]x[${k},${n}]${weight === 'nk' ? ' W.T' : ''}`;
  return { benchmark: 'gemm subgroups vs tile', shape, run: (ctx) => measureSubgroups(ctx, m, k, n, weight, shape) };
}

async function measureSubgroups(ctx: BenchContext, m: number, k: number, n: number, weight: 'kn' | 'nk', shape: string): Promise<RowInput[]> {
  const flops = 2 * m * n * k;
  const be = webgpuBackend();
  if (!ctx.gpu || !be) return [{ benchmark: SUBGROUP_GEMM, shape, backend: 'cpu', note: 'WebGPU only' }];
  const initial = be.subgroupsEnabled;
  const minShare = gemmTuning.minShareWidth;
  gemmTuning.minShareWidth = 4; // time the narrow (staged) sharing too, which production leaves off
  const owned: Tensor[] = [];
  const own = (t: Tensor): Tensor => (owned.push(t), t);
  try {
    const g = new Generator(4321);
    const a = own(randn([m, k], { device: 'webgpu', generator: g }));
    const w = own(randn(weight === 'nk' ? [n, k] : [k, n], { device: 'webgpu', generator: g }));
    const b = weight === 'nk' ? own(w.T) : w;
    const rows: RowInput[] = [];
    for (const sg of [false, true]) {
      const benchmark = sg ? SUBGROUP_GEMM : TILE_GEMM;
      be.subgroupsEnabled = sg && initial;
      if (sg && gemmShareWidth(be) === 0) {
        rows.push({ benchmark, shape, backend: 'webgpu', note: 'no subgroups (or subgroups under 4 lanes) on this adapter' });
        continue;
      }
      // Compiles this variant's pipeline before timing.
      matmul(a, b).dispose();
      await synchronize();
      ctx.log(`  webgpu ${benchmark} ${shape}`);
      const timing = await timeIt(async () => {
        matmul(a, b).dispose();
        await synchronize();
      }, ctx.time);
      rows.push({
        benchmark,
        shape,
        backend: 'webgpu',
        timing,
        flops,
        baselineBenchmark: sg ? TILE_GEMM : undefined,
        note: sg
          ? `A shared in groups of ${gemmShareWidth(be)} lanes, ${gemmShareWidth(be) >= gemmTuning.directALoadWidth ? 'loaded straight into registers' : 'staged in workgroup memory'}`
          : undefined,
      });
    }
    return rows;
  } finally {
    be.subgroupsEnabled = initial;
    gemmTuning.minShareWidth = minShare;
    for (const t of owned.reverse()) t.dispose();
  }
}

const KN_GEMM = 'gemv x@W via the tiled GEMM';
const KN_GEMV = 'gemv x@W [K,N] GEMV';

/** A [K, N] weight: the tiled GEMM (the path before the [K, N] GEMV, gemvKnTuning.enabled off) and the GEMV, one run. */
function gemvKnCase(m: number, k: number, n: number): BenchCase {
  const shape = `[${m},${k}]x[${k},${n}]`;
  return { benchmark: 'gemv x@W GEMV vs GEMM', shape, run: (ctx) => measureGemvKn(ctx, m, k, n, shape) };
}

async function measureGemvKn(ctx: BenchContext, m: number, k: number, n: number, shape: string): Promise<RowInput[]> {
  if (!ctx.gpu) return [{ benchmark: KN_GEMV, shape, backend: 'cpu', note: 'WebGPU only' }];
  const owned: Tensor[] = [];
  const own = (t: Tensor): Tensor => (owned.push(t), t);
  try {
    const g = new Generator(777);
    const a = own(randn([m, k], { device: 'webgpu', generator: g }));
    const w = own(randn([k, n], { device: 'webgpu', generator: g }));
    const rows: RowInput[] = [];
    for (const kn of [false, true]) {
      const benchmark = kn ? KN_GEMV : KN_GEMM;
      gemvKnTuning.enabled = kn;
      // Compiles this path's pipeline before timing; big problems take seconds a run on a software adapter.
      matmul(a, w).dispose();
      await synchronize();
      ctx.log(`  webgpu ${benchmark} ${shape}`);
      const timing = await timeIt(
        async () => {
          matmul(a, w).dispose();
          await synchronize();
        },
        { ...ctx.time, ...(k * n >= 1 << 24 ? { warmup: 0 } : {}) },
      );
      rows.push({ benchmark, shape, backend: 'webgpu', timing, flops: 2 * m * n * k, baselineBenchmark: kn ? KN_GEMM : undefined });
    }
    return rows;
  } finally {
    gemvKnTuning.enabled = true;
    for (const t of owned.reverse()) t.dispose();
  }
}

function matmulCase(spec: MatmulSpec): BenchCase {
  const shape = `[${spec.m},${spec.k}]x[${spec.k},${spec.n}]`;
  return { benchmark: spec.benchmark, shape, run: (ctx) => measure(ctx, spec, shape) };
}

async function measure(ctx: BenchContext, spec: MatmulSpec, shape: string): Promise<RowInput[]> {
  const { m, k, n } = spec;
  const flops = 2 * m * n * k;
  const base = { benchmark: spec.benchmark, shape, flops };
  const rows: RowInput[] = [];
  const owned: Tensor[] = [];
  const own = (t: Tensor): Tensor => (owned.push(t), t);
  const rhs = (w: Tensor): Tensor => (spec.weight === 'nk' ? own(w.T) : w);
  try {
    // The same seeded values on both backends: generated once on the CPU and copied to the GPU.
    const g = new Generator(1234);
    const a = own(randn([m, k], { device: 'cpu', generator: g }));
    const w = own(randn(spec.weight === 'nk' ? [n, k] : [k, n], { device: 'cpu', generator: g }));

    if (ctx.gpu) {
      const ga = own(await a.to('webgpu'));
      const gb = rhs(own(await w.to('webgpu')));
      // Tiny problems of the same kind (GEMM, or GEMV on a transposed weight) compile the pipeline used below.
      await primeGpu(
        `${spec.benchmark} ${m === 1 ? 'm1' : 'mn'}`,
        [
          [m === 1 ? 1 : 64, 64],
          [64, 64],
        ],
        ([x, y]) => {
          const yt = spec.weight === 'nk' ? y.T : y;
          try {
            return matmul(x, yt);
          } finally {
            if (yt !== y) yt.dispose();
          }
        },
      );
      ctx.log(`  webgpu ${spec.benchmark} ${shape}`);
      const timing = await timeIt(
        async () => {
          const c = matmul(ga, gb);
          await synchronize();
          c.dispose();
        },
        { ...ctx.time, ...spec.time },
      );
      rows.push({ ...base, backend: 'webgpu', timing });
    }

    const rate = spec.cpu.gflops;
    const predictedMs = rate ? flops / rate / 1e6 : undefined;
    if (predictedMs !== undefined && predictedMs > CPU_RUN_LIMIT_MS) {
      ctx.log(`  cpu ${spec.benchmark} ${shape}: skipped, ~${(predictedMs / 1000).toFixed(1)} s per run predicted at ${rate!.toFixed(2)} GFLOP/s`);
      rows.push({ ...base, backend: 'cpu', note: 'skipped (too slow)' });
    } else {
      ctx.log(`  cpu ${spec.benchmark} ${shape}`);
      const cb = rhs(w);
      const timing = await timeIt(() => matmul(a, cb).dispose(), { ...ctx.time, ...spec.time });
      spec.cpu.gflops = flops / timing.medianMs / 1e6;
      rows.push({ ...base, backend: 'cpu', timing });
    }
    return rows;
  } finally {
    for (const t of owned.reverse()) t.dispose();
  }
}

const NK_SCALAR = 'gemv x@W.T scalar activation loads';
const NK_VEC4 = 'gemv x@W.T vec4 activation chunks';

/**
 * The [N, K] decode GEMV (a float32 activation, the decode steps' case) with the activation read one scalar per
 * weight and row (gemvTuning.vectorActivations off, the kernel before) and as 16-byte chunks dotted with 4 decoded
 * weights (on), one run, same inputs.
 */
function gemvNkCase(m: number, k: number, n: number, weight: 'float32' | 'bfloat16' | 'int4'): BenchCase {
  const shape = `[${m},${k}]x[${n},${k}].T ${weight}`;
  return { benchmark: 'gemv x@W.T activation loads', shape, run: (ctx) => measureGemvNk(ctx, m, k, n, weight, shape) };
}

async function measureGemvNk(ctx: BenchContext, m: number, k: number, n: number, weight: 'float32' | 'bfloat16' | 'int4', shape: string): Promise<RowInput[]> {
  if (!ctx.gpu) return [{ benchmark: NK_VEC4, shape, backend: 'cpu', note: 'WebGPU only' }];
  const owned: Tensor[] = [];
  const own = (t: Tensor): Tensor => (owned.push(t), t);
  try {
    const g = new Generator(778);
    const a = own(randn([m, k], { device: 'webgpu', generator: g }));
    const w32 = own(randn([n, k], { device: 'webgpu', generator: g }));
    let run: () => Tensor;
    if (weight === 'int4') {
      const q = quantizeInt4(w32, 128);
      const [data, scale, zero] = [own(q.data), own(q.scale), own(q.zero)];
      run = () => linear(a, data, undefined, { weightScale: scale, int4: { zero, groupSize: q.groupSize } });
    } else {
      const w = weight === 'float32' ? w32 : own(w32.to(weight));
      run = () => linear(a, w);
    }
    const rows: RowInput[] = [];
    for (const vec of [false, true]) {
      const benchmark = vec ? NK_VEC4 : NK_SCALAR;
      gemvTuning.vectorActivations = vec;
      run().dispose();
      await synchronize();
      ctx.log(`  webgpu ${benchmark} ${shape}`);
      const timing = await timeIt(async () => {
        run().dispose();
        await synchronize();
      }, ctx.time);
      rows.push({ benchmark, shape, backend: 'webgpu', timing, flops: 2 * m * n * k, baselineBenchmark: vec ? NK_SCALAR : undefined });
    }
    return rows;
  } finally {
    gemvTuning.vectorActivations = true;
    for (const t of owned.reverse()) t.dispose();
  }
}
