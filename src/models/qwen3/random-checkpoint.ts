// Random-weight Qwen3 / Qwen3-MoE checkpoints in the exact Hugging Face layout (config.json, safetensors shards,
// index, FP8 `weight_scale_inv` block scales), for tests, benchmarks and the CLI's built-in default model, so
// nothing has to be downloaded. Each tensor's values depend only on the seed and its name (not on order or
// sharding), and are produced only when written: memory stays at one tensor.
import { encodeValues } from '../../core/codecs.js';
import type { DType } from '../../core/dtype.js';
import { generatorFor } from '../../core/random.js';
import { toBytes } from '../../ops/convert.js';
import { tensor } from '../../ops/creation.js';
import { quantize } from '../../ops/quantize.js';
import { writeCheckpoint } from '../../io/checkpoint-writer.js';
import { toHfConfig, type Qwen3Config } from '../../io/hf-config.js';
import type { TensorSource } from '../../io/safetensors-writer.js';
import { qwen3WeightSpecs, type WeightSpec } from './layout.js';

/** fp8: linear layers in float8_e4m3fn with 128x128 block scales (the Qwen3-*-FP8 layout); the rest bf16. */
export type RandomWeightDType = 'float32' | 'float16' | 'bfloat16' | 'fp8';

export interface RandomCheckpointOptions {
  dtype?: RandomWeightDType;
  seed?: number;
  /** Shard size limit in bytes (default: a single model.safetensors). */
  shardBytes?: number;
  /** Extra files to write next to the weights (tokenizer.json, tokenizer_config.json, ...). */
  extraFiles?: Record<string, string>;
}

const QWEN3_TOKENS = { vocabSize: 151936, bosTokenId: 151643, eosTokenIds: [151645, 151643] };

const COMMON = {
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 4096,
  attentionBias: false,
  torchDtype: 'bfloat16' as DType,
  ...QWEN3_TOKENS,
};

/**
 * Small configs with the real Qwen3 vocabulary (so the real tokenizer works with them). Hidden 128 keeps the
 * 151936-row embedding and lm_head (most of the weights here) cheap; the MoE intermediate size stays 128 so the
 * experts can be quantized to 128x128 FP8 blocks (`--dtype fp8`).
 */
export const QWEN3_PRESETS: Readonly<Record<string, Qwen3Config>> = {
  'qwen3-moe-tiny': {
    ...COMMON,
    modelType: 'qwen3_moe',
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 4,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    tieWordEmbeddings: false,
    moe: { numExperts: 32, numExpertsPerTok: 4, moeIntermediateSize: 128, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
  },
  'qwen3-tiny': {
    ...COMMON,
    modelType: 'qwen3',
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 4,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    tieWordEmbeddings: true,
  },
};

/**
 * Uniform values (as PyTorch's default Linear init draws them) with the scale a trained model keeps: unit variance
 * through linears and embeddings, norms near 1. Uniform costs one draw a value, which matters for the 39M-value
 * embedding of the real Qwen3 vocabulary.
 */
function randomValues(spec: WeightSpec, seed: number): Float32Array {
  const g = generatorFor(seed, spec.name);
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  const [center, std] = spec.role === 'norm' ? [1, 0.1] : [0, spec.role === 'embedding' ? 1 : 1 / Math.sqrt(spec.shape[1])];
  const width = 2 * Math.sqrt(3) * std; // uniform on [-w/2, w/2) has this standard deviation
  for (let i = 0; i < n; i++) out[i] = center + width * (g.uniform() - 0.5);
  return out;
}

function sources(config: Qwen3Config, dtype: RandomWeightDType, seed: number): [string, TensorSource][] {
  const out: [string, TensorSource][] = [];
  const plain: DType = dtype === 'fp8' ? 'bfloat16' : dtype;
  for (const spec of qwen3WeightSpecs(config)) {
    if (dtype === 'fp8' && spec.role === 'linear') {
      // Quantized once, on the CPU backend with the library's own quantize (the GPU path is tested against it).
      let cached: { data: Uint8Array; scale: Uint8Array } | undefined;
      const quantized = async () => {
        if (!cached) {
          const x = tensor(randomValues(spec, seed), { device: 'cpu' }).reshape([...spec.shape]);
          const q = quantize(x, { granularity: 'block128' });
          cached = { data: await toBytes(q.data), scale: await toBytes(q.scale) };
          for (const t of [x, q.data, q.scale]) t.dispose();
        }
        return cached;
      };
      const [n, k] = spec.shape;
      out.push([spec.name, { dtype: 'float8_e4m3fn', shape: spec.shape, bytes: async () => (await quantized()).data }]);
      out.push([`${spec.name}_scale_inv`, { dtype: 'float32', shape: [Math.ceil(n / 128), Math.ceil(k / 128)], bytes: async () => (await quantized()).scale }]);
      continue;
    }
    out.push([spec.name, { dtype: plain, shape: spec.shape, bytes: () => bytesOf(encodeValues(plain, randomValues(spec, seed))) }]);
  }
  return out;
}

function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** The config as saved for this weight dtype (FP8 adds quantization_config, as Qwen3-*-FP8 checkpoints do). */
export function randomCheckpointConfig(config: Qwen3Config, dtype: RandomWeightDType): Qwen3Config {
  return {
    ...config,
    torchDtype: dtype === 'fp8' ? 'bfloat16' : dtype,
    quantization: dtype === 'fp8' ? { method: 'fp8', format: 'float8_e4m3fn', weightBlockSize: [128, 128], activationScheme: 'dynamic', modulesToNotConvert: [] } : undefined,
  };
}

/** Writes a random-weight checkpoint of `config` to dir; returns the weight file names. */
export async function writeRandomQwen3Checkpoint(dir: string, config: Qwen3Config, options: RandomCheckpointOptions = {}): Promise<string[]> {
  const dtype = options.dtype ?? 'bfloat16';
  const saved = randomCheckpointConfig(config, dtype);
  return writeCheckpoint(dir, sources(saved, dtype, options.seed ?? 0), {
    config: toHfConfig(saved),
    shardBytes: options.shardBytes,
    extraFiles: options.extraFiles,
  });
}
