// Analytic gradients against central differences on the CPU backend: the backward rules' check, shared by
// test/autograd/gradcheck.test.ts and the op tests.
import { noGrad, tensor, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor } from './compare.js';

type Fn = (...xs: Tensor[]) => Tensor;

async function valueOf(fn: Fn, xs: Tensor[]): Promise<number> {
  const y = noGrad(() => fn(...xs));
  const v = await y.item();
  y.dispose();
  return v;
}

/**
 * sum(fn(xs) * r) for a fixed random r, differentiated by backward() and by central differences with step eps in
 * float64 on the host: |analytic - numeric| <= atol + rtol |numeric| element by element.
 */
export async function gradcheck(label: string, fn: Fn, xs: Tensor[], opts: { eps?: number; atol?: number; rtol?: number } = {}): Promise<void> {
  const { eps = 1e-2, atol = 2e-3, rtol = 1e-2 } = opts;
  const y0 = noGrad(() => fn(...xs));
  const r = y0.numel > 1 ? randomTensor(y0.shape, 'float32') : undefined;
  y0.dispose();
  const f: Fn = (...ts) => {
    const y = fn(...ts);
    return r ? y.mul(r).sum() : y.sum();
  };
  const leaves = xs.map((x) => x.detach().requiresGrad_());
  const loss = f(...leaves);
  loss.backward();
  for (let k = 0; k < xs.length; k++) {
    const base = Array.from(await xs[k].toArray());
    const numeric = new Float64Array(base.length);
    for (let i = 0; i < base.length; i++) {
      const at = (delta: number) => {
        const v = base.slice();
        v[i] += delta;
        return tensor(v, { shape: xs[k].shape, dtype: 'float32' });
      };
      const plus = at(eps);
      const minus = at(-eps);
      const others = (t: Tensor) => xs.map((x, j) => (j === k ? t : x));
      numeric[i] = ((await valueOf(f, others(plus))) - (await valueOf(f, others(minus)))) / (2 * eps);
      plus.dispose();
      minus.dispose();
    }
    const analytic = await leaves[k].grad!.toArray();
    expectClose(analytic, numeric, { atol, rtol }, `${label}: d/dx${k}`);
  }
  loss.dispose();
  r?.dispose();
  leaves.forEach((l) => (l.zeroGrad(), l.dispose()));
}
