// Epilogues fused into the projection kernels, each against the separate ops it replaces: linear + residual (GEMV
// and GEMM paths), expertLinear with SwiGLU (gate|up of the chosen experts) and with combine + residual (down),
// including the grouped prefill path. On the CPU the fused op equals the unfused chain exactly; on WebGPU the
// float32 result equals the GPU's own unfused chain bit for bit (same products, same adds) and the CPU within f32
// accumulation tolerance; each fused call is one dispatch on the decode path.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor, randomValues } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const bits = async (t: Tensor) => new Uint32Array(((await t.to('float32').toArray()) as Float32Array).buffer);
const F32 = { atol: 2e-5, rtol: 2e-5 };

/** Routing of t tokens over e experts, top k: distinct ids per token, weights summing to 1. */
function routing(t: number, e: number, k: number, seed: number): [Tensor, Tensor] {
  const g = new tg.Generator(seed);
  const ids: number[] = [];
  const w: number[] = [];
  for (let i = 0; i < t; i++) {
    const pick = new Set<number>();
    while (pick.size < k) pick.add(g.nextU32() % e);
    ids.push(...pick);
    const raw = [...pick].map(() => 0.1 + g.uniform());
    const sum = raw.reduce((a, b) => a + b, 0);
    w.push(...raw.map((v) => v / sum));
  }
  return [tg.tensor(ids, { dtype: 'int32', shape: [t, k] }), tg.tensor(w, { shape: [t, k] })];
}

const seeded = (shape: number[], dtype: DType, seed: number) =>
  tg.tensor(
    randomValues(
      shape.reduce((a, b) => a * b, 1),
      dtype,
      'normal',
      seed,
    ),
    { shape, dtype, saturate: true },
  );

describe('fused epilogues on the CPU equal the unfused ops exactly', () => {
  it('linear + residual', async () => {
    const x = randomTensor([3, 40]);
    const w = randomTensor([24, 40], 'bfloat16');
    const r = randomTensor([3, 24]);
    expect(await bits(tg.linear(x, w, undefined, { residual: r }))).toEqual(await bits(tg.add(r, tg.linear(x, w))));
  });

  it('expertLinear swiglu and combine + residual', async () => {
    const [ids, cw] = routing(3, 6, 2, 1);
    const x = randomTensor([3, 32]);
    const gateUp = randomTensor([6, 20, 32], 'bfloat16');
    const down = randomTensor([6, 32, 10], 'bfloat16');
    const r = randomTensor([3, 32]);
    const act = tg.expertLinear(x, gateUp, ids, { activation: 'swiglu' });
    expect(act.shape).toEqual([6, 10]);
    expect(await bits(act)).toEqual(await bits(tg.swiglu(tg.expertLinear(x, gateUp, ids))));
    expect(await bits(tg.expertLinear(act, down, ids, { combine: cw, residual: r }))).toEqual(
      await bits(tg.add(tg.expertLinear(act, down, ids, { combine: cw }), r)),
    );
  });

  it('linear swiglu (+ residual) equals swiglu of linear (+ add)', async () => {
    const x = randomTensor([3, 40]);
    const w = randomTensor([48, 40], 'bfloat16');
    const r = randomTensor([3, 24]);
    const act = tg.linear(x, w, undefined, { activation: 'swiglu' });
    expect(act.shape).toEqual([3, 24]);
    expect(await bits(act)).toEqual(await bits(tg.swiglu(tg.linear(x, w))));
    expect(await bits(tg.linear(x, w, undefined, { activation: 'swiglu', residual: r }))).toEqual(await bits(tg.add(tg.swiglu(tg.linear(x, w)), r)));
  });

  it('moeRouter equals moeRoute of linear', async () => {
    const x = randomTensor([3, 48]);
    const w = randomTensor([16, 48], 'bfloat16');
    const fused = tg.moeRouter(x, w, 4, { normalize: true });
    const chain = tg.moeRoute(tg.linear(x, w), 4, { normalize: true });
    expect(await fused.ids.toArray()).toEqual(await chain.ids.toArray());
    expect(await bits(fused.weights)).toEqual(await bits(chain.weights));
  });

  it('rejects misuse by name', () => {
    expect(() => tg.moeRouter(randomTensor([1, 8]), randomTensor([4, 9]), 2)).toThrow(/x must be \[T, H\] and weight \[E, H\]/);
    expect(() => tg.moeRouter(randomTensor([1, 8]), randomTensor([4, 8]), 5)).toThrow(/topK must be in 1\.\.4/);
    const [ids, cw] = routing(1, 4, 2, 2);
    const x = randomTensor([1, 8]);
    expect(() => tg.linear(x, randomTensor([5, 8]), undefined, { residual: randomTensor([1, 4]) })).toThrow(/residual must have the output's shape \[1, 5\]/);
    expect(() => tg.linear(x, randomTensor([5, 8]), undefined, { activation: 'swiglu' })).toThrow(/swiglu needs an even N/);
    expect(() => tg.linear(x, randomTensor([6, 8]), randomTensor([6]), { activation: 'swiglu' })).toThrow(/swiglu does not take a bias/);
    expect(() => tg.linear(x, randomTensor([6, 8]), undefined, { activation: 'swiglu', residual: randomTensor([1, 6]) })).toThrow(
      /residual must have the output's shape \[1, 3\]/,
    );
    expect(() => tg.expertLinear(x, randomTensor([4, 6, 8]), ids, { activation: 'swiglu', combine: cw })).toThrow(/not with combine/);
    expect(() => tg.expertLinear(x, randomTensor([4, 5, 8]), ids, { activation: 'swiglu' })).toThrow(/even N/);
    expect(() => tg.expertLinear(x, randomTensor([4, 6, 8]), ids, { residual: randomTensor([1, 6]) })).toThrow(/give combine too/);
  });
});

describe.skipIf(!gpu.available)(`fused epilogues on WebGPU ${gpu.skipReason}`, () => {
  it.each([
    ['GEMV (decode)', 2],
    ['GEMM (prefill)', 37],
  ] as const)('linear + residual: %s, f32 and bf16 weights', async (_, m) => {
    for (const wd of ['float32', 'bfloat16'] as const) {
      const x = seeded([m, 200], 'float32', 10 + m);
      const w = seeded([72, 200], wd, 11 + m);
      const r = seeded([m, 72], 'float32', 12 + m);
      const [gx, gw, gr] = await Promise.all([x, w, r].map((t) => t.to('webgpu')));
      const fused = tg.linear(gx, gw, undefined, { residual: gr });
      expect(await bits(fused)).toEqual(await bits(tg.add(gr, tg.linear(gx, gw))));
      expectClose((await fused.toArray()) as Float32Array, (await tg.linear(x, w, undefined, { residual: r }).toArray()) as Float32Array, F32, `m ${m} ${wd}`);
    }
  });

  it.each([
    ['GEMV (decode), one dispatch', 1],
    ['GEMV (decode), 4 rows', 4],
    ['GEMM (prefill), unfused', 9],
  ] as const)('linear swiglu (+ residual): %s; f32, bf16 and FP8 block weights, odd widths', async (_, m) => {
    for (const [wd, n2, k] of [
      ['float32', 2 * 37, 200],
      ['bfloat16', 2 * 72, 136],
      ['float8_e4m3fn', 2 * 160, 256],
    ] as const) {
      const x = seeded([m, k], 'float32', 30 + m);
      const plain = seeded([n2, k], 'float32', 31 + m);
      const q = wd === 'float8_e4m3fn' ? tg.quantize(plain, { granularity: 'block128' }) : undefined;
      const w = q ? q.data : plain.to(wd);
      const opts = q ? { weightScale: q.scale } : {};
      const r = seeded([m, n2 / 2], 'float32', 32 + m);
      const [gx, gw, gr, gs] = await Promise.all([x, w, r, ...(q ? [q.scale] : [])].map((t) => t.to('webgpu')));
      const gopts = gs ? { weightScale: gs } : {};
      const fused = tg.linear(gx, gw, undefined, { ...gopts, activation: 'swiglu', residual: gr });
      expect(fused.shape).toEqual([m, n2 / 2]);
      // The GPU's own unfused chain: same products and adds, so the same bits.
      expect(await bits(fused), `${wd} m ${m}`).toEqual(await bits(tg.add(tg.swiglu(tg.linear(gx, gw, undefined, gopts)), gr)));
      const cpu = tg.linear(x, w, undefined, { ...opts, activation: 'swiglu', residual: r });
      expectClose((await fused.toArray()) as Float32Array, (await cpu.toArray()) as Float32Array, { atol: 1e-4, rtol: 1e-4 }, `${wd} m ${m} vs cpu`);
    }
    if (m === 1)
      expect(
        await dispatchesOf([seeded([1, 64], 'float32', 1), seeded([96, 64], 'bfloat16', 2)], (a, b) => tg.linear(a, b, undefined, { activation: 'swiglu' })),
      ).toBe(1);
  });

  it.each([
    ['decode (expert GEMV)', 1],
    ['prefill (grouped expert GEMM)', 40],
  ] as const)('expertLinear swiglu and combine + residual: %s', async (_, t) => {
    const [ids, cw] = routing(t, 8, 2, 3 + t);
    const x = seeded([t, 64], 'float32', 20 + t);
    const gateUp = seeded([8, 2 * 48, 64], 'bfloat16', 21 + t);
    const down = seeded([8, 64, 48], 'bfloat16', 22 + t);
    const r = seeded([t, 64], 'float32', 23 + t);
    const g = await Promise.all([ids, cw, x, gateUp, down, r].map((v) => v.to('webgpu')));
    const [gids, gcw, gx, ggu, gdown, gr] = g;
    const act = tg.expertLinear(gx, ggu, gids, { activation: 'swiglu' });
    expect(await bits(act)).toEqual(await bits(tg.swiglu(tg.expertLinear(gx, ggu, gids))));
    const out = tg.expertLinear(act, gdown, gids, { combine: gcw, residual: gr });
    expect(await bits(out)).toEqual(await bits(tg.add(tg.expertLinear(act, gdown, gids, { combine: gcw }), gr)));
    const cpuAct = tg.expertLinear(x, gateUp, ids, { activation: 'swiglu' });
    expectClose((await act.toArray()) as Float32Array, (await cpuAct.toArray()) as Float32Array, F32, 'swiglu');
    const cpuOut = tg.expertLinear(cpuAct, down, ids, { combine: cw, residual: r });
    expectClose((await out.toArray()) as Float32Array, (await cpuOut.toArray()) as Float32Array, { atol: 1e-4, rtol: 1e-4 }, 'down');
  });

  it.each([
    ['128 experts, fused', 128, 256],
    ['1100 experts, router GEMV + top-k', 1100, 16],
  ] as const)('moeRouter matches the CPU: %s', async (_, e, h) => {
    for (const t of [1, 3]) {
      const x = seeded([t, h], 'float32', 30 + t);
      const w = seeded([e, h], 'bfloat16', 31 + t);
      const want = tg.moeRouter(x, w, 8, { normalize: true });
      const got = tg.moeRouter(await x.to('webgpu'), await w.to('webgpu'), 8, { normalize: true });
      // Random normal logits over h >= 16 terms: no two of the top 8 are within float32 rounding of each other.
      expect(Array.from(await got.ids.toArray())).toEqual(Array.from(await want.ids.toArray()));
      expectClose((await got.weights.toArray()) as Float32Array, (await want.weights.toArray()) as Float32Array, { atol: 1e-5, rtol: 1e-4 }, `T ${t}`);
    }
  });

  it('each fused decode call is one dispatch', async () => {
    expect(await dispatchesOf([randomTensor([1, 64]), randomTensor([32, 64], 'bfloat16')], (x, w) => tg.moeRouter(x, w, 4).ids)).toBe(1);
    const [ids, cw] = routing(1, 8, 2, 9);
    expect(
      await dispatchesOf([randomTensor([1, 64]), randomTensor([32, 64], 'bfloat16'), randomTensor([1, 32])], (x, w, r) =>
        tg.linear(x, w, undefined, { residual: r }),
      ),
    ).toBe(1);
    expect(
      await dispatchesOf([randomTensor([1, 64]), randomTensor([8, 32, 64], 'bfloat16'), ids], (x, w, i) => tg.expertLinear(x, w, i, { activation: 'swiglu' })),
    ).toBe(1);
    expect(
      await dispatchesOf([randomTensor([2, 16]), randomTensor([8, 64, 16], 'bfloat16'), ids, cw, randomTensor([1, 64])], (x, w, i, c, r) =>
        tg.expertLinear(x, w, i, { combine: c, residual: r }),
      ),
    ).toBe(1);
  });
});
