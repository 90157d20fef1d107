// `tensorgpu audio mel|spectrogram`: a WAV file (or the built-in synthetic signal) to features computed on the
// device, drawn as a PNG (time on x, frequency / mel bin on y, magma) and optionally saved as safetensors.
// mel: Whisper's log-mel front end (16 kHz; other rates are resampled first on the device). spectrogram: the
// STFT's power in dB (80 dB range) at the file's own rate.
import { basename } from 'node:path';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { chooseDevice } from './device.js';
import type { Tensor } from '../core/tensor.js';
import { resample } from '../audio/resample.js';
import { amplitudeToDb, spectrogram } from '../audio/spectrogram.js';
import { syntheticSignal } from '../audio/synthetic.js';
import { logMelSpectrogram, WHISPER_HOP_LENGTH, WHISPER_SAMPLE_RATE } from '../audio/whisper.js';
import { spectrogramLayout, writeSpectrogramPng, type SpectrogramAxes } from '../media/spectrogram-image.js';
import { writeSafetensors, tensorSource } from '../formats/safetensors-writer.js';
import { readWav, toMono } from '../media/wav.js';
import { tensor } from '../ops/creation.js';
import { compile } from '../compile/compile.js';
import { tidy } from '../core/scope.js';
import { gpuCounters, synchronize } from '../runtime/stats.js';

export type AudioFeature = 'mel' | 'spectrogram';

export interface AudioCliOptions {
  /** A .wav file; default the built-in synthetic signal. */
  input?: string;
  out: string;
  device: DeviceRequest;
  /** mel: 80 or 128. */
  nMels?: number;
  /** spectrogram: FFT size and hop (default 512 and 128). */
  nFft?: number;
  hop?: number;
  /** .safetensors file for the features. */
  save?: string;
  /** Seconds of the built-in signal (default 10). */
  seconds?: number;
  /** Pixels per value (default 1; 2 for short inputs makes the picture easier to see). */
  scale?: number;
  /** Run the front end through compile(). */
  compile?: boolean;
}

const BUILTIN_SECONDS = 10;

export async function runAudio(
  feature: AudioFeature,
  o: AudioCliOptions,
  out: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  log: (line: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<number> {
  const owned: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    owned.push(t);
    return t;
  };
  try {
    // A bad file fails before the device starts.
    let samples: Float32Array;
    let rate: number;
    let source: string;
    if (o.input) {
      const wav = await readWav(o.input);
      samples = toMono(wav);
      rate = wav.sampleRate;
      source = `${basename(o.input)} (${wav.channels.length} channel${wav.channels.length === 1 ? '' : 's'}${wav.channels.length > 1 ? ' mixed to mono' : ''}, ${wav.bitDepth}-bit, ${rate} Hz)`;
    } else {
      const seconds = o.seconds ?? BUILTIN_SECONDS;
      rate = WHISPER_SAMPLE_RATE;
      samples = syntheticSignal(seconds, rate);
      source = `built-in synthetic signal (chirp 100 Hz -> 7 kHz, tones at 440 Hz, 1 kHz and 3 kHz, noise), ${seconds} s at ${rate} Hz`;
    }
    if (samples.length === 0) throw new Error(`${o.input ?? 'input'}: the audio holds no samples`);
    const device = await chooseDevice(o.device, log);
    const audio = keep(tensor(samples, { device }));
    await synchronize();
    const before = gpuCounters();
    const t0 = performance.now();
    let front: (a: Tensor) => Tensor;
    let what: string;
    let axes: SpectrogramAxes;
    if (feature === 'mel') {
      const nMels = o.nMels ?? 80;
      front = (a) => logMelSpectrogram(rate === WHISPER_SAMPLE_RATE ? a : resample(a, rate, WHISPER_SAMPLE_RATE), { nMels });
      axes = { x: { label: 'time (s)', step: WHISPER_HOP_LENGTH / WHISPER_SAMPLE_RATE }, y: { label: 'mel bin', step: 1 } };
      what = `Whisper log-mel, ${nMels} mels, ${WHISPER_HOP_LENGTH / 16} ms hop${rate === WHISPER_SAMPLE_RATE ? '' : ` (resampled ${rate} -> ${WHISPER_SAMPLE_RATE} Hz on the device)`}`;
    } else {
      const nFft = o.nFft ?? 512;
      const hop = o.hop ?? Math.max(1, Math.floor(nFft / 4));
      front = (a) => amplitudeToDb(spectrogram(a, { nFft, hopLength: hop }), { topDb: 80 });
      axes = { x: { label: 'time (s)', step: hop / rate }, y: { label: 'frequency (Hz)', step: rate / nFft } };
      what = `power spectrogram in dB (80 dB range), n_fft ${nFft}, hop ${hop}, ${(rate / nFft).toFixed(1)} Hz per bin`;
    }
    // One call of a compiled function is its trace, which is the eager run: what compile() buys here is the check
    // that the front end replays (the API keeps the function and replays it for every later input of this length).
    const compiled = o.compile ? compile(front, { label: `audio ${feature}` }) : undefined;
    const features = keep(tidy(() => (compiled ?? front)(audio)));
    const values = (await features.toArray()) as Float32Array;
    const ms = performance.now() - t0;
    const after = gpuCounters();
    const [rows, cols] = features.shape;
    const picture = { scale: o.scale ?? 1, axes };
    await writeSpectrogramPng(o.out, values, rows, cols, { colormap: 'magma', ...picture });
    const size = spectrogramLayout(rows, cols, picture);
    if (o.save) {
      await writeSafetensors(o.save, [[feature === 'mel' ? 'log_mel' : 'spectrogram_db', tensorSource(features)]], {
        sample_rate: String(feature === 'mel' ? WHISPER_SAMPLE_RATE : rate),
        feature,
      });
    }
    out(`input: ${source}, ${(samples.length / rate).toFixed(2)} s`);
    out(`features: ${what}: [${rows}, ${cols}] on ${device} in ${ms.toFixed(0)} ms`);
    if (device === 'webgpu') out(`webgpu: ${after.dispatches - before.dispatches} dispatches`);
    out(
      `picture: ${o.out} (${size.width}x${size.height}: a ${cols * picture.scale}x${rows * picture.scale} heat map with axes, time (s) on x, ${feature === 'mel' ? 'mel bin' : 'frequency (Hz)'} on y, low at the bottom)`,
    );
    if (o.save) out(`saved: ${o.save}`);
    const signature = compiled?.stats().signatures[0];
    if (signature)
      out(
        `compile: ${signature.reason ? `eager because ${signature.reason}` : `traced (${signature.tracedOps} ops -> ${signature.programSteps} steps, ${signature.fusedGroups.length} fused group(s)): a later call of this length would replay`}`,
      );
    compiled?.reset();
    return 0;
  } finally {
    for (const t of owned.reverse()) t.dispose();
    releaseDevice();
  }
}
