// MoE ops on the CPU backend and on WebGPU: moeRoute (router softmax + top-k) and expertLinear (expert-indexed
// linear layer, gather and combine modes). Each is judged against a float64 definition written here from the
// values as stored, the GPU also against the CPU backend, and expertLinear once more against a per-expert loop of
// existing ops (linear on weight.select(0, e)), so the definition is pinned independently of the CPU reference.
//
// Tolerances. The CPU accumulates in float64 and rounds once to the output dtype, so it lies within half an output
// ulp of the definition. The GPU accumulates in float32 (64 partial sums per column, each over K/64 terms, then a
// reduction): its error is bounded by ~(K/64 + 8) f32 ulps of sum|x * w * scale * combine| (`mag`), and its result
// may then round to the neighbouring output code (one output ulp).
import { describe, expect, it } from 'vitest';
import { webgpuBackend } from '../../src/runtime/registry.js';
import { expertLinear, gpuCounters, linear, moeRoute, setDefaultDevice, ShapeError, synchronize, tensor, type DType, type Tensor } from '../../src/index.js';
import { Generator } from '../../src/index.js';
import { randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type FloatDType = 'float32' | 'float16' | 'bfloat16';

/** Relative size of one unit in the last place (worst case, at the bottom of a binade) of each output dtype. */
const OUT_ULP: Record<FloatDType, number> = { float32: 2 ** -23, float16: 2 ** -10, bfloat16: 2 ** -7 };

async function values(t: Tensor): Promise<Float64Array> {
  return Float64Array.from(await t.contiguous().toArray());
}

async function bothDevices(xs: readonly Tensor[]): Promise<Tensor[]> {
  return Promise.all(xs.map((x) => x.to('webgpu')));
}

/**
 * A weight (and its scales) shared by several problems: its values and WebGPU copy are made once, since building,
 * reading and uploading the stacked experts costs more here than running the kernels.
 */
class SharedWeight {
  private vals = new Map<Tensor, Promise<Float64Array>>();
  private copies = new Map<Tensor, Promise<Tensor>>();
  constructor(readonly tensors: readonly Tensor[]) {}
  has(t: Tensor): boolean {
    return this.tensors.includes(t);
  }
  values(t: Tensor): Promise<Float64Array> {
    if (!this.vals.has(t)) this.vals.set(t, values(t));
    return this.vals.get(t)!;
  }
  onGpu(t: Tensor): Promise<Tensor> {
    if (!this.copies.has(t)) this.copies.set(t, t.to('webgpu'));
    return this.copies.get(t)!;
  }
  async dispose(): Promise<void> {
    for (const c of this.copies.values()) (await c).dispose();
    this.tensors.forEach((t) => t.dispose());
  }
}

// ---- moeRoute --------------------------------------------------------------------------------------------------------

/** Router by definition: softmax in float64, probabilities rounded to float32, top-k (ties: lower id), optional renormalization. */
function routeByDefinition(logits: Float64Array, t: number, e: number, k: number, normalize: boolean): { ids: number[]; weights: number[] } {
  const ids: number[] = [];
  const weights: number[] = [];
  for (let r = 0; r < t; r++) {
    const row = Array.from(logits.subarray(r * e, (r + 1) * e));
    const max = Math.max(...row);
    const ex = row.map((v) => Math.exp(v - max));
    const sum = ex.reduce((a, b) => a + b, 0);
    const p = ex.map((v) => Math.fround(v / sum));
    const order = p.map((_, i) => i).sort((a, b) => p[b] - p[a] || a - b);
    const chosen = order.slice(0, k);
    let s = 0;
    for (const i of chosen) s = Math.fround(s + p[i]);
    ids.push(...chosen);
    weights.push(...chosen.map((i) => (normalize ? Math.fround(p[i] / s) : p[i])));
  }
  return { ids, weights };
}

interface RouteResult {
  ids: Int32Array;
  weights: Float32Array;
}

async function route(logits: Tensor, k: number, normalize: boolean): Promise<RouteResult> {
  const { ids, weights } = moeRoute(logits, k, { normalize });
  try {
    expect(ids.dtype).toBe('int32');
    expect(weights.dtype).toBe('float32');
    expect(ids.shape).toEqual([logits.shape[0], k]);
    expect(weights.shape).toEqual([logits.shape[0], k]);
    return { ids: (await ids.toArray()) as Int32Array, weights: (await weights.toArray()) as Float32Array };
  } finally {
    ids.dispose();
    weights.dispose();
  }
}

/** GPU weights: f32 exp/division differ from the correctly rounded ones by a few ulps. */
function expectWeightsClose(got: ArrayLike<number>, want: ArrayLike<number>, label: string): void {
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i])) expect(got[i], `${label} [${i}]`).toBeNaN();
    else expect(Math.abs(got[i] - want[i]), `${label} [${i}] got ${got[i]} want ${want[i]}`).toBeLessThanOrEqual(1e-30 + 4e-6 * Math.abs(want[i]));
  }
}

/** Routes on the CPU and (when present) the GPU: the CPU must match the definition exactly, the GPU the CPU's ids. */
async function checkRoute(logits: Tensor, k: number, normalize: boolean, label: string, view: (x: Tensor) => Tensor = (x) => x): Promise<RouteResult> {
  const [t, e] = view(logits).shape;
  const cpu = await route(view(logits), k, normalize);
  const def = routeByDefinition(await values(view(logits)), t, e, k, normalize);
  expect(Array.from(cpu.ids), label).toEqual(def.ids);
  expect(Array.from(cpu.weights), label).toEqual(def.weights.map(Math.fround));
  if (gpu.available) {
    const [g] = await bothDevices([logits]);
    try {
      const got = await route(view(g), k, normalize);
      expect(Array.from(got.ids), `${label} ids`).toEqual(Array.from(cpu.ids));
      expectWeightsClose(got.weights, cpu.weights, label);
    } finally {
      g.dispose();
    }
  }
  return cpu;
}

describe(`moeRoute ${gpu.skipReason}`, () => {
  it('a worked example: descending, ties to the lower id, normalize on and off', async () => {
    const logits = tensor([1, 3, 3, 2, 0, 3], { shape: [1, 6] });
    const off = await checkRoute(logits, 4, false, 'example');
    expect(Array.from(off.ids)).toEqual([1, 2, 5, 3]);
    const on = await checkRoute(logits, 4, true, 'example normalized');
    expect(Array.from(on.ids)).toEqual([1, 2, 5, 3]);
    const p3 = Math.exp(0) / (Math.exp(-2) + 3 + Math.exp(-1) + Math.exp(-3));
    expect(off.weights[0]).toBeCloseTo(p3, 6);
    expect(on.weights[0]).toBeCloseTo(1 / (3 + Math.exp(-1)), 6);
    expect(on.weights.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
  });

  for (const e of [8, 60, 128, 512]) {
    it(`E = ${e}, k = 1, 2, 8, float32 and bfloat16 logits${e === 128 ? ' (and float16)' : ''}, normalize on and off`, async () => {
      for (const k of [1, 2, 8]) {
        for (const dtype of e === 128 ? (['float32', 'bfloat16', 'float16'] as const) : (['float32', 'bfloat16'] as const)) {
          const logits = randomTensor([5, e], dtype, 'normal', 2);
          for (const normalize of [false, true]) await checkRoute(logits, k, normalize, `E ${e} k ${k} ${dtype} normalize ${normalize}`);
        }
      }
    });
  }

  it('ties pick the lower ids: coarse logits with many equal values, and a row of equal logits', async () => {
    for (const e of [60, 512]) {
      const logits = randomTensor([4, e], 'float32', 'coarse');
      for (const k of [2, 8, 16]) {
        const r = await checkRoute(logits, k, true, `coarse E ${e} k ${k}`);
        // Equal weights within a row appear in increasing id order.
        for (let i = 0; i + 1 < r.ids.length; i++) {
          if ((i + 1) % k !== 0 && r.weights[i] === r.weights[i + 1]) expect(r.ids[i]).toBeLessThan(r.ids[i + 1]);
        }
      }
    }
    const flat = tensor(new Float32Array(3 * 20).fill(0.5), { shape: [3, 20] });
    const r = await checkRoute(flat, 5, false, 'equal logits');
    expect(Array.from(r.ids.subarray(0, 5))).toEqual([0, 1, 2, 3, 4]);
    expect(r.weights[0]).toBeCloseTo(1 / 20, 7);
  });

  it('strided logits (a transposed view) and topK = E', async () => {
    const logits = randomTensor([24, 7], 'float32');
    await checkRoute(logits, 3, true, 'transposed', (x) => x.transpose(0, 1));
    await checkRoute(logits, 24, false, 'topK = E', (x) => x.transpose(0, 1));
  });

  it('NaN, +Inf or all -Inf rows: ids 0..k-1 with NaN weights on both backends; -Inf logits elsewhere get weight 0', async () => {
    const e = 12;
    const rows = [
      Array.from({ length: e }, (_, i) => (i === 5 ? NaN : i * 0.1)),
      Array.from({ length: e }, (_, i) => (i === 7 ? Infinity : -i * 0.1)),
      new Array<number>(e).fill(-Infinity),
      Array.from({ length: e }, (_, i) => (i % 2 === 0 ? -Infinity : i * 0.2)),
      Array.from({ length: e }, (_, i) => Math.sin(i)),
    ];
    const logits = tensor(rows.flat(), { shape: [rows.length, e] });
    const k = 8;
    const cpu = await route(logits, k, true);
    for (let r = 0; r < 3; r++) {
      expect(Array.from(cpu.ids.subarray(r * k, (r + 1) * k))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      for (const w of cpu.weights.subarray(r * k, (r + 1) * k)) expect(w).toBeNaN();
    }
    // Row 3: the six finite logits first (descending), then the -Inf ones with weight 0, lowest ids first.
    expect(Array.from(cpu.ids.subarray(3 * k, 4 * k))).toEqual([11, 9, 7, 5, 3, 1, 0, 2]);
    expect(Array.from(cpu.weights.subarray(3 * k + 6, 4 * k))).toEqual([0, 0]);
    if (gpu.available) {
      const [g] = await bothDevices([logits]);
      const got = await route(g, k, true);
      g.dispose();
      expect(Array.from(got.ids)).toEqual(Array.from(cpu.ids));
      expectWeightsClose(got.weights, cpu.weights, 'special rows');
    }
  });

  it.skipIf(!gpu.available)('is one dispatch with nothing read back', async () => {
    const logits = randomTensor([3, 128], 'bfloat16');
    const [g] = await bothDevices([logits]);
    await synchronize();
    const before = gpuCounters();
    const { ids, weights } = moeRoute(g, 8, { normalize: true });
    const after = gpuCounters();
    expect(after.dispatches - before.dispatches).toBe(1);
    expect(after.reads - before.reads).toBe(0);
    [ids, weights, g].forEach((t) => t.dispose());
  });

  it('rejects bad arguments with typed errors', () => {
    const logits = randomTensor([2, 8]);
    expect(() => moeRoute(logits, 0)).toThrow(RangeError);
    expect(() => moeRoute(logits, 9)).toThrow(RangeError);
    expect(() => moeRoute(randomTensor([8]), 2)).toThrow(ShapeError);
  });
});

// ---- expertLinear ----------------------------------------------------------------------------------------------------

interface Problem {
  e: number;
  n: number;
  k: number;
  t: number;
  slots: number;
  x: Tensor;
  weight: Tensor;
  ids: Tensor;
  scale?: Tensor;
  combine?: Tensor;
}

interface Spec {
  e: number;
  n: number;
  k: number;
  t: number;
  slots: number;
  xDtype: FloatDType;
  wDtype: DType;
  /** x has a row per slot ([T*k, K]) instead of per token. */
  perSlot: boolean;
  combine: boolean;
  seed: number;
}

/** Random ids over all E experts, with some tokens choosing one expert twice (a slot may repeat an id). */
function randomIds(t: number, slots: number, e: number, seed: number): number[] {
  const g = new Generator(seed);
  const ids: number[] = [];
  for (let i = 0; i < t * slots; i++) ids.push(g.nextU32() % e);
  if (slots > 1) for (let r = 0; r < t; r += 2) ids[r * slots + 1] = ids[r * slots];
  return ids;
}

/** A stacked expert weight [E, N, K] and, for FP8, its block scales [E, ceil(N/128), ceil(K/128)]. */
function makeWeight(e: number, n: number, k: number, wDtype: DType): [Tensor, Tensor | undefined] {
  const weight = randomTensor([e, n, k], wDtype, 'normal', wDtype.startsWith('float8') ? 40 : 0.5);
  // FP8 block scales: positive, distinct per expert and block (a wrong block index shows).
  const scale = wDtype.startsWith('float8') ? randomTensor([e, Math.ceil(n / 128), Math.ceil(k / 128)], 'float32', 'positive', 0.01) : undefined;
  return [weight, scale];
}

function makeProblem(s: Spec, shared?: [Tensor, Tensor | undefined]): Problem {
  const [weight, scale] = shared ?? makeWeight(s.e, s.n, s.k, s.wDtype);
  const x = randomTensor([s.perSlot ? s.t * s.slots : s.t, s.k], s.xDtype);
  const ids = tensor(randomIds(s.t, s.slots, s.e, s.seed), { shape: [s.t, s.slots], dtype: 'int32' });
  const combine = s.combine ? randomTensor([s.t, s.slots], 'float32', 'positive', 0.5) : undefined;
  return { e: s.e, n: s.n, k: s.k, t: s.t, slots: s.slots, x, weight, ids, scale, combine };
}

/** The problem's x, weight, ids, scale, combine on a device (fresh copies on WebGPU). */
async function placed(p: Problem, device: 'cpu' | 'webgpu'): Promise<[Tensor, Tensor, Tensor, Tensor | undefined, Tensor | undefined]> {
  const put = async (u: Tensor | undefined) => (u && device === 'webgpu' ? u.to('webgpu') : u);
  const [x, weight, ids, scale, combine] = await Promise.all([p.x, p.weight, p.ids, p.scale, p.combine].map(put));
  return [x!, weight!, ids!, scale, combine];
}

function disposeProblem(p: Problem, shared?: SharedWeight): void {
  [p.x, p.weight, p.ids, p.scale, p.combine].forEach((t) => t && !shared?.has(t) && t.dispose());
}

/** The definition in float64 from the stored values: v (the exact result) and mag (the same sum of |terms|). */
async function linearByDefinition(p: Problem, shared?: SharedWeight): Promise<{ v: Float64Array; mag: Float64Array }> {
  const get = (t: Tensor) => (shared?.has(t) ? shared.values(t) : values(t));
  const [xv, wv, idv] = [await values(p.x), await get(p.weight), await values(p.ids)];
  const sv = p.scale && (await get(p.scale));
  const cv = p.combine && (await values(p.combine));
  const { n, k, t, slots } = p;
  const perSlot = p.x.shape[0] === t * slots;
  const rows = cv ? t : t * slots;
  const v = new Float64Array(rows * n);
  const mag = new Float64Array(rows * n);
  const kb = Math.ceil(k / 128);
  const nb = Math.ceil(n / 128);
  for (let s = 0; s < t * slots; s++) {
    const e = idv[s];
    const tok = Math.floor(s / slots);
    const xr = (perSlot ? s : tok) * k;
    const o = (cv ? tok : s) * n;
    const c = cv ? cv[s] : 1;
    for (let j = 0; j < n; j++) {
      let dot = 0;
      let abs = 0;
      for (let q = 0; q < k; q++) {
        const w = wv[(e * n + j) * k + q] * (sv ? sv[(e * nb + Math.floor(j / 128)) * kb + Math.floor(q / 128)] : 1);
        dot += xv[xr + q] * w;
        abs += Math.abs(xv[xr + q] * w);
      }
      v[o + j] += c * dot;
      mag[o + j] += Math.abs(c) * abs;
    }
  }
  return { v, mag };
}

function run(p: Problem, view: (x: Tensor, weight: Tensor, ids: Tensor) => [Tensor, Tensor, Tensor] = (x, w, i) => [x, w, i]): (...xs: Tensor[]) => Tensor {
  return (x, weight, ids, ...rest) => {
    const [vx, vw, vi] = view(x, weight, ids);
    const scale = p.scale ? rest.shift() : undefined;
    const combine = p.combine ? rest.shift() : undefined;
    return expertLinear(vx, vw, vi, { scale, combine });
  };
}

function inputs(p: Problem): Tensor[] {
  return [p.x, p.weight, p.ids, ...(p.scale ? [p.scale] : []), ...(p.combine ? [p.combine] : [])];
}

function expectWithin(got: ArrayLike<number>, want: Float64Array, mag: Float64Array, ulp: number, accumulate: number, label: string): void {
  let bad = 0;
  let first = '';
  for (let i = 0; i < want.length; i++) {
    const tol = ulp * Math.abs(want[i]) + accumulate * mag[i] + 1e-30;
    const diff = Math.abs(got[i] - want[i]);
    if (!(diff <= tol)) {
      if (bad++ === 0) first = `[${i}] got ${got[i]} want ${want[i]} (|diff| ${diff.toExponential(3)} > ${tol.toExponential(3)})`;
    }
  }
  expect(bad, `${label}: ${bad} of ${want.length} elements off, first ${first}`).toBe(0);
}

/** f32 accumulation error bound of a GPU column: (K/64 + 8) roundings of sum |terms|, with slack for the scales. */
const gpuErr = (k: number) => 2 ** -23 * (k / 64 + 8) * 2;

/** Runs expertLinear on both backends (views applied on each), checks shape/dtype and both results against the definition. */
async function checkLinear(p: Problem, label: string, shared?: SharedWeight): Promise<Float64Array> {
  const outDtype = p.x.dtype as FloatDType;
  const fn = run(p);
  const { v, mag } = await linearByDefinition(p, shared);
  const rc = fn(...inputs(p));
  const shape = [p.combine ? p.t : p.t * p.slots, p.n];
  expect(rc.shape, label).toEqual(shape);
  expect(rc.dtype, label).toBe(outDtype);
  const cpu = Float64Array.from(await rc.toArray());
  rc.dispose();
  expectWithin(cpu, v, mag, OUT_ULP[outDtype] / 2, 1e-12, `${label} cpu`);
  if (gpu.available) {
    const onGpu = await Promise.all(inputs(p).map((t) => (shared?.has(t) ? shared.onGpu(t) : t.to('webgpu'))));
    const rg = fn(...onGpu);
    try {
      expect(rg.device).toBe('webgpu');
      expect(rg.shape, label).toEqual(shape);
      expect(rg.dtype, label).toBe(outDtype);
      const got = await rg.toArray();
      expectWithin(got, v, mag, OUT_ULP[outDtype], gpuErr(p.k), `${label} gpu vs definition`);
      expectWithin(got, cpu, mag, OUT_ULP[outDtype], gpuErr(p.k), `${label} gpu vs cpu`);
    } finally {
      rg.dispose();
      onGpu.forEach((t, i) => !shared?.has(inputs(p)[i]) && t.dispose());
    }
  }
  return cpu;
}

// Shapes with the (T, k) of each mode (gather, gather x per slot, combine, combine x per slot): the aligned shape
// keeps T * k small, since SwiftShader runs a slot's 64-invocation columns slowly.
const SHAPES = [
  // rows of 400 / 200 / 100 bytes: 16-byte loads for f32, word loads for 16-bit and FP8
  {
    n: 72,
    k: 100,
    tk: [
      [1, 4],
      [3, 2],
      [5, 8],
      [1, 1],
    ],
  },
  // odd N (16-bit outputs go through f32) and odd K: word loads for f32, element loads otherwise
  {
    n: 131,
    k: 257,
    tk: [
      [3, 2],
      [5, 4],
      [1, 1],
      [3, 4],
    ],
  },
  // aligned: 16-byte loads for every dtype
  {
    n: 256,
    k: 512,
    tk: [
      [1, 8],
      [5, 1],
      [3, 2],
      [1, 4],
    ],
  },
] as const;
const W_DTYPES = ['float32', 'bfloat16', 'float16', 'float8_e4m3fn'] as const;
const X_DTYPES: Record<(typeof W_DTYPES)[number], FloatDType> = { float32: 'float32', bfloat16: 'bfloat16', float16: 'float16', float8_e4m3fn: 'bfloat16' };

describe(`expertLinear ${gpu.skipReason}`, () => {
  for (const wDtype of W_DTYPES) {
    it(`${wDtype} weights, E = 16: gather and combine, x per token and per slot, T = 1, 3, 5, three shapes`, async () => {
      let seed = 100 * W_DTYPES.indexOf(wDtype);
      for (const { n, k, tk } of SHAPES) {
        const [weight, scale] = makeWeight(16, n, k, wDtype);
        const shared = new SharedWeight(scale ? [weight, scale] : [weight]);
        const used = new Set<number>();
        const modes = [
          [false, false],
          [true, false],
          [false, true],
          [true, true],
        ] as const;
        for (const [mi, [perSlot, combine]] of modes.entries()) {
          const [t, slots] = tk[mi];
          // The last mode takes float32 x: a mixed-dtype product and an f32 output at every weight dtype.
          const xDtype = mi === 3 ? 'float32' : X_DTYPES[wDtype];
          const p = makeProblem({ e: 16, n, k, t, slots, xDtype, wDtype, perSlot, combine, seed: seed++ }, [weight, scale]);
          await checkLinear(p, `${wDtype} N ${n} K ${k} T ${t} k ${slots} x ${xDtype}${perSlot ? ' per slot' : ''}${combine ? ' combine' : ''}`, shared);
          (await values(p.ids)).forEach((id) => used.add(id));
          disposeProblem(p, shared);
        }
        expect(used.size, `experts used at N ${n} K ${k}`).toBeGreaterThanOrEqual(8);
        await shared.dispose();
      }
    });
  }

  it('float8_e5m2 weights with block scales, combine', async () => {
    const p = makeProblem({ e: 6, n: 40, k: 144, t: 3, slots: 2, xDtype: 'float32', wDtype: 'float8_e5m2', perSlot: false, combine: true, seed: 7 });
    await checkLinear(p, 'e5m2');
    disposeProblem(p);
  });

  it('matches a per-expert loop of existing ops (linear on weight.select(0, e)), gather and combine', async () => {
    for (const [wDtype, xDtype] of [
      ['float8_e4m3fn', 'float32'],
      ['bfloat16', 'bfloat16'],
    ] as const) {
      const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;
      for (const device of devices) {
        const p = makeProblem({ e: 16, n: 72, k: 100, t: 2, slots: 3, xDtype, wDtype, perSlot: false, combine: true, seed: 900 });
        const [x, weight, ids, scale, combine] = await placed(p, device);
        const idv = await values(p.ids);
        const cv = await values(p.combine!);
        const gather = expertLinear(x, weight, ids, { scale });
        const combined = expertLinear(x, weight, ids, { scale, combine });
        const [gv, cmb] = [await values(gather), await values(combined)];
        const want = new Float64Array(p.t * p.n);
        // The slots' rounded outputs summed here carry their own rounding: the bound scales with sum |c * y|.
        const wantMag = new Float64Array(p.t * p.n);
        const tol = xDtype === 'float32' ? 2e-5 : 2 ** -7;
        for (let s = 0; s < p.t * p.slots; s++) {
          const tok = Math.floor(s / p.slots);
          const e = idv[s];
          const xr = x.narrow(0, tok, 1);
          const y = linear(xr, weight.select(0, e), undefined, scale ? { weightScale: scale.select(0, e) } : {});
          const yv = await values(y);
          for (let j = 0; j < p.n; j++) {
            expect(Math.abs(gv[s * p.n + j] - yv[j]), `${device} ${wDtype} slot ${s} [${j}]`).toBeLessThanOrEqual(tol * (1 + Math.abs(yv[j])));
            want[tok * p.n + j] += cv[s] * yv[j];
            wantMag[tok * p.n + j] += Math.abs(cv[s] * yv[j]);
          }
          [xr, y].forEach((u) => u.dispose());
        }
        for (let i = 0; i < want.length; i++)
          expect(Math.abs(cmb[i] - want[i]), `${device} ${wDtype} combine [${i}]`).toBeLessThanOrEqual(2 * tol * (1 + wantMag[i]));
        [gather, combined].forEach((u) => u.dispose());
        if (device === 'webgpu') [x, weight, ids, scale, combine].forEach((u) => u?.dispose());
        disposeProblem(p);
      }
    }
  });

  it('weight, x and ids as views: K-narrowed rows (aligned, with a tail), a transposed weight, strided x and ids', async () => {
    // Stored [E, N, 160] bf16 narrowed to K = 150: rows stay 320 bytes apart -> 16-byte loads with a 6-element tail.
    const narrowed = makeProblem({ e: 5, n: 20, k: 160, t: 3, slots: 2, xDtype: 'float32', wDtype: 'bfloat16', perSlot: false, combine: false, seed: 31 });
    const wide = randomTensor([3, 150], 'float32');
    const p1 = { ...narrowed, k: 150, x: wide };
    await checkNarrowed(p1, narrowed.weight);
    disposeProblem(narrowed);
    wide.dispose();

    // Stored [E, K, N] and transposed: K has stride N (element loads); ids transposed from [k, T]; x rows every other row.
    const e = 7,
      n = 24,
      k = 40,
      t = 4,
      slots = 3;
    const wStored = randomTensor([e, k, n], 'float16', 'normal', 0.5);
    const xStored = randomTensor([2 * t * slots, k], 'bfloat16');
    const idsStored = tensor(randomIds(slots, t, e, 5), { shape: [slots, t], dtype: 'int32' });
    const combine = randomTensor([t, slots], 'float32', 'positive');
    const view = (x: Tensor, w: Tensor, i: Tensor): [Tensor, Tensor, Tensor] => [x.slice(0, 0, undefined, 2), w.transpose(1, 2), i.transpose(0, 1)];
    for (const withCombine of [false, true]) {
      const p: Problem = {
        e,
        n,
        k,
        t,
        slots,
        x: xStored.slice(0, 0, undefined, 2).contiguous(),
        weight: wStored.transpose(1, 2).contiguous(),
        ids: idsStored.transpose(0, 1).contiguous(),
        combine: withCombine ? combine : undefined,
      };
      // The definition reads the contiguous copies; the op gets the views of the stored tensors.
      const { v, mag } = await linearByDefinition(p);
      const fn = run(p, view);
      const stored = [xStored, wStored, idsStored, ...(withCombine ? [combine] : [])];
      const cpu = fn(...stored);
      expectWithin(await cpu.toArray(), v, mag, OUT_ULP.bfloat16 / 2, 1e-12, `views cpu combine ${withCombine}`);
      cpu.dispose();
      if (gpu.available) {
        const g = await bothDevices(stored);
        const out = fn(...g);
        expectWithin(await out.toArray(), v, mag, OUT_ULP.bfloat16, gpuErr(k), `views gpu combine ${withCombine}`);
        [out, ...g].forEach((u) => u.dispose());
      }
      [p.x, p.weight, p.ids].forEach((u) => u.dispose());
    }
    [wStored, xStored, idsStored, combine].forEach((u) => u.dispose());
  });

  it.skipIf(!gpu.available)('subgroup reduction on and off give the same results', async () => {
    const be = webgpuBackend()!;
    const modes = [...new Set([be.subgroupsEnabled, false])];
    const p = makeProblem({ e: 8, n: 36, k: 1024, t: 2, slots: 3, xDtype: 'float32', wDtype: 'float8_e4m3fn', perSlot: false, combine: true, seed: 77 });
    try {
      for (const sg of modes) {
        be.subgroupsEnabled = sg;
        await checkLinear(p, `subgroups ${sg}`);
      }
    } finally {
      be.subgroupsEnabled = modes[0];
      disposeProblem(p);
    }
  });

  it('an out-of-range expert id: the CPU throws a ShapeError, the GPU gives zeros for that slot', async () => {
    const p = makeProblem({ e: 4, n: 8, k: 16, t: 2, slots: 2, xDtype: 'float32', wDtype: 'float32', perSlot: false, combine: true, seed: 3 });
    const ids = tensor([1, 4, -1, 2], { shape: [2, 2], dtype: 'int32' });
    expect(() => expertLinear(p.x, p.weight, ids)).toThrow(ShapeError);
    expect(() => expertLinear(p.x, p.weight, ids, { combine: p.combine })).toThrow(ShapeError);
    if (gpu.available) {
      const [x, w, gi, c] = await bothDevices([p.x, p.weight, ids, p.combine!]);
      const okIds = tensor([1, 0, 0, 2], { shape: [2, 2], dtype: 'int32' });
      const [oi] = await bothDevices([okIds]);
      const gathered = await values(expertLinear(x, w, gi));
      const good = await values(expertLinear(x, w, oi));
      // Slots 0 and 3 are valid and agree with a valid run; slots 1 and 2 are zero.
      for (let j = 0; j < 8; j++) {
        expect(gathered[j]).toBeCloseTo(good[j], 5);
        expect(gathered[8 + j]).toBe(0);
        expect(gathered[16 + j]).toBe(0);
        expect(gathered[24 + j]).toBeCloseTo(good[24 + j], 5);
      }
      // Combined: token 0 = c00 * slot 0 only, token 1 = c11 * slot 3 only.
      const cv = await values(p.combine!);
      const combined = await values(expertLinear(x, w, gi, { combine: c }));
      for (let j = 0; j < 8; j++) {
        expect(combined[j]).toBeCloseTo(cv[0] * good[j], 4);
        expect(combined[8 + j]).toBeCloseTo(cv[3] * good[24 + j], 4);
      }
      [x, w, gi, c, oi].forEach((u) => u.dispose());
      okIds.dispose();
    }
    ids.dispose();
    disposeProblem(p);
  });

  it.skipIf(!gpu.available)('a decode MoE layer is one dispatch per expertLinear, with nothing read back', async () => {
    const p = makeProblem({ e: 16, n: 64, k: 128, t: 1, slots: 8, xDtype: 'bfloat16', wDtype: 'bfloat16', perSlot: false, combine: true, seed: 11 });
    const [x, w, ids, c] = await bothDevices([p.x, p.weight, p.ids, p.combine!]);
    await synchronize();
    const before = gpuCounters();
    const up = expertLinear(x, w, ids);
    const down = expertLinear(x, w, ids, { combine: c });
    const after = gpuCounters();
    expect(after.dispatches - before.dispatches).toBe(2);
    expect(after.reads - before.reads).toBe(0);
    [up, down, x, w, ids, c].forEach((u) => u.dispose());
    disposeProblem(p);
  });

  it('rejects bad arguments with typed errors', () => {
    const x = randomTensor([2, 16]);
    const w = randomTensor([4, 8, 16]);
    const ids = tensor([0, 1, 2, 3], { shape: [2, 2], dtype: 'int32' });
    expect(() => expertLinear(x, randomTensor([8, 16]), ids)).toThrow(ShapeError);
    expect(() => expertLinear(randomTensor([3, 16]), w, ids)).toThrow(ShapeError);
    expect(() => expertLinear(x, w, ids, { combine: randomTensor([2, 3]) })).toThrow(ShapeError);
    expect(() => expertLinear(x, randomTensor([4, 8, 16], 'float8_e4m3fn'), ids)).toThrow(/block scales/);
    [x, w, ids].forEach((t) => t.dispose());
  });
});

async function checkNarrowed(p: Problem, stored: Tensor): Promise<void> {
  const view = (x: Tensor, w: Tensor, i: Tensor): [Tensor, Tensor, Tensor] => [x, w.narrow(2, 0, 150), i];
  const def: Problem = { ...p, weight: stored.narrow(2, 0, 150).contiguous() };
  const { v, mag } = await linearByDefinition(def);
  def.weight.dispose();
  const fn = run(p, view);
  const cpu = fn(p.x, stored, p.ids);
  expectWithin(await cpu.toArray(), v, mag, OUT_ULP.float32 / 2, 1e-12, 'narrowed cpu');
  cpu.dispose();
  if (gpu.available) {
    const g = await bothDevices([p.x, stored, p.ids]);
    const out = fn(...g);
    expectWithin(await out.toArray(), v, mag, OUT_ULP.float32, gpuErr(150), 'narrowed gpu');
    [out, ...g].forEach((u) => u.dispose());
  }
}
