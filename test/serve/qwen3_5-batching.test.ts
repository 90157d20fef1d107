// Continuous batching of a Qwen3.6-shaped model (Gated DeltaNet + gated attention + MoE with a shared expert): each
// running sequence holds a state slot for its DeltaNet layers (zeroed when it is admitted, given back when it ends
// or is preempted) beside its KV pages for the attention layers. A greedy sequence gives the same tokens alone as
// beside four others, with decode steps shared, on the CPU and on WebGPU; a prompt prefilled in chunks gives the
// tokens of a one-shot prefill; a full pool preempts the youngest, whose state is recomputed from its tokens; slots
// and pages all come back.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import type { DeltaNetStateSlots } from '../../src/models/qwen3_5/state-slots.js';
import { BatchScheduler, type BatchSchedulerOptions } from '../../src/serve/batch-scheduler.js';
import { PagedSequence } from '../../src/models/layers/paged-kv.js';
import { tensor } from '../../src/ops/creation.js';
import type { Sequence } from '../../src/serve/scheduler.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const CONFIG: Qwen35Config = {
  modelType: 'qwen3_5_moe',
  vocabSize: 512,
  hiddenSize: 64,
  intermediateSize: 1,
  numHiddenLayers: 4,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 32,
  rotaryDim: 8,
  ropeTheta: 10_000_000,
  rmsNormEps: 1e-6,
  maxPositionEmbeddings: 512,
  tieWordEmbeddings: false,
  layerTypes: ['linear_attention', 'linear_attention', 'full_attention', 'linear_attention'],
  linear: { numKeyHeads: 2, numValueHeads: 4, keyHeadDim: 16, valueHeadDim: 16, convKernel: 4 },
  eosTokenIds: [2],
  mtpLayers: 0,
  hasVision: false,
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
};

let dir: string;
const models: LoadedModel[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-batching-'));
  await writeRandomQwen35Checkpoint(dir, CONFIG, { seed: 11, dtype: 'float32', extraFiles: await qwen3TokenizerFiles() });
}, 60_000);

afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function load(device: 'cpu' | 'webgpu'): Promise<LoadedModel> {
  const m = await loadModel(dir, { device, maxSequence: 256 });
  models.push(m);
  return m;
}

function scheduler(m: LoadedModel, s: { pages?: number; pageSize?: number; sequences?: number; options?: Partial<BatchSchedulerOptions> } = {}) {
  const model = m.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: s.pageSize ?? 8, pages: s.pages ?? 64, sequences: s.sequences });
  const batches: number[] = [];
  const sched = new BatchScheduler(model, m.tokenizer!, pool, { maxQueue: 16, maxSequence: 256, observer: { onStep: (b) => batches.push(b) }, ...s.options });
  return { sched, batches, states: pool.states as DeltaNetStateSlots };
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

async function aloneAndTogether(m: LoadedModel, reqs: ReturnType<typeof requests>, setup: Parameters<typeof scheduler>[1] = {}) {
  const { sched, batches, states } = scheduler(m, setup);
  const alone: number[][] = [];
  for (const r of reqs) alone.push(await tokensOf(sched.submit(r)));
  batches.length = 0;
  const together = await Promise.all(reqs.map((r) => tokensOf(sched.submit(r))));
  expect(sched.pool.freePages).toBe(sched.pool.pages);
  expect(states.free).toBe(states.slots);
  sched.dispose();
  return { alone, together, maxBatch: Math.max(...batches) };
}

describe('BatchScheduler with a Qwen3.6-shaped model on the CPU', () => {
  it('gives each greedy sequence the same tokens alone and beside four others, sharing decode steps; the batch equals generate()', async () => {
    const m = await load('cpu');
    const { alone, together, maxBatch } = await aloneAndTogether(m, requests(6));
    expect(maxBatch).toBe(PROMPTS.length);
    expect(together).toEqual(alone);
    expect(alone.map((t) => t.length)).toEqual([6, 7, 8, 9, 10]);
    // The paged path against the model's own cache (forward): greedy ids of the second prompt.
    const model = m.model;
    const cache = model.newCache();
    let input = PROMPTS[1]!;
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) {
      const row = (await (await model.forward(tensor(input, { dtype: 'int32', device: 'cpu' }), cache)).toArray()) as Float32Array;
      let best = 0;
      for (let v = 1; v < row.length; v++) if (row[v] > row[best]) best = v;
      ids.push(best);
      input = [best];
    }
    cache.dispose();
    expect(alone[1]!.slice(0, ids.length)).toEqual(ids);
  });

  it('gives the tokens of a one-shot prefill with the prompts in chunks of 3', async () => {
    const m = await load('cpu');
    const reqs = requests(4);
    const oneShot = await aloneAndTogether(m, reqs);
    const chunked = await aloneAndTogether(m, reqs, { options: { prefillChunk: 3 } });
    expect(chunked.alone).toEqual(oneShot.alone);
    expect(chunked.together).toEqual(oneShot.alone);
  });

  it('preempts the youngest when the pool is full (its state recomputed) and when the state slots run out', async () => {
    const m = await load('cpu');
    const reqs = requests(16).slice(0, 3);
    const want = (await aloneAndTogether(m, reqs)).alone;
    const { sched, states } = scheduler(m, { pages: 9, pageSize: 4 });
    const got = await Promise.all(reqs.map((r) => tokensOf(sched.submit(r))));
    expect(sched.preemptions).toBeGreaterThan(0);
    expect(got).toEqual(want);
    expect([sched.pool.freePages, states.free]).toEqual([9, states.slots]);
    sched.dispose();
    // Two state slots for three sequences: at most two run at once, the third waits for a slot, then runs.
    const few = scheduler(m, { sequences: 2 });
    const running: number[] = [];
    const observed = new BatchScheduler(m.model as PagedCausalLM, m.tokenizer!, few.sched.pool, {
      maxQueue: 16,
      maxSequence: 256,
      observer: { onStep: () => running.push(observed.running) },
    });
    expect(await Promise.all(reqs.map((r) => tokensOf(observed.submit(r))))).toEqual(want);
    expect(Math.max(...running)).toBe(2);
    expect(few.states.free).toBe(2);
    observed.dispose();
  });
});

describe.skipIf(!gpu.available)(`BatchScheduler with a Qwen3.6-shaped model on WebGPU ${gpu.skipReason}`, () => {
  it('gives each greedy sequence the same tokens alone and beside four others', async () => {
    const m = await load('webgpu');
    const greedy = await aloneAndTogether(m, requests(6));
    expect(greedy.maxBatch).toBe(PROMPTS.length);
    expect(greedy.together).toEqual(greedy.alone);
    // A decode step of three sequences: every DeltaNet layer is one dispatch for all of them (8 a layer with its
    // projections and MoE); a paged attention layer takes its merge too (paged attention always splits its keys).
    const model = m.model as PagedCausalLM;
    const pool = model.newKvPool({ pageSize: 8, pages: 8, sequences: 4 });
    const seqs = [0, 1, 2].map(() => new PagedSequence(pool));
    for (const q of seqs) q.reserve(1);
    model
      .forwardPaged(
        tensor([5, 6, 7], { dtype: 'int32', device: 'webgpu' }),
        seqs.map((sequence) => ({ sequence, start: 0, rows: 1 })),
        pool,
      )
      .dispose();
    expect(model.lastForward.byKind).toEqual({ linear_attention: 8, full_attention: 10 });
    pool.dispose();
    // Decode steps are captured per bucket (serve/captured-step.ts) and replayed: recording costs an eager step each.
  }, 240_000);
});
