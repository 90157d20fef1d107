// Audio on one adapter, WebGPU against the CPU backend (float64 reference loops) in the same run:
// - Whisper's log-mel of 30 s of 16 kHz audio: the fused path (3 dispatches: STFT power, mel + log10 with partial
//   maxima, normalization) and, on WebGPU, the same features composed from ops (stft, |X|^2, matmul, log, a global
//   max read on the device, clamp, affine) as the design it replaces.
// - rfft of a batch of 3000 frames of 400 points (Whisper's n_fft, 2^4 5^2) and of 512 points: one dispatch each;
//   throughput counts 5 n log2 n flops per complex transform (the usual FFT convention, halved for real input).
// - conv1d and convTranspose1d at vocoder-like sizes: one dispatch each, padding included.
// Dispatches per call are machine-independent; times on a software adapter are CPU times.
import {
  conv1d,
  convTranspose1d,
  Generator,
  hannWindow,
  logMelSpectrogram,
  matmul,
  melFilterbank,
  randn,
  rfft,
  stft,
  synchronize,
  syntheticSignal,
  tensor,
  type Tensor,
} from '../src/index.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const DEVICES = ['webgpu', 'cpu'] as const;
type Device = (typeof DEVICES)[number];

export function audioCases(quick: boolean): BenchCase[] {
  const frames = quick ? 500 : 3000;
  return [
    { benchmark: 'log-mel whisper 80 mels', shape: '30 s [480000]', run: (ctx) => measureLogMel(ctx) },
    ...[400, 512].map((n): BenchCase => ({ benchmark: `rfft n=${n}`, shape: `[${frames},${n}]`, run: (ctx) => measureRfft(ctx, frames, n) })),
    { benchmark: 'conv1d k3 pad1', shape: quick ? '[1,64,4096] x [64,64,3]' : '[1,256,8192] x [256,256,3]', run: (ctx) => measureConv(ctx, quick, false) },
    {
      benchmark: 'convTranspose1d k4 s2',
      shape: quick ? '[1,64,2048] x [64,64,4]' : '[1,256,4096] x [256,256,4]',
      run: (ctx) => measureConv(ctx, quick, true),
    },
  ];
}

async function timeOn(ctx: BenchContext, device: Device, fn: () => Tensor) {
  return timeIt(async () => {
    const y = fn();
    if (device === 'cpu') await y.toArray();
    else await synchronize();
    y.dispose();
  }, ctx.time);
}

/** Whisper's features from ops, as a port of whisper/audio.py to a tensor library would write them. */
function composedLogMel(audio: Tensor, window: Tensor, filters: Tensor): Tensor {
  const owned: Tensor[] = [];
  const k = (t: Tensor) => (owned.push(t), t);
  const spec = k(stft(audio, { nFft: 400, hopLength: 160, window }));
  const power = k(k(spec.mul(spec)).sum(-1));
  const frames = k(power.narrow(1, 0, power.shape[1] - 1));
  const mel = k(matmul(filters, frames));
  const log = k(k(k(mel.maximum(1e-10)).log()).mul(1 / Math.LN10));
  const peak = k(k(log.flatten()).max(0));
  const floored = k(log.maximum(k(peak.sub(8))));
  const out = k(floored.add(4)).div(4);
  for (const t of owned) t.dispose();
  return out;
}

async function measureLogMel(ctx: BenchContext): Promise<RowInput[]> {
  const shape = '30 s [480000]';
  const benchmark = 'log-mel whisper 80 mels';
  const samples = syntheticSignal(30);
  const rows: RowInput[] = [];
  for (const device of DEVICES) {
    if (device === 'webgpu' && !ctx.gpu) continue;
    ctx.log(`  ${device} ${benchmark}`);
    const audio = tensor(samples, { device });
    const timing = await timeOn(ctx, device, () => logMelSpectrogram(audio));
    rows.push({
      benchmark,
      shape,
      backend: device,
      timing,
      note: device === 'webgpu' ? `${timing.dispatchesPerRun} dispatches (STFT power, mel + log, normalize), no read-back for the max` : undefined,
    });
    if (device === 'webgpu') {
      const window = hannWindow(400, { device });
      const filters = melFilterbank({ sampleRate: 16000, nFft: 400, nMels: 80, fMax: 8000, device });
      const composed = `${benchmark} from ops`;
      ctx.log(`  ${device} ${composed}`);
      const c = await timeOn(ctx, device, () => composedLogMel(audio, window, filters));
      rows.push({
        benchmark: composed,
        shape,
        backend: device,
        timing: c,
        note: `the same features from ${c.dispatchesPerRun} op dispatches (stft, |X|^2, matmul, log10, max, clamp, affine)`,
      });
      rows[rows.length - 2].baselineBenchmark = composed;
      window.dispose();
      filters.dispose();
    }
    audio.dispose();
  }
  return rows;
}

async function measureRfft(ctx: BenchContext, frames: number, n: number): Promise<RowInput[]> {
  const shape = `[${frames},${n}]`;
  const benchmark = `rfft n=${n}`;
  const flops = frames * 2.5 * n * Math.log2(n);
  const host = randn([frames, n], { generator: new Generator(7) });
  const rows: RowInput[] = [];
  for (const device of DEVICES) {
    if (device === 'webgpu' && !ctx.gpu) continue;
    ctx.log(`  ${device} ${benchmark}`);
    const x = device === 'cpu' ? host : await host.to(device);
    const timing = await timeOn(ctx, device, () => rfft(x));
    rows.push({
      benchmark,
      shape,
      backend: device,
      timing,
      flops,
      note:
        device === 'webgpu'
          ? `${timing.dispatchesPerRun} dispatch per batch (${n === 400 ? 'radices 4, 4, 5, 5' : 'radices 4, 4, 4, 4, 2'}, the row in workgroup memory)`
          : undefined,
    });
    if (x !== host) x.dispose();
  }
  host.dispose();
  return rows;
}

async function measureConv(ctx: BenchContext, quick: boolean, transposed: boolean): Promise<RowInput[]> {
  const c = quick ? 64 : 256;
  const length = (quick ? 4096 : 8192) / (transposed ? 2 : 1);
  const k = transposed ? 4 : 3;
  const benchmark = transposed ? 'convTranspose1d k4 s2' : 'conv1d k3 pad1';
  const shape = transposed ? `[1,${c},${length}] x [${c},${c},4]` : `[1,${c},${length}] x [${c},${c},3]`;
  const outLength = transposed ? 2 * length : length;
  const flops = 2 * c * c * k * (transposed ? length : outLength);
  const g = new Generator(11);
  const hx = randn([1, c, length], { generator: g });
  const hw = randn(transposed ? [c, c, k] : [c, c, k], { generator: g });
  const rows: RowInput[] = [];
  for (const device of DEVICES) {
    if (device === 'webgpu' && !ctx.gpu) continue;
    ctx.log(`  ${device} ${benchmark}`);
    const x = device === 'cpu' ? hx : await hx.to(device);
    const w = device === 'cpu' ? hw : await hw.to(device);
    const run = transposed ? () => convTranspose1d(x, w, undefined, { stride: 2, padding: 1 }) : () => conv1d(x, w, undefined, { padding: 1 });
    const timing = await timeOn(ctx, device, run);
    rows.push({ benchmark, shape, backend: device, timing, flops });
    if (x !== hx) x.dispose();
    if (w !== hw) w.dispose();
  }
  hx.dispose();
  hw.dispose();
  return rows;
}
