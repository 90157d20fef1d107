// loadModel, the one loading entry, in each form it takes (a folder, `builtin:<preset>`, an open Checkpoint), and
// the deprecated names over it (loadQwen3, loadModelOf, modelFromCheckpoint, qwen3FromCheckpoint): the same model
// type and the same logits as loadModel, other families refused by the Qwen3 ones before any weight is read. Tiny
// configs on the CPU backend.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as browserEntry from '../../src/browser.js';
import * as nodeEntry from '../../src/index.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { presetNames } from '../../src/models/families.js';
import * as fromCheckpoint from '../../src/models/from-checkpoint.js';
import { lfm2ToHfConfig, type Lfm2Config } from '../../src/models/lfm2/config.js';
import { lfm2WeightSpecs } from '../../src/models/lfm2/layout.js';
import { Lfm2Model } from '../../src/models/lfm2/model.js';
import { LFM2_PRESETS } from '../../src/models/lfm2/presets.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import * as load from '../../src/models/load.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { qwen3FromCheckpoint, requireQwen3 } from '../../src/models/qwen3/from-checkpoint.js';
import { loadQwen3 } from '../../src/models/qwen3/load.js';
import { Qwen3Model } from '../../src/models/qwen3/model.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/presets.js';
import { randomQwen3Checkpoint, writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { QWEN3_5_PRESETS } from '../../src/models/qwen3_5/presets.js';
import { randomCheckpointInMemory } from '../../src/models/random-weights.js';
import { tensor } from '../../src/ops/creation.js';

const { loadModel, loadModelOf } = load;
const { modelFromCheckpoint } = fromCheckpoint;

const QWEN3: Qwen3Config = { ...QWEN3_PRESETS['qwen3-moe-tiny']!, vocabSize: 256, bosTokenId: 0, eosTokenIds: [1], numHiddenLayers: 2 };
const LFM2: Lfm2Config = {
  ...LFM2_PRESETS['lfm2-tiny']!,
  vocabSize: 256,
  numHiddenLayers: 2,
  layerTypes: ['conv', 'full_attention'],
  bosTokenId: 0,
  padTokenId: 0,
  eosTokenIds: [1],
};
const PROMPT = [3, 17, 200, 42];
const SEED = 5;

const models: CausalLM[] = [];
function own<M extends CausalLM>(model: M): M {
  models.push(model);
  return model;
}

async function logitsOf(model: CausalLM): Promise<Float32Array> {
  const input = tensor(PROMPT, { dtype: 'int32', device: model.device });
  const logits = await model.forward(input, model.newCache(), true);
  input.dispose();
  const values = (await logits.toArray()) as Float32Array;
  logits.dispose();
  return values;
}

const lfm2Checkpoint = () =>
  randomCheckpointInMemory(lfm2WeightSpecs(LFM2), lfm2ToHfConfig({ ...LFM2, torchDtype: 'float32' }), { seed: SEED, dtype: 'float32' });

describe('loadModel: the one loading entry', () => {
  let dir = '';
  let lfm2Dir = '';
  let reference: Float32Array;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-load-qwen3-'));
    lfm2Dir = mkdtempSync(join(tmpdir(), 'tensorgpu-load-lfm2-'));
    await writeRandomQwen3Checkpoint(dir, QWEN3, { seed: SEED, dtype: 'float32' });
    await writeRandomLfm2Checkpoint(lfm2Dir, LFM2, { seed: SEED, dtype: 'float32' });
    const { model } = await loadModel(dir, { device: 'cpu', maxSequence: 16 });
    reference = await logitsOf(own(model));
  });

  afterAll(() => {
    for (const m of models) m.dispose();
    for (const d of [dir, lfm2Dir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it("loads a built-in preset by 'builtin:<name>', with the tokenizer its family's presets ship with", async () => {
    expect(presetNames()).toContain('qwen3-tiny');
    const loaded = await loadModel('builtin:qwen3-tiny', { device: 'cpu', maxSequence: 8 });
    own(loaded.model);
    expect(loaded.model).toBeInstanceOf(Qwen3Model);
    expect(loaded.config).toEqual(QWEN3_PRESETS['qwen3-tiny']);
    expect(loaded.tokenizer?.encode('hello world').length).toBeGreaterThan(0);
    expect(loaded.checkpointBytes).toBeGreaterThan(0);
    const logits = await logitsOf(loaded.model);
    expect(logits).toHaveLength(QWEN3_PRESETS['qwen3-tiny']!.vocabSize);
    expect(logits.every(Number.isFinite)).toBe(true);
  }, 60_000);

  it('names the presets when the builtin one is unknown', async () => {
    await expect(loadModel('builtin:no-such-preset', { device: 'cpu' })).rejects.toThrow(/unknown preset 'no-such-preset' \(presets: .*qwen3-tiny/);
  });

  it('loads an open Checkpoint (left open, no tokenizer) with the logits of the same folder loaded by path', async () => {
    await using ck = await Checkpoint.open(dir);
    const loaded = await loadModel(ck, { device: 'cpu', maxSequence: 16 });
    own(loaded.model);
    expect(loaded.model).toBeInstanceOf(Qwen3Model);
    expect(loaded.tokenizer).toBeUndefined();
    expect(loaded.generationConfig).toBeUndefined();
    expect(loaded.checkpointBytes).toBe(ck.totalBytes);
    expect(ck.names.length).toBeGreaterThan(0);
    expect(await logitsOf(loaded.model)).toEqual(reference);
  });

  it('loads an in-memory Checkpoint of any family', async () => {
    const qwen3 = await loadModel(await randomQwen3Checkpoint(QWEN3, { seed: SEED, dtype: 'float32' }), { device: 'cpu', maxSequence: 16 });
    expect(await logitsOf(own(qwen3.model))).toEqual(reference);
    const lfm2 = await loadModel(await lfm2Checkpoint(), { device: 'cpu', maxSequence: 16 });
    expect(own(lfm2.model)).toBeInstanceOf(Lfm2Model);
    expect(lfm2.config.modelType).toBe('lfm2');
  });

  it('calls `accept` with the family before any weight is read', async () => {
    const seen: string[] = [];
    const progress: number[] = [];
    const refuse = (family: { name: string }) => {
      seen.push(family.name);
      throw new Error(`no ${family.name} here`);
    };
    await expect(loadModel(dir, { device: 'cpu', accept: refuse, onProgress: (done) => progress.push(done) })).rejects.toThrow('no Qwen3 here');
    await expect(loadModel(await lfm2Checkpoint(), { device: 'cpu', accept: refuse, onProgress: (done) => progress.push(done) })).rejects.toThrow(
      'no LFM2 here',
    );
    expect(seen).toEqual(['Qwen3', 'LFM2']);
    expect(progress).toEqual([]);
  });

  it('is what each entry exports: the Checkpoint form in the browser entry, the superset in the Node entry', () => {
    expect(browserEntry.loadModel).toBe(fromCheckpoint.loadModel);
    expect(nodeEntry.loadModel).toBe(load.loadModel);
    expect(nodeEntry.modelFromCheckpoint).toBe(modelFromCheckpoint);
    expect(nodeEntry.QWEN3_PRESETS).toBe(QWEN3_PRESETS);
    expect(nodeEntry.LFM2_PRESETS).toBe(LFM2_PRESETS);
    expect(nodeEntry.QWEN3_5_PRESETS).toBe(QWEN3_5_PRESETS);
  });

  describe('the deprecated names over it', () => {
    it('loadQwen3 and loadModelOf: the LoadedModel of loadModel, the same model type and logits', async () => {
      const viaQwen3 = await loadQwen3(dir, { device: 'cpu', maxSequence: 16 });
      const viaOf = await loadModelOf(dir, { device: 'cpu', maxSequence: 16 }, requireQwen3);
      for (const loaded of [viaQwen3, viaOf]) {
        expect(own(loaded.model)).toBeInstanceOf(Qwen3Model);
        expect(loaded.config).toMatchObject({ ...QWEN3, torchDtype: 'float32' });
        expect(loaded.checkpointBytes).toBeGreaterThan(0);
        expect(await logitsOf(loaded.model)).toEqual(reference);
      }
      // loadQwen3 keeps the caller's own `accept` too.
      const seen: string[] = [];
      own((await loadQwen3(dir, { device: 'cpu', maxSequence: 16, accept: (f) => void seen.push(f.name) })).model);
      expect(seen).toEqual(['Qwen3']);
    });

    it('modelFromCheckpoint and qwen3FromCheckpoint: the model of loadModel(ck), the same type and logits', async () => {
      await using ck = await Checkpoint.open(dir);
      const any = own(await modelFromCheckpoint(ck, { device: 'cpu', maxSequence: 16 }));
      const qwen3 = own(await qwen3FromCheckpoint(ck, { device: 'cpu', maxSequence: 16 }));
      for (const model of [any, qwen3]) {
        expect(model).toBeInstanceOf(Qwen3Model);
        expect(await logitsOf(model)).toEqual(reference);
      }
      expect(own(await modelFromCheckpoint(await lfm2Checkpoint(), { device: 'cpu', maxSequence: 16 }))).toBeInstanceOf(Lfm2Model);
    });

    it('the Qwen3 ones refuse another family by name', async () => {
      await expect(loadQwen3(lfm2Dir, { device: 'cpu' })).rejects.toThrow(/the checkpoint is LFM2, not Qwen3/);
      await expect(loadModelOf(lfm2Dir, { device: 'cpu' }, requireQwen3)).rejects.toThrow(/the checkpoint is LFM2, not Qwen3/);
      await expect(qwen3FromCheckpoint(await lfm2Checkpoint(), { device: 'cpu' })).rejects.toThrow(/the checkpoint is LFM2, not Qwen3/);
    });
  });
});
