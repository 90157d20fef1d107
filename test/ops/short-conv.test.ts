// shortConv (LFM2's gated causal conv with its state) against a by-definition float64 conv over the whole sequence:
// prompts of 1, 2 and 3+ tokens, a sequence split into prefill + decode steps (the state carries exactly the last
// L-1 rows of B * x), widths that are not a multiple of the workgroup, bf16 taps; WebGPU against the CPU.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const F32 = { atol: 2e-6, rtol: 2e-6 };

/** transformers' slow path: Bx = B * x, causal conv1d with zero left padding (L-1), C * y; all S tokens at once. */
function byDefinition(bcx: Float32Array | number[], w: ArrayLike<number>, s: number, h: number, taps: number): Float64Array {
  const out = new Float64Array(s * h);
  for (let c = 0; c < h; c++) {
    for (let t = 0; t < s; t++) {
      let y = 0;
      for (let k = 0; k < taps; k++) {
        const src = t - (taps - 1) + k;
        if (src < 0) continue;
        y += w[c * taps + k] * bcx[src * 3 * h + c] * bcx[src * 3 * h + 2 * h + c];
      }
      out[t * h + c] = bcx[t * 3 * h + h + c] * y;
    }
  }
  return out;
}

/** Runs the sequence in chunks of the given sizes through one state; returns the outputs in order. */
async function chunked(bcx: Tensor, weight: Tensor, sizes: number[], device: 'cpu' | 'webgpu'): Promise<Float32Array> {
  const [s] = bcx.shape;
  const h = bcx.shape[1] / 3;
  const taps = weight.shape[weight.ndim - 1];
  const x = await bcx.to(device);
  const w = await weight.to(device);
  const state = tg.zeros([taps - 1, h], { device });
  const parts: Float32Array[] = [];
  let at = 0;
  for (const n of sizes) {
    const y = tg.shortConv(tg.narrow(x, 0, at, n), w, state);
    parts.push((await y.toArray()) as Float32Array);
    y.dispose();
    at += n;
  }
  expect(at).toBe(s);
  for (const t of [x, w, state]) t.dispose();
  const out = new Float32Array(s * h);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

const CASES = [
  { name: '1 token', s: 1, h: 8, taps: 3, splits: [[1]] },
  { name: '2 tokens', s: 2, h: 8, taps: 3, splits: [[2], [1, 1]] },
  { name: '3 tokens', s: 3, h: 8, taps: 3, splits: [[3], [1, 1, 1], [2, 1]] },
  { name: '9 tokens, 67 channels', s: 9, h: 67, taps: 3, splits: [[9], [5, 1, 1, 1, 1], [1, 8], [2, 2, 5]] },
  { name: '6 tokens, 4 taps', s: 6, h: 130, taps: 4, splits: [[6], [3, 1, 2]] },
  { name: '1 tap (no state)', s: 4, h: 5, taps: 1, splits: [[4], [1, 3]] },
];

describe(`shortConv ${gpu.skipReason}`, () => {
  it.each(CASES)('$name: every split equals one pass and the definition', async ({ s, h, taps, splits }) => {
    const bcx = randomTensor([s, 3 * h]);
    const weight = randomTensor([h, 1, taps], 'bfloat16');
    const want = byDefinition((await bcx.toArray()) as Float32Array, (await weight.to('float32').toArray()) as Float32Array, s, h, taps);
    for (const sizes of splits) {
      const cpu = await chunked(bcx, weight, sizes, 'cpu');
      expectClose(cpu, want, F32, `cpu ${sizes.join('+')}`);
      if (gpu.available) expectClose(await chunked(bcx, weight, sizes, 'webgpu'), cpu, F32, `webgpu ${sizes.join('+')}`);
    }
  });

  it('the state holds the last L-1 rows of B * x (older rows when S < L-1)', async () => {
    const h = 3;
    // B = 1, x = token index + 1: Bx rows are 1, 2, 3, ...
    const rows = (from: number, n: number) =>
      Array.from({ length: n }, (_, t) => [...Array(h).fill(1), ...Array(h).fill(1), ...Array(h).fill(from + t + 1)]).flat();
    for (const device of ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const) {
      const w = tg.ones([h, 4], { device });
      const state = tg.zeros([3, h], { device });
      tg.shortConv(tg.tensor(rows(0, 2), { shape: [2, 3 * h], device }), w, state).dispose();
      expect(Array.from((await state.toArray()) as Float32Array), device).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2]);
      const y = tg.shortConv(tg.tensor(rows(2, 1), { shape: [1, 3 * h], device }), w, state);
      expect(Array.from((await y.toArray()) as Float32Array), device).toEqual([6, 6, 6]); // 0 + 1 + 2 + 3
      expect(Array.from((await state.toArray()) as Float32Array), device).toEqual([1, 1, 1, 2, 2, 2, 3, 3, 3]);
    }
  });

  it('with a conv bias: C * (conv + bias), on both devices', async () => {
    const [s, h, taps] = [4, 37, 3];
    const bcx = randomTensor([s, 3 * h]);
    const weight = randomTensor([h, 1, taps]);
    const bias = randomTensor([h], 'bfloat16');
    const bv = (await bias.to('float32').toArray()) as Float32Array;
    const xv = (await bcx.toArray()) as Float32Array;
    const plain = byDefinition(xv, (await weight.toArray()) as Float32Array, s, h, taps);
    const want = plain.map((v, i) => v + xv[Math.floor(i / h) * 3 * h + h + (i % h)] * bv[i % h]);
    const cpu = (await tg.shortConv(bcx, weight, tg.zeros([taps - 1, h]), bias).toArray()) as Float32Array;
    expectClose(cpu, want, F32, 'cpu');
    if (gpu.available) {
      const [g, gw, gb] = [await bcx.to('webgpu'), await weight.to('webgpu'), await bias.to('webgpu')];
      expectClose((await tg.shortConv(g, gw, tg.zeros([taps - 1, h], { device: 'webgpu' }), gb).toArray()) as Float32Array, cpu, F32, 'webgpu');
    }
    expect(() => tg.shortConv(bcx, weight, tg.zeros([taps - 1, h]), tg.zeros([h + 1]))).toThrow(/bias must be \[37\]/);
  });

  it('NaN and Inf propagate like the unfused ops', async () => {
    const h = 2;
    const bcx = tg.tensor([1, 1, 1, 1, NaN, 2, /* t1 */ 1, 1, 1, 1, 1, Infinity], { shape: [2, 3 * h] });
    const w = tg.ones([h, 3]);
    const cpu = (await tg.shortConv(bcx, w, tg.zeros([2, h])).toArray()) as Float32Array;
    expect(Number.isNaN(cpu[0]) && Number.isNaN(cpu[2])).toBe(true);
    expect(cpu[1]).toBe(2);
    expect(cpu[3]).toBe(Infinity);
    if (gpu.available) {
      const g = (await tg.shortConv(await bcx.to('webgpu'), await w.to('webgpu'), tg.zeros([2, h], { device: 'webgpu' })).toArray()) as Float32Array;
      expect(Array.from(g)).toEqual(Array.from(cpu));
    }
  });

  it('a decode step is one dispatch', async () => {
    if (!gpu.available) return;
    const state = tg.zeros([2, 64], { device: 'webgpu' });
    expect(await dispatchesOf([randomTensor([1, 192]), randomTensor([64, 1, 3], 'bfloat16')], (x, w) => tg.shortConv(x, w, state))).toBe(1);
    state.dispose();
  });

  it('rejects wrong shapes and dtypes with the field named', () => {
    const w = randomTensor([4, 1, 3]);
    expect(() => tg.shortConv(randomTensor([2, 11]), w, tg.zeros([2, 4]))).toThrow(/bcx must be \[S, 12\]/);
    expect(() => tg.shortConv(randomTensor([2, 12]), w, tg.zeros([3, 4]))).toThrow(/state must be \[2, 4\]/);
    expect(() => tg.shortConv(randomTensor([2, 12]), randomTensor([4, 2, 3]), tg.zeros([2, 4]))).toThrow(/weight must be \[H, L\] or \[H, 1, L\]/);
    expect(() => tg.shortConv(randomTensor([2, 12], 'bfloat16'), w, tg.zeros([2, 4]))).toThrow(/does not take bfloat16/);
    expect(() => tg.shortConv(randomTensor([2, 12]), w, tg.zeros([4, 2]).transpose(0, 1))).toThrow(/state must be \[2, 4\]|contiguous/);
  });
});
