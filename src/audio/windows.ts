// torch's window functions (torch.hann_window, hamming_window, blackman_window), computed in float64 on the host
// and rounded once to float32. periodic (the default, as torch): the window of length n + 1 without its last
// sample, the right choice for spectral analysis (an STFT of a periodic window sums to a constant overlap-add).
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor, type CreateOptions } from '../ops/creation.js';
import { traceConstant } from '../compile/trace.js';

export interface WindowOptions extends CreateOptions {
  /** Default true. */
  periodic?: boolean;
}

/** sum_k a_k cos(2 pi k i / M) with alternating signs, M = n (periodic) or n - 1 (symmetric); [1] for n = 1. */
function cosineWindow(op: string, n: number, coefficients: readonly number[], options: WindowOptions): Tensor {
  if (!Number.isInteger(n) || n < 0) throw new ShapeError(`${op}: window length must be an integer >= 0, got ${n}`);
  const periodic = options.periodic ?? true;
  const values = new Float32Array(n);
  const m = periodic ? n : n - 1;
  for (let i = 0; i < n; i++) {
    if (n === 1) {
      values[i] = 1;
      break;
    }
    let w = 0;
    coefficients.forEach((a, k) => {
      w += (k % 2 === 0 ? a : -a) * Math.cos((2 * Math.PI * k * i) / m);
    });
    values[i] = w;
  }
  const { periodic: _, ...create } = options;
  return traceConstant(() => tensor(values, { ...create, dtype: create.dtype ?? 'float32', shape: [n] }));
}

/** torch.hann_window: 0.5 - 0.5 cos(2 pi i / M). */
export function hannWindow(n: number, options: WindowOptions = {}): Tensor {
  return cosineWindow('hannWindow', n, [0.5, 0.5], options);
}

/** torch.hamming_window (alpha 0.54, beta 0.46): 0.54 - 0.46 cos(2 pi i / M). */
export function hammingWindow(n: number, options: WindowOptions = {}): Tensor {
  return cosineWindow('hammingWindow', n, [0.54, 0.46], options);
}

/** torch.blackman_window: 0.42 - 0.5 cos(2 pi i / M) + 0.08 cos(4 pi i / M). */
export function blackmanWindow(n: number, options: WindowOptions = {}): Tensor {
  return cosineWindow('blackmanWindow', n, [0.42, 0.5, 0.08], options);
}
