// Qwen3.5 / Qwen3.6 end to end on both devices: prefill split any way then decode steps equals one prefill (the
// DeltaNet conv window and recurrent state carried exactly), WebGPU matches the CPU, captured decode steps replay
// the eager ones bit for bit, a decode step takes at most 8 dispatches per DeltaNet layer and 9 per attention layer
// with one read per token, nothing leaks, FP8 (quantized at load, and an FP8 checkpoint with experts stored one by
// one) stays close to the float weights, and bad configs and checkpoints are typed errors naming the field or tensor.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStats, setDefaultDevice, synchronize, type Tensor } from '../../src/index.js';
import { CheckpointError } from '../../src/core/errors.js';
import { DecodeSession } from '../../src/generate/decode-session.js';
import { measureDecode } from '../../src/generate/measure.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { parseQwen35Config, qwen35ToHfConfig, type Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { Qwen35Model } from '../../src/models/qwen3_5/model.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { tensor } from '../../src/ops/creation.js';
import { runInspectCheckpoint } from '../../src/cli/checkpoint.js';
import { writeCheckpoint } from '../../src/formats/checkpoint-writer.js';
import { qwen35WeightSpecs } from '../../src/models/qwen3_5/layout.js';
import { randomSources } from '../../src/models/random-weights.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const MOE = QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config;
const DENSE = QWEN3_5_REFERENCE_CASES['qwen3.5-ref'].config;
const SEQUENCE = [3, 17, 42, 5, 88, 1, 60, 200, 9, 31, 4];
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

const dirs: Record<string, string> = {};
const loaded: LoadedModel[] = [];

async function open(name: string, device: 'cpu' | 'webgpu', options: { dtype?: 'fp8'; maxSequence?: number } = {}): Promise<Qwen35Model> {
  const m = await loadModel(dirs[name], { device, maxSequence: options.maxSequence ?? 32, dtype: options.dtype });
  loaded.push(m);
  expect(m.model).toBeInstanceOf(Qwen35Model);
  return m.model as Qwen35Model;
}

async function rows(model: Qwen35Model, ids: readonly number[], cache = model.newCache(), lastOnly = false): Promise<Float32Array> {
  const logits: Tensor = await model.forward(tensor([...ids], { dtype: 'int32', device: model.device }), cache, { lastOnly });
  const out = (await logits.toArray()) as Float32Array;
  logits.dispose();
  return out;
}

beforeAll(async () => {
  for (const [name, config] of [
    ['moe', MOE],
    ['dense', DENSE],
  ] as const) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-qwen3_5-${name}-`));
    await writeRandomQwen35Checkpoint(dirs[name], config, { dtype: 'float32', seed: 5 });
  }
});

afterAll(() => {
  for (const m of loaded) m.model.dispose();
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

describe(`Qwen3.5 forward ${gpu.skipReason}`, () => {
  it.each(['moe', 'dense'])('%s: prefill of 1, 2, 5 tokens then decode steps equals one prefill of the whole sequence', async (name) => {
    const vocab = (name === 'moe' ? MOE : DENSE).vocabSize;
    for (const device of devices) {
      const model = await open(name, device);
      const full = await rows(model, SEQUENCE);
      for (const prompt of [1, 2, 5]) {
        const cache = model.newCache();
        const got = [await rows(model, SEQUENCE.slice(0, prompt), cache, true)];
        for (let t = prompt; t < SEQUENCE.length; t++) got.push(await rows(model, [SEQUENCE[t]], cache, true));
        cache.dispose();
        for (let i = 0; i < got.length; i++) {
          const at = prompt - 1 + i;
          expectClose(got[i], full.subarray(at * vocab, (at + 1) * vocab), { atol: 5e-5, rtol: 5e-5 }, `${device} prompt ${prompt}, position ${at}`);
        }
      }
    }
  });

  it.each(['moe', 'dense'])('%s: WebGPU matches the CPU at every position', async (name) => {
    if (!gpu.available) return;
    const cpu = await rows(await open(name, 'cpu'), SEQUENCE);
    const webgpu = await rows(await open(name, 'webgpu'), SEQUENCE);
    expectClose(webgpu, cpu, { atol: 1e-4, rtol: 1e-4 }, 'webgpu vs cpu');
  });
});

describe(`Qwen3.5 decode sessions ${gpu.skipReason}`, () => {
  it('captured decode steps replay the eager ones bit for bit and greedy tokens match the CPU', async () => {
    const run = async (device: 'cpu' | 'webgpu', capture: boolean) => {
      const model = await open('moe', device);
      const session = new DecodeSession(model, { sampling: { temperature: 0 }, capture, keepLogits: true });
      try {
        const ids = [await session.prefill(SEQUENCE.slice(0, 3), 0)];
        const logits: Float32Array[] = [];
        for (let i = 0; i < 8; i++) {
          ids.push(await session.next(0));
          logits.push((await session.logits!.toArray()) as Float32Array);
        }
        return { ids, logits, stats: { ...session.stats } };
      } finally {
        session.dispose();
      }
    };
    const cpu = await run('cpu', false);
    if (!gpu.available) return;
    const eager = await run('webgpu', false);
    const replay = await run('webgpu', true);
    expect(replay.stats.mode).toBe('replay');
    expect(replay.stats.replayedSteps).toBe(7);
    expect(eager.stats.mode).toBe('eager');
    expect(replay.ids).toEqual(eager.ids);
    for (let i = 0; i < replay.logits.length; i++) expect(Array.from(replay.logits[i]), `step ${i}`).toEqual(Array.from(eager.logits[i]));
    expect(replay.ids).toEqual(cpu.ids);
  });

  it('a decode step: 8 dispatches per DeltaNet layer, 9 per attention layer, one read per token', async () => {
    if (!gpu.available) return;
    const model = await open('moe', 'webgpu', { maxSequence: 64 });
    const m = await measureDecode(model, { promptTokens: 4, decodeSteps: 3 });
    expect(m.mode).toBe('replay');
    expect(m.readsPerToken).toBe(1);
    // DeltaNet: norm, [qkv|z|b|a], gatedDeltaNet, out_proj; attention: norm, [q|k|v|gate], attentionInputs,
    // attention (gate fused), o_proj; then norm, router (+ shared gate), gate|up, down + combine + residual.
    expect(m.dispatchesPerLayerKind).toEqual({ linear_attention: 8, full_attention: 9 });
    expect(m.dispatchesPerToken).toBe(model.lastForward.dispatches + 2);
  });

  it('the recurrent state is constant in the context; only attention layers keep KV', async () => {
    const model = await open('moe', 'cpu');
    const c = MOE;
    const linear = c.layerTypes.filter((t) => t === 'linear_attention').length;
    const l = c.linear;
    expect(model.stateBytesPerSequence()).toBe(
      linear * 4 * l.numValueHeads * ((l.convKernel - 1) * (2 * l.keyHeadDim + l.valueHeadDim) + l.keyHeadDim * l.valueHeadDim),
    );
    expect(model.kvBytesPerPosition()).toBe((c.numHiddenLayers - linear) * 2 * c.numKeyValueHeads * c.headDim * 4);
  });
});

describe(`Qwen3.5 memory ${gpu.skipReason}`, () => {
  it('fused, captured and per-expert decodes leave no GPU bytes behind once the model is disposed', async () => {
    if (!gpu.available) return;
    for (const mode of ['fused', 'per-expert'] as const) {
      await synchronize();
      const before = memoryStats().liveBytes;
      const { model } = await loadModel(dirs.moe, { device: 'webgpu', maxSequence: 32, moeMode: mode });
      await measureDecode(model, { promptTokens: 3, decodeSteps: 2 });
      model.dispose();
      await synchronize();
      expect(memoryStats().liveBytes - before, `${mode}: bytes still live`).toBe(0);
    }
  });

  it('the per-expert loop (with the shared expert as a slot) equals the fused block', async () => {
    const fused = await rows(await open('moe', 'cpu'), SEQUENCE.slice(0, 4));
    const { model } = await loadModel(dirs.moe, { device: 'cpu', maxSequence: 32, moeMode: 'per-expert' });
    loaded.push({ model } as LoadedModel);
    const perExpert = await rows(model as Qwen35Model, SEQUENCE.slice(0, 4));
    expectClose(perExpert, fused, { atol: 1e-5, rtol: 1e-5 }, 'per-expert vs fused');
  });
});

describe(`Qwen3.5 FP8 and checkpoint errors ${gpu.skipReason}`, () => {
  it('--dtype fp8 (quantized at load) and an FP8 checkpoint (experts one by one) run on both devices close to the float weights', async () => {
    const config: Qwen35Config = {
      ...MOE,
      hiddenSize: 128,
      numAttentionHeads: 2,
      numKeyValueHeads: 1,
      headDim: 128,
      rotaryDim: 32,
      linear: { numKeyHeads: 1, numValueHeads: 2, keyHeadDim: 64, valueHeadDim: 64, convKernel: 4 },
      moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 128, sharedExpertIntermediateSize: 128 },
    };
    dirs.fp8src = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-fp8src-'));
    dirs.fp8 = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-fp8-'));
    // The same random values need the same tensor names: the bf16 source stores its experts one by one too.
    dirs.fused = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-fused-'));
    await writeRandomQwen35Checkpoint(dirs.fp8src, config, { dtype: 'bfloat16', seed: 2, expertsOneByOne: true });
    await writeRandomQwen35Checkpoint(dirs.fused, config, { dtype: 'bfloat16', seed: 2 });
    await writeRandomQwen35Checkpoint(dirs.fp8, config, { dtype: 'fp8', seed: 2 });
    const index = JSON.parse(readFileSync(join(dirs.fp8, 'config.json'), 'utf8'));
    expect(index.quantization_config.weight_block_size).toEqual([128, 128]);
    const ids = SEQUENCE.slice(0, 5);
    const plain = await rows(await open('fp8src', 'cpu'), ids);
    // The release's fused 3-D experts, quantized at load in blocks that never straddle two experts.
    const fusedPlain = await rows(await open('fused', 'cpu'), ids);
    const fusedQuantized = await rows(await open('fused', 'cpu', { dtype: 'fp8' }), ids);
    const cosine = (a: Float32Array, b: Float32Array) => {
      let dot = 0;
      let a2 = 0;
      let b2 = 0;
      for (let i = 0; i < a.length; i++) {
        dot += a[i] * b[i];
        a2 += a[i] ** 2;
        b2 += b[i] ** 2;
      }
      return dot / Math.sqrt(a2 * b2);
    };
    const byDevice: Record<string, { quantized: Float32Array; stored: Float32Array }> = {};
    for (const device of devices) {
      const quantizedModel = await open('fp8src', device, { dtype: 'fp8' });
      const storedModel = await open('fp8', device);
      // The shared expert joins the FP8 expert stacks either way.
      for (const m of [quantizedModel, storedModel]) expect(m.routing?.sharedExpert, `${device} shared expert stacked`).toBe(true);
      const quantized = await rows(quantizedModel, ids);
      const stored = await rows(storedModel, ids);
      byDevice[device] = { quantized, stored };
      // e4m3 rounds each weight by up to 1/16 (measured cosine ~0.99); a wrong scale or regrouping gives ~0.
      expect(cosine(plain, quantized), `${device} quantized at load vs bf16`).toBeGreaterThan(0.95);
      expect(cosine(plain, stored), `${device} FP8 checkpoint vs bf16`).toBeGreaterThan(0.95);
    }
    expect(cosine(fusedPlain, fusedQuantized), 'fused experts quantized at load vs bf16').toBeGreaterThan(0.95);
    if (byDevice.webgpu) {
      expectClose(byDevice.webgpu.quantized, byDevice.cpu.quantized, { atol: 1e-3, rtol: 1e-3 }, 'quantized at load: webgpu vs cpu');
      expectClose(byDevice.webgpu.stored, byDevice.cpu.stored, { atol: 1e-3, rtol: 1e-3 }, 'FP8 checkpoint: webgpu vs cpu');
    }
  });

  it('configs it cannot run are errors naming the field', () => {
    const json = qwen35ToHfConfig(MOE) as { text_config: Record<string, unknown> };
    const withText = (over: Record<string, unknown>) => ({ ...json, text_config: { ...json.text_config, ...over } });
    expect(parseQwen35Config(json).layerTypes).toEqual(MOE.layerTypes);
    expect(() => parseQwen35Config(withText({ layer_types: ['linear_attention', 'mamba', 'full_attention', 'linear_attention', 'full_attention'] }))).toThrow(
      /text_config.layer_types\[1\] is "mamba"/,
    );
    expect(() => parseQwen35Config(withText({ layer_types: ['full_attention'] }))).toThrow(
      /text_config.layer_types must be a list of num_hidden_layers \(5\) entries/,
    );
    expect(() => parseQwen35Config(withText({ linear_num_value_heads: 3 }))).toThrow(
      /text_config.linear_num_value_heads must be a multiple of linear_num_key_heads \(2\)/,
    );
    expect(() => parseQwen35Config(withText({ rope_parameters: { rope_type: 'yarn', rope_theta: 1e6 } }))).toThrow(
      /rope_parameters.rope_type must be 'default'/,
    );
    expect(() => parseQwen35Config({ model_type: 'qwen3_5_moe', vision_config: { depth: 2 } })).toThrow(/no text_config/);
    const parsed = parseQwen35Config({ ...json, vision_config: { depth: 2 } });
    expect(parsed.hasVision).toBe(true);
    // Defaults of the released model where a field is absent: 16 / 32 linear heads of 128, conv 4, a quarter rotated.
    const {
      linear_num_key_heads: _k,
      linear_num_value_heads: _v,
      linear_key_head_dim: _kd,
      linear_value_head_dim: _vd,
      linear_conv_kernel_dim: _c,
      ...bare
    } = json.text_config;
    const defaults = parseQwen35Config({ ...json, text_config: { ...bare, rope_parameters: { rope_theta: 1e7 }, head_dim: 256 } });
    expect(defaults.linear).toEqual({ numKeyHeads: 16, numValueHeads: 32, keyHeadDim: 128, valueHeadDim: 128, convKernel: 4 });
    expect(defaults.rotaryDim).toBe(64);
  });

  it('a missing tensor or a mis-shaped conv is a CheckpointError naming the tensor; the tied / untied head follows the top level', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-bad-'));
    try {
      await writeRandomQwen35Checkpoint(dir, DENSE, { dtype: 'float32' });
      const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, text_config: { ...config.text_config, linear_conv_kernel_dim: 3 } }));
      const err = await loadModel(dir, { device: 'cpu' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointError);
      expect(String(err)).toMatch(/tensor 'model.language_model.layers.0.linear_attn.conv1d.weight' is \[80, 1, 4\], the config implies \[80, 1, 3\]/);
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, tie_word_embeddings: true }));
      const tied = await loadModel(dir, { device: 'cpu' });
      expect((tied.model as Qwen35Model).weights.lmHead.data).toBe((tied.model as Qwen35Model).weights.embedTokens);
      tied.model.dispose();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the presets parse back from the config.json they write', () => {
    for (const [name, preset] of Object.entries(QWEN3_5_PRESETS)) {
      const back = parseQwen35Config(JSON.parse(JSON.stringify(qwen35ToHfConfig(preset))));
      expect(back, name).toMatchObject({ ...preset, torchDtype: back.torchDtype });
    }
  });

  it('a release checkpoint with its vision tower and MTP layer loads the text model; inspect says what it leaves', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-vl-'));
    try {
      const extra = [
        { name: 'model.visual.patch_embed.proj.weight', shape: [8, 3, 2, 2, 2], role: 'conv' as const },
        { name: 'model.visual.merger.linear_fc1.weight', shape: [8, 8], role: 'linear' as const },
        { name: 'mtp.fc.weight', shape: [32, 64], role: 'linear' as const },
      ];
      const json = { ...qwen35ToHfConfig(DENSE), vision_config: { depth: 1, hidden_size: 8 } };
      await writeCheckpoint(dir, randomSources([...qwen35WeightSpecs(DENSE), ...extra], 'bfloat16', 1), { config: json });
      const lines: string[] = [];
      await runInspectCheckpoint(dir, (l) => lines.push(l));
      expect(lines[0]).toBe('config: qwen3_5, 4 layers (3 Gated DeltaNet, 1 gated attention), hidden 32, vocab 256');
      expect(lines).toContain('not loaded: 2 tensors of the vision tower (model.visual.*); tensorgpu runs the text model');
      expect(lines).toContain('not loaded: 1 tensors of the multi-token-prediction layer (mtp.*); tensorgpu runs the text model');
      const { model } = await loadModel(dir, { device: 'cpu', maxSequence: 8 });
      const logits = await rows(model as Qwen35Model, [1, 2, 3]);
      expect(logits.every(Number.isFinite)).toBe(true);
      model.dispose();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
