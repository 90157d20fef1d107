// compile() against eager on the same work and adapter: the 16-op elementwise chain of the peers' page (one fused
// kernel), a chain feeding a row sum (one fusedReduce), a small decoder's prefill and a Wan VAE decode (recorded
// and replayed: the same kernels, the host out of the loop). Each pair reports dispatches per call and the host time
// to queue one call (the work itself is the same kernels, or fewer), and the ratio of the eager time to the compiled.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compile, Generator, loadModel, logMelSpectrogram, randn, synchronize, syntheticSignal, tensor, type Tensor } from '../src/index.js';
import { ensureBuiltinModel } from '../src/models/builtin.js';
import { ensureDefaultVae } from '../src/models/wan-vae/default-model.js';
import { gpuCounters } from '../src/runtime/stats.js';
import { decoderForward, type DecoderBlocks } from '../src/models/layers/decoder-blocks.js';
import { QWEN3_PRESETS } from '../src/models/qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from '../src/models/qwen3/random-checkpoint.js';
import { loadWanVae } from '../src/models/wan-vae/load.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../src/models/wan-vae/random-checkpoint.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

interface Pair {
  benchmark: string;
  shape: string;
  /** Makes the inputs and the function; the function queues its work and returns what to dispose. */
  setup(): Promise<{ inputs: unknown[]; fn: (...args: never[]) => Tensor | Tensor[]; dispose(): void }>;
  bytes?: number;
}

export function compileCases(quick: boolean): BenchCase[] {
  const n = quick ? 1 << 16 : 1 << 20;
  const rows = quick ? 64 : 1024;
  const pairs: Pair[] = [
    {
      benchmark: 'compile/chain',
      shape: `16 ops on [${n}]`,
      bytes: 4 * 4 * n,
      setup: async () => {
        const g = new Generator(1);
        const [x, y, z] = [
          randn([n], { device: 'webgpu', generator: g }),
          randn([n], { device: 'webgpu', generator: g }),
          randn([n], { device: 'webgpu', generator: g }),
        ];
        const chain = (a: Tensor, b: Tensor, c: Tensor) => {
          let t = a;
          for (let i = 0; i < 8; i++) t = t.add(b).mul(c);
          return t;
        };
        return { inputs: [x, y, z], fn: chain as never, dispose: () => [x, y, z].forEach((t) => t.dispose()) };
      },
    },
    {
      benchmark: 'compile/chain+sum',
      shape: `exp(x*y+0.5).sum(-1) on [${rows}, 1024]`,
      bytes: 2 * 4 * rows * 1024,
      setup: async () => {
        const g = new Generator(2);
        const [x, y] = [randn([rows, 1024], { device: 'webgpu', generator: g }), randn([rows, 1024], { device: 'webgpu', generator: g })];
        return { inputs: [x, y], fn: ((a: Tensor, b: Tensor) => a.mul(b).add(0.5).exp().sum(-1)) as never, dispose: () => [x, y].forEach((t) => t.dispose()) };
      },
    },
    {
      benchmark: 'compile/prefill',
      shape: 'qwen3-moe-tiny layers, vocab 512, 16 tokens',
      setup: async () => {
        const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-compile-'));
        await writeRandomQwen3Checkpoint(
          dir,
          { ...QWEN3_PRESETS['qwen3-moe-tiny'], vocabSize: 512, bosTokenId: 0, eosTokenIds: [1] },
          { dtype: 'bfloat16', seed: 3 },
        );
        const { model } = await loadModel(dir, { device: 'webgpu', maxSequence: 32 });
        const m = model as unknown as { blocks: DecoderBlocks<unknown>; newCache(): { dispose(): void } };
        const cache = m.newCache();
        const ids = tensor(
          Array.from({ length: 16 }, (_, i) => (i * 37) % 512),
          { dtype: 'int32', device: 'webgpu' },
        );
        const prefill = (tokens: Tensor, start: number, c: unknown) => decoderForward(m.blocks, tokens, c, { start }, false).logits;
        return {
          inputs: [ids, 0, cache],
          fn: prefill as never,
          dispose: () => {
            ids.dispose();
            cache.dispose();
            model.dispose();
          },
        };
      },
    },
    {
      benchmark: 'compile/vae decode',
      shape: 'wan2.1-tiny, latent [1, 16, 2, 4, 6]',
      setup: async () => {
        const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-compile-vae-'));
        await writeRandomWanVae(dir, WAN_VAE_PRESETS['wan2.1-tiny'], { dtype: 'float32', seed: 3 });
        const vae = await loadWanVae(dir, { device: 'webgpu' });
        const z = randn([1, 16, 2, 4, 6], { device: 'webgpu', generator: new Generator(3) });
        return {
          inputs: [z],
          fn: ((x: Tensor) => vae.decode(x)) as never,
          dispose: () => {
            z.dispose();
            vae.dispose();
          },
        };
      },
    },
  ];
  return [...pairs.map((p) => ({ benchmark: p.benchmark, shape: p.shape, run: (ctx: BenchContext) => measure(ctx, p) })), ...wiredCases(quick)];
}

/** A runtime path with its compile option (issue 35's "use it where it pays"): one call of each way. */
interface Wired {
  benchmark: string;
  shape: string;
  setup(): Promise<{ eager(): Promise<void>; compiled(): Promise<void>; explain(): string; dispose(): void }>;
}

/**
 * The paths that take a compile option, each with and without it on the same inputs: generate's prefill of the
 * built-in default model (ForwardOptions.compile: a new cache every call, as every sequence has), the built-in tiny
 * VAE's chunked decode (DecodeOptions.compile) and Whisper's log-mel through compile(). Each call waits for the device.
 */
function wiredCases(quick: boolean): BenchCase[] {
  const promptTokens = quick ? 8 : 16;
  const latentFrames = quick ? 5 : 8;
  const seconds = quick ? 5 : 30;
  const cases: Wired[] = [
    {
      benchmark: 'compile/generate prefill',
      shape: `built-in qwen3-moe-tiny, ${promptTokens} tokens, new cache`,
      setup: async () => {
        const { model } = await loadModel(await ensureBuiltinModel(), { device: 'webgpu', maxSequence: 64 });
        const ids = tensor(
          Array.from({ length: promptTokens }, (_, i) => (i * 997) % 151_000),
          { dtype: 'int32', device: 'webgpu' },
        );
        const prefill = (compile: boolean) => async () => {
          const cache = model.newCache();
          const logits = await model.forward(ids, cache, { compile });
          await synchronize();
          logits.dispose();
          cache.dispose();
        };
        return {
          eager: prefill(false),
          compiled: prefill(true),
          explain: () => model.explainCompiled?.() ?? '',
          dispose: () => {
            ids.dispose();
            model.dispose();
          },
        };
      },
    },
    {
      benchmark: 'compile/vae decode chunks',
      shape: `built-in wan2.1-tiny, latent [1, 16, ${latentFrames}, 8, 8]`,
      setup: async () => {
        const vae = await loadWanVae(await ensureDefaultVae(), { device: 'webgpu' });
        const z = randn([1, 16, latentFrames, 8, 8], { device: 'webgpu', generator: new Generator(4) });
        const decode = (compile: boolean) => async () => {
          const video = vae.decode(z, { compile });
          await synchronize();
          video.dispose();
        };
        return {
          eager: decode(false),
          compiled: decode(true),
          explain: () => vae.explainCompiled() ?? '',
          dispose: () => {
            z.dispose();
            vae.dispose();
          },
        };
      },
    },
    {
      benchmark: 'compile/log-mel',
      shape: `Whisper log-mel, 80 mels, ${seconds} s at 16 kHz`,
      setup: async () => {
        const audio = tensor(syntheticSignal(seconds, 16000), { device: 'webgpu' });
        const front = (a: Tensor) => logMelSpectrogram(a, { nMels: 80 });
        const compiledFront = compile(front, { label: 'log-mel' });
        const run = (f: (a: Tensor) => Tensor) => async () => {
          const mel = f(audio);
          await synchronize();
          mel.dispose();
        };
        return {
          eager: run(front),
          compiled: run(compiledFront),
          explain: () => compiledFront.explain(),
          dispose: () => {
            compiledFront.reset();
            audio.dispose();
          },
        };
      },
    },
  ];
  return cases.map((c) => ({ benchmark: c.benchmark, shape: c.shape, run: (ctx: BenchContext) => measureWired(ctx, c) }));
}

async function dispatchesOf(call: () => Promise<void>): Promise<number> {
  const before = gpuCounters().dispatches;
  await call();
  return gpuCounters().dispatches - before;
}

async function measureWired(ctx: BenchContext, c: Wired): Promise<RowInput[]> {
  if (!ctx.gpu) return [{ benchmark: `${c.benchmark} compiled`, shape: c.shape, backend: 'webgpu', note: 'WebGPU unavailable' }];
  const { eager, compiled, explain, dispose } = await c.setup();
  try {
    // Trace, record: the compiled path's warm-up (the eager one compiles its pipelines on the first call).
    for (let i = 0; i < 2; i++) await compiled();
    await eager();
    const eagerDispatches = await dispatchesOf(eager);
    const compiledDispatches = await dispatchesOf(compiled);
    const eagerTiming = await timeIt(eager, ctx.time);
    const compiledTiming = await timeIt(compiled, ctx.time);
    ctx.log(`  ${c.benchmark}: ${explain().split('\n')[0]}`);
    const base = { shape: c.shape, backend: 'webgpu' as const };
    return [
      { ...base, benchmark: `${c.benchmark} eager`, timing: eagerTiming, note: `${eagerDispatches} dispatches per call` },
      {
        ...base,
        benchmark: `${c.benchmark} compiled`,
        timing: compiledTiming,
        baselineBenchmark: `${c.benchmark} eager`,
        note: `${compiledDispatches} dispatches per call (replayed); eager / compiled time ${(eagerTiming.medianMs / compiledTiming.medianMs).toFixed(2)}x`,
      },
    ];
  } finally {
    dispose();
  }
}

/** Host milliseconds to queue one call (no wait for the GPU), the median of `runs`. */
async function hostMs(call: () => Tensor | Tensor[], runs: number): Promise<number> {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    const out = call();
    times.push(performance.now() - t0);
    await synchronize();
    for (const t of [out].flat()) t.dispose();
  }
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)];
}

async function measure(ctx: BenchContext, p: Pair): Promise<RowInput[]> {
  if (!ctx.gpu) return [{ benchmark: `${p.benchmark} compiled`, shape: p.shape, backend: 'webgpu', note: 'WebGPU unavailable' }];
  const { inputs, fn, dispose } = await p.setup();
  const f = fn as (...a: unknown[]) => Tensor | Tensor[];
  const compiled = compile(f, { label: p.benchmark });
  try {
    const run = (g: (...a: unknown[]) => Tensor | Tensor[]) => async () => {
      const out = g(...inputs);
      await synchronize();
      for (const t of [out].flat()) t.dispose();
    };
    // Trace, record, then replay: the first two calls are the compiled function's warm-up.
    for (let i = 0; i < 3; i++) await run(compiled)();
    const eager = await timeIt(run(f), ctx.time);
    const replayed = await timeIt(run(compiled), ctx.time);
    const hostEager = await hostMs(() => f(...inputs), 5);
    const hostCompiled = await hostMs(() => compiled(...inputs), 5);
    const s = compiled.stats().signatures[0];
    const fused = s.fusedGroups.length ? `; ${s.fusedGroups.length} fused group(s)` : '';
    ctx.log(`  ${p.benchmark}: ${compiled.explain().split('\n').slice(1).join(' | ')}`);
    const base = { shape: p.shape, backend: 'webgpu' as const, bytes: p.bytes };
    return [
      { ...base, benchmark: `${p.benchmark} eager`, timing: eager, note: `${s.eagerDispatches} dispatches, host ${hostEager.toFixed(3)} ms to queue a call` },
      {
        ...base,
        benchmark: `${p.benchmark} compiled`,
        timing: replayed,
        baselineBenchmark: `${p.benchmark} eager`,
        note: `${s.dispatches ?? '-'} dispatches (${s.mode}${fused}), host ${hostCompiled.toFixed(3)} ms to queue a call (${(hostEager / hostCompiled).toFixed(1)}x less)`,
      },
    ];
  } finally {
    compiled.reset();
    dispose();
  }
}
