// A LoRA fine-tune whose steps run through compile() (FineTune's `compile` option) against the same run eagerly:
// the same losses and adapter weights step for step, with fewer dispatches once the step is replayed.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice } from '../../src/index.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { FineTune } from '../../src/train/fine-tune.js';
import { defaultLoraTargets, LoraAdapter } from '../../src/train/lora.js';
import { trainingView } from '../../src/train/decoder-training.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

describe.each(gpu.available ? (['cpu', 'webgpu'] as const) : (['cpu'] as const))('FineTune with compile on %s', (device) => {
  it('gives the eager run step for step (warm-up, trace, record, then replays)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-finetune-compile-'));
    const config = { ...QWEN3_PRESETS['qwen3-moe-tiny'], vocabSize: 256, bosTokenId: 0, eosTokenIds: [1], numHiddenLayers: 2 };
    await writeRandomQwen3Checkpoint(dir, config, { dtype: 'bfloat16', seed: 4 });
    const run = async (compile: boolean) => {
      const { model } = await tg.loadModel(dir, { device, maxSequence: 16 });
      const view = trainingView(model);
      const adapter = LoraAdapter.create(
        view.sites,
        { rank: 4, alpha: 8, targetModules: defaultLoraTargets(view) },
        { device, generator: new tg.Generator(1) },
      );
      const tune = new FineTune(model, { kind: 'lora', adapter }, { steps: 10, lr: 5e-3, warmupSteps: 2, capturable: true, compile });
      const steps = [];
      for (let k = 0; k < 5; k++) steps.push(await tune.step(Array.from({ length: 13 }, (_, i) => (i * 37 + k * 11) % 256)));
      const weights = await Promise.all(adapter.parameters().map(async (p) => Array.from(await p.toArray())));
      const status = tune.compileStatus;
      tune.dispose();
      adapter.dispose();
      model.dispose();
      return { steps, weights, status };
    };
    const eager = await run(false);
    const compiled = await run(true);
    expect(compiled.status).toBe(device === 'webgpu' ? 'recorded' : 'program');
    for (let k = 0; k < 5; k++) expect(compiled.steps[k].loss).toBeCloseTo(eager.steps[k].loss, 5);
    compiled.weights.forEach((w, i) => w.forEach((v, j) => expect(v).toBeCloseTo(eager.weights[i][j], 5)));
    if (device === 'webgpu') expect(compiled.steps[4].dispatches).toBeLessThan(eager.steps[4].dispatches);
  }, 240_000);

  it('full fine-tuning of an MoE model compiles too (the grouped experts give the expert stacks their gradients, no read back)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-finetune-compile-full-'));
    const tiny = QWEN3_PRESETS['qwen3-moe-tiny'];
    const config = {
      ...tiny,
      vocabSize: 256,
      bosTokenId: 0,
      eosTokenIds: [1],
      numHiddenLayers: 2,
      hiddenSize: 32,
      intermediateSize: 64,
      moe: { ...tiny.moe!, numExperts: 8, moeIntermediateSize: 16 },
    };
    await writeRandomQwen3Checkpoint(dir, config, { dtype: 'float32', seed: 4 });
    const run = async (compile: boolean) => {
      const { model } = await tg.loadModel(dir, { device, maxSequence: 16 });
      const tune = new FineTune(model, { kind: 'full' }, { steps: 10, lr: 5e-3, warmupSteps: 2, capturable: true, compile });
      const steps = [];
      for (let k = 0; k < 4; k++) steps.push(await tune.step(Array.from({ length: 13 }, (_, i) => (i * 37 + k * 11) % 256)));
      const weights = await Promise.all(tune.params.map(async (p) => Array.from(await p.toArray())));
      const status = tune.compileStatus;
      tune.dispose();
      model.dispose();
      return { steps, weights, status };
    };
    const eager = await run(false);
    const compiled = await run(true);
    expect(compiled.status).toBe(device === 'webgpu' ? 'recorded' : 'program');
    for (let k = 0; k < 4; k++) expect(compiled.steps[k].loss).toBeCloseTo(eager.steps[k].loss, 5);
    compiled.weights.forEach((w, i) => w.forEach((v, j) => expect(v).toBeCloseTo(eager.weights[i][j], 5)));
  }, 240_000);
});
