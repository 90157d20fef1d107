// expertLinear on WebGPU at prefill sizes (T*k >= 32), where it runs as a sorted, grouped expert GEMM (a plan
// dispatch, a tiled GEMM, and a combine dispatch) instead of the per-slot GEMV. Every case is judged against the
// CPU backend (the oracle) and checks, by counting dispatches, that the grouped path is the one that ran.
//
// Tolerance. The GEMM accumulates each output in float32 along K in order (the CPU in float64), so its error is
// at most ~K f32 ulps of sum |x * w * scale| (`mag`, computed here in float64), a few more for the combine sum;
// the result may then round to the neighbouring output code (one output ulp).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expertLinear, Generator, gpuCounters, memoryStats, setDefaultDevice, synchronize, tensor, type DType, type Tensor } from '../../src/index.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadQwen3 } from '../../src/models/qwen3/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type FloatDType = 'float32' | 'float16' | 'bfloat16';
const OUT_ULP: Record<FloatDType, number> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };

async function values(t: Tensor): Promise<Float64Array> {
  return Float64Array.from(await t.contiguous().toArray());
}

/**
 * Skewed routing: about half the slots go to one hot expert, every third expert gets none, the rest are spread
 * at random (a slot may repeat an expert of its token, which the op allows).
 */
function skewedIds(t: number, slots: number, e: number, seed: number): number[] {
  const g = new Generator(seed);
  const hot = e >> 1;
  const cold = (id: number) => id % 3 === 1 && id !== hot;
  const ids: number[] = [];
  for (let i = 0; i < t * slots; i++) {
    let id = g.nextU32() % 2 === 0 ? hot : g.nextU32() % e;
    while (cold(id)) id = (id + 1) % e;
    ids.push(id);
  }
  return ids;
}

interface Case {
  e: number;
  n: number;
  k: number;
  t: number;
  slots: number;
  wDtype: DType;
  xDtype: FloatDType;
  perSlot: boolean;
  combine: boolean;
}

interface Inputs {
  x: Tensor;
  weight: Tensor;
  ids: Tensor;
  scale?: Tensor;
  combine?: Tensor;
}

function makeInputs(c: Case, seed: number): Inputs {
  const fp8 = c.wDtype.startsWith('float8');
  return {
    x: randomTensor([c.perSlot ? c.t * c.slots : c.t, c.k], c.xDtype),
    weight: randomTensor([c.e, c.n, c.k], c.wDtype, 'normal', fp8 ? 40 : 0.5),
    ids: tensor(skewedIds(c.t, c.slots, c.e, seed), { shape: [c.t, c.slots], dtype: 'int32' }),
    // Distinct positive scales per expert and block, so a wrong block or expert index shows.
    scale: fp8 ? randomTensor([c.e, Math.ceil(c.n / 128), Math.ceil(c.k / 128)], 'float32', 'positive', 0.01) : undefined,
    combine: c.combine ? randomTensor([c.t, c.slots], 'float32', 'positive', 0.5) : undefined,
  };
}

/** sum |terms| of each output in float64 (the scale of its accumulation error). */
async function magnitudes(c: Case, p: Inputs): Promise<Float64Array> {
  const [xv, wv, idv] = await Promise.all([values(p.x), values(p.weight), values(p.ids)]);
  const sv = p.scale && (await values(p.scale));
  const cv = p.combine && (await values(p.combine));
  const { n, k, t, slots } = c;
  const mag = new Float64Array((cv ? t : t * slots) * n);
  const [nb, kb] = [Math.ceil(n / 128), Math.ceil(k / 128)];
  const absX = xv.map(Math.abs);
  for (let s = 0; s < t * slots; s++) {
    const e = idv[s];
    const xr = (c.perSlot ? s : Math.floor(s / slots)) * k;
    const o = (cv ? Math.floor(s / slots) : s) * n;
    const cw = cv ? Math.abs(cv[s]) : 1;
    for (let j = 0; j < n; j++) {
      let abs = 0;
      const wr = (e * n + j) * k;
      for (let q = 0; q < k; q++) {
        abs += absX[xr + q] * Math.abs(wv[wr + q]) * (sv ? sv[(e * nb + Math.floor(j / 128)) * kb + Math.floor(q / 128)] : 1);
      }
      mag[o + j] += cw * abs;
    }
  }
  return mag;
}

function expectWithin(got: ArrayLike<number>, want: ArrayLike<number>, mag: Float64Array, ulp: number, acc: number, label: string): void {
  let bad = 0;
  let first = '';
  for (let i = 0; i < want.length; i++) {
    const tol = ulp * Math.abs(want[i]) + acc * mag[i] + 1e-30;
    const diff = Math.abs(got[i] - want[i]);
    if (!(diff <= tol) && bad++ === 0) first = `[${i}] got ${got[i]} want ${want[i]} (|diff| ${diff.toExponential(3)} > ${tol.toExponential(3)})`;
  }
  expect(bad, `${label}: ${bad} of ${want.length} elements off, first ${first}`).toBe(0);
}

/** Dispatches of the grouped path: plan + GEMM, + combine, + an f32 -> 16-bit cast for packed odd-N gathers. */
function groupedDispatches(c: Case): number {
  if (c.combine) return 3;
  return c.xDtype !== 'float32' && c.n % 2 === 1 ? 3 : 2;
}

const label = (c: Case) =>
  `${c.wDtype} w, ${c.xDtype} x, E ${c.e}, T ${c.t} k ${c.slots}, N ${c.n} K ${c.k}${c.perSlot ? ', x per slot' : ''}${c.combine ? ', combine' : ''}`;

/**
 * Runs a case on the CPU and on WebGPU (views applied on both) and compares; returns the GPU dispatch count.
 * `view` maps the stored x, weight, ids to the operands (strided views).
 */
async function check(
  c: Case,
  p: Inputs,
  name: string,
  view: (x: Tensor, w: Tensor, i: Tensor) => [Tensor, Tensor, Tensor] = (x, w, i) => [x, w, i],
): Promise<number> {
  const call = (q: Inputs) => {
    const [x, w, i] = view(q.x, q.weight, q.ids);
    return expertLinear(x, w, i, { scale: q.scale, combine: q.combine });
  };
  const rc = call(p);
  const cpu = await rc.toArray();
  rc.dispose();
  const mag = await magnitudes(c, p);
  const entries = Object.entries(p).filter(([, v]) => v !== undefined) as [keyof Inputs, Tensor][];
  const g = Object.fromEntries(await Promise.all(entries.map(async ([key, v]) => [key, await v.to('webgpu')] as const))) as unknown as Inputs;
  try {
    await synchronize();
    const live = memoryStats().liveBytes;
    const before = gpuCounters();
    const rg = call(g);
    const after = gpuCounters();
    expect(rg.shape, name).toEqual([c.combine ? c.t : c.t * c.slots, c.n]);
    expect(rg.dtype, name).toBe(c.xDtype);
    const got = await rg.toArray();
    rg.dispose();
    // The plan and the slot results were released: only the inputs stay live.
    expect(memoryStats().liveBytes, `${name}: live bytes`).toBe(live);
    expect(after.reads - before.reads, `${name}: reads`).toBe(0);
    expectWithin(got, cpu, mag, OUT_ULP[c.xDtype], 2 ** -23 * (c.k + c.slots + 8) * 2, name);
    return after.dispatches - before.dispatches;
  } finally {
    Object.values(g).forEach((v: Tensor | undefined) => v?.dispose());
  }
}

async function runCase(c: Case, seed: number): Promise<void> {
  const p = makeInputs(c, seed);
  try {
    const dispatches = await check(c, p, label(c));
    expect(dispatches, `${label(c)}: dispatches`).toBe(groupedDispatches(c));
  } finally {
    Object.values(p).forEach((v: Tensor | undefined) => v?.dispose());
  }
}

// Each weight dtype across the three shapes (unaligned, odd, aligned), both x layouts, gather and combine, E = 8
// and 60, T = 20, 33, 130 with k = 2 and 8.
const CASES: Case[] = [
  { e: 8, n: 72, k: 100, t: 20, slots: 2, wDtype: 'float32', xDtype: 'float32', perSlot: false, combine: false },
  { e: 60, n: 130, k: 257, t: 33, slots: 8, wDtype: 'float32', xDtype: 'float32', perSlot: true, combine: true },
  { e: 60, n: 256, k: 512, t: 20, slots: 8, wDtype: 'float32', xDtype: 'float32', perSlot: false, combine: true },
  { e: 60, n: 130, k: 257, t: 20, slots: 2, wDtype: 'bfloat16', xDtype: 'bfloat16', perSlot: false, combine: false },
  { e: 8, n: 72, k: 100, t: 33, slots: 2, wDtype: 'bfloat16', xDtype: 'bfloat16', perSlot: true, combine: true },
  { e: 8, n: 256, k: 512, t: 130, slots: 8, wDtype: 'bfloat16', xDtype: 'bfloat16', perSlot: false, combine: true },
  { e: 60, n: 256, k: 512, t: 130, slots: 2, wDtype: 'float8_e4m3fn', xDtype: 'bfloat16', perSlot: true, combine: false },
  { e: 8, n: 130, k: 257, t: 20, slots: 8, wDtype: 'float8_e4m3fn', xDtype: 'float32', perSlot: false, combine: true },
  { e: 60, n: 131, k: 257, t: 33, slots: 2, wDtype: 'float8_e4m3fn', xDtype: 'bfloat16', perSlot: false, combine: true },
  { e: 8, n: 131, k: 100, t: 33, slots: 2, wDtype: 'float8_e4m3fn', xDtype: 'bfloat16', perSlot: true, combine: false },
  { e: 8, n: 72, k: 100, t: 20, slots: 8, wDtype: 'float16', xDtype: 'float16', perSlot: false, combine: false },
];

describe.skipIf(!gpu.available)(`expertLinear grouped GEMM (T*k >= 32) ${gpu.skipReason}`, () => {
  for (const [i, c] of CASES.entries()) {
    it(label(c), async () => runCase(c, 1000 + i));
  }

  it('the GEMV path below 32 slots, the grouped GEMM from 32', async () => {
    const base = { e: 8, n: 40, k: 64, slots: 2, wDtype: 'bfloat16', xDtype: 'bfloat16', perSlot: false, combine: false } as const;
    for (const [t, want] of [
      [15, 1],
      [16, 2],
    ] as const) {
      const c = { ...base, t };
      const p = makeInputs(c, 7);
      expect(await check(c, p, `T ${t}`), `T ${t}`).toBe(want);
      Object.values(p).forEach((v: Tensor | undefined) => v?.dispose());
    }
  });

  it('E = 512 (one expert per few slots) sorts on the GPU; past 1024 experts the GEMV path runs', async () => {
    for (const [e, want] of [
      [512, 2],
      [1100, 1],
    ] as const) {
      const c: Case = { e, n: 12, k: 20, t: 16, slots: 8, wDtype: 'float32', xDtype: 'float32', perSlot: false, combine: false };
      const p = makeInputs(c, 11);
      expect(await check(c, p, `E ${e}`), `E ${e} dispatches`).toBe(want);
      Object.values(p).forEach((v: Tensor | undefined) => v?.dispose());
    }
  });

  it('strided operands: a transposed weight, transposed ids, every other x row', async () => {
    const [e, n, k, t, slots] = [7, 40, 72, 12, 4];
    const wStored = randomTensor([e, k, n], 'float16', 'normal', 0.5);
    const xStored = randomTensor([2 * t, k], 'bfloat16');
    const idsStored = tensor(skewedIds(slots, t, e, 5), { shape: [slots, t], dtype: 'int32' });
    const view = (x: Tensor, w: Tensor, i: Tensor): [Tensor, Tensor, Tensor] => [x.slice(0, 0, undefined, 2), w.transpose(1, 2), i.transpose(0, 1)];
    for (const withCombine of [false, true]) {
      const c: Case = { e, n, k, t, slots, wDtype: 'float16', xDtype: 'bfloat16', perSlot: false, combine: withCombine };
      const combine = withCombine ? randomTensor([t, slots], 'float32', 'positive') : undefined;
      // magnitudes() reads contiguous copies of the views.
      const p: Inputs = { x: xStored, weight: wStored, ids: idsStored, combine };
      const contiguous: Inputs = {
        x: xStored.slice(0, 0, undefined, 2).contiguous(),
        weight: wStored.transpose(1, 2).contiguous(),
        ids: idsStored.transpose(0, 1).contiguous(),
        combine,
      };
      const rc = expertLinear(contiguous.x, contiguous.weight, contiguous.ids, { combine });
      const want = await rc.toArray();
      const viaViews = await check(c, p, `views combine ${withCombine}`, view);
      expect(viaViews).toBe(withCombine ? 3 : 2);
      // The views' CPU result equals the contiguous one (check compared the GPU with it).
      const rv = expertLinear(...view(xStored, wStored, idsStored), { combine });
      expect(Array.from(await rv.toArray())).toEqual(Array.from(want));
      [rc, rv, contiguous.x, contiguous.weight, contiguous.ids, combine].forEach((u) => u?.dispose());
    }
    [wStored, xStored, idsStored].forEach((u) => u.dispose());
  });

  it('out-of-range expert ids give zero rows (gather) and are skipped (combine), as on the GEMV path', async () => {
    const c: Case = { e: 6, n: 24, k: 48, t: 24, slots: 2, wDtype: 'float32', xDtype: 'float32', perSlot: false, combine: true };
    const p = makeInputs(c, 3);
    const idv = Array.from(await p.ids.toArray());
    const bad = [1, 6, 17, 40];
    const badIds = tensor(
      idv.map((id, s) => (bad.includes(s) ? (s % 2 ? -1 : 6) : id)),
      { shape: [c.t, c.slots], dtype: 'int32' },
    );
    const [x, w, gi, okIds, comb] = await Promise.all([p.x, p.weight, badIds, p.ids, p.combine!].map((u) => u.to('webgpu')));
    const outputs = [expertLinear(x, w, gi), expertLinear(x, w, okIds), expertLinear(x, w, gi, { combine: comb })];
    const [gathered, good, combined] = await Promise.all(outputs.map(values));
    outputs.forEach((u) => u.dispose());
    const cv = await values(p.combine!);
    for (let s = 0; s < c.t * c.slots; s++) {
      for (let j = 0; j < c.n; j++) expect(gathered[s * c.n + j], `slot ${s}`).toBe(bad.includes(s) ? 0 : good[s * c.n + j]);
    }
    for (let tok = 0; tok < c.t; tok++) {
      for (let j = 0; j < c.n; j++) {
        let want = 0;
        for (let q = 0; q < c.slots; q++) if (!bad.includes(tok * c.slots + q)) want += cv[tok * c.slots + q] * good[(tok * c.slots + q) * c.n + j];
        expect(combined[tok * c.n + j]).toBeCloseTo(want, 4);
      }
    }
    [x, w, gi, okIds, comb, badIds].forEach((u) => u.dispose());
    Object.values(p).forEach((v: Tensor | undefined) => v?.dispose());
  });
});

// A Qwen3-MoE prefill long enough for the grouped path (20 tokens x top-2 = 40 slots per expertLinear), bf16 and
// FP8 (128x128 block scales) checkpoints: every position's logits on WebGPU match the CPU's.
describe.skipIf(!gpu.available)(`Qwen3-MoE prefill through the grouped expert GEMM ${gpu.skipReason}`, () => {
  const base = { vocabSize: 256, rmsNormEps: 1e-6, ropeTheta: 1_000_000, maxPositionEmbeddings: 128, attentionBias: false, bosTokenId: 0, eosTokenIds: [1] };
  const config: Qwen3Config = {
    ...base,
    modelType: 'qwen3_moe',
    hiddenSize: 128,
    intermediateSize: 256,
    numHiddenLayers: 2,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    tieWordEmbeddings: false,
    moe: { numExperts: 6, numExpertsPerTok: 2, moeIntermediateSize: 128, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
  };
  const prompt = Array.from({ length: 20 }, (_, i) => (i * 37 + 5) % 256);

  it.each(['bfloat16', 'fp8'] as const)('%s checkpoint', async (dtype) => {
    const dir = mkdtempSync(join(tmpdir(), `tensorgpu-moe-grouped-${dtype}-`));
    await writeRandomQwen3Checkpoint(dir, config, { dtype, seed: 5 });
    const logits: Float32Array[] = [];
    for (const device of ['cpu', 'webgpu'] as const) {
      const m = await loadQwen3(dir, { device, maxSequence: 32 });
      const cache = m.model.newCache();
      const input = tensor(prompt, { dtype: 'int32', device });
      const out = await m.model.forward(input, cache, false);
      logits.push((await out.toArray()) as Float32Array);
      [input, out].forEach((u) => u.dispose());
      cache.dispose();
      m.model.dispose();
    }
    const [want, got] = logits;
    expect(got.length).toBe(prompt.length * base.vocabSize);
    const scale = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / scale);
    expect(worst).toBeLessThan(2e-3);
  });
});
