// Whisper on one adapter: the built-in random-weight tiny preset (the exact whisper-tiny layout, so its dispatch
// counts are a real tiny's) transcribing synthetic audio, WebGPU against the CPU backend in the same run.
// - transcribe: wall time of a whole transcription (log-mel, encoder, greedy decoding with timestamps, 32 tokens a
//   window at most); the realtime factor is audio seconds per wall second.
// - encoder: one 30 s window's forward, its dispatches (machine-independent).
// - decoder host µs per token: the decode step replayed from a capture against the same step run eagerly; the
//   host time excludes the logits read back, so it is the launch cost a token pays.
// Random weights decode gibberish; the counts and the ratios are what to read.
import { gpuCounters, loadWhisper, logMelSpectrogram, synchronize, syntheticSignal, tensor, type LoadedWhisper } from '../src/index.js';
import { transcribe } from '../src/transcribe/transcribe.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const DEVICES = ['webgpu', 'cpu'] as const;
const SAMPLE_LEN = 32;

export function whisperCases(quick: boolean): BenchCase[] {
  const seconds = quick ? 10 : 30;
  return [
    { benchmark: 'whisper-tiny transcribe', shape: `${seconds} s`, run: (ctx) => measureTranscribe(ctx, seconds) },
    { benchmark: 'whisper-tiny encoder', shape: '[1,80,3000]', run: (ctx) => measureEncoder(ctx) },
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
