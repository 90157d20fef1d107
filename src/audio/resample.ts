// torchaudio.functional.resample with its defaults (resampling_method 'sinc_interp_hann', lowpass_filter_width 6,
// rolloff 0.99): both rates divided by their gcd (orig, new), a bank of `new` windowed-sinc filters of
// 2 width + orig taps (width = ceil(6 orig / base), base = 0.99 min(orig, new)), built on the host in float64, then
// one polyphase dispatch: output i is phase i mod new of the filter bank correlated with the signal at
// (i div new) orig - width. The signal's zero padding costs nothing (bounds checks). 44.1 / 48 kHz -> 16 kHz.
import { runKernel } from '../kernels/registry.js';
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { FFT_DTYPES } from '../ops/fft.js';
import { commonBackend, requireDTypes, wrap } from '../ops/util.js';
import { traceConstant } from '../compile/trace.js';

export interface ResampleOptions {
  /** Zero crossings of the sinc on each side (default 6): sharper cutoff, longer filters. */
  lowpassFilterWidth?: number;
  /** The cutoff as a fraction of the lower Nyquist frequency (default 0.99). */
  rolloff?: number;
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

export interface ResampleKernel {
  /** Reduced rates. */
  readonly orig: number;
  readonly new: number;
  /** Zeros before the signal (and the filter's half length beyond the rate). */
  readonly width: number;
  /** float64 [new, 2 width + orig], row-major. */
  readonly values: Float64Array;
}

/** torchaudio's _get_sinc_resample_kernel (Hann window), in float64. */
export function resampleKernel(fromRate: number, toRate: number, options: ResampleOptions = {}): ResampleKernel {
  for (const [what, r] of [
    ['fromRate', fromRate],
    ['toRate', toRate],
  ] as const) {
    if (!Number.isInteger(r) || r < 1) throw new ShapeError(`resample: ${what} must be a positive integer (Hz), got ${r}`);
  }
  const g = gcd(fromRate, toRate);
  const orig = fromRate / g;
  const nw = toRate / g;
  const lowpass = options.lowpassFilterWidth ?? 6;
  const rolloff = options.rolloff ?? 0.99;
  if (!(lowpass > 0)) throw new ShapeError(`resample: lowpassFilterWidth must be > 0, got ${lowpass}`);
  if (!(rolloff > 0 && rolloff <= 1)) throw new ShapeError(`resample: rolloff must be in (0, 1], got ${rolloff}`);
  const base = Math.min(orig, nw) * rolloff;
  const width = Math.ceil((lowpass * orig) / base);
  const taps = 2 * width + orig;
  const values = new Float64Array(nw * taps);
  const scale = base / orig;
  for (let j = 0; j < nw; j++) {
    for (let i = 0; i < taps; i++) {
      let t = ((i - width) / orig - j / nw) * base;
      t = Math.max(-lowpass, Math.min(lowpass, t));
      const window = Math.cos((t * Math.PI) / lowpass / 2) ** 2;
      const x = t * Math.PI;
      values[j * taps + i] = (x === 0 ? 1 : Math.sin(x) / x) * window * scale;
    }
  }
  return { orig, new: nw, width, values };
}

/**
 * Resamples x [..., T] from fromRate to toRate (positive integers, Hz): float32 [..., ceil(T toRate / fromRate)].
 * Equal rates return a float32 copy (torchaudio returns the input).
 */
export function resample(x: Tensor, fromRate: number, toRate: number, options: ResampleOptions = {}): Tensor {
  const op = 'resample';
  const backend = commonBackend(op, x);
  requireDTypes(op, x, FFT_DTYPES);
  if (x.ndim < 1) throw new ShapeError(`${op}: x must be a signal [..., T], got ${x.describe()}`);
  const k = resampleKernel(fromRate, toRate, options);
  if (fromRate === toRate) return x.dtype === 'float32' ? x.clone() : (x.to('float32') as Tensor);
  const lead = x.shape.slice(0, -1);
  const t = x.shape[x.ndim - 1];
  const batch = lead.reduce((a, b) => a * b, 1);
  const length = Math.ceil((k.new * t) / k.orig);
  const signals = x.reshape([batch, t]);
  const bank = traceConstant(() => tensor(Float32Array.from(k.values), { shape: [k.new, 2 * k.width + k.orig], device: x.device }));
  const handle = runKernel('resample', backend, { x: signals.operand(), kernel: bank.operand(), stride: k.orig, padLeft: k.width, length });
  bank.dispose();
  if (signals !== x) signals.dispose();
  return wrap(backend, handle, 'float32', [...lead, length]);
}
