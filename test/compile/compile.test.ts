// compile(): traced once per signature, fused, recorded and replayed; every result checked against eager.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { compile, setDefaultDevice, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { randomInput, randomValues } from './inputs.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices: ('cpu' | 'webgpu')[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

/** Storage-exact values: float bits (16-bit floats decode to float32 one to one), integers as they are. */
async function codes(t: Tensor): Promise<number[]> {
  if (t.dtype === 'int64') return Array.from(await tg.toBigInt64Array(t), Number);
  const a = await t.toArray();
  return a instanceof Float32Array ? Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length)) : Array.from(a);
}

const bits = async (t: Tensor) => Array.from(new Uint32Array(new Float32Array(Array.from(await t.toArray())).buffer));

describe.each(devices)('compile on %s', (device) => {
  const make = (shape: number[], seed: number, dtype: tg.DType = 'float32') => randomInput(device, shape, seed, dtype);

  it('a 16-op chain is one kernel and gives the eager bits, call after call', async () => {
    const chain = (x: Tensor) => {
      let y = x;
      for (let i = 0; i < 4; i++) y = y.mul(1.5).add(0.25).tanh().sub(x);
      return y;
    };
    const compiled = compile(chain);
    for (let call = 0; call < 4; call++) {
      const x = make([1001], 10 + call);
      const want = chain(x);
      const got = compiled(x);
      expect(await bits(got)).toEqual(await bits(want));
      for (const t of [x, want, got]) t.dispose();
    }
    const s = compiled.stats().signatures[0];
    expect(s.fusedGroups).toHaveLength(1);
    expect(s.fusedGroups[0]).toContain('16 ops');
    if (device === 'webgpu') {
      expect(s.mode).toBe('recorded');
      expect(s.dispatches).toBe(1);
      expect(s.eagerDispatches).toBe(16);
    } else expect(s.mode).toBe('program');
    expect(compiled.explain()).toContain('fusedMap');
  });
});

describe.each(devices)('compile on %s: fusion boundaries', (device) => {
  const make = (shape: number[], seed: number, dtype: tg.DType = 'float32') => {
    const v = randomValues(
      shape.reduce((a, b) => a * b, 1),
      seed,
    );
    return tg.tensor(dtype === 'int32' ? v.map((x) => Math.round(x * 50)) : v, { shape, device, dtype });
  };

  /** Runs eager and compiled over several calls with fresh inputs; every output must carry the eager storage codes. */
  async function agree(fn: (...xs: Tensor[]) => Tensor | Tensor[], inputs: () => Tensor[], calls = 4) {
    const compiled = compile(fn);
    for (let call = 0; call < calls; call++) {
      const xs = inputs();
      const want = [fn(...xs)].flat();
      const got = [compiled(...xs)].flat();
      expect(got.length).toBe(want.length);
      for (let k = 0; k < want.length; k++) {
        expect(got[k].dtype).toBe(want[k].dtype);
        expect(got[k].shape).toEqual(want[k].shape);
        expect(await codes(got[k])).toEqual(await codes(want[k]));
      }
      for (const t of [...xs, ...want, ...got]) t.dispose();
    }
    return compiled;
  }

  it('broadcast operands from outside fuse; a broadcast of a value of the chain cuts it', async () => {
    let seed = 100;
    const c = await agree(
      (x, row, col) => {
        const y = x.mul(row).add(col).relu(); // [4, 6] with [1, 6] and [4, 1]
        const s = y.sub(1).exp(); // fused with the above
        const m = col.mul(2).sigmoid(); // [4, 1]: another shape, another group
        return s.mul(m); // reads m broadcast: its own group
      },
      () => [make([4, 6], seed++), make([1, 6], seed++), make([4, 1], seed++)],
    );
    const groups = c.stats().signatures[0].fusedGroups;
    expect(groups.length).toBeGreaterThanOrEqual(2);
    expect(groups[0]).toContain('[4, 6]');
  });

  it('views: a transposed input is read strided; a transposed value of the chain cuts it', async () => {
    let seed = 200;
    await agree(
      (x) => {
        const a = x.T.mul(3).add(1); // [6, 5] from a transposed view
        const b = a.T.neg(); // a transposed value of the chain: a new group reads it
        return b.add(x);
      },
      () => [make([5, 6], seed++)],
    );
  });

  it('inputs at offsets: aligned ones read a vec4 at a time, others word by word; the bits agree', async () => {
    let seed = 250;
    await agree(
      (x) => [
        x.narrow(0, 3, 50).mul(2).add(1).exp(),
        x
          .narrow(0, 4, 50)
          .mul(2)
          .sub(x.narrow(0, 8, 50))
          .to('float16')
          .add(1),
      ],
      () => [make([61], seed++)],
    );
  });

  it('dtype changes round like the ops one by one: f16 / bf16 intermediates, casts, comparisons, where, int32 math', async () => {
    let seed = 300;
    await agree(
      (x, h, b, i) => {
        const y = x.to('float16').mul(h).add(0.1); // float16 values in the chain
        const z = y.to('bfloat16').mul(b).to('float32'); // bf16 rounding in between
        const mask = z.gt(0.05); // bool
        const w = tg.where(mask, z, x.mul(-1)); // where of float32
        const k = i.mul(3).add(7).mul(i); // int32
        return [w, mask, k, tg.where(mask, i, 5)];
      },
      () => [make([37], seed++), make([37], seed++, 'float16'), make([37], seed++, 'bfloat16'), make([37], seed++, 'int32')],
    );
  });

  it('reductions and matmuls cut the chain; the values on both sides still agree', async () => {
    let seed = 400;
    const c = await agree(
      (x, w) => {
        const h = x.mul(0.5).add(1).silu();
        const s = h.sum(-1, { keepdim: true }); // a reduction
        const n = h.div(s).mul(2).sub(0.5);
        return tg.matmul(n, w).tanh().mul(3);
      },
      () => [make([3, 8], seed++), make([8, 5], seed++)],
    );
    // Before the reduction, between it and the matmul; after the matmul the tanh runs in its epilogue, the mul alone.
    expect(c.stats().signatures[0].fusedGroups.length).toBe(2);
    expect(c.stats().signatures[0].epilogues).toBe(1);
  });

  it('outputs used twice, the same output twice, an input returned and a view of a value', async () => {
    let seed = 500;
    await agree(
      (x) => {
        const y = x.mul(2).add(1);
        const z = y.exp().mul(y); // y feeds z and is returned
        return [y, z, y, x, z.reshape([3, 4]).T];
      },
      () => [make([12], seed++)],
    );
  });

  it('in-place writes into a closed-over tensor happen at every call', async () => {
    const cache = tg.zeros([4, 3], { device });
    const step = (x: Tensor) => {
      tg.copyInto(cache.narrow(0, 1, 2), x.mul(2).add(1));
      return cache.sum().mul(x.sum());
    };
    const compiled = compile(step);
    for (let call = 0; call < 4; call++) {
      const x = tg.tensor(randomValues(6, 600 + call), { shape: [2, 3], device });
      const want = Array.from(await x.mul(2).add(1).toArray());
      compiled(x).dispose();
      const rows = Array.from(await cache.narrow(0, 1, 2).contiguous().toArray());
      for (let k = 0; k < 6; k++) expect(rows[k]).toBeCloseTo(want[k], 6);
      x.dispose();
    }
    cache.dispose();
  });

  it('a value fn keeps alive without returning it (made anew at each call) is written back at every call', async () => {
    const holder: { value?: Tensor } = {};
    const step = (x: Tensor) => {
      const y = x.exp();
      holder.value?.dispose();
      holder.value = tg.keep(y.mul(3));
      return y.add(1);
    };
    // The first two calls trace (the first made state, so it was a warm-up); later calls, which do not run step,
    // write the new value into the tensor holder.value is left with.
    const compiled = compile(step);
    for (let call = 0; call < 5; call++) {
      const x = tg.tensor(randomValues(5, 700 + call), { device });
      compiled(x).dispose();
      const want = Array.from(await x.exp().mul(3).toArray());
      const got = Array.from(await holder.value!.toArray());
      for (let k = 0; k < 5; k++) expect(got[k]).toBeCloseTo(want[k], 5);
      x.dispose();
    }
    const s = compiled.stats();
    expect(s.traces).toBe(2);
    expect(s.signatures[0].escapees).toBe(1);
    holder.value!.dispose();
  });

  it('empty tensors and odd sizes', async () => {
    let seed = 800;
    await agree(
      (x) => x.mul(2).add(1).abs(),
      () => [make([0, 3], seed++)],
    );
    await agree(
      (x) => x.mul(2).add(1).abs().to('bfloat16').add(1),
      () => [make([7, 3, 5], seed++)],
    );
  });

  it('NaN and Inf pass through the fused ops as they do one by one', async () => {
    const values = [Number.NaN, Infinity, -Infinity, 0, -0, 1e-40, 3.5e38, -2];
    await agree(
      (x) => [tg.maximum(x.mul(2), x.neg()).exp().log(), x.gt(0), x.sqrt().relu()],
      () => [tg.tensor(values, { device })],
    );
  });
});

describe.each(devices)('compile on %s: signatures and fallbacks', (device) => {
  it('a new shape, dtype or number argument traces again; the cache keeps at most maxSignatures', async () => {
    const compiled = compile((x: Tensor, k: number) => x.mul(k).add(1), { maxSignatures: 2 });
    const run = async (n: number, k: number, dtype: tg.DType = 'float32') => {
      const x = tg.tensor(randomValues(n, n + k), { device, dtype });
      const got = (await compiled(x, k).toArray()) as Float32Array;
      const want = (await x.mul(k).add(1).toArray()) as Float32Array;
      expect(Array.from(got)).toEqual(Array.from(want));
      x.dispose();
    };
    await run(8, 2);
    await run(8, 2);
    await run(16, 2); // a new shape
    await run(8, 3); // a new number: the third signature drops the least recently used
    await run(8, 2, 'bfloat16'); // a new dtype
    const s = compiled.stats();
    expect(s.traces).toBe(4);
    expect(s.evictions).toBe(2);
    expect(s.signatures).toHaveLength(2);
    compiled.reset();
    expect(compiled.stats().signatures).toHaveLength(0);
  });

  it('what a replay cannot repeat stays eager, with the reason, and still gives the right values (and gradients)', async () => {
    const fromHost = compile((x: Tensor) => x.add(tg.tensor([1, 2, 3], { device })));
    const sampled = compile((x: Tensor) => tg.sampleToken(x, { temperature: 1 }));
    const needsGrad = compile((x: Tensor, w: Tensor) => x.mul(w).sum());
    const x = tg.tensor([0.5, -1, 2], { device });
    const w = tg.tensor([1, 2, 3], { device }).requiresGrad_();
    for (let call = 0; call < 3; call++) {
      expect(Array.from((await fromHost(x).toArray()) as Float32Array)).toEqual([1.5, 1, 5]);
      const token = (await sampled(x).toArray())[0];
      expect(token >= 0 && token < 3).toBe(true);
      const loss = needsGrad(x, w);
      expect(loss.requiresGrad).toBe(true);
      loss.backward();
      expect(Array.from((await w.grad!.toArray()) as Float32Array)).toEqual([0.5 * (call + 1), -1 * (call + 1), 2 * (call + 1)]);
    }
    expect(fromHost.explain()).toMatch(/eager because it creates a tensor from host data/);
    expect(sampled.explain()).toMatch(/eager because it samples with a random number drawn on the host/);
    // A forward whose output needs gradients is compiled with its backward (compile-backward.test.ts).
    expect(needsGrad.explain()).not.toMatch(/eager because/);
    for (const c of [fromHost, sampled]) expect(c.stats().signatures[0].mode).toBe('eager');
    x.dispose();
    w.dispose();
  });

  it('an async function stays eager with the reason', async () => {
    const compiled = compile(async (x: Tensor) => (await x.toArray())[0]);
    const x = tg.tensor([4, 5], { device });
    expect(await compiled(x)).toBe(4);
    expect(await compiled(x)).toBe(4);
    expect(compiled.explain()).toMatch(/eager because it is async/);
    x.dispose();
  });

  it('a compiled training step (forward, backward, plain SGD update in place) matches eager step for step', async () => {
    const make = () => tg.tensor(randomValues(6, 77), { shape: [2, 3], device }).requiresGrad_();
    const step = (w: Tensor) => (x: Tensor, y: Tensor) => {
      w.grad = undefined;
      const loss = tg.matmul(x, w).sub(y).pow(2).mean();
      loss.backward();
      tg.noGrad(() => tg.copyInto(w, w.sub(w.grad!.mul(0.1))));
      return loss.detach();
    };
    const we = make();
    const wc = make();
    const eager = step(we);
    const compiled = compile(step(wc));
    for (let call = 0; call < 5; call++) {
      const x = tg.tensor(randomValues(8, 900 + call), { shape: [4, 2], device });
      const y = tg.tensor(randomValues(12, 950 + call), { shape: [4, 3], device });
      const a = (await eager(x, y).toArray())[0];
      const b = (await compiled(x, y).toArray())[0];
      expect(b).toBeCloseTo(a, 6);
      expect(Array.from((await wc.toArray()) as Float32Array)).toEqual(Array.from((await we.toArray()) as Float32Array));
      x.dispose();
      y.dispose();
    }
    expect(compiled.stats().signatures[0].mode).toBe(device === 'webgpu' ? 'recorded' : 'program');
  });
});

describe.runIf(gpu.available)('compile on webgpu: memory', () => {
  it('stays flat over 1000 replays', async () => {
    const w = tg.tensor(randomValues(64, 5), { device: 'webgpu' });
    const compiled = compile((x: Tensor) =>
      tg
        .matmul(x.mul(w).add(1).reshape([8, 8]), w.reshape([8, 8]))
        .tanh()
        .sum(-1),
    );
    const x = tg.tensor(randomValues(64, 6), { device: 'webgpu' });
    const want = (await tg
      .matmul(x.mul(w).add(1).reshape([8, 8]), w.reshape([8, 8]))
      .tanh()
      .sum(-1)
      .toArray()) as Float32Array;
    const live: number[] = [];
    for (let call = 0; call < 1000; call++) {
      const out = compiled(x);
      if (call === 999) expect(Array.from((await out.toArray()) as Float32Array)).toEqual(Array.from(want));
      out.dispose();
      if (call % 100 === 99) {
        await tg.synchronize();
        live.push(tg.memoryStats().allocatedBytes);
      }
    }
    expect(new Set(live.slice(1)).size).toBe(1);
    expect(compiled.stats().signatures[0].calls).toBe(1000);
    x.dispose();
    w.dispose();
    compiled.reset();
  });
});

describe.each(devices)('compile on %s: matmul epilogues', (device) => {
  it('a bias or residual add after a 2-D float32 matmul runs in its epilogue', async () => {
    const make = (shape: number[], seed: number) =>
      tg.tensor(
        randomValues(
          shape.reduce((a, b) => a * b, 1),
          seed,
        ),
        { shape, device },
      );
    const fn = (x: Tensor, w: Tensor, b: Tensor, r: Tensor) => {
      const y = tg.matmul(x, w).add(b); // bias
      const z = r.add(tg.matmul(y, w.T)); // residual, the product second
      const u = tg.matmul(z, w).add(tg.matmul(x, w)); // both products: the first one's add can not move before the second
      return [y, z, u];
    };
    const compiled = compile(fn);
    for (let call = 0; call < 3; call++) {
      const xs = [make([5, 7], 1 + call), make([7, 7], 11 + call), make([7], 21 + call), make([5, 7], 31 + call)];
      const want = fn(...(xs as [Tensor, Tensor, Tensor, Tensor]));
      const got = compiled(...(xs as [Tensor, Tensor, Tensor, Tensor]));
      for (let k = 0; k < 3; k++) {
        // One rounding of the product plus the bias where eager rounds twice: the CPU's float64 reference sees it.
        if (device === 'webgpu') expect(await codes(got[k])).toEqual(await codes(want[k]));
        else {
          const [g, w] = [await got[k].toArray(), await want[k].toArray()];
          for (let e = 0; e < w.length; e++) expect(Math.abs(g[e] - w[e])).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(w[e])));
        }
      }
      for (const t of [...xs, ...want, ...got]) t.dispose();
    }
    expect(compiled.stats().signatures[0].epilogues).toBe(3);
  });
});

describe.each(devices)('compile on %s: activations in matmul epilogues', (device) => {
  it('gelu / silu / relu of a float32 matmul (after its bias, before a residual) run in its epilogue', async () => {
    const make = (shape: number[], seed: number) => randomInput(device, shape, seed, 'float32');
    const fn = (x: Tensor, w: Tensor, b: Tensor, r: Tensor) => {
      const p = tg.matmul(x, w);
      return [
        tg.gelu(tg.matmul(x, w).add(b)), // bias, then the activation: 2 folded
        r.add(tg.silu(tg.matmul(x, w))), // the activation, then a residual: 2 folded
        tg.relu(tg.matmul(x, w)).mul(2), // the activation folds, the mul stays
        p, // returned, so not folded:
        tg.tanh(p),
        tg.sigmoid(tg.matmul(x, w).add(r)), // after a residual: the add folds, the activation can not
        tg.gelu(tg.matmul(x, w), { approximate: 'tanh' }),
      ];
    };
    const compiled = compile(fn);
    // [5, 7] x [7, 7] runs the tiled GEMM; [3, 8] x [8, 8] the [K, N] GEMV (M <= 4, N contiguous).
    for (let call = 0; call < 6; call++) {
      const [m, k] = call < 3 ? [5, 7] : [3, 8];
      const xs = [make([m, k], 41 + call), make([k, k], 51 + call), make([k], 61 + call), make([m, k], 71 + call)] as const;
      const want = fn(...xs);
      const got = compiled(...xs);
      for (let k = 0; k < want.length; k++) {
        if (device === 'webgpu') expect(await codes(got[k]), `output ${k}`).toEqual(await codes(want[k]));
        else {
          const [g, w] = [await got[k].toArray(), await want[k].toArray()];
          for (let e = 0; e < w.length; e++) expect(Math.abs(g[e] - w[e]), `output ${k}`).toBeLessThanOrEqual(2e-6 * Math.max(1, Math.abs(w[e])));
        }
      }
      for (const t of [...xs, ...want, ...got]) t.dispose();
    }
    // bias + gelu, silu + residual, relu, the residual before sigmoid, gelu_tanh.
    expect(compiled.stats().signatures.map((s) => s.epilogues)).toEqual([7, 7]);
  });

  it('linear({ activation }) computes the activation in the epilogue on both backends, with its backward', async () => {
    for (const activation of ['gelu', 'gelu_tanh', 'silu', 'relu', 'tanh', 'sigmoid'] as const) {
      for (const m of [1, 6]) {
        const x = randomInput(device, [m, 24], 80 + m, 'float32').requiresGrad_();
        const w = randomInput(device, [13, 24], 90 + m, 'float32').requiresGrad_();
        const b = randomInput(device, [13], 95 + m, 'float32').requiresGrad_();
        const fused = tg.linear(x, w, b, { activation });
        const plain = {
          gelu: tg.gelu,
          gelu_tanh: (t: Tensor) => tg.gelu(t, { approximate: 'tanh' }),
          silu: tg.silu,
          relu: tg.relu,
          tanh: tg.tanh,
          sigmoid: tg.sigmoid,
        }[activation](tg.linear(x, w, b));
        const [f, p] = [await fused.toArray(), await plain.toArray()];
        for (let e = 0; e < p.length; e++) expect(Math.abs(f[e] - p[e]), `${activation} m ${m}`).toBeLessThanOrEqual(2e-6 * Math.max(1, Math.abs(p[e])));
        const gf = tg.grad(fused.mul(fused).sum(), [x, w, b]) as Tensor[];
        const gp = tg.grad(plain.mul(plain).sum(), [x, w, b]) as Tensor[];
        for (let i = 0; i < 3; i++) {
          const [a, c] = [await gf[i].toArray(), await gp[i].toArray()];
          for (let e = 0; e < c.length; e++) expect(Math.abs(a[e] - c[e]), `${activation} grad ${i}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(c[e])));
        }
        for (const t of [x, w, b, fused, plain, ...gf, ...gp]) t.dispose();
      }
    }
  });
});

describe.each(devices)('compile on %s: a chain feeding a reduction', (device) => {
  const make = (shape: number[], seed: number, dtype: tg.DType = 'float32') => randomInput(device, shape, seed, dtype);

  it.each([
    ['sum, short rows', [6, 9], -1],
    ['sum, long rows (a workgroup per row)', [3, 700], -1],
    ['mean over the middle dim', [4, 130, 3], 1],
  ] as const)('%s: one kernel, the bits of the chain then the reduction', async (_name, shape, dim) => {
    let seed = 1000;
    const fn = (x: Tensor, y: Tensor) => [x.mul(y).add(0.5).exp().sum(dim), x.sub(y).abs().to('bfloat16').mean(dim), x.add(y).max(dim), x.mul(y).argmax(dim)];
    const compiled = compile(fn);
    for (let call = 0; call < 3; call++) {
      const xs = [make([...shape], seed++), make([...shape], seed++)] as const;
      const want = fn(...xs);
      const got = compiled(...xs);
      for (let k = 0; k < want.length; k++) expect(await codes(got[k])).toEqual(await codes(want[k]));
      for (const t of [...xs, ...want, ...got]) t.dispose();
    }
    const groups = compiled.stats().signatures[0].fusedGroups;
    expect(groups.filter((g) => g.startsWith('fusedReduce'))).toHaveLength(4);
    // argmax's int32 indices then widen to int64 (torch's dtype): one more dispatch.
    if (device === 'webgpu') expect(compiled.stats().signatures[0].dispatches).toBe(5);
  });
});

describe.each(devices)('compile on %s: a reduction feeding a chain', (device) => {
  const make = (shape: number[], seed: number, dtype: tg.DType = 'float32') => randomInput(device, shape, seed, dtype);

  it.each([
    ['short rows', [6, 9], -1],
    ['long rows (a workgroup per row)', [3, 700], -1],
    ['the middle dim', [4, 130, 3], 1],
  ] as const)('%s: one kernel per reduction, the bits of the reduction then the chain', async (_name, shape, dim) => {
    let seed = 2000;
    const rows = shape.filter((_, d) => d !== (dim < 0 ? shape.length + dim : dim));
    const fn = (x: Tensor, h: Tensor, y: Tensor) => [
      x.sum(dim).mul(0.5).add(1).tanh(), // a norm's tail
      h.mean(dim).add(y).rsqrt(), // bf16 result, rounded before the chain; another input read per result
      x.max(dim).to('bfloat16').mul(3), // the chain's output dtype is stored
      x.argmax(dim).add(1).mul(2), // int64 math on indices (the int64 kernels: not fused)
      h.min(dim).sub(y).where(y.gt(0), 7), // where, comparisons
    ];
    const compiled = compile(fn);
    for (let call = 0; call < 3; call++) {
      const xs = [make([...shape], seed++), make([...shape], seed++, 'bfloat16'), make([...rows], seed++)] as const;
      const want = fn(...xs);
      const got = compiled(...xs);
      for (let k = 0; k < want.length; k++) {
        expect(got[k].dtype).toBe(want[k].dtype);
        expect(await codes(got[k])).toEqual(await codes(want[k]));
      }
      for (const t of [...xs, ...want, ...got]) t.dispose();
    }
    const groups = compiled.stats().signatures[0].fusedGroups;
    expect(groups.filter((g) => g.startsWith('reduceMap'))).toHaveLength(4);
    // argmax, its widening to int64, then add and mul on the int64 kernels.
    if (device === 'webgpu') expect(compiled.stats().signatures[0].dispatches).toBe(8);
  });

  it('a result read after the chain too, or NaN rows: still the eager values', async () => {
    const fn = (x: Tensor) => {
      const s = x.max(-1);
      return [s.mul(2).exp(), s.add(1)];
    };
    const compiled = compile(fn);
    for (let call = 0; call < 3; call++) {
      const x = make([5, 33], 3000 + call);
      const nan = tg.where(
        tg
          .arange(0, 5 * 33, 1, { device })
          .reshape([5, 33])
          .eq(40),
        Number.NaN,
        x,
      );
      for (const input of [x, nan]) {
        const want = fn(input);
        const got = compiled(input);
        for (let k = 0; k < 2; k++) expect(await codes(got[k])).toEqual(await codes(want[k]));
      }
    }
    expect(compiled.stats().signatures[0].fusedGroups.some((g) => g.startsWith('reduceMap'))).toBe(false);
  });
});

describe.runIf(gpu.available)('compile on webgpu: an input in a smaller buffer than the recorded one', () => {
  it('is copied in for the replay, and what the program wrote into it is copied back', async () => {
    const device = 'webgpu';
    const fn = (cache: Tensor, x: Tensor) => {
      tg.copyInto(cache, cache.add(x));
      return cache.mul(2);
    };
    const compiled = compile(fn);
    const x = tg.tensor([1, 2, 3, 4], { device });
    // Traced and recorded on a view of a large storage (same shape, strides and offset as a tensor of its own).
    const big = tg.zeros([4096], { device });
    for (let call = 0; call < 2; call++) compiled(big.narrow(0, 0, 4), x).dispose();
    expect(Array.from((await big.narrow(0, 0, 4).toArray()) as Float32Array)).toEqual([2, 4, 6, 8]);
    const small = tg.tensor([10, 20, 30, 40], { device });
    const out = compiled(small, x);
    expect(compiled.stats().signatures[0].mode).toBe('recorded');
    expect(Array.from((await out.toArray()) as Float32Array)).toEqual([22, 44, 66, 88]);
    expect(Array.from((await small.toArray()) as Float32Array)).toEqual([11, 22, 33, 44]);
    compiled.reset();
  });
});

describe.runIf(gpu.available)('compile on webgpu: buffers planned by lifetime', () => {
  it('ten chained matmuls bind a few buffers, not one per intermediate', async () => {
    const w = tg.tensor(randomValues(64, 3, 0.5), { shape: [8, 8], device: 'webgpu' });
    const fn = (x: Tensor) => {
      let t = x;
      for (let i = 0; i < 10; i++) t = tg.matmul(t, w);
      return t;
    };
    const compiled = compile(fn);
    const x = tg.tensor(randomValues(64, 4), { shape: [8, 8], device: 'webgpu' });
    for (let call = 0; call < 3; call++) {
      const [a, b] = [compiled(x), fn(x)];
      expect(await codes(a)).toEqual(await codes(b));
      a.dispose();
      b.dispose();
    }
    // x, w, the output and the intermediates taking turns in two buffers.
    expect(compiled.stats().signatures[0].recordedBuffers!.count).toBeLessThanOrEqual(5);
    expect(compiled.stats().signatures[0].dispatches).toBe(10);
    x.dispose();
    w.dispose();
    compiled.reset();
  });
});

describe.each(devices)('compile on %s: state made on the first call', (device) => {
  it('a tensor made from host data and kept (state made on first use) is a constant the replays update', async () => {
    const state: { counter?: Tensor } = {};
    const step = (x: Tensor) => {
      state.counter ??= tg.keep(tg.tensor([0], { device }));
      tg.copyInto(state.counter, state.counter.add(1));
      return x.mul(state.counter);
    };
    const compiled = compile(step);
    const x = tg.tensor([1, 2], { device });
    for (let call = 1; call <= 4; call++) {
      const y = compiled(x);
      expect(Array.from(await y.toArray())).toEqual([call, 2 * call]);
      y.dispose();
    }
    expect(compiled.stats().signatures[0].reason).toBeUndefined();
    const fresh = compile((t: Tensor) => [tg.tensor([7], { device }), t.add(1)]);
    fresh(x).forEach((t) => t.dispose());
    expect(fresh.explain()).toMatch(/eager because it returns a tensor made from host data/);
    x.dispose();
    state.counter!.dispose();
  });
});

describe.runIf(gpu.available)('compile on webgpu: a new device', () => {
  it('after releaseDevice() and initDevice() the next call traces again on the new device', async () => {
    const compiled = compile((x: Tensor) => x.mul(3).add(1));
    for (let round = 0; round < 2; round++) {
      if (round === 1) {
        tg.releaseDevice();
        await tg.initDevice('webgpu');
        setDefaultDevice('cpu');
      }
      for (let call = 0; call < 3; call++) {
        const x = tg.tensor([1, 2, 3], { device: 'webgpu' });
        const y = compiled(x);
        expect(Array.from(await y.toArray())).toEqual([4, 7, 10]);
        x.dispose();
        y.dispose();
      }
    }
    expect(compiled.stats().traces).toBe(2);
    compiled.reset();
  });
});

describe.each(devices)('compile on %s: trace constants', (device) => {
  it("a constant the call made and released stays the program's, whatever is allocated between calls", async () => {
    const fn = (x: Tensor) => x.mul(2).add(tg.arange(8, undefined, 1, { device }).to('float32'));
    const compiled = compile(fn);
    const x = tg.tensor(randomValues(8, 77), { device });
    const want = Array.from(await fn(x).toArray());
    const clutter: Tensor[] = [];
    for (let call = 0; call < 4; call++) {
      const y = compiled(x);
      // Allocations of the constant's size in between: a freed constant's buffer would be handed to them.
      for (let k = 0; k < 8; k++) clutter.push(tg.full([8], -1e30, { device }));
      expect(Array.from(await y.toArray())).toEqual(want);
      y.dispose();
    }
    expect(compiled.stats().signatures[0].reason).toBeUndefined();
    for (const t of [x, ...clutter]) t.dispose();
    compiled.reset();
  });
});

describe.each(devices)('compile on %s: a training step with a capturable AdamW', (device) => {
  it('matches eager step for step: the first call makes the state (a warm-up), the second traces, then replays', async () => {
    const init = randomValues(6, 31);
    const make = () => tg.tensor(init, { shape: [3, 2], device }).requiresGrad_();
    const setup = () => {
      const w = make();
      const opt = new tg.AdamW([w], { lr: 0.05, weightDecay: 0.01, capturable: true });
      const step = (x: Tensor, y: Tensor) => {
        const loss = tg.matmul(x, w).sub(y).pow(2).mean();
        loss.backward();
        opt.step();
        opt.zeroGrad();
        return loss.detach();
      };
      return { w, opt, step };
    };
    const eager = setup();
    const compiled = setup();
    const c = compile(compiled.step);
    for (let call = 0; call < 6; call++) {
      const x = tg.tensor(randomValues(12, 500 + call), { shape: [4, 3], device });
      const y = tg.tensor(randomValues(8, 600 + call), { shape: [4, 2], device });
      const a = await eager.step(x, y).item();
      const b = await c(x, y).item();
      expect(b).toBeCloseTo(a, 6);
      const [we, wc] = [Array.from(await eager.w.toArray()), Array.from(await compiled.w.toArray())];
      for (let k = 0; k < 6; k++) expect(wc[k]).toBeCloseTo(we[k], 6);
      x.dispose();
      y.dispose();
    }
    const s = c.stats();
    expect(s.traces).toBe(2);
    expect(s.signatures[0].mode).toBe(device === 'webgpu' ? 'recorded' : 'program');
    // An optimizer with host step counts would replay its first update: that step stays eager, saying why.
    const w = make();
    const sgd = new tg.SGD([w], { lr: 0.1 });
    const plain = compile((x: Tensor) => {
      w.mul(x).sum().backward();
      sgd.step();
      sgd.zeroGrad();
      return w.detach().clone();
    });
    const x = tg.tensor(randomValues(6, 3), { shape: [3, 2], device });
    for (let call = 0; call < 3; call++) plain(x).dispose();
    expect(plain.explain()).toMatch(/eager because SGD's step count and learning rate are host numbers/);
    for (const t of [w, x]) t.dispose();
    for (const o of [eager, compiled]) {
      o.opt.dispose();
      o.w.dispose();
    }
    c.reset();
  });
});
