// Shared by the spectral tests: an exact float64 DFT from its definition (angles 2 pi ((j k) mod n) / n are integer
// indices into one cos/sin table, so the reference keeps float64 accuracy for any n), and a runner that applies an
// op on one device and returns its float32 values.
import { expect } from 'vitest';
import type { Tensor } from '../../src/index.js';
import { takeValues } from './compare.js';

export type Dev = 'cpu' | 'webgpu';

const tables = new Map<number, [Float64Array, Float64Array]>();

/** cos and sin of 2 pi i / n for i < n (cached). */
export function cosSin(n: number): [Float64Array, Float64Array] {
  let t = tables.get(n);
  if (!t) {
    const c = new Float64Array(n);
    const s = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      c[i] = Math.cos((2 * Math.PI * i) / n);
      s[i] = Math.sin((2 * Math.PI * i) / n);
    }
    t = [c, s];
    tables.set(n, t);
  }
  return t;
}

/**
 * X_k = scale * sum_{j < min(L, n)} z_j exp(-+2 pi i j k / n) for k < bins (z zero-padded or cut to n), from the
 * definition: the angle index (j k) mod n is kept exact by stepping it by k mod n.
 */
export function dft(re: ArrayLike<number>, im: ArrayLike<number>, n: number, inverse: boolean, scale: number, bins = n): [Float64Array, Float64Array] {
  const [c, s] = cosSin(n);
  const sign = inverse ? 1 : -1;
  const take = Math.min(re.length, n);
  const outRe = new Float64Array(bins);
  const outIm = new Float64Array(bins);
  for (let k = 0; k < bins; k++) {
    let sr = 0;
    let si = 0;
    let t = 0;
    for (let j = 0; j < take; j++) {
      const wr = c[t];
      const wi = sign * s[t];
      sr += re[j] * wr - im[j] * wi;
      si += re[j] * wi + im[j] * wr;
      t += k;
      if (t >= n) t -= n;
    }
    outRe[k] = sr * scale;
    outIm[k] = si * scale;
  }
  return [outRe, outIm];
}

/** fn on dev (inputs copied to WebGPU when dev is webgpu): the float32 result's values and shape. */
export async function runOn(dev: Dev, inputs: readonly Tensor[], fn: (...xs: Tensor[]) => Tensor): Promise<{ values: Float32Array; shape: readonly number[] }> {
  const xs = dev === 'cpu' ? inputs : await Promise.all(inputs.map((t) => t.to('webgpu') as Promise<Tensor>));
  try {
    const y = fn(...xs);
    expect(y.device).toBe(dev);
    expect(y.dtype).toBe('float32');
    const shape = y.shape;
    return { values: await takeValues(y), shape };
  } finally {
    if (dev !== 'cpu') xs.forEach((t) => t.dispose());
  }
}
