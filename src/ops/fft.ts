// torch.fft's one-dimensional transforms: fft, ifft, rfft, irfft for any length. Complex values travel as a
// trailing dim of 2 (torch.view_as_real's layout) in float32; inputs may be float32, float16 or bfloat16 views.
// Every transform is one dispatch on WebGPU (see runtime/fft-plan.ts for the algorithm).
import { runKernel } from '../kernels/registry.js';
import type { FftArgs, FftInput, FftOutput } from '../runtime/backend.js';
import { ShapeError } from '../core/errors.js';
import { normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, requireDTypes, wrap } from './util.js';

export const FFT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

/** torch.fft's norm: which direction carries the 1/n ('backward': the inverse), or 1/sqrt(n) both ways. */
export type FftNorm = 'backward' | 'forward' | 'ortho';

export interface FftOptions {
  /** Transform length: the signal is zero-padded or cut to it (default: its length; irfft: 2 (L - 1)). */
  n?: number;
  /** The dim transformed (default -1; for complex input, a dim of the complex shape, before the trailing 2). */
  dim?: number;
  norm?: FftNorm;
}

/** The factor a transform of length n multiplies by. */
export function fftScale(n: number, norm: FftNorm = 'backward', inverse: boolean): number {
  if (norm === 'ortho') return 1 / Math.sqrt(n);
  return (norm === 'forward') !== inverse ? 1 / n : 1;
}

/** A complex tensor [..., 2] (view_as_real): the complex shape without the trailing 2. */
function complexShape(op: string, x: Tensor): readonly number[] {
  if (x.ndim < 2 || x.shape[x.ndim - 1] !== 2) {
    throw new ShapeError(
      `${op}: complex input is [..., L, 2] (real and imaginary parts in a trailing dim of 2, torch.view_as_real's layout), got ${x.describe()}`,
    );
  }
  return x.shape.slice(0, -1);
}

function transformLength(op: string, n: number | undefined, fallback: number): number {
  const len = n ?? fallback;
  if (!Number.isInteger(len) || len < 1)
    throw new ShapeError(`${op}: the transform length n must be an integer >= 1, got ${n === undefined ? `${len} (from the input)` : n}`);
  return len;
}

/**
 * Runs one transform over the last dim of x's logical shape (`logical`: x's shape, or its complex shape); `dim`
 * is moved last first (a view) and moved back in the result (a view).
 */
function transform(
  op: string,
  x: Tensor,
  options: FftOptions,
  input: FftInput,
  output: FftOutput,
  inverse: boolean,
  defaultN: (length: number) => number,
): Tensor {
  const backend = commonBackend(op, x);
  requireDTypes(op, x, FFT_DTYPES);
  const complex = input !== 'real';
  const logical = complex ? complexShape(op, x) : x.shape;
  if (logical.length === 0) throw new ShapeError(`${op}: needs at least one dim to transform, got ${x.describe()}`);
  const dim = normalizeDim(options.dim ?? -1, logical.length);
  const last = logical.length - 1;
  // Move dim last (a permuted view; the backend reads any strides).
  const order = [...Array(x.ndim).keys()];
  if (dim !== last) [order[dim], order[last]] = [order[last], order[dim]];
  const moved = dim === last ? x : x.permute(order);
  const movedShape = complex ? moved.shape.slice(0, -1) : moved.shape;
  const length = movedShape[last];
  const n = transformLength(op, options.n, defaultN(length));
  if (input === 'hermitian' && length < 1) throw new ShapeError(`${op}: needs at least one bin, got ${x.describe()}`);
  const lead = movedShape.slice(0, -1);
  const rows = lead.reduce((a, b) => a * b, 1);
  // [1, rows, L(, 2)]: a view when the leading dims merge, else a copy.
  const rowsView = moved.reshape(complex ? [1, rows, length, 2] : [1, rows, length]);
  const args: FftArgs = { n, inverse, input, output, scale: fftScale(n, options.norm, inverse) };
  const bins = output === 'half' ? Math.floor(n / 2) + 1 : n;
  const outShape = output === 'real' ? [...lead, bins] : [...lead, bins, 2];
  const result = wrap(backend, runKernel('fft', backend, { x: rowsView.operand(), args }), 'float32', outShape);
  if (rowsView !== moved) rowsView.dispose();
  if (moved !== x) moved.dispose();
  if (dim === last) return result;
  // The output's dims: the same swap, over one dim more (rfft's pair) or less (irfft drops it).
  return result.permute(output === 'real' ? order.slice(0, logical.length) : complex ? order : [...order, x.ndim]);
}

/** torch.fft.fft: the DFT of complex x [..., L, 2] along dim (default -1): [..., n, 2]. */
export function fft(x: Tensor, options: FftOptions = {}): Tensor {
  return transform('fft', x, options, 'complex', 'complex', false, (l) => l);
}

/** torch.fft.ifft: the inverse DFT (1/n by default) of complex x [..., L, 2]: [..., n, 2]. */
export function ifft(x: Tensor, options: FftOptions = {}): Tensor {
  return transform('ifft', x, options, 'complex', 'complex', true, (l) => l);
}

/** torch.fft.rfft: the DFT of real x [..., L], its n / 2 + 1 non-negative frequencies: [..., n/2 + 1, 2]. */
export function rfft(x: Tensor, options: FftOptions = {}): Tensor {
  return transform('rfft', x, options, 'real', 'half', false, (l) => l);
}

/**
 * torch.fft.irfft: the real signal [..., n] whose rfft is x [..., L, 2] (n defaults to 2 (L - 1); bins past
 * n / 2 are ignored, missing ones are zeros, and the imaginary parts of bin 0 and the Nyquist bin are dropped).
 */
export function irfft(x: Tensor, options: FftOptions = {}): Tensor {
  return transform('irfft', x, options, 'hermitian', 'real', true, (l) => 2 * (l - 1));
}
