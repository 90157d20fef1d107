// Prefix caching (models/layers/prefix-cache.ts in the BatchScheduler): the index and the pool's reference counts on
// their own (hash chain, LRU eviction, copy-on-write), then on the tiny Qwen3-MoE and a Qwen3.6-shaped hybrid: a
// second chat turn prefills only its new tokens and gives the tokens of a cold run with the cache off; a prompt
// cached whole recomputes its last token in a copied page; concurrent requests share a prefix; a small pool evicts
// cached pages and every reference comes back; the server reports hits in /metrics.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { PagedKvPool, PagedSequence } from '../../src/models/layers/paged-kv.js';
import { pageKey } from '../../src/models/layers/prefix-cache.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { DeltaNetStateSlots } from '../../src/models/qwen3_5/state-slots.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { tensor } from '../../src/ops/creation.js';
import { copyInto, narrow, select } from '../../src/ops/shape-ops.js';
import { BatchScheduler, type BatchSchedulerOptions } from '../../src/serve/batch-scheduler.js';
import type { Sequence } from '../../src/serve/scheduler.js';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { loadTinyModel, metric, MODEL, serve } from './helpers.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const HYBRID: Qwen35Config = {
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

let qwen3Dir: string;
let hybridDir: string;
const models: LoadedModel[] = [];

beforeAll(async () => {
  const files = await qwen3TokenizerFiles();
  qwen3Dir = mkdtempSync(join(tmpdir(), 'tensorgpu-prefix-qwen3-'));
  await writeRandomQwen3Checkpoint(qwen3Dir, { ...TINY_CHAT_MOE, vocabSize: 512, bosTokenId: 1, eosTokenIds: [2] }, { seed: 11, extraFiles: files });
  hybridDir = mkdtempSync(join(tmpdir(), 'tensorgpu-prefix-qwen3_5-'));
  await writeRandomQwen35Checkpoint(hybridDir, HYBRID, { seed: 11, dtype: 'float32', extraFiles: files });
}, 60_000);

afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function load(dir: string): Promise<LoadedModel> {
  const m = await loadModel(dir, { device: 'cpu', maxSequence: 256 });
  models.push(m);
  return m;
}

function scheduler(
  m: LoadedModel,
  s: { pages?: number; pageSize?: number; snapshots?: number; options?: Partial<BatchSchedulerOptions> } = {},
): BatchScheduler {
  const model = m.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: s.pageSize ?? 8, pages: s.pages ?? 64, sequences: 8, snapshots: s.snapshots });
  return new BatchScheduler(model, m.tokenizer!, pool, { maxQueue: 16, maxSequence: 256, ...s.options });
}

async function tokensOf(seq: Sequence): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of seq.tokens) ids.push(t.id);
  return ids;
}

const ids = (n: number, seed: number) => Array.from({ length: n }, (_, j) => (37 * seed + 11 * j + 3) % 509);
const greedy = (maxNewTokens: number) => ({ maxNewTokens, temperature: 0, stopTokenIds: [-1] });

/** The greedy tokens of each prompt on a scheduler with the prefix cache off, one after another. */
async function cold(m: LoadedModel, prompts: number[][], maxNew: number, snapshots?: number): Promise<number[][]> {
  const sched = scheduler(m, { snapshots, options: { prefixCache: false } });
  const out: number[][] = [];
  for (const p of prompts) out.push(await tokensOf(sched.submit({ promptIds: p, options: greedy(maxNew) })));
  sched.dispose();
  return out;
}

function expectAllReturned(sched: BatchScheduler): void {
  const pool = sched.pool;
  expect(pool.freePages).toBe(pool.pages);
  for (let p = 0; p < pool.pages; p++) expect(pool.refCount(p)).toBe(0);
}

describe('the prefix index and the pool', () => {
  const geometry = { layers: 2, kvHeads: 1, headDim: 2 };

  it('shares cached pages by reference, keeps unreferenced ones until the pool runs dry, evicting the tail first', () => {
    const pool = new PagedKvPool(geometry, { pageSize: 4, pages: 6 }, 'cpu');
    const cache = pool.enablePrefixCache();
    const a = new PagedSequence(pool);
    const prompt = ids(13, 1);
    expect(a.reserve(13)).toBe(true);
    // Three full pages go in the index under their prefix chain.
    let parent = '';
    for (let p = 0; p < 3; p++) parent = cache.insert(parent, prompt.slice(4 * p, 4 * p + 4), a.pages[p]!).key;
    expect(cache.match(prompt).map((e) => e.page)).toEqual(a.pages.slice(0, 3));
    // The same page content under another parent is another key.
    expect(pageKey('', prompt.slice(4, 8))).not.toBe(cache.match(prompt)[1]!.key);
    expect(cache.match([...prompt.slice(0, 4), 999, ...prompt.slice(5)]).length).toBe(1);

    const b = new PagedSequence(pool);
    b.adopt(
      cache
        .match(prompt)
        .slice(0, 2)
        .map((e) => e.page),
    );
    expect(b.reserve(9)).toBe(true);
    expect(a.pages.slice(0, 2).map((p) => pool.refCount(p))).toEqual([2, 2]);
    a.release();
    // a's third page is cached and unreferenced, its partial fourth page free; b holds the first two and one more.
    expect([pool.cachedPages, pool.freePages]).toEqual([1, 3]);
    b.release();
    expect([pool.cachedPages, pool.freePages, cache.size]).toEqual([3, 6, 3]);
    // Taking every page evicts the cached ones, the sequence's last page first.
    const c = new PagedSequence(pool);
    expect(c.reserve(4 * 4)).toBe(true);
    expect([cache.size, cache.match(prompt).length]).toEqual([2, 2]);
    expect(c.reserve(4 * 6)).toBe(true);
    expect([cache.size, cache.match(prompt).length, pool.freePages]).toEqual([0, 0, 0]);
    expect(c.reserve(4 * 7)).toBe(false);
    c.release();
    expect(pool.freePages).toBe(6);
    for (let p = 0; p < 6; p++) expect(pool.refCount(p)).toBe(0);
    pool.dispose();
  });

  it('copies a shared page before it is written (copy-on-write), leaving the cached page as it was', async () => {
    const pool = new PagedKvPool(geometry, { pageSize: 4, pages: 3 }, 'cpu');
    const cache = pool.enablePrefixCache();
    const a = new PagedSequence(pool);
    a.reserve(4);
    copyInto(narrow(pool.keys[1]!, 0, 4 * a.pages[0]!, 4), tensor([[[1, 2]], [[3, 4]], [[5, 6]], [[7, 8]]]));
    cache.insert('', [1, 2, 3, 4], a.pages[0]!);
    const cached = a.pages[0]!;
    const b = new PagedSequence(pool);
    b.adopt([cached]);
    expect(pool.refCount(cached)).toBe(2);
    expect(b.copyOnWrite(0)).toBe(true);
    expect(b.pages[0]).not.toBe(cached);
    expect(pool.refCount(cached)).toBe(1);
    expect(Array.from(await narrow(pool.keys[1]!, 0, 4 * b.pages[0]!, 4).toArray())).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    // Written in b's copy only.
    copyInto(narrow(pool.keys[1]!, 0, 4 * b.pages[0]!, 1), tensor([[[9, 9]]]));
    expect(Array.from(await narrow(pool.keys[1]!, 0, 4 * cached, 4).toArray())).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    a.release();
    b.release();
    expect([pool.freePages, pool.cachedPages]).toEqual([3, 1]);
    pool.dispose();
  });
});

describe('BatchScheduler with the prefix cache (tiny Qwen3-MoE, CPU)', () => {
  it('prefills only the new tokens of a second chat turn, with the tokens of a cold run', async () => {
    const m = await load(qwen3Dir);
    const sched = scheduler(m);
    const first = ids(21, 1);
    const reply = await tokensOf(sched.submit({ promptIds: first, options: greedy(12) }));
    expect(sched.prefilledTokens).toBe(21);
    // Turn 1 computed 21 + 11 positions (its last token was never fed): 4 full pages of 8.
    const second = [...first, ...reply, ...ids(5, 2)];
    const warm = await tokensOf(sched.submit({ promptIds: second, options: greedy(8) }));
    expect(sched.prefixHitTokens).toBe(32);
    // The new tokens and the reply's last token, which turn 1 sampled but never ran.
    expect(sched.prefilledTokens - 21).toBe(6);
    expectAllReturned(sched);
    sched.dispose();
    const [coldFirst, coldSecond] = await cold(m, [first, second], 12);
    expect(reply).toEqual(coldFirst);
    expect(warm).toEqual(coldSecond!.slice(0, 8));
  });

  it('recomputes the last token of a prompt cached whole in a copy of its page', async () => {
    const m = await load(qwen3Dir);
    const sched = scheduler(m);
    const prompt = ids(16, 3);
    const a = await tokensOf(sched.submit({ promptIds: prompt, options: greedy(6) }));
    const cachedPages = sched.prefixCache!.match(prompt).map((e) => e.page);
    expect(cachedPages).toHaveLength(2);
    const b = await tokensOf(sched.submit({ promptIds: prompt, options: greedy(6) }));
    expect(b).toEqual(a);
    expect(sched.prefixHitTokens).toBe(15);
    expect(sched.prefilledTokens).toBe(16 + 1);
    // The cached pages are still the ones the first run filled: the second wrote into a copy.
    expect(sched.prefixCache!.match(prompt).map((e) => e.page)).toEqual(cachedPages);
    const c = await tokensOf(sched.submit({ promptIds: prompt, options: greedy(6) }));
    expect(c).toEqual(a);
    expectAllReturned(sched);
    sched.dispose();
  });

  it('shares a prefix between concurrent requests, each with the tokens it gets cold', async () => {
    const m = await load(qwen3Dir);
    const sched = scheduler(m);
    const prefix = ids(24, 4);
    const prompts = [0, 1, 2].map((i) => [...prefix, ...ids(3 + i, 5 + i)]);
    const want = await cold(m, prompts, 6);
    // The first request's prefill indexes the prefix; the others join once it has its first token.
    const lead = sched.submit({ promptIds: prompts[0]!, options: greedy(6) });
    const it = lead.tokens[Symbol.asyncIterator]();
    const head = (await it.next()).value!.id;
    const rest = prompts.slice(1).map((p) => sched.submit({ promptIds: p, options: greedy(6) }));
    const firstPage = sched.prefixCache!.match(prefix)[0]!.page;
    const refs: number[] = [];
    const seen = Promise.all(rest.map(tokensOf));
    for (let i = 0; i < 50 && sched.running > 0; i++) {
      refs.push(sched.pool.refCount(firstPage));
      await new Promise((r) => setTimeout(r, 5));
    }
    const leadTokens = [head];
    for (let r = await it.next(); !r.done; r = await it.next()) leadTokens.push(r.value.id);
    expect([leadTokens, ...(await seen)]).toEqual(want);
    expect(Math.max(...refs)).toBe(3);
    expect(sched.prefixHitTokens).toBe(2 * 24);
    expectAllReturned(sched);
    sched.dispose();
  });

  it('evicts cached pages when the pool runs out, the oldest first, and completes every request', async () => {
    const m = await load(qwen3Dir);
    // 8 pages of 4 positions: two prompts' pages fill the pool.
    const sched = scheduler(m, { pages: 8, pageSize: 4 });
    const prompts = [0, 1, 2, 3].map((i) => ids(11, 10 + i));
    const want = await cold(m, prompts, 4);
    const got: number[][] = [];
    for (const p of prompts) got.push(await tokensOf(sched.submit({ promptIds: p, options: greedy(4) })));
    expect(got).toEqual(want);
    // Each run leaves 3 full pages cached (11 + 3 positions); the first ones were evicted for the later ones.
    expect(sched.pool.cachedPages).toBeLessThanOrEqual(8);
    expect(sched.prefixCache!.match(prompts[0]!)).toHaveLength(0);
    expect(sched.prefixCache!.match(prompts[3]!)).toHaveLength(2);
    expect(await tokensOf(sched.submit({ promptIds: prompts[3]!, options: greedy(4) }))).toEqual(want[3]);
    expect(sched.prefixHitTokens).toBe(8);
    expectAllReturned(sched);
    sched.dispose();
  });
});

describe('BatchScheduler with the prefix cache (Qwen3.6-shaped hybrid, CPU)', () => {
  it('restores the DeltaNet state snapshotted at a page boundary: a second turn prefills only its new tokens', async () => {
    const m = await load(hybridDir);
    const sched = scheduler(m, { snapshots: 4 });
    expect(sched.prefixCache).toBeDefined();
    const first = ids(21, 1);
    const reply = await tokensOf(sched.submit({ promptIds: first, options: greedy(12) }));
    const second = [...first, ...reply, ...ids(5, 2)];
    const warm = await tokensOf(sched.submit({ promptIds: second, options: greedy(8) }));
    // Snapshots at 16 (the prompt's chunk ends on a page boundary) and at 24 and 32 (decode steps crossing them).
    expect(sched.prefixHitTokens).toBe(32);
    expect(sched.prefilledTokens).toBe(21 + 6);
    expectAllReturned(sched);
    sched.dispose();
    const [coldFirst, coldSecond] = await cold(m, [first, second], 12);
    expect(reply).toEqual(coldFirst);
    expect(warm).toEqual(coldSecond!.slice(0, 8));
    // Without snapshot slots the hybrid bypasses the cache.
    const bypass = scheduler(m);
    expect(bypass.prefixCache).toBeUndefined();
    bypass.dispose();
  });
});

describe('serve: a second chat turn hits the prefix cache', () => {
  it('reports hits in /metrics and answers as a server without the cache does', async () => {
    const m = await loadTinyModel();
    models.push(m);
    const turns: string[][] = [];
    const counts: { hit: number; prefill: number; prompt: number }[] = [];
    for (const prefixCache of [true, false]) {
      const { server, client } = await serve(m, { prefixCache, kvPageSize: 8 });
      try {
        const messages: { role: 'user' | 'assistant'; content: string }[] = [{ role: 'user', content: 'Tell me about paged attention in a few words.' }];
        const texts: string[] = [];
        let prompt = 0;
        for (const next of ['And prefix caching?', 'Thanks!']) {
          const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, temperature: 0 });
          const text = r.choices[0]!.message.content ?? '';
          texts.push(text);
          prompt = r.usage!.prompt_tokens;
          messages.push({ role: 'assistant', content: text }, { role: 'user', content: next });
        }
        turns.push(texts);
        counts.push({
          hit: await metric(server, 'tensorgpu_prefix_cache_hit_tokens_total'),
          prefill: await metric(server, 'tensorgpu_prefill_tokens_total'),
          prompt,
        });
      } finally {
        await server.close();
      }
    }
    expect(turns[0]).toEqual(turns[1]);
    expect(counts[1]!.hit).toBe(0);
    // The second turn's prompt starts with the first's: at least the first turn's whole pages were not prefilled.
    expect(counts[0]!.hit).toBeGreaterThanOrEqual(16);
    expect(counts[0]!.prefill).toBe(counts[1]!.prefill - counts[0]!.hit);
  }, 60_000);
});

describe.skipIf(!gpu.available)(`the prefix cache's copies on WebGPU ${gpu.skipReason}`, () => {
  it('copies a KV page and a DeltaNet state slot within their pools', async () => {
    const pool = new PagedKvPool({ layers: 1, kvHeads: 1, headDim: 2 }, { pageSize: 2, pages: 2 }, 'webgpu');
    copyInto(narrow(pool.keys[0]!, 0, 0, 2), tensor([[[1, 2]], [[3, 4]]], { device: 'webgpu' }));
    pool.copyPage(0, 1);
    expect(Array.from(await pool.keys[0]!.toArray())).toEqual([1, 2, 3, 4, 1, 2, 3, 4]);
    pool.dispose();
    const g = { keyHeads: 1, valueHeads: 1, keyDim: 2, valueDim: 2, convKernel: 2 };
    const slots = new DeltaNetStateSlots(1, g, 1, 'webgpu', 1);
    const snap = slots.takeSnapshot()!;
    expect(snap).toBe(1);
    copyInto(
      select(slots.recurrent[0]!, 0, 0),
      tensor(
        [
          [
            [1, 2],
            [3, 4],
          ],
        ],
        { device: 'webgpu' },
      ),
    );
    slots.copy(0, snap);
    expect(Array.from(await select(slots.recurrent[0]!, 0, snap).toArray())).toEqual([1, 2, 3, 4]);
    slots.dispose();
  });
});
