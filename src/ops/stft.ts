// torch.stft / torch.istft for real signals. The STFT is one dispatch on WebGPU: framing, the center padding
// (reflect or zeros, by index arithmetic: no padded copy), the window and the DFT of every frame, written straight
// into torch's [..., freq, frames] layout (complex pairs, or power / magnitude for spectrograms). istft is two: an
// inverse DFT per frame read in place from the spectrum, then a gathered overlap-add with torch's window-envelope
// normalization, so that istft(stft(x)) returns x.
import { runKernel } from '../kernels/registry.js';
import type { StftArgs } from '../runtime/backend.js';
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { ones } from './creation.js';
import { FFT_DTYPES } from './fft.js';
import { pad } from './pad.js';
import { commonBackend, requireDTypes, wrap } from './util.js';

export interface StftOptions {
  nFft: number;
  /** Default floor(nFft / 4). */
  hopLength?: number;
  /** Default nFft; a shorter window is zero-padded on both sides to nFft (torch.stft). */
  winLength?: number;
  /** [winLength] of a float dtype on x's device; default a rectangular window (ones). */
  window?: Tensor;
  /** Pad nFft / 2 samples on both sides so frame t is centred on sample t * hop (default true). */
  center?: boolean;
  /** How center pads (default 'reflect'). */
  padMode?: 'reflect' | 'constant';
  /** Multiply by nFft^-0.5 (default false). */
  normalized?: boolean;
  /** Keep the nFft / 2 + 1 non-negative frequencies (default true). */
  onesided?: boolean;
}

/** What a spectrogram keeps of each bin: the complex value (stft), |X|^2 (power) or |X| (magnitude). */
export type SpectrumKind = 'complex' | 'power' | 'magnitude';

interface Framing {
  readonly nFft: number;
  readonly hop: number;
  readonly window: Tensor;
  /** Whether window was made here (and must be disposed by the caller). */
  readonly ownWindow: boolean;
  readonly padLeft: number;
}

function positiveInt(op: string, what: string, v: number): number {
  if (!Number.isInteger(v) || v < 1) throw new ShapeError(`${op}: ${what} must be an integer >= 1, got ${v}`);
  return v;
}

/** nFft, hop and the window padded to nFft, validated. */
function framing(op: string, x: Tensor, options: StftOptions): Framing {
  const nFft = positiveInt(op, 'nFft', options.nFft);
  const hop = positiveInt(op, 'hopLength', options.hopLength ?? Math.max(1, Math.floor(nFft / 4)));
  const winLength = positiveInt(op, 'winLength', options.winLength ?? nFft);
  if (winLength > nFft) throw new ShapeError(`${op}: winLength ${winLength} is longer than nFft ${nFft}`);
  let window = options.window;
  if (window) {
    commonBackend(op, x, window);
    requireDTypes(op, window, FFT_DTYPES);
    if (window.ndim !== 1 || window.shape[0] !== winLength)
      throw new ShapeError(`${op}: window must be [winLength] = [${winLength}], got ${window.describe()}`);
  }
  let ownWindow = false;
  if (!window) {
    window = ones([winLength], { device: x.device, dtype: 'float32' });
    ownWindow = true;
  }
  if (winLength < nFft) {
    const left = Math.floor((nFft - winLength) / 2);
    const padded = pad(window, [left, nFft - winLength - left]);
    if (ownWindow) window.dispose();
    window = padded;
    ownWindow = true;
  }
  const center = options.center ?? true;
  return { nFft, hop, window, ownWindow, padLeft: center ? Math.floor(nFft / 2) : 0 };
}

/**
 * The STFT of real x [..., T] as `kind` says: [..., bins, frames, 2] (complex) or [..., bins, frames], float32. Used
 * by stft and by the spectrogram ops (power / magnitude come out of the same dispatch).
 */
export function spectrogramOf(op: string, x: Tensor, options: StftOptions, kind: SpectrumKind): Tensor {
  const backend = commonBackend(op, x);
  requireDTypes(op, x, FFT_DTYPES);
  if (x.ndim < 1) throw new ShapeError(`${op}: x must be a signal [..., T], got ${x.describe()}`);
  const f = framing(op, x, options);
  try {
    const t = x.shape[x.ndim - 1];
    const padMode = options.padMode ?? 'reflect';
    if (padMode !== 'reflect' && padMode !== 'constant') throw new ShapeError(`${op}: padMode must be 'reflect' or 'constant', got ${String(padMode)}`);
    if (f.padLeft > 0 && padMode === 'reflect' && f.padLeft >= t) {
      throw new ShapeError(
        `${op}: center reflect-padding of ${f.padLeft} samples (nFft / 2) needs a signal longer than that, got ${t} samples (x ${x.describe()}); use padMode 'constant' or a shorter nFft`,
      );
    }
    const padded = t + 2 * f.padLeft;
    if (padded < f.nFft) throw new ShapeError(`${op}: a signal of ${t} samples${f.padLeft ? ` (${padded} padded)` : ''} is shorter than nFft ${f.nFft}`);
    const frames = 1 + Math.floor((padded - f.nFft) / f.hop);
    const onesided = options.onesided ?? true;
    const bins = onesided ? Math.floor(f.nFft / 2) + 1 : f.nFft;
    const lead = x.shape.slice(0, -1);
    const batch = lead.reduce((a, b) => a * b, 1);
    const signals = x.reshape([batch, t]);
    const args: StftArgs = {
      nFft: f.nFft,
      hop: f.hop,
      frames,
      padLeft: f.padLeft,
      padMode,
      onesided,
      scale: options.normalized ? 1 / Math.sqrt(f.nFft) : 1,
      output: kind,
    };
    const handle = runKernel('stft', backend, { x: signals.operand(), window: f.window.operand(), args });
    if (signals !== x) signals.dispose();
    return wrap(backend, handle, 'float32', kind === 'complex' ? [...lead, bins, frames, 2] : [...lead, bins, frames]);
  } finally {
    if (f.ownWindow) f.window.dispose();
  }
}

/** torch.stft(x, ..., return_complex=True) viewed as real: x [..., T] gives float32 [..., bins, frames, 2]. */
export function stft(x: Tensor, options: StftOptions): Tensor {
  return spectrogramOf('stft', x, options, 'complex');
}

export interface IstftOptions extends Omit<StftOptions, 'padMode'> {
  /** Samples of the result (default: everything the frames cover, less the centre padding); zeros past the frames. */
  length?: number;
}

/**
 * torch.istft: spec [..., bins, frames, 2] (onesided: bins = nFft / 2 + 1; else nFft, the real part kept) back to
 * float32 signals [..., length]. Each frame's inverse DFT times the window is overlap-added and divided by the
 * summed squared window (positions no frame covers, or where that sum is 0, give 0; torch raises there).
 */
export function istft(spec: Tensor, options: IstftOptions): Tensor {
  const op = 'istft';
  const backend = commonBackend(op, spec);
  requireDTypes(op, spec, FFT_DTYPES);
  if (spec.ndim < 3 || spec.shape[spec.ndim - 1] !== 2)
    throw new ShapeError(`${op}: spec must be [..., bins, frames, 2] (complex pairs), got ${spec.describe()}`);
  const f = framing(op, spec, options);
  try {
    const bins = spec.shape[spec.ndim - 3];
    const frames = spec.shape[spec.ndim - 2];
    const onesided = options.onesided ?? bins !== f.nFft;
    const want = onesided ? Math.floor(f.nFft / 2) + 1 : f.nFft;
    if (bins !== want)
      throw new ShapeError(`${op}: a ${onesided ? 'onesided ' : ''}spectrum of nFft ${f.nFft} has ${want} bins, got ${bins} (spec ${spec.describe()})`);
    if (frames < 1) throw new ShapeError(`${op}: spec has no frames: ${spec.describe()}`);
    const lead = spec.shape.slice(0, -3);
    const batch = lead.reduce((a, b) => a * b, 1);
    const covered = f.nFft + f.hop * (frames - 1) - 2 * f.padLeft;
    const length = options.length ?? covered;
    if (!Number.isInteger(length) || length < 0) throw new ShapeError(`${op}: length must be an integer >= 0, got ${length}`);
    // [B, bins, frames, 2] -> [B, frames, bins, 2] (a view): row (b, frame) reads its bins in place.
    const specs = spec.reshape([batch, bins, frames, 2]);
    const rows = specs.permute([0, 2, 1, 3]);
    const scale = (1 / f.nFft) * (options.normalized ? Math.sqrt(f.nFft) : 1);
    const framesHandle = runKernel('fft', backend, {
      x: rows.operand(),
      args: { n: f.nFft, inverse: true, input: onesided ? 'hermitian' : 'complex', output: 'real', scale },
    });
    const timeFrames = wrap(backend, framesHandle, 'float32', [batch, frames, f.nFft]);
    rows.dispose();
    if (specs !== spec) specs.dispose();
    const handle = runKernel('overlapAdd', backend, { frames: timeFrames.operand(), window: f.window.operand(), hop: f.hop, padLeft: f.padLeft, length });
    timeFrames.dispose();
    return wrap(backend, handle, 'float32', [...lead, length]);
  } finally {
    if (f.ownWindow) f.window.dispose();
  }
}
