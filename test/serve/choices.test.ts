// `n > 1` through the official openai client: n choices, each its own sequence in the batch with seed + i, the later
// ones admitted once the first has prefilled the prompt and sharing its cached pages (prefix_cache_hit_tokens
// grows); each choice equals a single request with its seed; streamed chunks name their choice's index; usage counts
// the prompt once and every choice's tokens. Served on the CPU by the tiny Qwen3-MoE and by lfm2-tiny (conv-state snapshots shared too).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { LFM2_PRESETS, writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { lfm2TokenizerFiles } from '../../src/models/lfm2/tokenizer.js';
import type { RunningServer } from '../../src/serve/server.js';
import { loadTinyModel, metric, MODEL, serve } from './helpers.js';

const models: LoadedModel[] = [];
afterAll(() => {
  for (const m of models) m.model.dispose();
});

const PROMPT = 'Write a word about the sea and the sky and the long road home, please.';

describe.each(['qwen3-moe', 'lfm2'])('n > 1 on the %s model', (family) => {
  let server: RunningServer;
  let client: OpenAI;
  beforeAll(async () => {
    let m: LoadedModel;
    if (family === 'qwen3-moe') m = await loadTinyModel();
    else {
      const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-choices-lfm2-'));
      await writeRandomLfm2Checkpoint(dir, LFM2_PRESETS['lfm2-tiny']!, { seed: 3, outputSpread: true, extraFiles: await lfm2TokenizerFiles() });
      m = await loadModel(dir, { device: 'cpu', maxSequence: 256 });
    }
    models.push(m);
    ({ server, client } = await serve(m, { kvPageSize: 4, kvMemoryBytes: 1 << 22 }));
  }, 60_000);
  afterAll(() => server.close());

  it('gives n chat choices, choice i equal to a single request with seed + i, sharing the prompt pages', async () => {
    const ask = { model: MODEL, messages: [{ role: 'user' as const, content: PROMPT }], max_tokens: 3, temperature: 1, seed: 40 };
    const hits0 = await metric(server, 'tensorgpu_prefix_cache_hit_tokens_total');
    const many = await client.chat.completions.create({ ...ask, n: 3 });
    expect(many.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    // The two later choices shared the first one's full pages.
    expect(await metric(server, 'tensorgpu_prefix_cache_hit_tokens_total')).toBeGreaterThan(hits0);
    const singles = [];
    for (let i = 0; i < 3; i++) singles.push(await client.chat.completions.create({ ...ask, seed: 40 + i }));
    expect(many.choices.map((c) => c.message.content)).toEqual(singles.map((s) => s.choices[0]!.message.content));
    // lfm2-tiny is written with outputSpread (as the built-in presets are): its random logits spread enough for seeds
    // to differ within 3 tokens.
    expect(new Set(many.choices.map((c) => c.message.content)).size).toBeGreaterThan(1);
    const completion = singles.reduce((a, s) => a + s.usage!.completion_tokens, 0);
    expect(many.usage).toEqual({
      prompt_tokens: singles[0]!.usage!.prompt_tokens,
      completion_tokens: completion,
      total_tokens: singles[0]!.usage!.prompt_tokens + completion,
    });
  }, 180_000);

  it('streams n completions choices, each chunk naming its index, the same text as unstreamed, one usage chunk', async () => {
    const ask = { model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 1, seed: 9, n: 2 };
    const whole = await client.completions.create(ask);
    const texts = ['', ''];
    const finished: (string | null)[] = [null, null];
    let usage: OpenAI.CompletionUsage | undefined;
    const stream = await client.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason) finished[c.index] = c.finish_reason;
      }
    }
    expect(texts).toEqual(whole.choices.map((c) => c.text));
    expect(finished).toEqual(['length', 'length']);
    expect(usage).toEqual(whole.usage);
    // Chat streams: the role, deltas and finish of each choice under its index.
    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 3,
      n: 2,
      seed: 1,
      stream: true,
    });
    const roles = new Set<number>();
    const ends = new Set<number>();
    for await (const chunk of chat) {
      for (const c of chunk.choices) {
        if (c.delta.role) roles.add(c.index);
        if (c.finish_reason) ends.add(c.index);
      }
    }
    expect([...roles].sort()).toEqual([0, 1]);
    expect([...ends].sort()).toEqual([0, 1]);
  }, 180_000);

  it('refuses n beyond 16', async () => {
    await expect(client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1, n: 17 })).rejects.toMatchObject({ status: 400 });
  });
});
