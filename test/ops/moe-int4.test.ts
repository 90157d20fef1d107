// The fused MoE expert kernels over packed 4-bit experts (stacked [E, N, K/8] words with per-expert group scales and
// zero points, formats/int4.ts's layout): the CPU reference against expertLinear over the dequantized float32
// weight, the WebGPU per-slot GEMV (T*k < 32) and grouped expert GEMM (T*k >= 32) against the CPU, for odd N,
// several experts, top-2, with and without an act-order permutation the experts share; and a decode / prefill MoE
// block over int4 experts costs the dispatches of the float block (only the chosen experts' bytes are read).
import { describe, expect, it } from 'vitest';
import { DTypeError, expertLinear, Generator, gpuCounters, setDefaultDevice, ShapeError, synchronize, tensor, type Tensor } from '../../src/index.js';
import { dequantizeInt4, quantizeInt4 } from '../../src/ops/int4.js';
import { fusedMoe } from '../../src/models/layers/blocks.js';
import type { MoeWeights } from '../../src/models/layers/weights.js';
import { expectClose, randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

interface Int4Stack {
  data: Tensor;
  scale: Tensor;
  zero: Tensor;
  groupSize: number;
  perm?: Tensor;
}

/** E random float experts [N, K] quantized to 4 bits (float16 scales), with a random shared permutation of K. */
function randomStack(e: number, n: number, k: number, groupSize: number, seed: number, actOrder: boolean): Int4Stack {
  const q = quantizeInt4(randomTensor([e * n, k]), groupSize);
  const g = new Generator(seed);
  let perm: Tensor | undefined;
  if (actOrder) {
    const p = Int32Array.from({ length: k }, (_, i) => i);
    for (let i = k - 1; i > 0; i--) {
      const j = g.nextU32() % (i + 1);
      [p[i], p[j]] = [p[j], p[i]];
    }
    perm = tensor(p, { shape: [k] });
  }
  const groups = k / groupSize;
  return {
    data: q.data.reshape([e, n, k / 8]),
    scale: q.scale.to('float16').reshape([e, n, groups]),
    zero: q.zero.reshape([e, n, groups]),
    groupSize,
    perm,
  };
}

async function toGpu(w: Int4Stack): Promise<Int4Stack> {
  return {
    data: await w.data.to('webgpu'),
    scale: await w.scale.to('webgpu'),
    zero: await w.zero.to('webgpu'),
    groupSize: w.groupSize,
    perm: w.perm && (await w.perm.to('webgpu')),
  };
}

const int4Options = (w: Int4Stack) => ({ scale: w.scale, int4: { zero: w.zero, groupSize: w.groupSize, perm: w.perm } });

/** Top-k ids with distinct experts per token. */
function randomIds(t: number, topK: number, e: number, seed: number): Tensor {
  const g = new Generator(seed);
  const ids: number[] = [];
  for (let i = 0; i < t; i++) {
    const chosen: number[] = [];
    while (chosen.length < topK) {
      const id = g.nextU32() % e;
      if (!chosen.includes(id)) chosen.push(id);
    }
    ids.push(...chosen);
  }
  return tensor(ids, { shape: [t, topK], dtype: 'int32' });
}

const E = 5;
const TOP_K = 2;

describe(`expertLinear over packed 4-bit experts ${gpu.skipReason}`, () => {
  for (const [n, k, g, actOrder] of [
    [13, 64, 32, false],
    [33, 128, 64, true],
    [14, 256, 128, false],
  ] as const) {
    it(`N=${n} K=${k} g=${g}${actOrder ? ' act-order' : ''}: CPU = dequantized float32 weight; WebGPU GEMV (T=1, 3) and grouped GEMM (T=20) = CPU`, async () => {
      const w = randomStack(E, n, k, g, n + k, actOrder);
      const dense = dequantizeInt4(w); // float32 [E, N, K], columns in activation order
      const gw = gpu.available ? await toGpu(w) : undefined;
      for (const t of [1, 3, 20]) {
        const x = randomTensor([t, k]);
        const ids = randomIds(t, TOP_K, E, 7 * t + n);
        const combine = randomTensor([t, TOP_K]);
        const residual = randomTensor([t, n]);
        const modes = [
          ['gather', {}],
          ['combine + residual', { combine, residual }],
          ...(n % 2 === 0 ? [['swiglu', { activation: 'swiglu' as const }] as const] : []),
        ] as const;
        for (const [mode, o] of modes) {
          const want = expertLinear(x, dense, ids, o);
          const cpu = expertLinear(x, w.data, ids, { ...int4Options(w), ...o });
          expectClose(await cpu.toArray(), await want.toArray(), { atol: 1e-5, rtol: 1e-5 }, `cpu ${mode} t=${t}`);
          if (gw) {
            const [gx, gi] = [await x.to('webgpu'), await ids.to('webgpu')];
            const go = {
              ...o,
              ...('combine' in o ? { combine: await combine.to('webgpu'), residual: await residual.to('webgpu') } : {}),
            };
            const got = expertLinear(gx, gw.data, gi, { ...int4Options(gw), ...go });
            expectClose(await got.toArray(), await cpu.toArray(), { atol: 1e-4, rtol: 1e-4 }, `webgpu ${mode} t=${t}`);
          }
        }
      }
    });
  }

  it('rejects a weight without scales or with a wrong permutation with typed errors', () => {
    const w = randomStack(E, 8, 64, 32, 1, false);
    const x = randomTensor([1, 64]);
    const ids = randomIds(1, TOP_K, E, 1);
    expect(() => expertLinear(x, w.data, ids, { int4: { zero: w.zero, groupSize: 32 } })).toThrow(DTypeError);
    const badPerm = tensor(new Int32Array(32), { shape: [32] });
    expect(() => expertLinear(x, w.data, ids, { ...int4Options(w), int4: { zero: w.zero, groupSize: 32, perm: badPerm } })).toThrow(ShapeError);
    expect(() => expertLinear(x, w.data, ids, { ...int4Options(w), int4: { zero: w.zero, groupSize: 64 } })).toThrow(ShapeError);
  });
});

describe(`expertLinear over a frozen packed 4-bit stack: x gradient through the transposed stack ${gpu.skipReason}`, () => {
  // N odd and past one 64-wide tile; several groups along K; act-order permutes the columns dx must come back in.
  for (const [n, k, g, actOrder] of [
    [37, 128, 32, true],
    [70, 64, 32, false],
  ] as const) {
    it(`N=${n} K=${k} g=${g}${actOrder ? ' act-order' : ''}: dx = the dequantized weight's on the CPU; WebGPU GEMV (T=3) and grouped GEMM (T=20) = CPU`, async () => {
      const w = randomStack(E, n, k, g, 5 * n + k, actOrder);
      const dense = dequantizeInt4(w);
      const gw = gpu.available ? await toGpu(w) : undefined;
      for (const t of [3, 20]) {
        const ids = randomIds(t, TOP_K, E, 3 * t + n);
        const [xHost, rHost] = [randomTensor([t, k]), randomTensor([t * TOP_K, n])];
        const dx = async (weight: Tensor, options: object, device: 'cpu' | 'webgpu') => {
          const [x, r, i] = device === 'cpu' ? [xHost.clone(), rHost, ids] : [await xHost.to('webgpu'), await rHost.to('webgpu'), await ids.to('webgpu')];
          x.requiresGrad_();
          expertLinear(x, weight, i, options).mul(r).sum().backward();
          const out = await x.grad!.toArray();
          x.dispose();
          return out;
        };
        const want = await dx(dense, {}, 'cpu');
        const cpu = await dx(w.data, int4Options(w), 'cpu');
        expectClose(cpu, want, { atol: 1e-5, rtol: 1e-5 }, `cpu t=${t}`);
        expect(Array.from(cpu).some((v) => v !== 0)).toBe(true);
        if (gw) expectClose(await dx(gw.data, int4Options(gw), 'webgpu'), cpu, { atol: 1e-4, rtol: 1e-4 }, `webgpu t=${t}`);
      }
    });
  }
});

/** An MoE block's weights (router [E, H], gate|up [E, 2I, H], down [E, H, I]), float32 and quantized to 4 bits. */
function moeWeights(h: number, inter: number): { float: MoeWeights; int4: MoeWeights; stacks: Int4Stack[] } {
  const router = { data: randomTensor([E, h]) };
  const gateUp = randomStack(E, 2 * inter, h, 32, 3, true);
  const down = randomStack(E, h, inter, 32, 4, false);
  const weight = (s: Int4Stack) => ({ data: s.data, scale: s.scale, int4: { groupSize: s.groupSize, zero: s.zero, ...(s.perm ? { perm: s.perm } : {}) } });
  return {
    float: { kind: 'moe', router, gateUp: { data: dequantizeInt4(gateUp) }, down: { data: dequantizeInt4(down) } },
    int4: { kind: 'moe', router, gateUp: weight(gateUp), down: weight(down) },
    stacks: [gateUp, down],
  };
}

async function onGpu(m: MoeWeights): Promise<MoeWeights> {
  const w = async (x: MoeWeights['gateUp']) => ({
    data: await x.data.to('webgpu'),
    scale: x.scale && (await x.scale.to('webgpu')),
    ...(x.int4
      ? { int4: { groupSize: x.int4.groupSize, zero: await x.int4.zero.to('webgpu'), ...(x.int4.perm ? { perm: await x.int4.perm.to('webgpu') } : {}) } }
      : {}),
  });
  return { kind: 'moe', router: await w(m.router), gateUp: await w(m.gateUp), down: await w(m.down) };
}

describe(`fusedMoe over packed 4-bit experts ${gpu.skipReason}`, () => {
  const routing = { topK: TOP_K, normalize: true };

  it('equals the block over the dequantized float experts (CPU; WebGPU = CPU)', async () => {
    const { float, int4 } = moeWeights(64, 32);
    const g = gpu.available ? { float: await onGpu(float), int4: await onGpu(int4) } : undefined;
    for (const t of [1, 20]) {
      const x = randomTensor([t, 64]);
      const residual = randomTensor([t, 64]);
      const want = fusedMoe(x, float, routing, residual);
      const cpu = fusedMoe(x, int4, routing, residual);
      expectClose(await cpu.toArray(), await want.toArray(), { atol: 1e-5, rtol: 1e-5 }, `cpu t=${t}`);
      if (g) {
        const got = fusedMoe(await x.to('webgpu'), g.int4, routing, await residual.to('webgpu'));
        expectClose(await got.toArray(), await cpu.toArray(), { atol: 1e-4, rtol: 1e-4 }, `webgpu t=${t}`);
      }
    }
  });

  it.skipIf(!gpu.available)('costs the dispatches of the float block, with nothing read back (decode and prefill)', async () => {
    const { float, int4 } = moeWeights(64, 32);
    const g = { float: await onGpu(float), int4: await onGpu(int4) };
    for (const t of [1, 20]) {
      const x = await randomTensor([t, 64]).to('webgpu');
      const residual = await randomTensor([t, 64]).to('webgpu');
      const count = async (w: MoeWeights) => {
        await synchronize();
        const before = gpuCounters();
        const out = fusedMoe(x, w, routing, residual);
        const after = gpuCounters();
        out.dispose();
        return { dispatches: after.dispatches - before.dispatches, reads: after.reads - before.reads };
      };
      const f = await count(g.float);
      const q = await count(g.int4);
      expect(q, `t=${t}`).toEqual(f);
      expect(q.reads).toBe(0);
      if (t === 1) expect(q.dispatches).toBe(3); // router + top-k, gate|up with SwiGLU, down + combine + residual
    }
  });
});
