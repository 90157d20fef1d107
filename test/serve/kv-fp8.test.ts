// Serving with an FP8 KV pool (`serve --kv-dtype fp8`): continuous batching over e4m3 pages gives each greedy
// sequence the same tokens alone and beside others (and on WebGPU as on the CPU), shared prefix pages included, and
// the same --kv-memory holds about twice the pages of a bfloat16 pool.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import type { DType } from '../../src/core/dtype.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { BatchScheduler } from '../../src/serve/batch-scheduler.js';
import type { Sequence } from '../../src/serve/scheduler.js';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { serve } from './helpers.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

let dir: string;
const models: LoadedModel[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-kv-fp8-serve-'));
  await writeRandomQwen3Checkpoint(
    dir,
    { ...TINY_CHAT_MOE, vocabSize: 512, bosTokenId: 1, eosTokenIds: [2] },
    { seed: 11, extraFiles: await qwen3TokenizerFiles() },
  );
}, 60_000);

afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function load(device: 'cpu' | 'webgpu', kvDtype: DType = 'float8_e4m3fn'): Promise<LoadedModel> {
  const m = await loadModel(dir, { device, maxSequence: 128, kvDtype });
  models.push(m);
  return m;
}

async function tokensOf(seq: Sequence): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of seq.tokens) ids.push(t.id);
  return ids;
}

/** Prompts of 2, 11, 13 and 11 tokens, the last sharing its first 8 (a full page) with the second. */
const PROMPTS = [2, 11, 13].map((n, i) => Array.from({ length: n }, (_, j) => (37 * i + 11 * j + 3) % 512));
PROMPTS.push([...PROMPTS[1]!.slice(0, 8), 400, 401, 402]);

/** Each prompt alone, then all at once, through an FP8 pool with the prefix cache on. */
async function aloneAndTogether(m: LoadedModel): Promise<{ alone: number[][]; together: number[][] }> {
  const model = m.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: 8, pages: 48 });
  expect(pool.keys[0]!.dtype).toBe('float8_e4m3fn');
  const sched = new BatchScheduler(model, m.tokenizer!, pool, { maxQueue: 16, maxSequence: 128, prefixCache: true });
  const reqs = PROMPTS.map((promptIds, i) => ({ promptIds, options: { maxNewTokens: 3 + i, temperature: 0, stopTokenIds: [-1] } }));
  const alone: number[][] = [];
  for (const r of reqs) alone.push(await tokensOf(sched.submit(r)));
  const together = await Promise.all(reqs.map((r) => tokensOf(sched.submit(r))));
  sched.dispose();
  return { alone, together };
}

describe('continuous batching over an FP8 KV pool', () => {
  let cpuTokens: number[][];

  it('gives each greedy sequence the same tokens alone and beside the others on the CPU', async () => {
    const { alone, together } = await aloneAndTogether(await load('cpu'));
    expect(together).toEqual(alone);
    expect(alone.map((t) => t.length)).toEqual([3, 4, 5, 6]);
    cpuTokens = alone;
  }, 60_000);

  it.skipIf(!gpu.available)(
    `gives the CPU's tokens on WebGPU ${gpu.skipReason}`,
    async () => {
      const { alone, together } = await aloneAndTogether(await load('webgpu'));
      expect(together).toEqual(alone);
      expect(alone).toEqual(cpuTokens);
    },
    300_000,
  );
});

describe('serve --kv-dtype fp8', () => {
  /** The pages a server makes of `kvMemoryBytes` for a model with this KV dtype (from its scheduler log line). */
  async function pagesOf(kvDtype: DType, kvMemoryBytes: number): Promise<number> {
    const m = await load('cpu', kvDtype);
    const logs: string[] = [];
    const { server, client } = await serve(m, { kvMemoryBytes, kvPageSize: 16, log: (l) => logs.push(l) });
    try {
      const r = await client.completions.create({ model: 'tiny-chat', prompt: PROMPTS[1]!, max_tokens: 3, temperature: 0 });
      expect(r.usage!.completion_tokens).toBe(3);
    } finally {
      await server.close();
    }
    const line = logs.find((l) => /KV cache \d+ pages/.test(l));
    expect(line, logs.join('\n')).toBeDefined();
    return Number(/KV cache (\d+) pages/.exec(line!)![1]);
  }

  it('fits about twice the positions of bfloat16 in the same --kv-memory', async () => {
    const bytes = 1 << 20;
    const bf16 = await pagesOf('bfloat16', bytes);
    const fp8 = await pagesOf('float8_e4m3fn', bytes);
    // Per position: 2 layers x 1 kv head x keys and values x (16 bf16 = 32 bytes | 16 codes + a 4-byte scale).
    expect(bf16).toBe(Math.floor(bytes / (16 * 2 * 2 * 32)));
    expect(fp8).toBe(Math.floor(bytes / (16 * 2 * 2 * 20)));
    // 2 D / (D + 4) for head dim D: 1.6 here (D = 16), 1.94 at D = 128, 1.97 at D = 256.
    expect(fp8 / bf16).toBeCloseTo(32 / 20, 2);
  }, 60_000);
});
