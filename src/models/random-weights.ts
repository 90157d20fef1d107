// Random-weight checkpoints in the exact Hugging Face layout (config.json, safetensors shards, index, FP8
// `weight_scale_inv` block scales) for any decoder family whose tensors a WeightSpec list describes: tests,
// benchmarks and the CLI's built-in models run with nothing to download. Each tensor's values depend only on the
// seed and its name (not on order or sharding) and are produced only when written: memory stays at one tensor.
import { encodeValues } from '../core/codecs.js';
import type { DType } from '../core/dtype.js';
import { generatorFor } from '../core/random.js';
import { toBytes } from '../ops/convert.js';
import { tensor } from '../ops/creation.js';
import { quantize } from '../ops/quantize.js';
import { writeCheckpoint } from '../formats/checkpoint-writer.js';
import type { Fp8QuantizationConfig } from './qwen3/config.js';
import { encodeSafetensors, type TensorSource } from '../formats/safetensors-writer.js';
import { Checkpoint } from '../formats/checkpoint.js';
import { SafetensorsFile } from '../formats/safetensors-reader.js';

/** fp8: linear layers in float8_e4m3fn with 128x128 block scales (the *-FP8 layout); the rest bf16. */
export type RandomWeightDType = 'float32' | 'float16' | 'bfloat16' | 'fp8';

/**
 * What a tensor is, which sets its random scale and whether FP8 checkpoints quantize it: 'linear' weights are
 * quantized, 'router' and 'lm_head' are not (as official FP8 checkpoints keep them); 'conv' taps scale by their
 * fan-in (the last dim); 'selection-bias' (LFM2's expert_bias) is always float32; 'bias' is a linear's bias.
 * 'a-log' is log(A) with A in [1, 16] and, like 'float32-norm', stored float32 as the Qwen3.5 release stores them;
 * 'experts' ([E, N, K]) scale by their fan-in K and, in FP8 checkpoints, are quantized expert by expert.
 */
export type WeightRole =
  | 'embedding'
  | 'linear'
  | 'router'
  | 'norm'
  | 'lm_head'
  | 'conv'
  | 'bias'
  | 'selection-bias'
  // Qwen3.5: zero-centred norms (the model multiplies by 1 + w), the DeltaNet's float32 gated norm, A_log and
  // dt_bias, and fused 3-D experts [E, N, K].
  | 'centered-norm'
  | 'float32-norm'
  | 'a-log'
  | 'dt-bias'
  | 'experts';

export interface WeightSpec {
  readonly name: string;
  /** As stored: a linear weight is [out_features, in_features]. */
  readonly shape: readonly number[];
  readonly role: WeightRole;
}

export interface RandomCheckpointOptions {
  dtype?: RandomWeightDType;
  seed?: number;
  /** Shard size limit in bytes (default: a single model.safetensors). */
  shardBytes?: number;
  /** Extra files to write next to the weights (tokenizer.json, tokenizer_config.json, ...). */
  extraFiles?: Record<string, string>;
  /**
   * Scale the output projection so the logits spread like a trained model's (std OUTPUT_LOGIT_STD) rather than
   * being dominated by one token: the built-in presets' choice, off by default so every other checkpoint (and the
   * reference fixtures written from them) keeps its values. See outputSpreadValues.
   */
  outputSpread?: boolean;
}

/** The quantization_config FP8 checkpoints carry (128x128 blocks, dynamic activations). */
export const FP8_BLOCK_QUANTIZATION: Fp8QuantizationConfig = {
  method: 'fp8',
  format: 'float8_e4m3fn',
  weightBlockSize: [128, 128],
  activationScheme: 'dynamic',
  modulesToNotConvert: [],
};

/** A config as a checkpoint of this weight dtype saves it: torch_dtype, and FP8's quantization_config. */
export function savedConfig<C extends { readonly torchDtype?: DType; readonly quantization?: Fp8QuantizationConfig }>(config: C, dtype: RandomWeightDType): C {
  return { ...config, torchDtype: dtype === 'fp8' ? 'bfloat16' : dtype, quantization: dtype === 'fp8' ? FP8_BLOCK_QUANTIZATION : undefined };
}

/**
 * Uniform values (as PyTorch's default Linear init draws them) with the scale a trained model keeps: unit variance
 * through linears and embeddings, norms near 1, biases small. Uniform costs one draw a value, which matters for
 * the tens of millions of values of a real vocabulary's embedding.
 */
export function randomValues(spec: WeightSpec, seed: number): Float32Array {
  const g = generatorFor(seed, spec.name);
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  const fanIn = spec.role === 'conv' || spec.role === 'experts' ? spec.shape[spec.shape.length - 1] : spec.shape[1];
  if (spec.role === 'a-log') {
    for (let i = 0; i < n; i++) out[i] = Math.log(1 + 15 * g.uniform());
    return out;
  }
  const [center, std] =
    spec.role === 'norm' || spec.role === 'float32-norm' || spec.role === 'dt-bias'
      ? [1, 0.1]
      : spec.role === 'embedding'
        ? [0, 1]
        : spec.role === 'bias' || spec.role === 'selection-bias' || spec.role === 'centered-norm'
          ? [0, 0.1]
          : [0, 1 / Math.sqrt(fanIn)];
  const width = 2 * Math.sqrt(3) * std; // uniform on [-w/2, w/2) has this standard deviation
  for (let i = 0; i < n; i++) out[i] = center + width * (g.uniform() - 0.5);
  return out;
}

/** The logits' standard deviation `outputSpread` aims at: softmax at temperature 1 stays spread over many tokens. */
export const OUTPUT_LOGIT_STD = 2.5;

/** The final norm's names (LFM2 calls its final norm embedding_norm; Qwen3.5 nests the text model). */
const FINAL_NORMS = new Set(['model.norm.weight', 'model.embedding_norm.weight', 'model.language_model.norm.weight']);

/**
 * `outputSpread`'s values for a tensor, or undefined to keep randomValues'. The logits are the final norm's output
 * (RMS ~1 per element times its weight) dotted with a row of the output matrix:
 * - an untied lm_head (std 1/sqrt(hidden)) gives logits of std ~1, too flat for greedy decoding to look like text
 *   and for temperature to matter, so it grows to std OUTPUT_LOGIT_STD/sqrt(hidden);
 * - a tied embedding (std 1) gives logits of std ~sqrt(hidden), and the input token's own row, still the largest
 *   part of the residual stream, has a logit of ~hidden: the model repeats one token. Shrinking the embedding would
 *   leave the attention layers' context average to pick one token whatever the input, so instead the final norm's
 *   weight becomes zero-mean with std OUTPUT_LOGIT_STD/sqrt(hidden): random signs cancel the self-match
 *   (sum_i w_i e_i^2 has mean 0) and the logits get std ~OUTPUT_LOGIT_STD, each token's next one a random function
 *   of it, as with an untied head.
 */
function outputSpreadValues(spec: WeightSpec, tied: boolean, seed: number): Float32Array | undefined {
  if (spec.role === 'lm_head') {
    const v = randomValues(spec, seed);
    for (let i = 0; i < v.length; i++) v[i] *= OUTPUT_LOGIT_STD;
    return v;
  }
  if (!tied || !FINAL_NORMS.has(spec.name) || (spec.role !== 'norm' && spec.role !== 'centered-norm')) return undefined;
  // A bias-role draw is zero-mean with std 0.1; a centred norm stores w - 1 for a multiplier w.
  const v = randomValues({ ...spec, role: 'bias' }, seed);
  const factor = OUTPUT_LOGIT_STD / Math.sqrt(spec.shape[0]) / 0.1;
  const offset = spec.role === 'centered-norm' ? -1 : 0;
  for (let i = 0; i < v.length; i++) v[i] = v[i] * factor + offset;
  return v;
}

/** Roles stored float32 whatever the checkpoint's dtype. */
const FLOAT32_ROLES: readonly WeightRole[] = ['selection-bias', 'float32-norm', 'a-log'];

function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Each spec as a lazily produced tensor source in the checkpoint dtype (FP8 linears with their block scales). */
export function randomSources(specs: readonly WeightSpec[], dtype: RandomWeightDType, seed: number, outputSpread = false): [string, TensorSource][] {
  const out: [string, TensorSource][] = [];
  const plain: DType = dtype === 'fp8' ? 'bfloat16' : dtype;
  const tied = !specs.some((s) => s.role === 'lm_head');
  for (const spec of specs) {
    const values = (): Float32Array => (outputSpread && outputSpreadValues(spec, tied, seed)) || randomValues(spec, seed);
    if (dtype === 'fp8' && spec.role === 'linear') {
      // Quantized once, on the CPU backend with the library's own quantize (the GPU path is tested against it).
      let cached: { data: Uint8Array; scale: Uint8Array } | undefined;
      const quantized = async () => {
        if (!cached) {
          const x = tensor(values(), { device: 'cpu' }).reshape([...spec.shape]);
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
    const stored: DType = FLOAT32_ROLES.includes(spec.role) ? 'float32' : plain;
    out.push([spec.name, { dtype: stored, shape: spec.shape, bytes: () => bytesOf(encodeValues(stored, values())) }]);
  }
  return out;
}

/** Writes the specs' random tensors and config.json to dir; returns the weight file names. */
export async function writeRandomCheckpoint(
  dir: string,
  specs: readonly WeightSpec[],
  config: Record<string, unknown>,
  options: RandomCheckpointOptions = {},
): Promise<string[]> {
  return writeCheckpoint(dir, randomSources(specs, options.dtype ?? 'bfloat16', options.seed ?? 0, options.outputSpread), {
    config,
    shardBytes: options.shardBytes,
    extraFiles: options.extraFiles,
  });
}

/** The specs' random tensors as a checkpoint in memory (one safetensors file, no file system): for pages and tests. */
export async function randomCheckpointInMemory(
  specs: readonly WeightSpec[],
  config: Record<string, unknown>,
  options: Pick<RandomCheckpointOptions, 'dtype' | 'seed' | 'outputSpread'> = {},
): Promise<Checkpoint> {
  const bytes = await encodeSafetensors(randomSources(specs, options.dtype ?? 'bfloat16', options.seed ?? 0, options.outputSpread), { format: 'pt' });
  return Checkpoint.fromFiles('memory', config, [await SafetensorsFile.fromBytes(bytes)]);
}
