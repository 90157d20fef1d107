// attention's output gate (Qwen3.5 / Qwen3.6 gated attention: attn * sigmoid(gate), elementwise): the CPU against a
// by-definition float64 reference, WebGPU against the CPU on the single-pass kernel, the key-split (flash-decoding)
// merge and the paged path; gates as strided column views of a wider projection and as 3-D views; NaN in the gate
// reaching the output; gradients through the composed path; shape, dtype and device errors.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, DeviceMismatchError, ShapeError, setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor, randomValues } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

interface Case {
  sq: number;
  skv: number;
  hq: number;
  hkv: number;
  d: number;
  dtype: DType;
  gateDtype: DType;
  causal: boolean;
  /** How the gate is given: a contiguous [Sq, Hq * D], a column view of a wider projection, or a 3-D strided view. */
  layout: 'flat' | 'column' | 'heads';
}

const CASES: Case[] = [
  { sq: 5, skv: 9, hq: 6, hkv: 2, d: 24, dtype: 'float32', gateDtype: 'float32', causal: true, layout: 'flat' },
  { sq: 3, skv: 3, hq: 3, hkv: 1, d: 256, dtype: 'float32', gateDtype: 'bfloat16', causal: false, layout: 'column' },
  { sq: 4, skv: 6, hq: 10, hkv: 5, d: 24, dtype: 'bfloat16', gateDtype: 'bfloat16', causal: true, layout: 'heads' },
  { sq: 2, skv: 5, hq: 4, hkv: 2, d: 7, dtype: 'float16', gateDtype: 'float32', causal: true, layout: 'column' },
  // Decode over a long cache with few heads: the keys are split across workgroups and merged.
  { sq: 1, skv: 600, hq: 4, hkv: 2, d: 24, dtype: 'float32', gateDtype: 'float16', causal: true, layout: 'column' },
  { sq: 1, skv: 520, hq: 3, hkv: 1, d: 256, dtype: 'bfloat16', gateDtype: 'float32', causal: false, layout: 'flat' },
];
const label = (c: Case) => `Sq ${c.sq}, Skv ${c.skv}, ${c.hq}/${c.hkv} heads, D ${c.d}, ${c.dtype}, ${c.gateDtype} ${c.layout} gate`;

interface Inputs {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  /** The tensor the gate is a view of. */
  proj: Tensor;
}

function inputs(c: Case, seed: number): Inputs {
  const make = (shape: number[], dtype: DType, k: number, scale = 1) =>
    tg.tensor(
      randomValues(
        shape.reduce((a, b) => a * b, 1),
        dtype,
        'normal',
        seed * 10 + k,
        scale,
      ),
      { shape, dtype, saturate: true },
    );
  const width = c.hq * c.d;
  const projShape = c.layout === 'flat' ? [c.sq, width] : c.layout === 'column' ? [c.sq, 2 * width + 5] : [c.hq, c.sq, c.d];
  return {
    q: make([c.sq, c.hq, c.d], c.dtype, 1),
    k: make([c.skv, c.hkv, c.d], c.dtype, 2),
    v: make([c.skv, c.hkv, c.d], c.dtype, 3),
    proj: make(projShape, c.gateDtype, 4, 2),
  };
}

/** The gate as the case gives it: the projection itself, its columns width+3.. (row stride 2 width + 5), or [Hq, Sq, D] transposed. */
function gateOf(c: Case, proj: Tensor): Tensor {
  if (c.layout === 'flat') return proj;
  if (c.layout === 'column') return tg.narrow(proj, 1, c.hq * c.d + 3, c.hq * c.d);
  return tg.transpose(proj, 0, 1);
}

async function toDevice(x: Inputs, device: 'cpu' | 'webgpu'): Promise<Inputs> {
  if (device === 'cpu') return x;
  return { q: await x.q.to('webgpu'), k: await x.k.to('webgpu'), v: await x.v.to('webgpu'), proj: await x.proj.to('webgpu') };
}

function gatedAttention(c: Case, x: Inputs): Tensor {
  return tg.attention(x.q, x.k, x.v, { causal: c.causal, gate: gateOf(c, x.proj) });
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

/** By definition, float64: softmax(q k^T / sqrt(D)) v per head (kv head h / (Hq / Hkv)), times sigmoid(gate). */
async function reference(c: Case, x: Inputs): Promise<number[]> {
  const [q, k, v] = await Promise.all([x.q.toArray(), x.k.toArray(), x.v.toArray()]);
  const g = Array.from(await tg.contiguous(gateOf(c, x.proj)).toArray());
  const out: number[] = [];
  const offset = c.skv - c.sq;
  for (let i = 0; i < c.sq; i++) {
    const visible = c.causal ? Math.max(0, Math.min(c.skv, offset + i + 1)) : c.skv;
    for (let h = 0; h < c.hq; h++) {
      const kh = Math.floor(h / (c.hq / c.hkv));
      const scores: number[] = [];
      for (let j = 0; j < visible; j++) {
        let dot = 0;
        for (let e = 0; e < c.d; e++) dot += q[(i * c.hq + h) * c.d + e] * k[(j * c.hkv + kh) * c.d + e];
        scores.push(dot / Math.sqrt(c.d));
      }
      const max = Math.max(...scores);
      const p = scores.map((s) => Math.exp(s - max));
      const sum = p.reduce((a, b) => a + b, 0);
      for (let e = 0; e < c.d; e++) {
        let o = 0;
        for (let j = 0; j < visible; j++) o += (p[j] / sum) * v[(j * c.hkv + kh) * c.d + e];
        out.push(o * sigmoid(g[(i * c.hq + h) * c.d + e]));
      }
    }
  }
  return out;
}

const narrowCheck = (dtype: DType) =>
  dtype === 'float32' ? { atol: 1e-5, rtol: 1e-5 } : dtype === 'float16' ? { atol: 2e-3, rtol: 4e-3 } : { atol: 1e-2, rtol: 2e-2 };

describe('attention with an output gate on the CPU', () => {
  it.each(CASES)('equals softmax(q k^T / sqrt D) v * sigmoid(gate) in float64: $sq x $skv, D $d, $layout gate', async (c) => {
    const x = inputs(c, c.d + c.skv + c.hq);
    const got = Array.from(await gatedAttention(c, x).to('float32').toArray());
    // The CPU rounds once, from float64, to the output dtype.
    const check = c.dtype === 'float32' ? { atol: 1e-7, rtol: 1e-6 } : narrowCheck(c.dtype);
    expectClose(got, await reference(c, x), check, label(c));
  });

  it('a NaN in the gate reaches only its own output element, also in a row that sees no key', async () => {
    const c: Case = { sq: 3, skv: 2, hq: 2, hkv: 1, d: 4, dtype: 'float32', gateDtype: 'float32', causal: true, layout: 'flat' };
    const x = inputs(c, 5);
    const g = Array.from(await x.proj.toArray());
    g[1 * 8 + 5] = NaN; // query 1 (sees key 0), head 1, dim 1
    g[0 * 8 + 2] = NaN; // query 0: queryOffset -1 sees no key (zeros), and 0 * sigmoid(NaN) is NaN
    const out = Array.from(await tg.attention(x.q, x.k, x.v, { causal: true, gate: tg.tensor(g, { shape: [3, 8] }) }).toArray());
    out.forEach((o, e) => expect(Number.isNaN(o), `element ${e}`).toBe(e === 13 || e === 2));
    expect(out.filter((_o, e) => e < 8 && e !== 2)).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });

  it('equals attention * sigmoid(gate) composed from ops, and is composed (with gradients) when an input requires grad', async () => {
    const c = CASES[0];
    const x = inputs(c, 17);
    const fused = (await gatedAttention(c, x).toArray()) as Float32Array;
    const composed = tg.attention(x.q, x.k, x.v, { causal: true }).mul(tg.sigmoid(x.proj).reshape([c.sq, c.hq, c.d]));
    expectClose(fused, (await composed.toArray()) as Float32Array, { atol: 1e-7, rtol: 5e-7 }, 'fused vs composed');

    const [q, gate] = [tg.clone(x.q).requiresGrad_(), tg.clone(x.proj).requiresGrad_()];
    const w = randomTensor([c.sq, c.hq, c.d]);
    const out = tg.attention(q, x.k, x.v, { causal: true, gate });
    expect(out.requiresGrad).toBe(true);
    expectClose((await out.toArray()) as Float32Array, fused, { atol: 1e-7, rtol: 5e-7 }, 'grad path forward');
    out.mul(w).sum().backward();
    // d/dgate = w * attn * s (1 - s); d/dq = attention's backward of w * s.
    const attn = tg.attention(x.q, x.k, x.v, { causal: true });
    const s = tg.sigmoid(x.proj).reshape([c.sq, c.hq, c.d]);
    const dGate = w
      .mul(attn)
      .mul(s)
      .mul(s.neg().add(1))
      .reshape([c.sq, c.hq * c.d]);
    expectClose((await gate.grad!.toArray()) as Float32Array, (await dGate.toArray()) as Float32Array, { atol: 1e-6, rtol: 1e-5 }, 'gate grad');
    const q2 = tg.clone(x.q).requiresGrad_();
    tg.attention(q2, x.k, x.v, { causal: true }).mul(w.mul(s)).sum().backward();
    expectClose((await q.grad!.toArray()) as Float32Array, (await q2.grad!.toArray()) as Float32Array, { atol: 1e-6, rtol: 1e-5 }, 'q grad');
  });

  it('rejects a gate of the wrong shape, dtype or device by name', async () => {
    const [q, k, v] = [randomTensor([2, 4, 8]), randomTensor([3, 2, 8]), randomTensor([3, 2, 8])];
    expect(() => tg.attention(q, k, v, { gate: randomTensor([2, 31]) })).toThrow(ShapeError);
    expect(() => tg.attention(q, k, v, { gate: randomTensor([2, 31]) })).toThrow(/gate must be \[2, 32\] or \[2, 4, 8\].*got \[2, 31\]/);
    expect(() => tg.attention(q, k, v, { gate: randomTensor([2, 8, 4]) })).toThrow(/got \[2, 8, 4\]/);
    expect(() => tg.attention(q, k, v, { gate: randomTensor([3, 32]) })).toThrow(/got \[3, 32\]/);
    expect(() => tg.attention(q, k, v, { gate: randomTensor([64]) })).toThrow(ShapeError);
    expect(() => tg.attention(q, k, v, { gate: tg.zeros([2, 32], { dtype: 'int32' }) })).toThrow(DTypeError);
    if (gpu.available) expect(() => tg.attention(q, k, v, { gate: tg.zeros([2, 32], { device: 'webgpu' }) })).toThrow(DeviceMismatchError);
  });
});

describe.skipIf(!gpu.available)(`attention with an output gate on WebGPU ${gpu.skipReason}`, () => {
  it.each(CASES)('matches the CPU: $sq x $skv, $hq/$hkv heads, D $d, $dtype, $gateDtype $layout gate', async (c) => {
    const x = inputs(c, 2 * c.d + c.skv + c.hq);
    const want = await gatedAttention(c, x).to('float32').toArray();
    const got = await gatedAttention(c, await toDevice(x, 'webgpu'))
      .to('float32')
      .toArray();
    expectClose(got, want, narrowCheck(c.dtype), label(c));
  });

  it('takes the split path for decode over a long cache (two dispatches: partials, then the gated merge)', async () => {
    const c = CASES[4];
    const x = inputs(c, 31);
    const n = await dispatchesOf([x.q, x.k, x.v, x.proj], (q, k, v, proj) => tg.attention(q, k, v, { causal: true, gate: gateOf(c, proj) }));
    expect(n).toBe(2);
  });

  it('a NaN in the gate propagates on the single-pass and split paths', async () => {
    for (const c of [CASES[0], CASES[4]]) {
      const x = inputs(c, 41);
      const g = Array.from(await x.proj.toArray());
      const width = g.length / c.sq;
      const at = (c.sq - 1) * width + c.hq * c.d + 3 + 5; // last query, head 0, dim 5 of the column view (or of the flat gate)
      const nanAt = c.layout === 'column' ? at : (c.sq - 1) * width + 5;
      g[nanAt] = NaN;
      const proj = tg.tensor(g, { shape: x.proj.shape, dtype: x.proj.dtype });
      const want = await gatedAttention(c, { ...x, proj }).toArray();
      const got = await gatedAttention(c, await toDevice({ ...x, proj }, 'webgpu')).toArray();
      expect(Number.isNaN(want[(c.sq - 1) * c.hq * c.d + 5])).toBe(true);
      expectClose(got, want, narrowCheck(c.dtype), `${label(c)} with a NaN`);
    }
  });

  it('a paged batch with a gate matches the CPU', async () => {
    const [hq, hkv, d, page] = [4, 2, 24, 16];
    const seqs = [
      { start: 3, table: [5] },
      { start: 300, table: Array.from({ length: 19 }, (_, i) => (i * 7 + 1) % 40) },
      { start: 20, table: [30, 39] },
    ];
    const pool = (k: number) => tg.tensor(randomValues(40 * page * hkv * d, 'float32', 'normal', 50 + k), { shape: [40 * page, hkv, d] });
    const [keys, values] = [pool(1), pool(2)];
    const q = randomTensor([seqs.length, hq, d]);
    const proj = randomTensor([seqs.length, 3 * hq * d], 'bfloat16', 'normal', 2);
    const run = async (device: 'cpu' | 'webgpu') => {
      const move = async (t: Tensor) => (device === 'cpu' ? t : await t.to('webgpu'));
      const pages = tg.pagedIndex(
        seqs.map((s) => ({ pages: s.table, start: s.start, rows: 1 })),
        page,
        device,
      );
      const gate = tg.narrow(await move(proj), 1, hq * d, hq * d);
      return tg.attention(await move(q), await move(keys), await move(values), { pages, gate }).toArray();
    };
    const want = await run('cpu');
    // The CPU's paged path equals its contiguous one on each sequence's keys.
    for (const [r, s] of seqs.entries()) {
      const rows = Array.from({ length: s.start + 1 }, (_, j) => s.table[Math.floor(j / page)]! * page + (j % page));
      const idx = tg.tensor(rows, { dtype: 'int32' });
      const gate = tg.narrow(tg.narrow(proj, 0, r, 1), 1, hq * d, hq * d);
      const one = await tg.attention(tg.narrow(q, 0, r, 1), tg.indexSelect(keys, 0, idx), tg.indexSelect(values, 0, idx), { causal: true, gate }).toArray();
      expectClose(want.slice(r * hq * d, (r + 1) * hq * d), one, { atol: 0, rtol: 0 }, `sequence ${r} paged vs contiguous`);
    }
    expectClose(await run('webgpu'), want, { atol: 1e-5, rtol: 1e-5 }, 'paged WebGPU vs CPU');
  });
});
