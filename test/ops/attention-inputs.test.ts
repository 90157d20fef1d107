// attentionInputs (q/k RMSNorm + RoPE + KV-cache write in one kernel) against the unfused op chain it replaces on
// the CPU, and WebGPU against the CPU; attention with the query offset read from a device scalar over a whole
// cache; the sampler reading its draw from a buffer. Positions given as a number and as a device tensor must agree.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor, randomValues } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

function ropeTables(positions: number, d: number): [Tensor, Tensor] {
  const half = d / 2;
  const cos: number[] = [];
  const sin: number[] = [];
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const a = p * 1e6 ** (-(2 * i) / d);
      cos.push(Math.cos(a));
      sin.push(Math.sin(a));
    }
  }
  return [tg.tensor(cos, { shape: [positions, half] }), tg.tensor(sin, { shape: [positions, half] })];
}

interface Case {
  s: number;
  heads: number;
  kvHeads: number;
  d: number;
  capacity: number;
  position: number;
  dtype: DType;
  cacheDtype: DType;
  norm: boolean;
}

/** The chain attentionInputs replaces, with ops (rmsNorm, rope, copyInto), on the device of its inputs. */
function unfused(qkv: Tensor, c: Case, w: { qn?: Tensor; kn?: Tensor; cos: Tensor; sin: Tensor; keys: Tensor; values: Tensor }): Tensor {
  const { s, heads: h, kvHeads: kv, d } = c;
  const part = (start: number, n: number) => tg.reshape(tg.narrow(qkv, 1, start * d, n * d), [s, n, d]);
  const norm = (x: Tensor, weight?: Tensor) => (weight ? tg.rmsNorm(x, weight, 1e-6) : x);
  const q = tg.rope(norm(part(0, h), w.qn), w.cos, w.sin, c.position);
  const k = tg.rope(norm(part(h, kv), w.kn), w.cos, w.sin, c.position);
  tg.copyInto(tg.narrow(w.keys, 0, c.position, s), k);
  tg.copyInto(tg.narrow(w.values, 0, c.position, s), part(h + kv, kv));
  return q;
}

async function run(
  c: Case,
  device: 'cpu' | 'webgpu',
  fused: boolean,
  dynamic: boolean,
): Promise<{ q: Float32Array; keys: Float32Array; values: Float32Array }> {
  const { s, heads, kvHeads, d } = c;
  // The same inputs on every call for a case (seeded by its shape), fresh between cases.
  const seed = 7 * s + 13 * heads + 17 * kvHeads + d;
  const seeded = (shape: number[], dtype: DType, k: number) =>
    tg.tensor(
      randomValues(
        shape.reduce((a, b) => a * b, 1),
        dtype,
        'normal',
        seed * 10 + k,
      ),
      { shape, dtype, saturate: true },
    );
  const inputs = {
    qkv: seeded([s, (heads + 2 * kvHeads) * d], c.dtype, 1),
    qn: c.norm ? seeded([d], c.dtype, 2) : undefined,
    kn: c.norm ? seeded([d], c.dtype, 3) : undefined,
    keys: seeded([c.capacity, kvHeads, d], c.cacheDtype, 4),
    values: seeded([c.capacity, kvHeads, d], c.cacheDtype, 5),
  };
  const [cos, sin] = ropeTables(c.capacity + 2, d);
  const move = async (t: Tensor | undefined) => (t && device === 'webgpu' ? t.to('webgpu') : t);
  const qkv = (await move(inputs.qkv))!;
  const w = {
    qn: await move(inputs.qn),
    kn: await move(inputs.kn),
    cos: (await move(cos))!,
    sin: (await move(sin))!,
    keys: (await move(inputs.keys))!,
    values: (await move(inputs.values))!,
  };
  const position = dynamic ? tg.tensor([c.position], { dtype: 'int32', device }) : c.position;
  const q = fused
    ? tg.attentionInputs(qkv, { heads, kvHeads, headDim: d, qNorm: w.qn, kNorm: w.kn, cos: w.cos, sin: w.sin, keys: w.keys, values: w.values, position })
    : unfused(qkv, c, w);
  return {
    q: (await q.to('float32').toArray()) as Float32Array,
    keys: (await w.keys.to('float32').toArray()) as Float32Array,
    values: (await w.values.to('float32').toArray()) as Float32Array,
  };
}

const CASES: Case[] = [
  { s: 1, heads: 4, kvHeads: 2, d: 64, capacity: 9, position: 5, dtype: 'float32', cacheDtype: 'float32', norm: true },
  { s: 3, heads: 6, kvHeads: 2, d: 130, capacity: 7, position: 2, dtype: 'float32', cacheDtype: 'bfloat16', norm: true },
  { s: 2, heads: 2, kvHeads: 1, d: 256, capacity: 4, position: 2, dtype: 'bfloat16', cacheDtype: 'float16', norm: true },
  { s: 5, heads: 3, kvHeads: 3, d: 6, capacity: 5, position: 0, dtype: 'float16', cacheDtype: 'float32', norm: false },
];
const label = (c: Case) => `S ${c.s}, ${c.heads}/${c.kvHeads} heads, D ${c.d}, ${c.dtype} -> cache ${c.cacheDtype}${c.norm ? '' : ', no norm'}`;

describe('attentionInputs on the CPU', () => {
  it.each(CASES)('equals rmsNorm + rope + copyInto: $s tokens', async (c) => {
    const fused = await run(c, 'cpu', true, false);
    const chain = await run(c, 'cpu', false, false);
    expectClose(fused.q, chain.q, { atol: 0, rtol: 0 }, `${label(c)} q`);
    expectClose(fused.keys, chain.keys, { atol: 0, rtol: 0 }, `${label(c)} keys`);
    expectClose(fused.values, chain.values, { atol: 0, rtol: 0 }, `${label(c)} values`);
    expect(await run(c, 'cpu', true, true)).toEqual(fused);
  });

  it('rejects bad shapes, dtypes and positions by name', () => {
    const [cos, sin] = ropeTables(4, 8);
    const keys = tg.zeros([4, 1, 8]);
    const values = tg.zeros([4, 1, 8]);
    const qkv = tg.zeros([1, 24]);
    const o = { heads: 1, kvHeads: 1, headDim: 8, cos, sin, keys, values, position: 0 };
    expect(() => tg.attentionInputs(tg.zeros([1, 20]), o)).toThrow(/qkv must be \[S, 24\]/);
    expect(() => tg.attentionInputs(qkv, { ...o, position: 4 })).toThrow(/positions 4\.\.4 do not fit/);
    expect(() => tg.attentionInputs(qkv, { ...o, position: tg.tensor([0]) })).toThrow(/position tensor must be int32/);
    expect(() => tg.attentionInputs(qkv, { ...o, qNorm: tg.ones([8]) })).toThrow(/both qNorm and kNorm/);
    expect(() => tg.attentionInputs(qkv, { ...o, keys: tg.zeros([4, 2, 8]) })).toThrow(/keys must be \[capacity, 1, 8\]/);
  });
});

describe.skipIf(!gpu.available)(`attentionInputs on WebGPU ${gpu.skipReason}`, () => {
  it.each(CASES)('matches the CPU, position as a number and as a device tensor: $s tokens, D $d', async (c) => {
    const want = await run(c, 'cpu', true, false);
    const narrow = c.dtype !== 'float32' || c.cacheDtype !== 'float32';
    const check = narrow ? { atol: 2e-2, rtol: 2e-2 } : { atol: 2e-6, rtol: 2e-5 };
    for (const dynamic of [false, true]) {
      const got = await run(c, 'webgpu', true, dynamic);
      expectClose(got.q, want.q, check, `${label(c)} q`);
      expectClose(got.keys, want.keys, check, `${label(c)} keys`);
      expectClose(got.values, want.values, check, `${label(c)} values`);
    }
  });

  it('is one dispatch', async () => {
    const [cos, sin] = ropeTables(8, 64);
    const keys = await tg.zeros([8, 2, 64]).to('webgpu');
    const values = await tg.zeros([8, 2, 64]).to('webgpu');
    const n = await dispatchesOf([randomTensor([1, 8 * 64]), randomTensor([64]), randomTensor([64]), cos, sin], (qkv, qn, kn, c, s) =>
      tg.attentionInputs(qkv, { heads: 4, kvHeads: 2, headDim: 64, qNorm: qn, kNorm: kn, cos: c, sin: s, keys, values, position: 3 }),
    );
    expect(n).toBe(1);
  });

  it('attention with the query offset from a device scalar over the whole cache equals attention over the prefix', async () => {
    const [hq, hkv, d, cap] = [8, 2, 64, 700];
    for (const filled of [1, 9, 600]) {
      const q = await randomTensor([1, hq, d]).to('webgpu');
      const keys = await randomTensor([cap, hkv, d]).to('webgpu');
      const values = await randomTensor([cap, hkv, d]).to('webgpu');
      const prefix = tg.attention(q, tg.narrow(keys, 0, 0, filled), tg.narrow(values, 0, 0, filled), { causal: true, queryOffset: filled - 1 });
      const offset = tg.tensor([filled - 1], { dtype: 'int32', device: 'webgpu' });
      const whole = tg.attention(q, keys, values, { causal: true, queryOffset: offset });
      const cpu = tg.attention(await q.to('cpu'), await keys.to('cpu'), await values.to('cpu'), { causal: true, queryOffset: await offset.to('cpu') });
      const want = (await prefix.toArray()) as Float32Array;
      expectClose((await whole.toArray()) as Float32Array, want, { atol: 1e-5, rtol: 1e-4 }, `${filled} keys`);
      expectClose((await cpu.toArray()) as Float32Array, want, { atol: 1e-5, rtol: 1e-4 }, `${filled} keys (cpu)`);
    }
  });

  it('the sampler reads its draw from a buffer: same token as the uniform draw, on both devices', async () => {
    const logits = randomTensor([1, 1000], 'float32', 'normal', 3);
    const g = await logits.to('webgpu');
    for (const u of [0.01, 0.5, 0.97]) {
      const draw = tg.tensor([u], { device: 'webgpu' });
      const byBuffer = (await tg.sampleToken(g, { temperature: 0.9, topK: 50, draw }).toArray())[0];
      const cpuDraw = tg.tensor([u]);
      const cpu = (await tg.sampleToken(logits, { temperature: 0.9, topK: 50, draw: cpuDraw }).toArray())[0];
      expect(byBuffer).toBe(cpu);
    }
  });
});
