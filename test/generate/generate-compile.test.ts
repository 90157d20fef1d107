// generate({ compile: true }): the prefill runs through compile() (the model keeps one signature per prompt length,
// its cache's tensors bound as inputs, so a new sequence's cache replays the recording) and gives the eager tokens
// and log-probabilities exactly, on the CPU and on WebGPU, for each decoder family.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel, setDefaultDevice } from '../../src/index.js';
import { generate, type GenerateOptions } from '../../src/generate/generate.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { LFM2_PRESETS } from '../../src/models/lfm2/presets.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { TextTokenizer, qwen3TokenizerDir } from '../../src/tokenizer/tokenizer.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;
// Ids below 512 are ordinary Qwen3 tokens: the real tokenizer streams their text.
const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());
const small = { vocabSize: 512, bosTokenId: 0, eosTokenIds: [1] };

// Each family's tiny preset with its layer kinds, fewer layers and a 512-token vocabulary.
const writers: Record<string, (dir: string) => Promise<unknown>> = {
  'qwen3-tiny': (dir) => writeRandomQwen3Checkpoint(dir, { ...QWEN3_PRESETS['qwen3-tiny'], ...small, numHiddenLayers: 2 }, { dtype: 'bfloat16', seed: 3 }),
  'qwen3-moe-tiny': (dir) =>
    writeRandomQwen3Checkpoint(dir, { ...QWEN3_PRESETS['qwen3-moe-tiny'], ...small, numHiddenLayers: 2 }, { dtype: 'bfloat16', seed: 3 }),
  'lfm2-tiny': (dir) =>
    writeRandomLfm2Checkpoint(
      dir,
      { ...LFM2_PRESETS['lfm2-tiny'], ...small, numHiddenLayers: 3, layerTypes: ['conv', 'full_attention', 'conv'] },
      { dtype: 'float32', seed: 3 },
    ),
  'qwen3.5-tiny': (dir) => writeRandomQwen35Checkpoint(dir, { ...QWEN3_5_PRESETS['qwen3.5-tiny'], ...small }, { dtype: 'float32', seed: 3 }),
};

const dirs: Record<string, string> = {};
beforeAll(async () => {
  for (const [name, write] of Object.entries(writers)) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-generate-compile-${name}-`));
    await write(dirs[name]);
  }
}, 60_000);
afterAll(() => {
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

async function run(model: CausalLM, prompt: readonly number[], options: GenerateOptions) {
  const out: { id: number; logprob: number; top: number[] }[] = [];
  const stream = generate(model, tokenizer, prompt, { temperature: 0, maxNewTokens: 2, stopTokenIds: [], logprobs: 2, ...options });
  let r = await stream.next();
  while (!r.done) {
    const lp = r.value.logprobs!;
    out.push({ id: r.value.id, logprob: lp.logprob, top: lp.top.map((t) => t.logprob) });
    r = await stream.next();
  }
  return out;
}

describe(`generate({ compile: true }) ${gpu.skipReason}`, () => {
  it.each(Object.keys(writers))(
    '%s: the prefill traced, then replayed for new sequences; the eager tokens and log-probs exactly',
    async (name) => {
      for (const device of devices) {
        const { model } = await loadModel(dirs[name], { device, maxSequence: 16 });
        try {
          for (let call = 0; call < 3; call++) {
            const prompt = [5 + call, 17, 300, 42, 7, 99];
            const got = await run(model, prompt, { compile: true });
            // The first call is the trace: the eager run itself.
            if (call > 0) expect(got, `${device} call ${call}`).toEqual(await run(model, prompt, {}));
          }
          const explained = model.explainCompiled!()!;
          expect(explained).toContain('1 signature(s), 1 trace(s)');
          expect(explained).not.toContain('eager because');
          expect(explained).toContain(device === 'webgpu' ? ': recorded, 3 call(s)' : ': program, 3 call(s)');
        } finally {
          model.dispose();
        }
      }
    },
    120_000,
  );
});
