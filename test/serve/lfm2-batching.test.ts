// Continuous batching of LFM2 / LFM2-MoE (short-conv + attention hybrids): each running sequence holds a conv-state
// slot for its conv layers (zeroed when it is admitted, given back when it ends or is preempted) beside its KV pages
// for the attention layers. A greedy sequence gives the same tokens alone as beside four others, with decode steps
// shared, on the CPU and on WebGPU, for the lfm2-tiny and lfm2-moe-tiny presets (a 512-token vocabulary, so a step's
// head stays small); the batch equals the model's own contiguous-cache forward; chunked prefill, preemption and the
// prefix cache (conv-state snapshots at page boundaries) give the same tokens.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { LFM2_PRESETS, writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { lfm2TokenizerFiles } from '../../src/models/lfm2/tokenizer.js';
import type { ConvStateSlots } from '../../src/models/lfm2/state-slots.js';
import type { Lfm2Config } from '../../src/models/lfm2/config.js';
import { PagedSequence } from '../../src/models/layers/paged-kv.js';
import { BatchScheduler, type BatchSchedulerOptions } from '../../src/serve/batch-scheduler.js';
import { tensor } from '../../src/ops/creation.js';
import type { Sequence } from '../../src/serve/scheduler.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const PRESETS = ['lfm2-tiny', 'lfm2-moe-tiny'] as const;
const dirs: Record<string, string> = {};
const models: LoadedModel[] = [];

beforeAll(async () => {
  const files = await lfm2TokenizerFiles();
  for (const preset of PRESETS) {
    dirs[preset] = mkdtempSync(join(tmpdir(), `tensorgpu-${preset}-batching-`));
    await writeRandomLfm2Checkpoint(dirs[preset]!, { ...LFM2_PRESETS[preset]!, vocabSize: 512 }, { seed: 5, dtype: 'float32', extraFiles: files });
  }
}, 60_000);

afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function load(preset: string, device: 'cpu' | 'webgpu'): Promise<LoadedModel> {
  const m = await loadModel(dirs[preset]!, { device, maxSequence: 256 });
  models.push(m);
  return m;
}

interface Setup {
  pages?: number;
  pageSize?: number;
  sequences?: number;
  snapshots?: number;
  options?: Partial<BatchSchedulerOptions>;
}

function scheduler(m: LoadedModel, s: Setup = {}) {
  const model = m.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: s.pageSize ?? 8, pages: s.pages ?? 64, sequences: s.sequences, snapshots: s.snapshots });
  const batches: number[] = [];
  const sched = new BatchScheduler(model, m.tokenizer!, pool, { maxQueue: 16, maxSequence: 256, observer: { onStep: (b) => batches.push(b) }, ...s.options });
  return { sched, batches, states: pool.states as ConvStateSlots };
}

async function tokensOf(seq: Sequence): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of seq.tokens) ids.push(t.id);
  return ids;
}

/** Prompts of 2, 11, 1, 13 and 5 tokens. */
const PROMPTS = [2, 11, 1, 13, 5].map((n, i) => Array.from({ length: n }, (_, j) => (37 * i + 11 * j + 3) % 512));
const requests = (maxNewTokens: number) =>
  PROMPTS.map((promptIds, i) => ({ promptIds, options: { maxNewTokens: maxNewTokens + i, temperature: 0, stopTokenIds: [-1] } }));
/** Seeded sampling (temperature 1): random weights often repeat one greedy token, draws vary the ids. */
const sampled = (maxNewTokens: number) =>
  PROMPTS.map((promptIds, i) => ({
    promptIds,
    options: { maxNewTokens: maxNewTokens + i, temperature: 1, topK: 0, topP: 1, seed: 100 + i, stopTokenIds: [-1] },
  }));

async function aloneAndTogether(m: LoadedModel, reqs: ReturnType<typeof requests>, setup: Setup = {}) {
  const { sched, batches, states } = scheduler(m, setup);
  const alone: number[][] = [];
  for (const r of reqs) alone.push(await tokensOf(sched.submit(r)));
  batches.length = 0;
  const together = await Promise.all(reqs.map((r) => tokensOf(sched.submit(r))));
  expect(sched.pool.freePages).toBe(sched.pool.pages);
  expect(states.free).toBe(states.slots);
  const hits = sched.prefixHitTokens;
  sched.dispose();
  return { alone, together, maxBatch: Math.max(...batches), hits };
}

/** Greedy ids of a prompt through the model's own contiguous cache (forward). */
async function greedyForward(m: LoadedModel, prompt: number[], n: number): Promise<number[]> {
  const cache = m.model.newCache();
  let input = prompt;
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const logits = await m.model.forward(tensor(input, { dtype: 'int32', device: m.model.device }), cache);
    const row = (await logits.toArray()) as Float32Array;
    logits.dispose();
    let best = 0;
    for (let v = 1; v < row.length; v++) if (row[v]! > row[best]!) best = v;
    ids.push(best);
    input = [best];
  }
  cache.dispose();
  return ids;
}

describe.each(PRESETS)('BatchScheduler with %s on the CPU', (preset) => {
  it('gives each greedy sequence the same tokens alone and beside four others, sharing decode steps; the batch equals forward()', async () => {
    const m = await load(preset, 'cpu');
    const { alone, together, maxBatch } = await aloneAndTogether(m, requests(6));
    expect(maxBatch).toBe(PROMPTS.length);
    expect(together).toEqual(alone);
    expect(alone.map((t) => t.length)).toEqual([6, 7, 8, 9, 10]);
    expect(alone[1]).toEqual(await greedyForward(m, PROMPTS[1]!, 7));
    const seeded = await aloneAndTogether(m, sampled(6));
    expect(seeded.together).toEqual(seeded.alone);
    expect(new Set(seeded.alone.flat()).size).toBeGreaterThan(4);
  });

  it('gives the same tokens with prompts in chunks of 3, under preemption, and from the prefix cache (conv-state snapshots)', async () => {
    const m = await load(preset, 'cpu');
    const reqs = requests(4);
    const want = (await aloneAndTogether(m, reqs, { options: { prefixCache: false } })).alone;
    const chunked = await aloneAndTogether(m, reqs, { options: { prefillChunk: 3, prefixCache: false } });
    expect(chunked.together).toEqual(want);
    // Prefix cache on, with snapshot slots: the second round shares the first's pages and restarts from snapshots.
    const cached = await aloneAndTogether(m, reqs, { pageSize: 4, snapshots: 8 });
    expect(cached.together).toEqual(want);
    expect(cached.alone).toEqual(want);
    expect(cached.hits).toBeGreaterThan(0);
    const long = requests(16).slice(0, 3);
    const longWant = (await aloneAndTogether(m, long, { options: { prefixCache: false } })).alone;
    const { sched, states } = scheduler(m, { pages: 9, pageSize: 4, options: { prefixCache: false } });
    const got = await Promise.all(long.map((r) => tokensOf(sched.submit(r))));
    expect(sched.preemptions).toBeGreaterThan(0);
    expect(got).toEqual(longWant);
    expect([sched.pool.freePages, states.free]).toEqual([9, states.slots]);
    sched.dispose();
  });
});

/** The presets narrowed for SwiftShader (hidden 64, 8 experts): the same layer patterns, a tenth of the work. */
const SMALL: Record<string, Partial<Lfm2Config>> = {
  'lfm2-tiny': { hiddenSize: 64, intermediateSize: 128, headDim: 16 },
  'lfm2-moe-tiny': {
    hiddenSize: 64,
    intermediateSize: 128,
    headDim: 16,
    moe: { ...LFM2_PRESETS['lfm2-moe-tiny']!.moe!, numExperts: 8, moeIntermediateSize: 32 },
  },
};

describe.skipIf(!gpu.available)(`BatchScheduler with LFM2 on WebGPU ${gpu.skipReason}`, () => {
  it.each(PRESETS)(
    '%s (narrowed): a batched paged forward gives the CPU logits; seeded sequences the same tokens alone and together',
    async (preset) => {
      const dir = mkdtempSync(join(tmpdir(), `tensorgpu-${preset}-small-`));
      await writeRandomLfm2Checkpoint(
        dir,
        { ...LFM2_PRESETS[preset]!, ...SMALL[preset], vocabSize: 256 },
        { seed: 5, dtype: 'float32', extraFiles: await lfm2TokenizerFiles() },
      );
      // Three sequences of 1, 2 and 3 rows in one forward (conv states in slots 0..2, KV through the page tables).
      const logitsOn = async (device: 'cpu' | 'webgpu') => {
        const m = await loadModel(dir, { device, maxSequence: 64 });
        models.push(m);
        const model = m.model as PagedCausalLM;
        const pool = model.newKvPool({ pageSize: 4, pages: 8, sequences: 4 });
        const seqs = [1, 2, 3].map((rows) => {
          const sequence = new PagedSequence(pool);
          sequence.reserve(rows);
          return { sequence, start: 0, rows };
        });
        const logits = model.forwardPaged(tensor([5, 6, 7, 8, 9, 10], { dtype: 'int32', device }), seqs, pool);
        const out = Array.from((await logits.toArray()) as Float32Array);
        logits.dispose();
        pool.dispose();
        return { m, out };
      };
      const cpu = await logitsOn('cpu');
      const gpuRun = await logitsOn('webgpu');
      expect(gpuRun.out.length).toBe(3 * 256);
      gpuRun.out.forEach((v, i) => expect(v).toBeCloseTo(cpu.out[i]!, 3));
      const reqs = sampled(3).slice(0, 3);
      const seeded = await aloneAndTogether(gpuRun.m, reqs);
      expect(seeded.together).toEqual(seeded.alone);
    },
    300_000,
  );
});
