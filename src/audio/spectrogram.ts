// Spectrograms as torchaudio computes them: Spectrogram / MelSpectrogram (the STFT's power or magnitude from the
// same single dispatch, then the mel projection as one matmul) and AmplitudeToDB.
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tidy } from '../core/scope.js';
import { matmul } from '../ops/matmul.js';
import { spectrogramOf, type StftOptions } from '../ops/stft.js';
import { hannWindow } from './windows.js';
import { melFilterbank, type MelScale } from './mel-filterbank.js';

export interface SpectrogramOptions extends Omit<StftOptions, 'nFft'> {
  /** Default 400. */
  nFft?: number;
  /** 2: power |X|^2 (default), 1: magnitude |X|. */
  power?: 1 | 2;
}

/** Window, hop and power as torchaudio.transforms.Spectrogram defaults them (periodic Hann, hop = winLength / 2). */
function resolve(x: Tensor, options: SpectrogramOptions): { stft: StftOptions; kind: 'power' | 'magnitude'; ownWindow?: Tensor } {
  const nFft = options.nFft ?? 400;
  const winLength = options.winLength ?? nFft;
  const power = options.power ?? 2;
  if (power !== 1 && power !== 2) throw new ShapeError(`spectrogram: power must be 1 (magnitude) or 2 (power), got ${String(power)}`);
  const ownWindow = options.window ? undefined : hannWindow(winLength, { device: x.device });
  return {
    stft: { ...options, nFft, winLength, hopLength: options.hopLength ?? Math.max(1, Math.floor(winLength / 2)), window: options.window ?? ownWindow },
    kind: power === 2 ? 'power' : 'magnitude',
    ownWindow,
  };
}

/** torchaudio.transforms.Spectrogram: x [..., T] -> float32 [..., nFft / 2 + 1, frames]; one dispatch on WebGPU. */
export function spectrogram(x: Tensor, options: SpectrogramOptions = {}): Tensor {
  const r = resolve(x, options);
  try {
    return spectrogramOf('spectrogram', x, r.stft, r.kind);
  } finally {
    r.ownWindow?.dispose();
  }
}

export interface MelSpectrogramOptions extends SpectrogramOptions {
  /** Default 16000. */
  sampleRate?: number;
  /** Default 128. */
  nMels?: number;
  fMin?: number;
  fMax?: number;
  /** Default 'htk' (torchaudio's default; librosa and Whisper use 'slaney'). */
  melScale?: MelScale;
  /** Default null (torchaudio's default). */
  norm?: 'slaney' | null;
}

/**
 * torchaudio.transforms.MelSpectrogram: x [..., T] -> float32 [..., nMels, frames] = melFilterbank @ spectrogram.
 * Two dispatches on WebGPU.
 */
export function melSpectrogram(x: Tensor, options: MelSpectrogramOptions = {}): Tensor {
  const { sampleRate = 16000, nMels = 128, fMin, fMax, melScale = 'htk', norm = null, ...spec } = options;
  return tidy(() => {
    const s = spectrogram(x, spec);
    const filters = melFilterbank({ sampleRate, nFft: spec.nFft ?? 400, nMels, fMin, fMax, melScale, norm, device: x.device });
    return matmul(filters, s);
  });
}

export interface AmplitudeToDbOptions {
  /** 'power' (10 log10, default) or 'magnitude' (20 log10). */
  stype?: 'power' | 'magnitude';
  /** Values are clamped to at least amin before the log (default 1e-10). */
  amin?: number;
  /** The value that maps to 0 dB (default 1). */
  ref?: number;
  /** Raise everything to at least (max - topDb) dB, the max taken per spectrogram (the last two dims). */
  topDb?: number;
}

/** torchaudio's AmplitudeToDB: multiplier * log10(max(x, amin)) - multiplier * log10(max(amin, ref)). */
export function amplitudeToDb(x: Tensor, options: AmplitudeToDbOptions = {}): Tensor {
  const multiplier = (options.stype ?? 'power') === 'power' ? 10 : 20;
  const amin = options.amin ?? 1e-10;
  const ref = options.ref ?? 1;
  if (!(amin > 0)) throw new ShapeError(`amplitudeToDb: amin must be > 0, got ${amin}`);
  if (x.ndim < 2 && options.topDb !== undefined) throw new ShapeError(`amplitudeToDb: topDb needs a spectrogram [..., freq, time], got ${x.describe()}`);
  return tidy(() => {
    const db = x
      .maximum(amin)
      .log()
      .mul(multiplier / Math.LN10)
      .sub(multiplier * Math.log10(Math.max(amin, ref)));
    if (options.topDb === undefined) return db;
    if (!(options.topDb >= 0)) throw new ShapeError(`amplitudeToDb: topDb must be >= 0, got ${options.topDb}`);
    const peak = db.max(-1, { keepdim: true }).max(-2, { keepdim: true });
    return db.maximum(peak.sub(options.topDb));
  });
}
