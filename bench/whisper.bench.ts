// Whisper on one adapter: the built-in random-weight tiny preset (the exact whisper-tiny layout, so its dispatch
// counts are a real tiny's) transcribing synthetic audio, WebGPU against the CPU backend in the same run.
// - transcribe: wall time of a whole transcription (log-mel, encoder, greedy decoding with timestamps, 32 tokens a
//   window at most); the realtime factor is audio seconds per wall second.
// - encoder: one 30 s window's forward, its dispatches (machine-independent).
// - encoder, 90 s: the three 30 s windows of a 90 s input one at a time (what transcribe does with timestamps)
//   against one batched forward over [3, 80, 3000] (encodeWindows: what transcribe --batch-windows does where the
//   windows are known ahead); WebGPU only, one timed run each (a window takes tens of seconds on SwiftShader).
// - decoder host µs per token: the decode step replayed from a capture against the same step run eagerly; the
//   host time excludes the logits read back, so it is the launch cost a token pays.
// Random weights decode gibberish; the counts and the ratios are what to read.
import { cat, gpuCounters, loadWhisper, logMelSpectrogram, synchronize, syntheticSignal, tensor, type LoadedWhisper } from '../src/index.js';
import { transcribe } from '../src/transcribe/transcribe.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const DEVICES = ['webgpu', 'cpu'] as const;
const SAMPLE_LEN = 32;

export function whisperCases(quick: boolean): BenchCase[] {
  const seconds = quick ? 10 : 30;
  return [
    { benchmark: 'whisper-tiny transcribe', shape: `${seconds} s`, run: (ctx) => measureTranscribe(ctx, seconds) },
    { benchmark: 'whisper-tiny encoder', shape: '[1,80,3000]', run: (ctx) => measureEncoder(ctx) },
    { benchmark: 'whisper-tiny encoder 90 s', shape: '3 windows', run: (ctx) => measureBatchedEncoder(ctx) },
  ];
}

async function load(device: (typeof DEVICES)[number]): Promise<LoadedWhisper> {
  return loadWhisper('builtin:whisper-tiny', { device });
}

async function measureTranscribe(ctx: BenchContext, seconds: number): Promise<RowInput[]> {
  const benchmark = 'whisper-tiny transcribe';
  const shape = `${seconds} s`;
  const audio = syntheticSignal(seconds);
  const rows: RowInput[] = [];
  for (const device of DEVICES) {
    if (device === 'webgpu' && !ctx.gpu) continue;
    ctx.log(`  ${device} ${benchmark}`);
    const { model, tokenizer } = await load(device);
    try {
      const modes = device === 'webgpu' ? [true, false] : [false];
      for (const capture of modes) {
        let last: Awaited<ReturnType<typeof transcribe>> | undefined;
        const timing = await timeIt(
          async () => {
            last = await transcribe(model, tokenizer, audio, { temperature: 0, sampleLen: SAMPLE_LEN, language: 'en', capture });
          },
          { ...ctx.time, warmup: 1, minRuns: 1, maxRuns: ctx.quick ? 2 : 3 },
        );
        const s = last!.stats;
        const realtime = seconds / (timing.medianMs / 1000);
        const perToken = s.decodeSteps > 0 ? (s.hostMs * 1000) / s.decodeSteps : NaN;
        const label = device === 'webgpu' ? `${benchmark} (${capture ? 'captured' : 'eager'} decode)` : benchmark;
        rows.push({
          benchmark: label,
          shape,
          backend: device,
          timing,
          note:
            `realtime x${realtime.toFixed(2)}, ${s.windows} window(s), ${s.decodeSteps} decode steps, ` +
            `decoder host ${perToken.toFixed(1)} µs/token (${s.mode}${s.capturedDispatches ? `, ${s.capturedDispatches} dispatches a captured step` : ''})`,
          baselineBenchmark: device === 'webgpu' && capture ? `${benchmark} (eager decode)` : undefined,
        });
      }
    } finally {
      model.dispose();
    }
  }
  return rows;
}

async function measureEncoder(ctx: BenchContext): Promise<RowInput[]> {
  const benchmark = 'whisper-tiny encoder';
  const shape = '[1,80,3000]';
  const samples = syntheticSignal(30);
  const rows: RowInput[] = [];
  for (const device of DEVICES) {
    if (device === 'webgpu' && !ctx.gpu) continue;
    ctx.log(`  ${device} ${benchmark}`);
    const { model } = await load(device);
    const audio = tensor(samples, { device });
    const mel = logMelSpectrogram(audio, { nMels: 80 });
    const features = mel.unsqueeze(0);
    try {
      const d0 = gpuCounters().dispatches;
      const once = model.encode(features);
      await once.toArray();
      once.dispose();
      const dispatches = gpuCounters().dispatches - d0;
      const timing = await timeIt(
        async () => {
          const y = model.encode(features);
          if (device === 'cpu') await y.toArray();
          else await synchronize();
          y.dispose();
        },
        { ...ctx.time, warmup: 1, minRuns: 1, maxRuns: ctx.quick ? 2 : 5 },
      );
      rows.push({ benchmark, shape, backend: device, timing, note: device === 'webgpu' ? `${dispatches} dispatches a window` : undefined });
    } finally {
      for (const t of [features, mel, audio]) t.dispose();
      model.dispose();
    }
  }
  return rows;
}

async function measureBatchedEncoder(ctx: BenchContext): Promise<RowInput[]> {
  const shape = '3 windows';
  const ONE = 'whisper-tiny encoder 90 s, one window at a time';
  const BATCHED = 'whisper-tiny encoder 90 s, batched';
  if (!ctx.gpu) return [ONE, BATCHED].map((benchmark) => ({ benchmark, shape, backend: 'cpu', note: 'WebGPU only' }));
  ctx.log(`  webgpu ${BATCHED}`);
  const { model } = await load('webgpu');
  const audio = tensor(syntheticSignal(90), { device: 'webgpu' });
  const mel = logMelSpectrogram(audio, { nMels: 80 });
  const views = [0, 1, 2].map((i) => mel.narrow(1, i * 3000, 3000));
  const slices = views.map((v) => v.contiguous());
  const windows = slices.map((t) => t.unsqueeze(0));
  const batch = cat(windows);
  const once = { ...ctx.time, warmup: 0, minRuns: 1, maxRuns: 1 };
  try {
    const oneByOne = await timeIt(async () => {
      for (const w of windows) model.encode(w).dispose();
      await synchronize();
    }, once);
    const batched = await timeIt(async () => {
      model.encodeWindows(batch).dispose();
      await synchronize();
    }, once);
    return [
      { benchmark: ONE, shape, backend: 'webgpu', timing: oneByOne, note: `${ONE}: ${oneByOne.dispatchesPerRun} encoder dispatches` },
      {
        benchmark: BATCHED,
        shape,
        backend: 'webgpu',
        timing: batched,
        baselineBenchmark: ONE,
        note: `${BATCHED}: ${batched.dispatchesPerRun} encoder dispatches for [3, 80, 3000]`,
      },
    ];
  } finally {
    for (const t of [batch, ...windows, ...slices, ...views, mel, audio]) t.dispose();
    model.dispose();
  }
}
