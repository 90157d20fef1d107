// gatedDeltaNet (Qwen3.5's linear attention after its projections) against a by-definition float64 port of
// transformers' path written here (conv1d over the whole sequence with zero left padding, SiLU, l2norm,
// repeat_interleave of the key heads, the recurrent gated delta rule, the gated RMSNorm): the CPU matches it, any
// split of the sequence into prefill + decode calls equals one call, and WebGPU matches the CPU, for odd sizes, more
// state columns than the workgroup, strided views of one projection, NaN propagation and bad shapes.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { expectClose } from '../helpers/compare.js';
import { EPS, makeInputs, packedHead, run, split, type Geometry, type Inputs } from '../helpers/gated-delta-net.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const F32 = { atol: 2e-5, rtol: 2e-5 };

const silu = (x: number) => x / (1 + Math.exp(-x));
const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));

/** transformers' Qwen3_5MoeGatedDeltaNet from the projections on, for all S tokens from zero states. */
function byDefinition(
  g: Geometry,
  s: number,
  x: { qkv: number[]; z: number[]; b: number[]; a: number[]; conv: number[]; aLog: number[]; dtBias: number[]; norm: number[] },
): Float64Array {
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv, convKernel: taps } = g;
  const c = 2 * hk * dk + hv * dv;
  const conv = new Float64Array(s * c);
  for (let t = 0; t < s; t++) {
    for (let ch = 0; ch < c; ch++) {
      let y = 0;
      for (let k = 0; k < taps; k++) {
        const src = t - (taps - 1) + k;
        if (src >= 0) y += x.conv[ch * taps + k] * x.qkv[src * c + ch];
      }
      conv[t * c + ch] = silu(y);
    }
  }
  const out = new Float64Array(s * hv * dv);
  for (let h = 0; h < hv; h++) {
    const kh = Math.floor(h / (hv / hk));
    const S = new Float64Array(dk * dv);
    for (let t = 0; t < s; t++) {
      const q = Array.from({ length: dk }, (_, i) => conv[t * c + kh * dk + i]);
      const k = Array.from({ length: dk }, (_, i) => conv[t * c + hk * dk + kh * dk + i]);
      const v = Array.from({ length: dv }, (_, j) => conv[t * c + 2 * hk * dk + h * dv + j]);
      const nq = 1 / Math.sqrt(q.reduce((m, e) => m + e * e, 0) + EPS) / Math.sqrt(dk);
      const nk = 1 / Math.sqrt(k.reduce((m, e) => m + e * e, 0) + EPS);
      const decay = Math.exp(-Math.exp(x.aLog[h]) * softplus(x.a[t * hv + h] + x.dtBias[h]));
      const beta = 1 / (1 + Math.exp(-x.b[t * hv + h]));
      const o = new Float64Array(dv);
      for (let j = 0; j < dv; j++) {
        let kv = 0;
        for (let i = 0; i < dk; i++) {
          S[i * dv + j] *= decay;
          kv += S[i * dv + j] * k[i] * nk;
        }
        const delta = (v[j] - kv) * beta;
        for (let i = 0; i < dk; i++) {
          S[i * dv + j] += k[i] * nk * delta;
          o[j] += S[i * dv + j] * q[i] * nq;
        }
      }
      const rms = Math.sqrt(o.reduce((m, e) => m + e * e, 0) / dv + EPS);
      for (let j = 0; j < dv; j++) out[(t * hv + h) * dv + j] = ((x.norm[j] * o[j]) / rms) * silu(x.z[t * hv * dv + h * dv + j]);
    }
  }
  return out;
}

async function definition(x: Inputs, g: Geometry, s: number): Promise<Float64Array> {
  const parts = split(x.proj, g);
  const arr = async (t: Tensor) => Array.from((await t.to('float32').toArray()) as Float32Array);
  return byDefinition(g, s, {
    qkv: await arr(parts.qkv.contiguous()),
    z: await arr(parts.z.contiguous()),
    b: await arr(parts.b.contiguous()),
    a: await arr(parts.a.contiguous()),
    conv: await arr(x.conv),
    aLog: await arr(x.aLog),
    dtBias: await arr(x.dtBias),
    norm: await arr(x.norm),
  });
}

const CASES = [
  { name: 'one token, 2 value heads per key head', g: { keyHeads: 1, valueHeads: 2, keyDim: 8, valueDim: 8, convKernel: 4 }, s: 1, splits: [[1]] },
  {
    name: '12 tokens, odd dims',
    g: { keyHeads: 2, valueHeads: 4, keyDim: 12, valueDim: 20, convKernel: 4 },
    s: 12,
    splits: [[12], [7, 5], [1, 1, 10], [3, 3, 3, 3]],
  },
  { name: 'more columns than the workgroup, 3 taps', g: { keyHeads: 1, valueHeads: 1, keyDim: 16, valueDim: 200, convKernel: 3 }, s: 5, splits: [[5], [2, 3]] },
  { name: 'one tap (no conv state), dk 130', g: { keyHeads: 2, valueHeads: 2, keyDim: 130, valueDim: 6, convKernel: 1 }, s: 3, splits: [[3], [1, 2]] },
];

describe(`gatedDeltaNet ${gpu.skipReason}`, () => {
  it.each(CASES)('$name: the definition, every split, and WebGPU', async ({ g, s, splits }) => {
    const x = makeInputs(g, s);
    const want = await definition(x, g, s);
    let _cpuWhole: Float32Array | undefined;
    for (const sizes of splits) {
      const cpu = await run(x, g, sizes, 'cpu');
      expectClose(cpu.out, want, F32, `cpu ${sizes.join('+')}`);
      _cpuWhole ??= cpu.out;
      if (gpu.available) {
        const webgpu = await run(x, g, sizes, 'webgpu');
        expectClose(webgpu.out, cpu.out, F32, `webgpu ${sizes.join('+')}`);
        expectClose(webgpu.state, cpu.state, F32, `webgpu state ${sizes.join('+')}`);
      }
    }
  });

  it('a NaN input poisons only its own value heads', async () => {
    const g = { keyHeads: 2, valueHeads: 4, keyDim: 8, valueDim: 8, convKernel: 4 };
    const x = makeInputs(g, 2);
    const values = (await x.proj.toArray()) as Float32Array;
    values[0] = NaN; // q channel 0 of key head 0: value heads 0 and 1
    x.proj = tg.tensor(values, { shape: x.proj.shape });
    for (const device of ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const) {
      const { out } = await run(x, g, [2], device);
      const headNaN = (t: number, h: number) => out.subarray((t * 4 + h) * 8, (t * 4 + h + 1) * 8).every(Number.isNaN);
      expect([headNaN(0, 0), headNaN(0, 1), headNaN(1, 1)], device).toEqual([true, true, true]);
      expect(out.subarray(2 * 8, 4 * 8).some(Number.isNaN), device).toBe(false);
    }
  });

  it('inputs in separate buffers (packed by the op) give the bits of views of one projection', async () => {
    const g = { keyHeads: 2, valueHeads: 4, keyDim: 8, valueDim: 12, convKernel: 4 };
    const x = makeInputs(g, 5);
    for (const device of ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const) {
      const proj = await x.proj.to(device);
      const w = { conv: await x.conv.to(device), aLog: await x.aLog.to(device), dtBias: await x.dtBias.to(device), norm: await x.norm.to(device) };
      const views = split(proj, g);
      const apart = { qkv: views.qkv.contiguous(), z: views.z.contiguous(), b: views.b.contiguous(), a: views.a.to('float32').contiguous() };
      const run = async (inputs: typeof views) => {
        const state = tg.newGatedDeltaNetState(g, device);
        const y = (await tg.gatedDeltaNet(inputs, w, state, { ...g, eps: EPS }).toArray()) as Float32Array;
        return { y, s: (await state.recurrent.toArray()) as Float32Array };
      };
      const [one, separate] = [await run(views), await run(apart)];
      expect(Array.from(separate.y), device).toEqual(Array.from(one.y));
      expect(Array.from(separate.s), device).toEqual(Array.from(one.s));
    }
  });

  it('a batch of sequences (rows 1, 3, 2 in pool slots 2, 0, 1) equals each alone, in one dispatch', async () => {
    const g = { keyHeads: 1, valueHeads: 2, keyDim: 8, valueDim: 12, convKernel: 4 };
    const rows = [1, 3, 2];
    const slots = [2, 0, 1];
    const warm = makeInputs(g, 4); // each sequence's history, so every slot starts from a state of its own
    const x = makeInputs(g, 6);
    for (const device of ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const) {
      const w = { conv: await x.conv.to(device), ...packedHead(await tg.cat([x.aLog, x.dtBias, x.norm]).to(device), g) };
      const [warmProj, proj] = [await warm.proj.to(device), await x.proj.to(device)];
      const pool = {
        conv: tg.zeros([3, g.valueHeads, g.convKernel - 1, 2 * g.keyDim + g.valueDim], { device }),
        recurrent: tg.zeros([3, g.valueHeads, g.keyDim, g.valueDim], { device }),
      };
      const alone: number[] = [];
      let at = 0;
      for (let i = 0; i < 3; i++) {
        const own = tg.newGatedDeltaNetState(g, device);
        tg.gatedDeltaNet(split(tg.narrow(warmProj, 0, i, 2), g), w, own, { ...g, eps: EPS }).dispose();
        tg.copyInto(tg.select(pool.conv, 0, slots[i]), own.conv);
        tg.copyInto(tg.select(pool.recurrent, 0, slots[i]), own.recurrent);
        alone.push(...((await tg.gatedDeltaNet(split(tg.narrow(proj, 0, at, rows[i]), g), w, own, { ...g, eps: EPS }).toArray()) as Float32Array));
        at += rows[i];
      }
      const batched = () => tg.gatedDeltaNet(split(proj, g), w, pool, { ...g, eps: EPS }, { rows, slots });
      expectClose((await batched().toArray()) as Float32Array, alone, F32, `${device} batch vs alone`);
      if (device === 'webgpu') {
        const before = tg.gpuCounters().dispatches;
        batched().dispose();
        expect(tg.gpuCounters().dispatches - before).toBe(1);
      }
      expect(() => tg.gatedDeltaNet(split(proj, g), w, pool, { ...g, eps: EPS }, { rows: [1, 3, 1], slots })).toThrow(/adding up to the 6 rows/);
      expect(() => tg.gatedDeltaNet(split(proj, g), w, pool, { ...g, eps: EPS }, { rows, slots: [0, 0, 1] })).toThrow(/distinct slots below 3/);
    }
  });

  it('a decode step is one dispatch', async () => {
    if (!gpu.available) return;
    const g = { keyHeads: 2, valueHeads: 4, keyDim: 16, valueDim: 16, convKernel: 4 };
    const x = makeInputs(g, 1);
    const state = tg.newGatedDeltaNetState(g, 'webgpu');
    const n = await dispatchesOf([x.proj, x.conv, tg.cat([x.aLog, x.dtBias, x.norm])], (proj, conv, head) =>
      tg.gatedDeltaNet(split(proj, g), { conv, ...packedHead(head, g) }, state, { ...g, eps: EPS }),
    );
    expect(n).toBe(1);
    state.conv.dispose();
    state.recurrent.dispose();
  });

  it('bad shapes and dtypes are typed errors naming the tensor', () => {
    const g = { keyHeads: 2, valueHeads: 4, keyDim: 8, valueDim: 8, convKernel: 4 };
    const x = makeInputs(g, 3);
    const state = tg.newGatedDeltaNetState(g, 'cpu');
    const parts = split(x.proj, g);
    const call =
      (over: Partial<typeof parts>, st = state, geo: Geometry = g) =>
      () =>
        tg.gatedDeltaNet({ ...parts, ...over }, x, st, { ...geo, eps: EPS });
    expect(call({ z: tg.narrow(x.proj, 1, 0, 31) })).toThrow(/z must be \[3, 32\]/);
    expect(call({ a: tg.zeros([3, 4], { dtype: 'int32' }) })).toThrow(/gatedDeltaNet a does not take int32/);
    expect(call({}, { conv: tg.zeros([4, 2, 24]), recurrent: state.recurrent })).toThrow(/conv state must be \[4, 3, 24\]/);
    expect(call({}, state, { ...g, valueHeads: 3 })).toThrow(/multiple of keyHeads/);
    expect(call({ b: tg.zeros([2, 4]) })).toThrow(/b must be \[3, 4\]/);
  });
});
