// openai-whisper's log_mel_spectrogram (whisper/audio.py), reproduced exactly: 16 kHz audio, n_fft 400, hop 160,
// a periodic Hann window, centred frames with reflect padding, power |X|^2 with the last frame dropped (480000
// samples give 3000 frames), librosa's slaney mel filters (fmax 8000), log10(max(mel, 1e-10)), max(x, max - 8),
// (x + 4) / 4. Three dispatches on WebGPU: the STFT's power (framing, window and DFT in one kernel), the mel
// projection with the log and per-workgroup maxima, and the normalization that reduces those maxima on the device.
import { runKernel } from '../kernels/registry.js';
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { FFT_DTYPES } from '../ops/fft.js';
import { pad } from '../ops/pad.js';
import { commonBackend, requireDTypes, wrap } from '../ops/util.js';
import { melFilterbankValues } from './mel-filterbank.js';
import { hannWindow } from './windows.js';
import { traceConstant } from '../compile/trace.js';

export const WHISPER_SAMPLE_RATE = 16000;
export const WHISPER_N_FFT = 400;
export const WHISPER_HOP_LENGTH = 160;
/** 30 s of audio: the length Whisper's encoder takes (pad_or_trim). */
export const WHISPER_N_SAMPLES = 480000;

export interface LogMelOptions {
  /** 80 (Whisper up to large-v2) or 128 (large-v3); default 80. */
  nMels?: number;
  /** Zeros appended to the audio first (whisper's `padding`). */
  padding?: number;
}

interface Filters {
  readonly values: Float32Array;
  /** Each filter's nonzero bins [first, end). */
  readonly bands: [number, number][];
}

const filterCache = new Map<number, Filters>();
function whisperFilters(nMels: number): Filters {
  let f = filterCache.get(nMels);
  if (!f) {
    const values = Float32Array.from(
      melFilterbankValues({ sampleRate: WHISPER_SAMPLE_RATE, nFft: WHISPER_N_FFT, nMels, fMin: 0, fMax: 8000, melScale: 'slaney', norm: 'slaney' }),
    );
    const bins = WHISPER_N_FFT / 2 + 1;
    const bands = Array.from({ length: nMels }, (_, m): [number, number] => {
      const row = values.subarray(m * bins, (m + 1) * bins);
      const first = row.findIndex((w) => w !== 0);
      if (first < 0) return [0, 0];
      let end = bins;
      while (row[end - 1] === 0) end--;
      return [first, end];
    });
    f = { values, bands };
    filterCache.set(nMels, f);
  }
  return f;
}

/**
 * Whisper's log-mel features of 16 kHz audio [T] or [B, T] (float32/16/bf16): float32 [nMels, frames] or
 * [B, nMels, frames] with frames = T / 160 (rounded down). A batch is normalized per example (whisper's own
 * function takes one); the values of one example equal whisper's.
 */
export function logMelSpectrogram(audio: Tensor, options: LogMelOptions = {}): Tensor {
  const op = 'logMelSpectrogram';
  const backend = commonBackend(op, audio);
  requireDTypes(op, audio, FFT_DTYPES);
  const nMels = options.nMels ?? 80;
  if (!Number.isInteger(nMels) || nMels < 1) throw new ShapeError(`${op}: nMels must be an integer >= 1 (80 or 128 for Whisper), got ${nMels}`);
  if (audio.ndim !== 1 && audio.ndim !== 2) throw new ShapeError(`${op}: audio must be [T] or [B, T] samples at 16 kHz, got ${audio.describe()}`);
  const padding = options.padding ?? 0;
  if (!Number.isInteger(padding) || padding < 0) throw new ShapeError(`${op}: padding must be an integer >= 0, got ${padding}`);
  const signals = audio.ndim === 1 ? audio.reshape([1, audio.shape[0]]) : audio;
  const [batch, samples] = signals.shape;
  const t = samples + padding;
  const padLeft = WHISPER_N_FFT / 2;
  if (t <= padLeft)
    throw new ShapeError(`${op}: reflect padding of ${padLeft} samples needs more than ${padLeft} samples of audio, got ${t} (audio ${audio.describe()})`);
  // torch.stft gives 1 + t // hop frames; whisper drops the last.
  const frames = Math.floor(t / WHISPER_HOP_LENGTH);
  const window = hannWindow(WHISPER_N_FFT, { device: audio.device });
  const { values: filterValues, bands } = whisperFilters(nMels);
  const filters = traceConstant(() => tensor(filterValues, { shape: [nMels, WHISPER_N_FFT / 2 + 1], device: audio.device }));
  let source = signals;
  // whisper pads with zeros before the STFT, so its reflect padding mirrors those zeros: one pad dispatch.
  if (padding > 0) source = pad(signals, [0, padding]);
  const power = runKernel('stft', backend, {
    x: source.operand(),
    window: window.operand(),
    args: { nFft: WHISPER_N_FFT, hop: WHISPER_HOP_LENGTH, frames, padLeft, padMode: 'reflect', onesided: true, scale: 1, output: 'power' },
  });
  const powerTensor = wrap(backend, power, 'float32', [batch, WHISPER_N_FFT / 2 + 1, frames]);
  const out = runKernel('logMel', backend, {
    power: powerTensor.operand(),
    filters: filters.operand(),
    args: { floor: 1e-10, dynamicRange: 8, offset: 4, divisor: 4, bands },
  });
  powerTensor.dispose();
  window.dispose();
  filters.dispose();
  if (source !== signals) source.dispose();
  if (signals !== audio) signals.dispose();
  return wrap(backend, out, 'float32', audio.ndim === 1 ? [nMels, frames] : [batch, nMels, frames]);
}
