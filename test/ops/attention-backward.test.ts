// The fused attention backward (Backend.attentionBackward): WebGPU gradients against the CPU's float64 reference,
// and the CPU's against the composed formula attention had before (P materialized, softmax backward by ops) and
// central differences, on fresh random inputs: causal and not, grouped-query heads (Hq = 4 over Hkv = 4, 2, 1),
// Sq != Skv with several query offsets (rows that see no key included), sequences longer than a workgroup and not
// a multiple of it, head dims 8, 64 and 100, bfloat16 inputs, strided views, NaN; then that backward is two
// kernels and its peak memory does not grow with Hq * Sq * Skv.
import { describe, expect, it } from 'vitest';
import {
  arange,
  attention,
  gpuCounters,
  memoryStats,
  noGrad,
  resetPeakMemory,
  setDefaultDevice,
  synchronize,
  tensor,
  where,
  type DType,
  type Tensor,
} from '../../src/index.js';
import { softmaxBackward } from '../../src/ops/grad-rules.js';
import { expectClose, randomTensor, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

interface Case {
  sq: number;
  skv: number;
  hq: number;
  hkv: number;
  d: number;
  causal: boolean;
  queryOffset?: number;
  dtype?: DType;
  /** Build q from a [Hq, Sq, D] tensor permuted (a strided view), and likewise k and v. */
  strided?: boolean;
}

type Grads = [Float32Array, Float32Array, Float32Array];

const label = (c: Case) =>
  `Sq ${c.sq} Skv ${c.skv} Hq ${c.hq} Hkv ${c.hkv} D ${c.d}${c.causal ? ' causal' : ''}${c.queryOffset !== undefined ? ` offset ${c.queryOffset}` : ''} ${c.dtype ?? 'float32'}${c.strided ? ' strided' : ''}`;

/** Fresh q, k, v (c.dtype) and a float32 upstream gradient, on the CPU. */
function inputs(c: Case): Tensor[] {
  const dtype = c.dtype ?? 'float32';
  return [
    randomTensor([c.sq, c.hq, c.d], dtype),
    randomTensor([c.skv, c.hkv, c.d], dtype),
    randomTensor([c.skv, c.hkv, c.d], dtype),
    randomTensor([c.sq, c.hq, c.d], dtype),
  ];
}

const headsFirst = (t: Tensor) => t.permute(1, 0, 2).contiguous().permute(1, 0, 2);

/** d q, d k, d v of sum(attention(q, k, v) * g) through the op's backward on one device. */
async function opGrads(device: 'cpu' | 'webgpu', c: Case, [q, k, v, g]: Tensor[]): Promise<Grads> {
  const leaves = await Promise.all([q, k, v].map(async (t) => (device === 'cpu' ? t.clone() : await t.to('webgpu')).requiresGrad_()));
  const cot = device === 'cpu' ? g.clone() : await g.to('webgpu');
  const views = c.strided ? leaves.map(headsFirst) : leaves;
  const out = attention(views[0], views[1], views[2], { causal: c.causal, queryOffset: c.queryOffset });
  try {
    out.backward(cot);
    return (await Promise.all(leaves.map((t) => t.grad!.to('float32').toArray()))) as Grads;
  } finally {
    out.dispose();
    cot.dispose();
    for (const t of leaves) {
      t.zeroGrad();
      t.dispose();
    }
  }
}

/**
 * The backward attention had before this kernel, composed from ops on the CPU in float32: P [H, Sq, Skv] built
 * in full, dV = P^T dO, dS = P (dP - rowsum(dP P)), dQ = scale dS K, dK = scale dS^T Q.
 */
async function composedGrads(c: Case, [q, k, v, g]: Tensor[]): Promise<Grads> {
  const { sq, skv, hq, hkv, d } = c;
  const scale = 1 / Math.sqrt(d);
  const queryOffset = c.queryOffset ?? skv - sq;
  const group = hq / hkv;
  const parts = noGrad(() => {
    const heads = (t: Tensor) => t.to('float32').permute(1, 0, 2);
    const widen = (t: Tensor) => (group === 1 ? t : t.unsqueeze(1).expand(hkv, group, skv, d).reshape(hq, skv, d));
    const qh = heads(q);
    const kh = widen(heads(k));
    const vh = widen(heads(v));
    let scores = qh.matmul(kh.transpose(1, 2)).mul(scale);
    if (c.causal) {
      const allowed = arange(0, skv, 1)
        .reshape(1, skv)
        .le(arange(0, sq, 1).reshape(sq, 1).add(queryOffset));
      scores = where(allowed, scores, -Infinity);
    }
    const probs = scores.softmax(-1);
    const p = where(probs.ne(probs), 0, probs);
    const dO = heads(g);
    const dv = p.transpose(1, 2).matmul(dO);
    const ds = softmaxBackward(p, dO.matmul(vh.transpose(1, 2)), -1);
    const dq = ds.matmul(kh).mul(scale);
    const dk = ds.transpose(1, 2).matmul(qh).mul(scale);
    const narrow = (t: Tensor) => (group === 1 ? t : t.reshape(hkv, group, skv, d).sum(1));
    return [dq.permute(1, 0, 2), narrow(dk).permute(1, 0, 2), narrow(dv).permute(1, 0, 2)];
  });
  const arrays = (await Promise.all(parts.map((t) => t.contiguous().toArray()))) as Grads;
  parts.forEach((t) => t.dispose());
  return arrays;
}

/** float32 sums of up to Skv * group terms on both sides: slack relative to the gradient's scale. */
function tol(want: Float32Array, dtype: DType = 'float32'): Tolerance {
  // Narrow inputs get narrow gradients (the leaf's dtype): one rounding of theirs on either side.
  const rtol = dtype === 'bfloat16' ? 8e-3 : dtype === 'float16' ? 1e-3 : 2e-4;
  let max = 0;
  for (const x of want) if (Number.isFinite(x)) max = Math.max(max, Math.abs(x));
  return { atol: 2e-5 * max + 1e-7, rtol };
}

const NAMES = ['dq', 'dk', 'dv'];

async function check(c: Case): Promise<void> {
  const xs = inputs(c);
  try {
    const cpu = await opGrads('cpu', c, xs);
    const composed = await composedGrads(c, xs);
    cpu.forEach((g, i) => expectClose(g, composed[i], tol(composed[i], c.dtype), `${label(c)}: CPU ${NAMES[i]} vs composed`));
    if (!gpu.available) return;
    const gpuGrads = await opGrads('webgpu', c, xs);
    gpuGrads.forEach((g, i) => expectClose(g, cpu[i], tol(cpu[i], c.dtype), `${label(c)}: WebGPU ${NAMES[i]} vs CPU`));
    // Some gradient is non-zero: a kernel writing zeros must not pass.
    const someRowSees = !c.causal || c.sq - 1 + (c.queryOffset ?? c.skv - c.sq) >= 0;
    for (let i = 0; i < 3; i++)
      if (someRowSees)
        expect(
          cpu[i].some((x) => x !== 0),
          `${label(c)}: ${NAMES[i]} non-zero`,
        ).toBe(true);
  } finally {
    xs.forEach((t) => t.dispose());
  }
}

describe('attention backward: CPU reference against the composed formula and central differences', () => {
  it('central differences of sum(attention * g), causal GQA with an offset', async () => {
    const c: Case = { sq: 3, skv: 5, hq: 4, hkv: 2, d: 8, causal: true, queryOffset: 1 };
    const xs = inputs(c);
    const [q, k, v, g] = xs;
    const grads = await opGrads('cpu', c, xs);
    const base = (await Promise.all([q, k, v].map((t) => t.toArray()))) as Float32Array[];
    const loss = async (which: number, at: number, delta: number) => {
      const ins = base.map((vals, i) => {
        const moved = Float32Array.from(vals);
        if (i === which) moved[at] += delta;
        return tensor(Array.from(moved), { shape: xs[i].shape });
      });
      const out = attention(ins[0], ins[1], ins[2], { causal: true, queryOffset: 1 });
      const l = out.mul(g).sum();
      const r = ((await l.toArray()) as Float32Array)[0];
      [...ins, out, l].forEach((t) => t.dispose());
      return r;
    };
    for (let which = 0; which < 3; which++) {
      const n = xs[which].numel;
      for (const at of [0, Math.floor(n / 2), n - 1, 7 % n]) {
        const h = 1e-2;
        const fd = ((await loss(which, at, h)) - (await loss(which, at, -h))) / (2 * h);
        expect(Math.abs(fd - grads[which][at]), `${NAMES[which]}[${at}]: fd ${fd} vs ${grads[which][at]}`).toBeLessThan(2e-3 + 2e-3 * Math.abs(fd));
      }
    }
    xs.forEach((t) => t.dispose());
  });
});

describe.skipIf(!gpu.available)(`attention backward: WebGPU equals the CPU ${gpu.skipReason}`, () => {
  it('causal and not, Hq = 4 over Hkv = 4, 2, 1, D = 8 and 64', async () => {
    for (const causal of [false, true]) {
      for (const hkv of [4, 2, 1]) {
        for (const d of [8, 64]) await check({ sq: 7, skv: 7, hq: 4, hkv, d, causal });
      }
    }
  }, 120_000);

  it('Sq != Skv with query offsets (decode-like, chunked prefill, rows that see no key, past either end)', async () => {
    for (const queryOffset of [undefined, 0, -3, 2, 20, -20]) {
      await check({ sq: 5, skv: 9, hq: 4, hkv: 2, d: 8, causal: true, queryOffset });
    }
    await check({ sq: 1, skv: 70, hq: 4, hkv: 1, d: 64, causal: true });
    await check({ sq: 9, skv: 4, hq: 2, hkv: 2, d: 8, causal: false });
  }, 120_000);

  it('sequences longer than a workgroup and not a multiple of it (S = 300, 130), D = 100', async () => {
    await check({ sq: 300, skv: 300, hq: 4, hkv: 2, d: 64, causal: true });
    await check({ sq: 130, skv: 300, hq: 4, hkv: 1, d: 8, causal: false });
    await check({ sq: 67, skv: 67, hq: 2, hkv: 1, d: 100, causal: true });
  }, 300_000);

  it('bfloat16 and float16 inputs, strided views', async () => {
    await check({ sq: 70, skv: 70, hq: 4, hkv: 2, d: 64, causal: true, dtype: 'bfloat16' });
    await check({ sq: 5, skv: 9, hq: 4, hkv: 1, d: 8, causal: true, queryOffset: 2, dtype: 'float16' });
    await check({ sq: 11, skv: 13, hq: 4, hkv: 2, d: 8, causal: true, strided: true });
  }, 120_000);

  it('NaN in q propagates to its row and the keys it sees; rows that see no key get zeros', async () => {
    const c: Case = { sq: 4, skv: 6, hq: 2, hkv: 1, d: 8, causal: true, queryOffset: 0 };
    const xs = inputs(c);
    const qv = (await xs[0].toArray()) as Float32Array;
    qv[(2 * 2 + 1) * 8 + 3] = NaN; // query 2, head 1
    xs[0].dispose();
    xs[0] = tensor(Array.from(qv), { shape: [4, 2, 8] });
    const cpu = await opGrads('cpu', c, xs);
    const got = await opGrads('webgpu', c, xs);
    got.forEach((g, i) => expectClose(g, cpu[i], tol(cpu[i]), `NaN: WebGPU ${NAMES[i]} vs CPU`));
    expect(cpu[0].slice((2 * 2 + 1) * 8, (2 * 2 + 2) * 8).every(Number.isNaN), 'the NaN row of dq').toBe(true);
    expect(Number.isNaN(cpu[0][0]), 'other rows of dq stay finite').toBe(false);
    expect(cpu[1].slice(0, 3 * 8).every(Number.isNaN) && !cpu[1].slice(3 * 8).some(Number.isNaN), 'dk: NaN for keys 0..2 only').toBe(true);
    xs.forEach((t) => t.dispose());

    // queryOffset -2: queries 0 and 1 see no key, the forward gives them zeros, the backward no gradient.
    const none: Case = { sq: 4, skv: 4, hq: 2, hkv: 2, d: 8, causal: true, queryOffset: -2 };
    const ys = inputs(none);
    const g2 = await opGrads('webgpu', none, ys);
    expect(
      g2[0].slice(0, 2 * 2 * 8).every((x) => x === 0),
      'dq of rows that see nothing',
    ).toBe(true);
    expect(g2[0].slice(2 * 2 * 8).some((x) => x !== 0)).toBe(true);
    expect(
      g2[1].slice(2 * 2 * 8).every((x) => x === 0),
      'dk of keys no query sees',
    ).toBe(true);
    ys.forEach((t) => t.dispose());
  }, 60_000);

  it('two kernels, no [H, Sq, Skv] temporary: dispatches and peak memory of backward', async () => {
    // Sq = Skv = 512, Hq = 4: one [H, S, S] float32 is 4 MiB (the composed backward peaked near 38 MiB above its
    // inputs, in 26 dispatches).
    const [s, hq, hkv, d] = [512, 4, 2, 8];
    const q = (await randomTensor([s, hq, d]).to('webgpu')).requiresGrad_();
    const k = (await randomTensor([s, hkv, d]).to('webgpu')).requiresGrad_();
    const v = (await randomTensor([s, hkv, d]).to('webgpu')).requiresGrad_();
    const g = await randomTensor([s, hq, d]).to('webgpu');
    const probsBytes = hq * s * s * 4;
    const gradBytes = (q.numel + k.numel + v.numel) * 4;
    for (let round = 0; round < 2; round++) {
      const out = attention(q, k, v, { causal: true });
      await synchronize();
      resetPeakMemory();
      const atBackward = memoryStats().liveBytes;
      const c0 = gpuCounters();
      out.backward(g);
      const c1 = gpuCounters();
      await synchronize();
      const growth = memoryStats().peakLiveBytes - atBackward;
      if (round === 1) {
        const ran = (name: string) => (c1.byKernel[name] ?? 0) - (c0.byKernel[name] ?? 0);
        expect(ran('attention_backward_dq')).toBe(1);
        expect(ran('attention_backward_dkv')).toBe(1);
        expect(ran('gemm') + ran('softmax'), 'no matmul or softmax').toBe(0);
        expect(c1.dispatches - c0.dispatches, 'dispatches of backward').toBeLessThanOrEqual(4);
        // The three gradients, L and D [Hq, Sq], and size-class rounding: a few percent of one [H, S, S].
        expect(growth, 'peak growth in backward').toBeLessThanOrEqual(gradBytes + 96 * 1024);
        expect(growth).toBeLessThan(probsBytes / 16);
      }
      out.dispose();
      for (const t of [q, k, v]) t.zeroGrad();
    }
    for (const t of [q, k, v, g]) t.dispose();
  }, 120_000);
});
