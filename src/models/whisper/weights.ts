// Whisper's weights on a device, arranged for the forward (model.ts): the encoder's convs and positions, each
// attention's q, k, v, out (k with no bias: a zero bias is stacked in its place where q|k|v or k|v are fused), the
// decoder self-attention's q|k|v stacked into one projection (the cache write is fused after it), the
// cross-attention's k|v stacked (run once per audio), and proj_out tied to embed_tokens unless the config unties it.
// With `quantize`, the attention and MLP projections (stacks included, quantized whole) become FP8 128x128 blocks or
// packed 4-bit groups at load, as the text models' are; the convs, embeddings, positions, norms and proj_out stay.
import type { Tensor } from '../../core/tensor.js';
import { quantizeWeightInt4, type Checkpoint, type Weight } from '../../formats/checkpoint.js';
import { zeros } from '../../ops/creation.js';
import { quantize as quantizeTensor } from '../../ops/quantize.js';
import { cat } from '../../ops/shape-ops.js';
import { weightScaleOptions } from '../layers/blocks.js';
import { checkLayout, weightParts, WeightLoader, type WeightLoadingOptions } from '../layers/weights.js';
import type { WhisperConfig } from './config.js';
import { whisperWeightSpecs } from './layout.js';

export interface LinearWeights {
  /** [out, in] as stored. */
  readonly weight: Tensor;
  readonly bias?: Tensor;
  /** When quantized (FP8 blocks or packed 4-bit): the options linear() dequantizes `weight` with. */
  readonly quant?: ReturnType<typeof weightScaleOptions>;
}

/** A loaded Weight (quantized or not) as the forward's LinearWeights. */
function linearWeights(w: Weight, bias?: Tensor): LinearWeights {
  return { weight: w.data, bias, ...(w.scale ? { quant: weightScaleOptions(w) } : {}) };
}

/** A LinearWeights' tensors: the weight, its bias and, when quantized, its scales and zero points. */
function linearTensors(l: LinearWeights): Tensor[] {
  const q = l.quant;
  const quant = q ? [...(q.weightScale ? [q.weightScale] : []), ...(q.int4 ? [q.int4.zero, ...(q.int4.perm ? [q.int4.perm] : [])] : [])] : [];
  return [l.weight, ...(l.bias ? [l.bias] : []), ...quant];
}

export interface LayerNormWeights {
  readonly weight: Tensor;
  readonly bias: Tensor;
}

export interface EncoderLayerWeights {
  readonly selfAttnLayerNorm: LayerNormWeights;
  readonly q: LinearWeights;
  readonly k: LinearWeights;
  readonly v: LinearWeights;
  readonly out: LinearWeights;
  readonly finalLayerNorm: LayerNormWeights;
  readonly fc1: LinearWeights;
  readonly fc2: LinearWeights;
}

export interface DecoderLayerWeights {
  readonly selfAttnLayerNorm: LayerNormWeights;
  /** q|k|v stacked [3d, d] with bias [q_bias, 0, v_bias]. */
  readonly qkv: LinearWeights;
  readonly selfOut: LinearWeights;
  readonly encoderAttnLayerNorm: LayerNormWeights;
  readonly crossQ: LinearWeights;
  /** k|v stacked [2d, d] with bias [0, v_bias]: projected from the encoder output once per audio. */
  readonly crossKv: LinearWeights;
  readonly crossOut: LinearWeights;
  readonly finalLayerNorm: LayerNormWeights;
  readonly fc1: LinearWeights;
  readonly fc2: LinearWeights;
}

export interface WhisperWeights {
  readonly conv1: LinearWeights;
  readonly conv2: LinearWeights;
  /** [maxSourcePositions, d]. */
  readonly encoderPositions: Tensor;
  readonly encoderLayers: readonly EncoderLayerWeights[];
  readonly encoderLayerNorm: LayerNormWeights;
  /** [vocab, d]. */
  readonly embedTokens: Tensor;
  /** [maxTargetPositions, d]. */
  readonly decoderPositions: Tensor;
  readonly decoderLayers: readonly DecoderLayerWeights[];
  readonly decoderLayerNorm: LayerNormWeights;
  /** The embedding itself when tied. */
  readonly projOut: Tensor;
}

export function whisperWeightTensors(w: WhisperWeights): Tensor[] {
  const out: Tensor[] = [];
  const lin = (l: LinearWeights) => out.push(...linearTensors(l));
  const ln = (l: LayerNormWeights) => out.push(l.weight, l.bias);
  lin(w.conv1);
  lin(w.conv2);
  out.push(w.encoderPositions, w.embedTokens, w.decoderPositions);
  for (const l of w.encoderLayers) {
    ln(l.selfAttnLayerNorm);
    ln(l.finalLayerNorm);
    for (const x of [l.q, l.k, l.v, l.out, l.fc1, l.fc2]) lin(x);
  }
  ln(w.encoderLayerNorm);
  for (const l of w.decoderLayers) {
    for (const n of [l.selfAttnLayerNorm, l.encoderAttnLayerNorm, l.finalLayerNorm]) ln(n);
    for (const x of [l.qkv, l.selfOut, l.crossQ, l.crossKv, l.crossOut, l.fc1, l.fc2]) lin(x);
  }
  ln(w.decoderLayerNorm);
  if (w.projOut !== w.embedTokens) out.push(w.projOut);
  return out;
}

export async function loadWhisperWeights(ck: Checkpoint, config: WhisperConfig, options: WeightLoadingOptions = {}): Promise<WhisperWeights> {
  checkLayout(ck, whisperWeightSpecs(config));
  const load = new WeightLoader(ck, options);
  const d = config.dModel;
  // Weights loaded only to be stacked are released once the stack exists.
  const scratch: Tensor[] = [];
  const part = async (name: string) => {
    const t = await load.plain(name);
    scratch.push(t);
    return t;
  };
  try {
    const conv = async (p: string): Promise<LinearWeights> => ({ weight: await load.plain(`${p}.weight`), bias: await load.plain(`${p}.bias`) });
    // A projection: quantized by the loader when asked (a K int4 groups do not divide stays float).
    const linear = async (p: string, bias = true): Promise<LinearWeights> =>
      linearWeights(await load.linear(p), bias ? await load.plain(`${p}.bias`) : undefined);
    // Row blocks stacked into one projection: quantized after the stack, so FP8 blocks need not line up with seams.
    const stacked = async (prefixes: readonly string[], bias: Tensor): Promise<LinearWeights> => {
      load.adopt(bias);
      const parts: Tensor[] = [];
      for (const p of prefixes) parts.push(await part(`${p}.weight`));
      const plain = load.adopt(cat(parts, 0));
      const { quantize } = options;
      if (!quantize) return { weight: plain, bias };
      const q: Weight | undefined =
        quantize === 'int4'
          ? await quantizeWeightInt4(plain, prefixes.join('|'), options)
          : { ...quantizeTensor(plain, { dtype: quantize, granularity: 'block128' }), recipe: 'block' };
      if (!q) return { weight: plain, bias }; // a K that int4 groups do not divide: stays float
      plain.dispose();
      for (const t of weightParts(q)) load.adopt(t);
      return linearWeights(q, bias);
    };
    const layerNorm = async (p: string): Promise<LayerNormWeights> => ({ weight: await load.plain(`${p}.weight`), bias: await load.plain(`${p}.bias`) });
    const zeroBias = (like: Tensor) => {
      const t = zeros([d], { device: like.device, dtype: like.dtype });
      scratch.push(t);
      return t;
    };
    const e = 'model.encoder';
    const conv1 = await conv(`${e}.conv1`);
    const conv2 = await conv(`${e}.conv2`);
    const encoderPositions = await load.plain(`${e}.embed_positions.weight`);
    const encoderLayers: EncoderLayerWeights[] = [];
    for (let i = 0; i < config.encoderLayers; i++) {
      const p = `${e}.layers.${i}`;
      encoderLayers.push({
        selfAttnLayerNorm: await layerNorm(`${p}.self_attn_layer_norm`),
        q: await linear(`${p}.self_attn.q_proj`),
        k: await linear(`${p}.self_attn.k_proj`, false),
        v: await linear(`${p}.self_attn.v_proj`),
        out: await linear(`${p}.self_attn.out_proj`),
        finalLayerNorm: await layerNorm(`${p}.final_layer_norm`),
        fc1: await linear(`${p}.fc1`),
        fc2: await linear(`${p}.fc2`),
      });
    }
    const encoderLayerNorm = await layerNorm(`${e}.layer_norm`);
    const dec = 'model.decoder';
    const embedTokens = await load.plain(`${dec}.embed_tokens.weight`);
    const decoderPositions = await load.plain(`${dec}.embed_positions.weight`);
    const decoderLayers: DecoderLayerWeights[] = [];
    for (let i = 0; i < config.decoderLayers; i++) {
      const p = `${dec}.layers.${i}`;
      const s = `${p}.self_attn`;
      const x = `${p}.encoder_attn`;
      const qBias = await part(`${s}.q_proj.bias`);
      const qkv = await stacked([`${s}.q_proj`, `${s}.k_proj`, `${s}.v_proj`], cat([qBias, zeroBias(qBias), await part(`${s}.v_proj.bias`)], 0));
      const vBias = await part(`${x}.v_proj.bias`);
      const crossKv = await stacked([`${x}.k_proj`, `${x}.v_proj`], cat([zeroBias(vBias), vBias], 0));
      decoderLayers.push({
        selfAttnLayerNorm: await layerNorm(`${p}.self_attn_layer_norm`),
        qkv,
        selfOut: await linear(`${s}.out_proj`),
        encoderAttnLayerNorm: await layerNorm(`${p}.encoder_attn_layer_norm`),
        crossQ: await linear(`${x}.q_proj`),
        crossKv,
        crossOut: await linear(`${x}.out_proj`),
        finalLayerNorm: await layerNorm(`${p}.final_layer_norm`),
        fc1: await linear(`${p}.fc1`),
        fc2: await linear(`${p}.fc2`),
      });
      for (const t of scratch.splice(0)) t.dispose();
    }
    const decoderLayerNorm = await layerNorm(`${dec}.layer_norm`);
    const projOut = config.tieWordEmbeddings ? embedTokens : await load.plain('proj_out.weight');
    return { conv1, conv2, encoderPositions, encoderLayers, encoderLayerNorm, embedTokens, decoderPositions, decoderLayers, decoderLayerNorm, projOut };
  } catch (err) {
    for (const t of scratch) if (!t.isDisposed) t.dispose();
    load.release();
    throw err;
  }
}
