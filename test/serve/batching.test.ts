// Continuous batching (BatchScheduler over a paged KV pool) on the tiny Qwen3-MoE: a greedy or seeded sequence
// gives the same tokens alone as beside others (the batch invariance the server promises), on the CPU and on
// WebGPU, with decode steps really shared; prefill in chunks; a full pool makes new sequences wait, and growing
// sequences preempt the youngest, which resumes and still completes; cancellation gives the pages back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { BatchScheduler, type BatchSchedulerOptions } from '../../src/serve/batch-scheduler.js';
import { ContextLengthError } from '../../src/serve/errors.js';
import type { Sequence } from '../../src/serve/scheduler.js';
import type { GenerateOptions } from '../../src/generate/generate.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { setDefaultDevice } from '../../src/index.js';
import { metric, MODEL, serve } from './helpers.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

let dir: string;
const models: LoadedModel[] = [];

// The tiny chat model with a 512-token vocabulary (its ids still decode with the Qwen3 tokenizer): a step's
// lm_head and sampling are then small enough for SwiftShader.
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-batching-'));
  await writeRandomQwen3Checkpoint(
    dir,
    { ...TINY_CHAT_MOE, vocabSize: 512, bosTokenId: 1, eosTokenIds: [2] },
    { seed: 11, extraFiles: await qwen3TokenizerFiles() },
  );
}, 60_000);

afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function load(device: 'cpu' | 'webgpu'): Promise<LoadedModel> {
  const m = await loadModel(dir, { device, maxSequence: 256 });
  models.push(m);
  return m;
}

interface Setup {
  pages?: number;
  pageSize?: number;
  options?: Partial<BatchSchedulerOptions>;
}

function scheduler(m: LoadedModel, s: Setup = {}): { sched: BatchScheduler; batches: number[] } {
  const model = m.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: s.pageSize ?? 8, pages: s.pages ?? 64 });
  const batches: number[] = [];
  const sched = new BatchScheduler(model, m.tokenizer!, pool, { maxQueue: 16, maxSequence: 256, observer: { onStep: (b) => batches.push(b) }, ...s.options });
  return { sched, batches };
}

async function tokensOf(seq: Sequence): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of seq.tokens) ids.push(t.id);
  return ids;
}

/** Prompts of 2, 11, 1, 13 and 5 tokens. */
const PROMPTS = [2, 11, 1, 13, 5].map((n, i) => Array.from({ length: n }, (_, j) => (37 * i + 11 * j + 3) % 512));

function requests(_m: LoadedModel, maxNewTokens: number, extra: GenerateOptions = {}) {
  // A never-sampled stop id: every sequence runs its full length, so the comparison covers every step.
  return PROMPTS.map((promptIds, i) => ({ promptIds, options: { maxNewTokens: maxNewTokens + i, temperature: 0, stopTokenIds: [-1], ...extra } }));
}

/** Each request alone (one after another), then all at once; returns both token lists and the decode batch sizes. */
async function aloneAndTogether(m: LoadedModel, reqs: ReturnType<typeof requests>, setup: Setup = {}) {
  const { sched, batches } = scheduler(m, setup);
  const alone: number[][] = [];
  for (const r of reqs) alone.push(await tokensOf(sched.submit(r)));
  batches.length = 0;
  const together = await Promise.all(reqs.map((r) => tokensOf(sched.submit(r))));
  expect(sched.pool.freePages).toBe(sched.pool.pages);
  sched.dispose();
  return { alone, together, maxBatch: Math.max(...batches) };
}

describe('BatchScheduler on the CPU', () => {
  it('gives each greedy sequence the same tokens alone and beside four others, sharing decode steps', async () => {
    const m = await load('cpu');
    const { alone, together, maxBatch } = await aloneAndTogether(m, requests(m, 6));
    expect(maxBatch).toBe(PROMPTS.length);
    expect(together).toEqual(alone);
    expect(alone.map((t) => t.length)).toEqual([6, 7, 8, 9, 10]);
  });

  it('gives the tokens of a one-shot prefill with the prompt in chunks of 3, decodes running meanwhile', async () => {
    const m = await load('cpu');
    const reqs = requests(m, 5);
    const oneShot = await aloneAndTogether(m, reqs);
    const chunked = await aloneAndTogether(m, reqs, { options: { prefillChunk: 3 } });
    expect(chunked.alone).toEqual(oneShot.alone);
    expect(chunked.together).toEqual(oneShot.alone);
  });

  it('makes new sequences wait while the pool is full, preempts the youngest as sequences grow, and completes them all', async () => {
    const m = await load('cpu');
    const reqs = requests(m, 20).slice(0, 3);
    const want = (await aloneAndTogether(m, reqs)).alone;
    // 9 pages of 4 positions: the sequences (2 + 20, 11 + 21, 1 + 22 positions) do not all fit at once.
    const { sched } = scheduler(m, { pages: 9, pageSize: 4 });
    const seqs = reqs.map((r) => sched.submit(r));
    const got = await Promise.all(seqs.map(tokensOf));
    expect(sched.preemptions).toBeGreaterThan(0);
    expect(got).toEqual(want);
    expect(sched.pool.freePages).toBe(9);
    sched.dispose();
  });

  it('queues a sequence whose prompt does not fit the free pages until one ends', async () => {
    const m = await load('cpu');
    const { sched } = scheduler(m, { pages: 4, pageSize: 4 });
    const prompt = PROMPTS[1]!.slice(0, 9); // 9 tokens: 3 of the 4 pages with its first token
    const first = sched.submit({ promptIds: prompt, options: { maxNewTokens: 3, temperature: 0, stopTokenIds: [-1] } });
    const second = sched.submit({ promptIds: prompt, options: { maxNewTokens: 3, temperature: 0, stopTokenIds: [-1] } });
    await first.tokens[Symbol.asyncIterator]().next();
    expect([sched.running, sched.waiting]).toEqual([1, 1]);
    expect(await tokensOf(second)).toHaveLength(3);
    expect((await first.result).generatedTokens).toBe(3);
    expect(() => sched.submit({ promptIds: prompt, options: { maxNewTokens: 8 } })).toThrow(ContextLengthError);
    sched.dispose();
  });

  it('cancels a running sequence at the next step, its pages back in the pool, the others unaffected', async () => {
    const m = await load('cpu');
    const reqs = requests(m, 8).slice(0, 2);
    const { sched } = scheduler(m);
    const want = await tokensOf(sched.submit(reqs[1]!));
    const doomed = sched.submit({ ...reqs[0]!, options: { ...reqs[0]!.options, maxNewTokens: 200 } });
    const kept = sched.submit(reqs[1]!);
    const it = doomed.tokens[Symbol.asyncIterator]();
    await it.next();
    expect(sched.cancel(doomed.id)).toBe(true);
    expect((await doomed.result).stopReason).toBe('aborted');
    expect(await tokensOf(kept)).toEqual(want);
    expect(sched.pool.freePages).toBe(sched.pool.pages);
    sched.dispose();
  });
});

describe('serve: concurrent streams through the openai client', () => {
  it('streams four concurrent completions (token-id prompts) with the text each gets alone, in shared steps', async () => {
    const m = await load('cpu');
    const { server, client } = await serve(m);
    try {
      const ask = async (prompt: number[], max_tokens: number) => {
        const stream = await client.completions.create({ model: MODEL, prompt, max_tokens, temperature: 0, stream: true });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
        return text;
      };
      const prompts = PROMPTS.slice(0, 4);
      const alone: string[] = [];
      for (const [i, p] of prompts.entries()) alone.push(await ask(p, 6 + i));
      const before = await metric(server, 'tensorgpu_decode_batch_size_sum');
      const together = await Promise.all(prompts.map((p, i) => ask(p, 6 + i)));
      expect(together).toEqual(alone);
      // Shared steps: the decode batches of the concurrent run add up to more tokens than steps.
      const steps = await metric(server, 'tensorgpu_decode_batch_size_count');
      expect((await metric(server, 'tensorgpu_decode_batch_size_sum')) - before).toBeGreaterThan(0);
      expect(await metric(server, 'tensorgpu_decode_batch_size_bucket{le="1"}')).toBeLessThan(steps);
      expect(await metric(server, 'tensorgpu_kv_pages{kind="used"}')).toBe(0);
      const bad = await client.completions
        .create({ model: MODEL, prompt: [5, 512], max_tokens: 2 })
        .catch((e: unknown) => e as { status: number; message: string });
      expect(bad).toMatchObject({ status: 400 });
      expect((bad as { message: string }).message).toMatch(/token id 512 at index 1 is outside the model's vocabulary of 512/);
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe('serve: log-probabilities', () => {
  it("reports each token's logprob and top alternatives, batched and one at a time alike, streamed and not", async () => {
    const m = await load('cpu');
    const results: { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[] }[] = [];
    for (const maxBatch of [16, 1]) {
      const { server, client } = await serve(m, { maxBatch });
      try {
        const request = { model: MODEL, prompt: PROMPTS[1]!, max_tokens: 5, temperature: 0, logprobs: 3 };
        const whole = await client.completions.create(request);
        const lp = whole.choices[0]!.logprobs as unknown as (typeof results)[number];
        expect(lp.tokens).toHaveLength(whole.usage!.completion_tokens);
        // Random ids of the tiny model often split UTF-8 characters, which a token alone shows as U+FFFD.
        const complete = (t: string) => t.replaceAll('\ufffd', '');
        expect(complete(lp.tokens.join(''))).toBe(complete(whole.choices[0]!.text));
        lp.token_logprobs.forEach((x, i) => {
          const top = Object.values(lp.top_logprobs[i]!);
          // Keyed by text, so ids that decode alike (U+FFFD) share one entry.
          expect(top.length).toBeGreaterThanOrEqual(1);
          expect(top.length).toBeLessThanOrEqual(3);
          // Greedy: the token is the most likely one; the alternatives come in order and are probabilities.
          expect(x).toBeCloseTo(top[0]!, 12);
          top.slice(1).forEach((y, j) => expect(y).toBeLessThanOrEqual(top[j]!));
          expect(top.reduce((a, b) => a + Math.exp(b), 0)).toBeLessThanOrEqual(1 + 1e-9);
        });
        const streamed: number[] = [];
        for await (const chunk of await client.completions.create({ ...request, stream: true })) {
          const l = chunk.choices[0]?.logprobs as unknown as (typeof results)[number] | null;
          if (l) streamed.push(...l.token_logprobs);
        }
        expect(streamed).toEqual(lp.token_logprobs);
        results.push(lp);
      } finally {
        await server.close();
      }
    }
    expect(results[1]!.tokens).toEqual(results[0]!.tokens);
    results[1]!.token_logprobs.forEach((x, i) => expect(x).toBeCloseTo(results[0]!.token_logprobs[i]!, 5));
  }, 60_000);
});

describe.skipIf(!gpu.available)(`BatchScheduler on WebGPU ${gpu.skipReason}`, () => {
  it('gives each greedy and seeded sequence the same tokens alone and beside four others', async () => {
    const m = await load('webgpu');
    const greedy = await aloneAndTogether(m, requests(m, 6));
    expect(greedy.maxBatch).toBe(PROMPTS.length);
    expect(greedy.together).toEqual(greedy.alone);
    const seeded = await aloneAndTogether(m, requests(m, 5, { temperature: 0.8, topK: 40, seed: 1234 }));
    expect(seeded.together).toEqual(seeded.alone);
  }, 120_000);
});
