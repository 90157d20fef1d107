// The float64 references of fft and stft, the oracles of their WebGPU kernel: float64 throughout, the DFT by the
// same plan as the GPU (fft-plan.ts), results rounded once to float32.
import type { StorageArray } from '../../core/codecs.js';
import type { FftArgs, Operand, StftArgs } from '../../runtime/backend.js';
import { fftPlan, fftTransform } from '../../runtime/fft-plan.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/** Bins an fft row writes. */
export function fftOutputBins(n: number, output: FftArgs['output']): number {
  return output === 'half' ? Math.floor(n / 2) + 1 : n;
}

/** z (length n) of one row of x's values (row-major [rows, L] or [rows, L, 2]) as the input kind reads it. */
function loadRow(x: Float64Array, row: number, length: number, args: FftArgs, re: Float64Array, im: Float64Array): void {
  const { n, input } = args;
  re.fill(0);
  im.fill(0);
  const complex = input !== 'real';
  const base = row * length * (complex ? 2 : 1);
  const take = Math.min(length, input === 'hermitian' ? Math.floor(n / 2) + 1 : n);
  for (let j = 0; j < take; j++) {
    re[j] = complex ? x[base + 2 * j] : x[base + j];
    im[j] = complex ? x[base + 2 * j + 1] : 0;
  }
  if (input === 'hermitian') {
    im[0] = 0;
    if (n % 2 === 0) im[n / 2] = 0;
    for (let j = Math.floor(n / 2) + 1; j < n; j++) {
      re[j] = re[n - j];
      im[j] = -im[n - j];
    }
  }
}

export function fftReference(x: Operand<Handle>, args: FftArgs): Handle {
  const complex = args.input !== 'real';
  const shape = x.view.shape;
  const length = shape[complex ? shape.length - 2 : shape.length - 1];
  const rows = shape.slice(0, complex ? -2 : -1).reduce((a, b) => a * b, 1);
  const xs = values(x);
  const { n, output, scale } = args;
  const plan = fftPlan(n);
  const bins = fftOutputBins(n, output);
  const width = output === 'real' ? 1 : 2;
  const out = new Float64Array(rows * bins * width);
  const re = new Float64Array(n);
  const im = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    loadRow(xs, r, length, args, re, im);
    fftTransform(re, im, plan, args.inverse);
    for (let k = 0; k < bins; k++) {
      if (width === 1) out[r * bins + k] = re[k] * scale;
      else {
        out[2 * (r * bins + k)] = re[k] * scale;
        out[2 * (r * bins + k) + 1] = im[k] * scale;
      }
    }
  }
  return store(out, 'float32');
}

/** Index of sample position p of a signal of length t as padMode reads it (-1: a zero). */
export function paddedIndex(p: number, t: number, mode: StftArgs['padMode']): number {
  if (p >= 0 && p < t) return p;
  if (mode === 'constant') return -1;
  // Reflect without repeating the edge; the op checks the pad is < t, so one reflection lands inside.
  return p < 0 ? -p : 2 * (t - 1) - p;
}

export function stftReference(x: Operand<Handle>, window: Operand<Handle>, args: StftArgs): Handle {
  const [batch, t] = x.view.shape;
  const xs = values(x);
  const win = values(window);
  const { nFft, hop, frames, padLeft, padMode, onesided, scale, output } = args;
  const plan = fftPlan(nFft);
  const bins = onesided ? Math.floor(nFft / 2) + 1 : nFft;
  const width = output === 'complex' ? 2 : 1;
  const out = new Float64Array(batch * bins * frames * width);
  const re = new Float64Array(nFft);
  const im = new Float64Array(nFft);
  for (let b = 0; b < batch; b++) {
    for (let f = 0; f < frames; f++) {
      for (let j = 0; j < nFft; j++) {
        const i = paddedIndex(f * hop - padLeft + j, t, padMode);
        re[j] = i < 0 ? 0 : xs[b * t + i] * win[j];
        im[j] = 0;
      }
      fftTransform(re, im, plan, false);
      for (let k = 0; k < bins; k++) {
        const at = (b * bins + k) * frames + f;
        const vr = re[k] * scale;
        const vi = im[k] * scale;
        if (output === 'complex') {
          out[2 * at] = vr;
          out[2 * at + 1] = vi;
        } else {
          const power = vr * vr + vi * vi;
          out[at] = output === 'power' ? power : Math.sqrt(power);
        }
      }
    }
  }
  return store(out, 'float32');
}
