// generate() with an FP8 KV cache (kvDtype 'float8_e4m3fn', `--kv-dtype fp8`): the tiny Qwen3-MoE gives the same
// greedy tokens on WebGPU (captured decode steps replayed) as on the CPU reference, and the CLI runs it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import { generate, type GenerateOptions, type GenerationStats } from '../../src/generate/generate.js';
import { TextTokenizer, qwen3TokenizerDir, qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { runGenerate } from '../../src/cli/generate.js';
import { TINY_CHAT_MOE, writeTinyChatModel } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());
const models: LoadedModel[] = [];
afterAll(() => {
  for (const m of models) m.model.dispose();
});

async function run(m: LoadedModel, prompt: number[], options: GenerateOptions) {
  const ids: number[] = [];
  const stream = generate(m.model, m.tokenizer!, prompt, options);
  let r = await stream.next();
  while (!r.done) {
    ids.push(r.value.id);
    r = await stream.next();
  }
  return { ids, stats: r.value as GenerationStats };
}

describe('generate with an FP8 KV cache', () => {
  it('rejects a KV dtype that is not a cache dtype', async () => {
    await expect(loadModel(await writeTinyChatModel(3), { device: 'cpu', kvDtype: 'int32' })).rejects.toThrow(
      /kvDtype must be one of .*float8_e4m3fn, got int32/,
    );
  });

  // The 4096-token vocabulary keeps a step cheap on a software adapter (see generate.test.ts).
  it.skipIf(!gpu.available)(
    `gives the same greedy tokens on WebGPU as on the CPU ${gpu.skipReason}`,
    async () => {
      const small = mkdtempSync(join(tmpdir(), 'tensorgpu-kv-fp8-'));
      await writeRandomQwen3Checkpoint(
        small,
        { ...TINY_CHAT_MOE, vocabSize: 4096, bosTokenId: undefined, eosTokenIds: [0] },
        { seed: 45, extraFiles: await qwen3TokenizerFiles() },
      );
      const [cpu, webgpu] = await Promise.all(
        (['cpu', 'webgpu'] as const).map(async (device) => {
          const m = await loadModel(small, { device, maxSequence: 64, kvDtype: 'float8_e4m3fn' });
          models.push(m);
          return m;
        }),
      );
      // 2 layers x 1 kv head x (16 codes + a 4-byte scale) x keys and values.
      expect((cpu.model as PagedCausalLM).kvBytesPerPosition()).toBe(2 * 2 * 20);
      const prompt = tokenizer.encode('Q: Name a color.\nA:');
      const options = { maxNewTokens: 6, stopTokenIds: [], temperature: 0 };
      const want = await run(cpu, prompt, options);
      const got = await run(webgpu, prompt, options);
      expect(want.ids).toHaveLength(6);
      expect(got.ids).toEqual(want.ids);
      expect(got.stats.decode).toMatchObject({ mode: 'replay' });
      expect(new Set(want.ids).size, `tokens ${want.ids.join(', ')}`).toBeGreaterThan(1);
    },
    300_000,
  );

  it('runs `generate --kv-dtype fp8` on the CPU (last: the CLI releases the device)', async () => {
    const dir = await writeTinyChatModel(5);
    let out = '';
    const logs: string[] = [];
    const code = await runGenerate(
      { model: dir, prompt: 'Hi', maxTokens: 4, temperature: 0, device: 'cpu', kvDtype: 'fp8' },
      (t) => (out += t),
      (l) => logs.push(l),
    );
    expect(code, logs.join('\n')).toBe(0);
    expect(logs.join('\n')).toMatch(/generated/);
    expect(out.length).toBeGreaterThan(0);
  }, 60_000);
});
