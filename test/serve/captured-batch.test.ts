// Captured batched decode steps (serve/captured-step.ts): on WebGPU the continuous-batching scheduler records its
// decode forward once per batch-size bucket and replays it. Greedy tokens of a batch of requests equal the eager
// steps' (capture off), for the tiny Qwen3-MoE, LFM2 (conv states per sequence) and the built-in Qwen3.5 / Qwen3.6
// presets (Gated DeltaNet conv and recurrent states per sequence, padding rows on the scratch slot), with sequences
// joining (one prefill a step) and leaving (staggered lengths) so the bucket changes between steps and padded rows run; the
// fallbacks say why they are eager; the server reports the mode in /metrics and its startup line.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { LFM2_PRESETS, writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { lfm2TokenizerFiles } from '../../src/models/lfm2/tokenizer.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { qwen3_5TokenizerFiles } from '../../src/models/qwen3_5/tokenizer-files.js';
import { BatchScheduler, type BatchSchedulerOptions } from '../../src/serve/batch-scheduler.js';
import { decodeBuckets } from '../../src/serve/captured-step.js';
import type { Sequence } from '../../src/serve/scheduler.js';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { metric, serve } from './helpers.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

/** The built-in Qwen3.5 (dense) and Qwen3.6 (MoE) presets' shapes: DeltaNet layers with a state slot per sequence. */
const QWEN3_5 = ['qwen3.5-tiny', 'qwen3.6-moe-tiny'] as const;
type Family = 'qwen3' | 'lfm2' | (typeof QWEN3_5)[number];

const dirs: Record<string, string> = {};
const models: LoadedModel[] = [];

beforeAll(async () => {
  dirs.qwen3 = mkdtempSync(join(tmpdir(), 'tensorgpu-captured-qwen3-'));
  await writeRandomQwen3Checkpoint(
    dirs.qwen3,
    { ...TINY_CHAT_MOE, vocabSize: 512, bosTokenId: 1, eosTokenIds: [2] },
    { seed: 11, extraFiles: await qwen3TokenizerFiles() },
  );
  dirs.lfm2 = mkdtempSync(join(tmpdir(), 'tensorgpu-captured-lfm2-'));
  // Narrowed (hidden 64) with bfloat16 weights: SwiftShader runs LFM2's batched GEMVs slowly.
  await writeRandomLfm2Checkpoint(
    dirs.lfm2,
    { ...LFM2_PRESETS['lfm2-tiny']!, hiddenSize: 64, intermediateSize: 128, headDim: 16, vocabSize: 512 },
    { seed: 5, extraFiles: await lfm2TokenizerFiles() },
  );
  // The built-in presets' layer pattern and kinds (dense Qwen3.5, Qwen3.6 with MoE and a shared expert) at the
  // widths SwiftShader runs in seconds: a 512-row vocabulary (not the release's 248,320-row lm_head), hidden 64.
  for (const preset of QWEN3_5) {
    const c = QWEN3_5_PRESETS[preset]!;
    const narrow = {
      vocabSize: 512,
      eosTokenIds: [2],
      hiddenSize: 64,
      intermediateSize: c.moe ? 1 : 128,
      headDim: 32,
      rotaryDim: 8,
      mropeSection: undefined,
      numHiddenLayers: 4,
      layerTypes: c.layerTypes.slice(0, 4),
      linear: { ...c.linear, keyHeadDim: 16, valueHeadDim: 16 },
      moe: c.moe && { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
    };
    dirs[preset] = mkdtempSync(join(tmpdir(), `tensorgpu-captured-${preset}-`));
    await writeRandomQwen35Checkpoint(dirs[preset], { ...c, ...narrow }, { seed: 7, outputSpread: true, extraFiles: await qwen3_5TokenizerFiles() });
  }
}, 60_000);

afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function load(family: Family, device: 'cpu' | 'webgpu'): Promise<LoadedModel> {
  const m = await loadModel(dirs[family]!, { device, maxSequence: 256 });
  models.push(m);
  return m;
}

function scheduler(m: LoadedModel, options: Partial<BatchSchedulerOptions> = {}) {
  const model = m.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: 8, pages: 32, sequences: 4, snapshots: 4 });
  const batches: number[] = [];
  const sched = new BatchScheduler(model, m.tokenizer!, pool, {
    maxQueue: 16,
    maxSequence: 256,
    maxBatch: 4,
    observer: { onStep: (b) => batches.push(b) },
    ...options,
  });
  return { sched, batches };
}

async function tokensOf(seq: Sequence): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of seq.tokens) ids.push(t.id);
  return ids;
}

/** Prompts of 2, 11, 1 and 5 tokens; lengths staggered so sequences leave one by one. */
const PROMPTS = [2, 11, 1, 5].map((n, i) => Array.from({ length: n }, (_, j) => (37 * i + 11 * j + 3) % 512));
const requests = (maxNewTokens: number) =>
  PROMPTS.map((promptIds, i) => ({ promptIds, options: { maxNewTokens: maxNewTokens + 2 * i, temperature: 0, stopTokenIds: [-1] } }));

/**
 * Three requests at once (joining one prefill a step: batches of 1, 2, then 3 padded to 4), a fourth after the
 * first's first token, then leaving one by one; returns tokens, decode batch sizes and the scheduler's stats.
 */
async function run(m: LoadedModel, capture: boolean, maxNewTokens = 4) {
  const { sched, batches } = scheduler(m, { capture });
  const reqs = requests(maxNewTokens);
  const first = reqs.slice(0, 3).map((r) => sched.submit(r));
  const ids = (await first[0]!.tokens[Symbol.asyncIterator]().next()).value!.id;
  const later = reqs.slice(3).map((r) => sched.submit(r));
  const tokens = await Promise.all([...first, ...later].map(tokensOf));
  tokens[0]!.unshift(ids);
  const stats = structuredClone(sched.decodeStats);
  const recorded = sched.captured.recorded;
  expect(sched.pool.freePages).toBe(sched.pool.pages);
  sched.dispose();
  return { tokens, batches: batches.filter((b) => b > 0), stats, recorded };
}

describe.skipIf(!gpu.available)(`captured batched decode steps on WebGPU ${gpu.skipReason}`, () => {
  for (const family of ['qwen3', 'lfm2', ...QWEN3_5] as const) {
    it(`${family}: greedy tokens equal the eager steps', with sequences joining and leaving between steps`, async () => {
      const m = await load(family, 'webgpu');
      // Fewer tokens for the DeltaNet models: SwiftShader runs their steps slowly.
      const n = family.startsWith('qwen3.') ? 3 : 4;
      const eager = await run(m, false, n);
      const captured = await run(m, true, n);
      expect(eager.stats.steps.replay + eager.stats.steps.record).toBe(0);
      expect(captured.tokens).toEqual(eager.tokens);
      // The first token of each sequence is sampled from a prefill; the decode steps grow its list.
      expect(captured.tokens.map((t) => t.length)).toEqual([n, n + 2, n + 4, n + 6]);
      // Buckets changed between steps (the batch grew and shrank): several shapes recorded, most steps replayed.
      const sizes = new Set(captured.batches);
      expect(sizes.size).toBeGreaterThanOrEqual(3);
      expect(captured.stats.steps.eager).toBe(0);
      expect(captured.recorded).toBeGreaterThanOrEqual(2);
      expect(captured.stats.steps.replay).toBeGreaterThan(captured.stats.steps.record);
      // A replay queues the recorded dispatches: per step no more than the eager forward (which builds its index).
      const perStep = (s: typeof captured.stats, mode: 'replay' | 'eager') => s.dispatches[mode] / s.steps[mode];
      expect(perStep(captured.stats, 'replay')).toBeLessThanOrEqual(perStep(eager.stats, 'eager'));
    }, 120_000);
  }

  it('reports the mode in /metrics and the startup line, and frees the recorded steps when the server stops', async () => {
    const m = await load('qwen3', 'webgpu');
    const lines: string[] = [];
    const { server, client } = await serve(m, { maxBatch: 4, log: (l) => lines.push(l) });
    try {
      // The three prefill in one step and then decode together: enough tokens that a bucket's recorded step replays.
      await Promise.all([4, 5, 6].map((n, i) => client.completions.create({ model: 'tiny-chat', prompt: PROMPTS[i]!, max_tokens: n, temperature: 0 })));
      expect(lines.find((l) => l.startsWith('scheduler:'))).toContain('decode steps captured and replayed (batch buckets 1, 2, 4)');
      expect(await metric(server, 'tensorgpu_decode_steps_total{mode="replay"}')).toBeGreaterThan(0);
      expect(await metric(server, 'tensorgpu_decode_steps_total{mode="record"}')).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  }, 120_000);

  it('falls back to eager with a reason: capture off, TENSORGPU_CAPTURE=0', async () => {
    const m = await load('qwen3', 'webgpu');
    const off = scheduler(m, { capture: false }).sched;
    expect(off.decodeMode).toEqual({ mode: 'eager', reason: 'capture turned off', buckets: [] });
    off.dispose();
    process.env.TENSORGPU_CAPTURE = '0';
    try {
      const env = scheduler(m).sched;
      expect(env.decodeMode.reason).toBe('capture turned off');
      env.dispose();
    } finally {
      delete process.env.TENSORGPU_CAPTURE;
    }
    const on = scheduler(m).sched;
    expect(on.decodeMode).toEqual({ mode: 'replay', buckets: [1, 2, 4] });
    on.dispose();
  });
});

describe('captured batched decode steps on the CPU', () => {
  it('run eagerly, saying why', async () => {
    const m = await load('qwen3', 'cpu');
    const { sched } = scheduler(m);
    expect(sched.decodeMode).toEqual({ mode: 'eager', reason: 'not on WebGPU', buckets: [] });
    const got = await tokensOf(sched.submit(requests(2)[0]!));
    expect(got).toHaveLength(2);
    expect(sched.decodeStats.steps.eager).toBe(1);
    sched.dispose();
  });

  it('buckets a max batch into powers of two and the max itself', () => {
    expect(decodeBuckets(1)).toEqual([1]);
    expect(decodeBuckets(8)).toEqual([1, 2, 4, 8]);
    expect(decodeBuckets(12)).toEqual([1, 2, 4, 8, 12]);
  });
});
