// A tiny Qwen3 / Qwen3-MoE GPTQ checkpoint written on disk in the exact published layout (qweight / qzeros / scales /
// g_idx, quantization_config with quant_method 'gptq', experts one by one), loaded by loadQwen3 without conversion:
// its logits equal those of the same weights dequantized into a float32 checkpoint on the CPU (1e-5 relative), and
// WebGPU matches the CPU (1e-4), at prefill and decode. A compressed-tensors one loads the same way.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CheckpointError, setDefaultDevice } from '../../src/index.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { writeSafetensors, type TensorSource } from '../../src/formats/safetensors-writer.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadQwen3 } from '../../src/models/qwen3/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { int4LayerTensors, int4QuantizationConfig, type Int4FixtureCase, divideScalesBy16 } from '../../tools/int4-reference/cases.js';
import { randomCodes } from '../../tools/int4-reference/int4_reference.js';
import { SMALL_QWEN3_MOE } from '../helpers/qwen3.js';
import { expectInt4MatchesFloat } from '../helpers/int4-pair.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const MOE: Qwen3Config = { ...SMALL_QWEN3_MOE, bosTokenId: 0 };
const { moe: _experts, ...denseLayers } = MOE;
const DENSE: Qwen3Config = { ...denseLayers, modelType: 'qwen3', tieWordEmbeddings: false };

const quantized = (name: string) => name.endsWith('_proj.weight');

/**
 * Writes the random float32 checkpoint's linear weights as random 4-bit codes in `format` (group 32, asymmetric),
 * and beside it the float32 checkpoint of the same weights dequantized by the port. Returns [int4 dir, float dir].
 */
async function writeInt4Pair(
  config: Qwen3Config,
  format: Omit<Int4FixtureCase, 'name' | 'seed' | 'n' | 'k'>,
  expertOrder: 'shared' | 'own' = 'own',
): Promise<[string, string]> {
  const src = mkdtempSync(join(tmpdir(), 'tensorgpu-int4-src-'));
  await writeRandomQwen3Checkpoint(src, config, { dtype: 'float32', seed: 4 });
  const ck = await Checkpoint.open(src);
  const q: [string, TensorSource][] = [];
  const f: [string, TensorSource][] = [];
  let seed = 1;
  for (const name of ck.names) {
    const e = ck.entry(name);
    const raw = new Uint8Array((await (await ck.load(name)).toArray()).buffer.slice(0));
    const plain: TensorSource = { dtype: 'float32', shape: e.shape, bytes: () => raw };
    if (!quantized(name)) {
      q.push([name, plain]);
      f.push([name, plain]);
      continue;
    }
    const [n, k] = e.shape;
    const codes = randomCodes(n, k, format.groupSize, { seed: seed++, symmetric: format.symmetric, actOrder: format.actOrder });
    if (format.actOrder) {
      // GPTQ orders a layer's columns by its input's Hessian: q, k, v share one order, and so do gate and up.
      // expertOrder 'shared': every expert of a layer has the same order too (what the fused expert kernels take).
      const named = expertOrder === 'shared' ? name.replace(/\.experts\.\d+\./, '.experts.') : name;
      const input = named.replace(/\.(q|k|v)_proj\./, '.qkv.').replace(/\.(gate|up)_proj\./, '.gate_up.');
      const key = [...input].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
      codes.gIdx = randomCodes(1, k, format.groupSize, { seed: key, symmetric: true, actOrder: true }).gIdx;
    }
    const layer = int4LayerTensors({ ...format, n, k }, codes, name.slice(0, -'.weight'.length));
    q.push(...layer.tensors);
    const w = Float32Array.from(layer.weight, (v) => v / 16); // scales ~ 2^-6..2^-3: keep activations moderate
    f.push([name, { dtype: 'float32', shape: [n, k], bytes: () => new Uint8Array(w.buffer) }]);
  }
  await ck.close();
  // The float copy's weights are the port's divided by 16: the 4-bit copy's scales are divided by 16 too (exact).
  await divideScalesBy16(q);
  const config0 = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  const qdir = mkdtempSync(join(tmpdir(), 'tensorgpu-int4-q-'));
  const fdir = mkdtempSync(join(tmpdir(), 'tensorgpu-int4-f-'));
  await writeSafetensors(join(qdir, 'model.safetensors'), q);
  await writeSafetensors(join(fdir, 'model.safetensors'), f);
  writeFileSync(join(qdir, 'config.json'), JSON.stringify({ ...config0, quantization_config: int4QuantizationConfig(format) }));
  writeFileSync(join(fdir, 'config.json'), JSON.stringify(config0));
  return [qdir, fdir];
}

const STEPS = [[3, 17, 250, 9, 41, 7], [88], [5]];

describe(`int4 checkpoints end to end ${gpu.skipReason}`, () => {
  for (const [label, config, format] of [
    ['dense Qwen3, GPTQ v1 g32 act-order', DENSE, { method: 'gptq', groupSize: 32, symmetric: false, v1: true, actOrder: true }],
    ['Qwen3-MoE, GPTQ g32 sym (experts one by one)', MOE, { method: 'gptq', groupSize: 32, symmetric: true, v1: true }],
    ['Qwen3-MoE, compressed-tensors g64 asym', MOE, { method: 'compressed-tensors', groupSize: 64, symmetric: false }],
    ['Qwen3-MoE, GPTQ g32 act-order, one g_idx per layer for all experts', MOE, { method: 'gptq', groupSize: 32, symmetric: false, v1: true, actOrder: true }],
  ] as const) {
    it(`${label}: CPU = dequantized float32 (1e-5), WebGPU = CPU (1e-4)`, async () => {
      const [qdir, fdir] = await writeInt4Pair(config, format, 'shared');
      await expectInt4MatchesFloat((dir, device) => loadQwen3(dir, { device, maxSequence: 32 }), qdir, fdir, STEPS, gpu.available);
    });
  }

  it('Qwen3-MoE, GPTQ act-order with a g_idx per expert: a CheckpointError naming g_idx (the fused kernels read one permutation)', async () => {
    const [qdir] = await writeInt4Pair(MOE, { method: 'gptq', groupSize: 32, symmetric: false, v1: true, actOrder: true }, 'own');
    const err = await loadQwen3(qdir, { device: 'cpu', maxSequence: 32 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointError);
    expect(String(err)).toMatch(/g_idx/);
  });
});
