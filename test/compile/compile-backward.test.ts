// The backward of a compiled forward: the forward program also returns what its backward reads, and the backward is
// compiled too. Every gradient is checked against eager autograd over several calls, with leaf and non-leaf inputs,
// closed-over weights (trainable and frozen), and the fallbacks.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { compile, setDefaultDevice, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { randomInput, randomValues } from './inputs.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices: ('cpu' | 'webgpu')[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

const values = async (t: Tensor) => Array.from((await t.toArray()) as Float32Array);

/** Within 1e-6 relative (fusion may reorder float math), elementwise. */
async function expectClose(got: Tensor | undefined, want: Tensor | undefined) {
  expect(got === undefined).toBe(want === undefined);
  if (!got || !want) return;
  const [a, b] = [await values(got), await values(want)];
  expect(a.length).toBe(b.length);
  a.forEach((v, i) => expect(Math.abs(v - b[i])).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(b[i]))));
}

describe.each(devices)('grad() on %s', (device) => {
  it('returns gradients without touching .grad, stops at a non-leaf input and leaves the graph behind it', async () => {
    const x = tg.tensor([1, -2, 3], { device }).requiresGrad_();
    const w = tg.tensor([0.5, 0.25, 2], { device }).requiresGrad_();
    const y = x.mul(2);
    const z = y.mul(y).mul(w).sum();
    const [gy, gw] = tg.grad(z, [y, w]);
    expect(await values(gy!)).toEqual([2, -2, 24]); // 2 y w
    expect(await values(gw!)).toEqual([4, 16, 36]); // y^2
    expect(w.grad).toBeUndefined();
    expect(x.grad).toBeUndefined();
    y.sum().backward(); // the graph behind y is still there
    expect(await values(x.grad!)).toEqual([2, 2, 2]);
    const unrelated = tg.tensor([1], { device }).requiresGrad_();
    const [none, twice] = tg.grad(x.mul(3).sum(), [unrelated, x]);
    expect(none).toBeUndefined();
    expect(await values(twice!)).toEqual([3, 3, 3]);
    expect(() => tg.grad(x.mul(1), [x])).toThrow(/needs a gradient argument/);
    expect(() => tg.grad(x.mul(1).sum(), [tg.tensor([1], { device })])).toThrow(/does not require grad/);
  });
});

describe.each(devices)('compile on %s: the backward of a compiled forward', (device) => {
  const make = (shape: number[], seed: number, grad = false) => {
    const t = randomInput(device, shape, seed);
    return grad ? t.requiresGrad_() : t;
  };
  /** A two-layer MLP over closed-over weights, with elementwise runs the compiler fuses in both directions. */
  const mlp = (w1: Tensor, b1: Tensor, w2: Tensor) => (x: Tensor) =>
    tg
      .matmul(
        tg
          .matmul(x, w1)
          .add(b1)
          .tanh()
          .mul(1.5)
          .add(x.sum(-1, { keepdim: true }).mul(0.1)),
        w2,
      )
      .sigmoid();

  it('gives the eager loss and gradients (weights and a leaf input), call after call, then replays both', async () => {
    const weights = () => [make([6, 8], 1, true), make([8], 2, true), make([8, 5], 3, true)] as const;
    const [e1, eb, e2] = weights();
    const [c1, cb, c2] = weights();
    const eager = mlp(e1, eb, e2);
    const compiled = compile(mlp(c1, cb, c2));
    for (let call = 0; call < 4; call++) {
      const xe = make([3, 6], 100 + call, true);
      const xc = make([3, 6], 100 + call, true);
      const target = make([3, 5], 200 + call);
      const le = eager(xe).sub(target).pow(2).mean();
      const lc = compiled(xc).sub(target).pow(2).mean();
      await expectClose(lc, le);
      le.backward();
      lc.backward();
      for (const [g, w] of [
        [xc, xe],
        [c1, e1],
        [cb, eb],
        [c2, e2],
      ])
        await expectClose(g.grad, w.grad);
      for (const t of [xe, xc, target, le, lc]) t.dispose();
    }
    const s = compiled.stats().signatures[0];
    expect(s.mode).toBe(device === 'webgpu' ? 'recorded' : 'program');
    const text = compiled.explain();
    expect(text).toMatch(/its output needs gradients: the forward also returns \d+ saved tensor/);
    expect(text).toMatch(device === 'webgpu' ? /backward[^\n]*\n[^\n]*recorded/ : /backward[^\n]*\n[^\n]*program/);
    expect(text).not.toMatch(/eager because/);
    if (device === 'webgpu') expect(text).toMatch(/fused/);
  });

  it('a non-leaf input gets its gradient through the node that made it; a frozen weight gets none', async () => {
    const frozen = make([4, 4], 7);
    const la = make([4, 2], 8, true);
    const lb = make([2, 4], 9, true);
    // A LoRA-style layer: the base weight frozen, the low-rank pair trained.
    const layer = (x: Tensor) =>
      tg
        .matmul(x, frozen)
        .add(tg.matmul(tg.matmul(x, la), lb).mul(0.5))
        .relu();
    const compiled = compile(layer);
    for (let call = 0; call < 3; call++) {
      const raw = make([5, 4], 300 + call, true);
      const x = raw.mul(2).sub(0.1); // made by ops: the compiled region's input has a node
      la.grad = undefined;
      lb.grad = undefined;
      raw.grad = undefined;
      layer(x).sum().backward();
      const want = [raw.grad!, la.grad!, lb.grad!];
      la.grad = undefined;
      lb.grad = undefined;
      raw.grad = undefined;
      const x2 = raw.mul(2).sub(0.1);
      compiled(x2).sum().backward();
      await expectClose(raw.grad, want[0]);
      await expectClose(la.grad, want[1]);
      await expectClose(lb.grad, want[2]);
      expect(frozen.grad).toBeUndefined();
    }
    expect(compiled.stats().signatures[0].mode).toBe(device === 'webgpu' ? 'recorded' : 'program');
  });

  it('several forwards before one backward; a weight that stops requiring grad traces again', async () => {
    const w = make([3, 3], 11, true);
    const f = (x: Tensor) => tg.matmul(x, w).tanh();
    const compiled = compile(f);
    const xs = [0, 1, 2].map((k) => make([2, 3], 400 + k));
    for (let round = 0; round < 3; round++) {
      w.grad = undefined;
      xs.reduce((acc: Tensor | undefined, x) => (acc ? acc.add(f(x).sum()) : f(x).sum()), undefined)!.backward();
      const want = w.grad!;
      w.grad = undefined;
      xs.reduce((acc: Tensor | undefined, x) => (acc ? acc.add(compiled(x).sum()) : compiled(x).sum()), undefined)!.backward();
      await expectClose(w.grad, want);
    }
    w.requiresGrad_(false);
    const y = compiled(xs[0]);
    expect(y.requiresGrad).toBe(false);
    await expectClose(y, f(xs[0]));
  });

  it('stays eager, with the reason, where the backward cannot be split off', async () => {
    const w = make([3], 12, true);
    const two = compile((x: Tensor) => [x.mul(w), x.add(w)]);
    const x = make([3], 13);
    for (let call = 0; call < 2; call++) {
      const [a, b] = two(x);
      a.add(b).sum().backward();
    }
    await expectClose(
      w.grad,
      tg.tensor(
        (await values(x)).map((v) => 2 * (v + 1)),
        { device },
      ),
    );
    expect(two.explain()).toMatch(/eager because more than one of its outputs needs gradients/);
  });

  it('a gradient that is a broadcast view or reaches only part of the output', async () => {
    const w = make([4], 14, true);
    const compiled = compile((x: Tensor) => x.mul(w).exp());
    const x = make([3, 4], 15);
    for (let call = 0; call < 3; call++) {
      // Only the first row's gradient is nonzero on odd calls: a gradient from a slice.
      const pick = (y: Tensor) => (call % 2 ? y.slice(0, 0, 1).sum() : y.sum());
      w.grad = undefined;
      pick(compiled(x)).backward(); // the seed reaches the node as an expanded view (or a padded slice's)
      const a = await values(w.grad!);
      w.grad = undefined;
      pick(x.mul(w).exp()).backward();
      await expectClose(w.grad, tg.tensor(a, { device }));
    }
  });
});

describe.runIf(gpu.available)('compile on webgpu: the backward of a compiled forward', () => {
  it('fewer dispatches than eager forward + backward, and memory flat over 200 steps', async () => {
    const device = 'webgpu';
    const w1 = tg.tensor(randomValues(64, 21), { shape: [8, 8], device }).requiresGrad_();
    const w2 = tg.tensor(randomValues(64, 22), { shape: [8, 8], device }).requiresGrad_();
    const f = (x: Tensor) => tg.matmul(tg.matmul(x, w1).mul(0.5).add(0.1).tanh().mul(2).sub(1), w2).sigmoid().mul(3).add(1);
    const compiled = compile(f);
    const x = tg.tensor(randomValues(32, 23), { shape: [4, 8], device });
    const dispatches = (run: () => void) => {
      const before = tg.gpuCounters().dispatches;
      run();
      return tg.gpuCounters().dispatches - before;
    };
    const step = (g: (x: Tensor) => Tensor) => () =>
      tg.tidy(() => {
        const y = g(x);
        y.backward(tg.ones(y.shape, { device }));
      });
    const eager = dispatches(step(f));
    for (let i = 0; i < 3; i++) step(compiled)();
    const replayed = dispatches(step(compiled));
    expect(replayed).toBeLessThan(eager);
    const live: number[] = [];
    for (let i = 0; i < 200; i++) {
      w1.grad?.dispose();
      w1.grad = undefined;
      w2.grad?.dispose();
      w2.grad = undefined;
      step(compiled)();
      if (i % 50 === 49) {
        await tg.synchronize();
        live.push(tg.memoryStats().allocatedBytes);
      }
    }
    expect(new Set(live.slice(1)).size).toBe(1);
    compiled.reset();
  });
});
