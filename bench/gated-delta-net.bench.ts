// Gated DeltaNet prefill (Qwen3.5 / Qwen3.6's linear-attention token mixing, gatedDeltaNet) on one adapter, the
// two WebGPU forms forced through gatedDeltaNetTuning.chunkedFrom:
// - recurrent: one dispatch, one workgroup per value head walking the S tokens in order (the decode kernel);
// - chunked: the WY / UT form over 64-token chunks in four dispatches (prep, intra-chunk solve, the scan across
//   chunks, the gated norm), only the scan sequential and over S/64 steps.
// Each row times one prefill of S tokens from the states the previous run left (a layer's whole op after its
// projections). The notes give ms per token, the per-token ratio against the previous size (linear cost: flat),
// and the ratio recurrent / chunked; dispatches per prefill are machine-independent, times on a software adapter
// are not (only ratios mean anything there). Throughput counts the recurrent form's 6 S Hv dk dv flops for both.
import { Generator, gatedDeltaNet, newGatedDeltaNetState, randn, synchronize, type Tensor } from '../src/index.js';
import { gatedDeltaNetTuning } from '../src/kernels/gated-delta-net/webgpu.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

interface Geometry {
  keyHeads: number;
  valueHeads: number;
  keyDim: number;
  valueDim: number;
  convKernel: number;
}

/** Qwen3.6's linear-attention layers (Qwen3.6-35B-A3B: 16 key heads, 32 value heads, 128 x 128, 4 taps). */
const QWEN36: Geometry = { keyHeads: 16, valueHeads: 32, keyDim: 128, valueDim: 128, convKernel: 4 };
/** --quick: the same head dims and grouping with an eighth of the heads. */
const QUICK: Geometry = { keyHeads: 2, valueHeads: 4, keyDim: 128, valueDim: 128, convKernel: 4 };

const RECURRENT = 'gated delta net prefill recurrent';
const CHUNKED = 'gated delta net prefill chunked';

export function gatedDeltaNetCases(quick: boolean): BenchCase[] {
  const g = quick ? QUICK : QWEN36;
  const sizes = [64, 256, 1024];
  const geometry = `Hk${g.keyHeads} Hv${g.valueHeads} dk${g.keyDim} dv${g.valueDim} K${g.convKernel}`;
  // ms per token of each form at each size, filled in as the cases run (in size order).
  const perToken = new Map<string, number>();
  return sizes.map((s, i): BenchCase => {
    const shape = `${geometry} S=${s}`;
    return { benchmark: 'gated delta net prefill', shape, run: (ctx) => measure(ctx, g, s, shape, i > 0 ? sizes[i - 1] : undefined, perToken) };
  });
}

async function measure(
  ctx: BenchContext,
  g: Geometry,
  s: number,
  shape: string,
  previous: number | undefined,
  perToken: Map<string, number>,
): Promise<RowInput[]> {
  if (!ctx.gpu) return [RECURRENT, CHUNKED].map((benchmark) => ({ benchmark, shape, backend: 'cpu', note: 'WebGPU only' }));
  const convDim = 2 * g.keyHeads * g.keyDim + g.valueHeads * g.valueDim;
  const vd = g.valueHeads * g.valueDim;
  const gen = new Generator(7);
  const owned: Tensor[] = [];
  const make = (shape: number[], scale = 1, shift = 0) => {
    const r = randn(shape, { device: 'webgpu', generator: gen });
    const m = r.mul(scale);
    const t = m.add(shift);
    r.dispose();
    m.dispose();
    owned.push(t);
    return t;
  };
  const inputs = { qkv: make([s, convDim]), z: make([s, vd]), b: make([s, g.valueHeads]), a: make([s, g.valueHeads]) };
  const weights = {
    conv: make([convDim, 1, g.convKernel], 0.5),
    aLog: make([g.valueHeads], 0.5, 1),
    dtBias: make([g.valueHeads], 0.5),
    norm: make([g.valueDim], 0.1, 1),
  };
  const state = newGatedDeltaNetState(g, 'webgpu');
  owned.push(state.conv, state.recurrent);
  const saved = gatedDeltaNetTuning.chunkedFrom;
  const flops = 6 * s * g.valueHeads * g.keyDim * g.valueDim;
  try {
    const rows: RowInput[] = [];
    const ms: Record<string, number> = {};
    for (const [benchmark, from] of [
      [RECURRENT, Number.POSITIVE_INFINITY],
      [CHUNKED, 1],
    ] as const) {
      gatedDeltaNetTuning.chunkedFrom = from;
      ctx.log(`  webgpu ${benchmark} ${shape}`);
      const timing = await timeIt(async () => {
        gatedDeltaNet(inputs, weights, state, { ...g, eps: 1e-6 }).dispose();
        await synchronize();
      }, ctx.time);
      ms[benchmark] = timing.medianMs;
      const tokenMs = timing.medianMs / s;
      const before = previous === undefined ? undefined : perToken.get(`${benchmark} ${previous}`);
      perToken.set(`${benchmark} ${s}`, tokenMs);
      rows.push({
        benchmark,
        shape,
        backend: 'webgpu',
        timing,
        flops,
        baselineBenchmark: benchmark === CHUNKED ? RECURRENT : undefined,
        note:
          `${tokenMs.toPrecision(3)} ms/token` +
          (before === undefined ? '' : `, per-token time ${(tokenMs / before).toFixed(2)}x that at S=${previous}`) +
          `, ${timing.dispatchesPerRun} dispatches/prefill` +
          (benchmark === CHUNKED ? `; recurrent / chunked ${(ms[RECURRENT] / ms[CHUNKED]).toFixed(2)}x` : ''),
      });
    }
    return rows;
  } finally {
    gatedDeltaNetTuning.chunkedFrom = saved;
    for (const t of owned) t.dispose();
  }
}
