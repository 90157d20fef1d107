// librosa.filters.mel: triangular filters on the mel scale over the rfft bins of n_fft, float64 on the host,
// rounded once to float32. 'slaney' (librosa's default, linear below 1 kHz, logarithmic above) or 'htk'
// (2595 log10(1 + f / 700)); norm 'slaney' divides each triangle by its width in Hz / 2 (constant energy per
// channel), null leaves peaks at 1. Whisper's mel_filters.npz is this with (16000, 400, 80 or 128).
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor, type CreateOptions } from '../ops/creation.js';
import { traceConstant } from '../compile/trace.js';

export type MelScale = 'slaney' | 'htk';

export interface MelFilterbankOptions extends CreateOptions {
  sampleRate: number;
  nFft: number;
  nMels?: number;
  /** Default 0. */
  fMin?: number;
  /** Default sampleRate / 2. */
  fMax?: number;
  /** Default 'slaney'. */
  melScale?: MelScale;
  /** Default 'slaney'. */
  norm?: 'slaney' | null;
}

const F_SP = 200 / 3;
const MIN_LOG_HZ = 1000;
const MIN_LOG_MEL = MIN_LOG_HZ / F_SP;
const LOG_STEP = Math.log(6.4) / 27;

export function hzToMel(hz: number, scale: MelScale = 'slaney'): number {
  if (scale === 'htk') return 2595 * Math.log10(1 + hz / 700);
  return hz >= MIN_LOG_HZ ? MIN_LOG_MEL + Math.log(hz / MIN_LOG_HZ) / LOG_STEP : hz / F_SP;
}

export function melToHz(mel: number, scale: MelScale = 'slaney'): number {
  if (scale === 'htk') return 700 * (10 ** (mel / 2595) - 1);
  return mel >= MIN_LOG_MEL ? MIN_LOG_HZ * Math.exp(LOG_STEP * (mel - MIN_LOG_MEL)) : F_SP * mel;
}

/** The float64 weights [nMels, nFft / 2 + 1], row-major. */
export function melFilterbankValues(options: MelFilterbankOptions): Float64Array {
  const { sampleRate, nFft } = options;
  const nMels = options.nMels ?? 128;
  const fMin = options.fMin ?? 0;
  const fMax = options.fMax ?? sampleRate / 2;
  const scale = options.melScale ?? 'slaney';
  const norm = options.norm === undefined ? 'slaney' : options.norm;
  if (!(sampleRate > 0)) throw new ShapeError(`melFilterbank: sampleRate must be > 0, got ${sampleRate}`);
  if (!Number.isInteger(nFft) || nFft < 1) throw new ShapeError(`melFilterbank: nFft must be an integer >= 1, got ${nFft}`);
  if (!Number.isInteger(nMels) || nMels < 1) throw new ShapeError(`melFilterbank: nMels must be an integer >= 1, got ${nMels}`);
  if (!(fMin >= 0 && fMax > fMin)) throw new ShapeError(`melFilterbank: needs 0 <= fMin < fMax, got fMin ${fMin}, fMax ${fMax}`);
  if (scale !== 'slaney' && scale !== 'htk') throw new ShapeError(`melFilterbank: melScale must be 'slaney' or 'htk', got ${String(scale)}`);
  if (norm !== 'slaney' && norm !== null) throw new ShapeError(`melFilterbank: norm must be 'slaney' or null, got ${String(norm)}`);
  const bins = Math.floor(nFft / 2) + 1;
  // nMels + 2 points evenly spaced in mel between fMin and fMax (np.linspace), back in Hz.
  const lo = hzToMel(fMin, scale);
  const hi = hzToMel(fMax, scale);
  const points = nMels + 2;
  const hz = Array.from({ length: points }, (_, i) => melToHz(lo + ((hi - lo) * i) / (points - 1), scale));
  const out = new Float64Array(nMels * bins);
  for (let m = 0; m < nMels; m++) {
    const lower = hz[m];
    const center = hz[m + 1];
    const upper = hz[m + 2];
    const enorm = norm === 'slaney' ? 2 / (upper - lower) : 1;
    for (let k = 0; k < bins; k++) {
      const f = (k * sampleRate) / nFft;
      const rising = (f - lower) / (center - lower);
      const falling = (upper - f) / (upper - center);
      out[m * bins + k] = Math.max(0, Math.min(rising, falling)) * enorm;
    }
  }
  return out;
}

/** librosa.filters.mel as a float32 tensor [nMels, nFft / 2 + 1]. */
export function melFilterbank(options: MelFilterbankOptions): Tensor {
  const values = melFilterbankValues(options);
  const { sampleRate: _s, nFft, nMels: _m, fMin: _a, fMax: _b, melScale: _c, norm: _d, ...create } = options;
  const bins = Math.floor(nFft / 2) + 1;
  return traceConstant(() => tensor(Float32Array.from(values), { ...create, dtype: 'float32', shape: [values.length / bins, bins] }));
}
