// Qwen3 / Qwen3-MoE weights on a device, arranged for the forward: linear weights as stored ([out, in], FP8 with
// their scales), each MoE layer's experts stacked into [E, 2I, H] gate|up and [E, H, I] down tensors so one
// dispatch serves every selected expert, and the dense MLP's gate and up fused into one [2I, H] weight.
import type { DeviceName } from '../../backends/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Checkpoint, Weight } from '../../io/checkpoint.js';
import { isMoeLayer, type Qwen3Config } from '../../io/hf-config.js';
import { cat, unsqueeze } from '../../ops/shape-ops.js';

export interface AttentionWeights {
  /**
   * q, k and v stacked into one [(Hq + 2 Hkv) * D, H] weight (one GEMV per token), or the three apart when FP8
   * 128-row blocks would straddle a seam.
   */
  readonly qkv: Weight | { readonly q: Weight; readonly k: Weight; readonly v: Weight };
  readonly o: Weight;
  readonly qNorm: Tensor;
  readonly kNorm: Tensor;
}

export interface DenseMlpWeights {
  readonly kind: 'dense';
  /** [2I, H]: gate rows then up rows (or separate when FP8 blocks would straddle the seam). */
  readonly gateUp: Weight;
  readonly down: Weight;
}

export interface MoeWeights {
  readonly kind: 'moe';
  /** Router [E, H]. */
  readonly router: Weight;
  /** Stacked experts: [E, 2I, H] (gate rows then up rows of each expert) and its block scales when FP8. */
  readonly gateUp: Weight;
  /** [E, H, I]. */
  readonly down: Weight;
}

export interface LayerWeights {
  readonly inputNorm: Tensor;
  readonly postAttentionNorm: Tensor;
  readonly attention: AttentionWeights;
  readonly mlp: DenseMlpWeights | MoeWeights;
}

export interface Qwen3Weights {
  readonly embedTokens: Tensor;
  readonly layers: readonly LayerWeights[];
  readonly norm: Tensor;
  /** The untied lm_head, or the embedding itself when tied. */
  readonly lmHead: Weight;
}

export interface WeightLoadingOptions {
  device?: DeviceName;
  /** Quantize float linear weights to FP8 (128x128 blocks) at load. */
  quantize?: 'float8_e4m3fn';
  /** Convert unquantized linear weights (and norms, embeddings) to this dtype at load. */
  dtype?: DType;
  onBytes?: (bytes: number) => void;
}

/** Every tensor a weight set holds (for disposal and memory accounting). */
export function weightTensors(w: Qwen3Weights): Tensor[] {
  const of = (x: Weight) => [x.data, ...(x.scale ? [x.scale] : [])];
  const out: Tensor[] = [w.embedTokens, w.norm, ...(w.lmHead.data === w.embedTokens ? [] : of(w.lmHead))];
  for (const l of w.layers) {
    const a = l.attention;
    const qkv = 'data' in a.qkv ? of(a.qkv) : [...of(a.qkv.q), ...of(a.qkv.k), ...of(a.qkv.v)];
    out.push(l.inputNorm, l.postAttentionNorm, a.qNorm, a.kNorm, ...qkv, ...of(a.o));
    out.push(...(l.mlp.kind === 'moe' ? of(l.mlp.router) : []), ...of(l.mlp.gateUp), ...of(l.mlp.down));
  }
  return out;
}

export function disposeWeights(w: Qwen3Weights): void {
  for (const t of weightTensors(w)) t.dispose();
}

/** Concatenates weights along dim (their data, and their scales along the same dim), disposing the parts. */
function concatWeights(parts: Weight[], dim: number): Weight {
  const data = cat(parts.map((p) => p.data), dim);
  const scale = parts[0].scale ? cat(parts.map((p) => p.scale!), dim) : undefined;
  for (const p of parts) {
    p.data.dispose();
    p.scale?.dispose();
  }
  return { data, scale, recipe: parts[0].recipe };
}

/** Stacks [N, K] weights into [E, N, K] (scales into [E, ...]). */
function stackWeights(parts: Weight[]): Weight {
  const lifted = parts.map((p) => ({ data: unsqueeze(p.data, 0), scale: p.scale && unsqueeze(p.scale, 0), recipe: p.recipe }));
  for (const p of parts) {
    p.data.dispose();
    p.scale?.dispose();
  }
  return concatWeights(lifted, 0);
}

/** Gate and up fuse into one weight unless FP8 128-row blocks would straddle the seam (I not a multiple of 128). */
function canFuseRows(w: Weight, rows: number): boolean {
  return !w.scale || (w.recipe === 'block' && rows % 128 === 0) || w.recipe === 'row';
}

export async function loadQwen3Weights(ck: Checkpoint, config: Qwen3Config, options: WeightLoadingOptions = {}): Promise<Qwen3Weights> {
  const { device, onBytes, quantize } = options;
  const dtype = options.dtype;
  const loaded: Weight[] = [];
  const plain = async (name: string) => ck.load(name, { device, dtype, onBytes });
  const linear = async (prefix: string, canQuantize = true) => {
    const w = await ck.loadWeight(prefix, { device, dtype, onBytes, quantize: canQuantize ? quantize : undefined });
    loaded.push(w);
    return w;
  };
  try {
    const embedTokens = await plain('model.embed_tokens.weight');
    const layers: LayerWeights[] = [];
    for (let i = 0; i < config.numHiddenLayers; i++) {
      const p = `model.layers.${i}`;
      const q = await linear(`${p}.self_attn.q_proj`);
      const k = await linear(`${p}.self_attn.k_proj`);
      const v = await linear(`${p}.self_attn.v_proj`);
      const stackable = canFuseRows(q, config.numAttentionHeads * config.headDim) && canFuseRows(k, config.numKeyValueHeads * config.headDim);
      const attention: AttentionWeights = {
        qkv: stackable ? concatWeights([q, k, v], 0) : { q, k, v },
        o: await linear(`${p}.self_attn.o_proj`),
        qNorm: await plain(`${p}.self_attn.q_norm.weight`),
        kNorm: await plain(`${p}.self_attn.k_norm.weight`),
      };
      let mlp: DenseMlpWeights | MoeWeights;
      if (config.moe && isMoeLayer(config, i)) {
        // The router stays in high precision, as in the official FP8 checkpoints.
        const router = await linear(`${p}.mlp.gate`, false);
        const gateUps: Weight[] = [];
        const downs: Weight[] = [];
        for (let e = 0; e < config.moe.numExperts; e++) {
          const x = `${p}.mlp.experts.${e}`;
          const gate = await linear(`${x}.gate_proj`);
          const up = await linear(`${x}.up_proj`);
          if (!canFuseRows(gate, config.moe.moeIntermediateSize)) {
            throw new RangeError(`FP8 block-scaled experts need moe_intermediate_size (${config.moe.moeIntermediateSize}) to be a multiple of 128`);
          }
          gateUps.push(concatWeights([gate, up], 0));
          downs.push(await linear(`${x}.down_proj`));
        }
        mlp = { kind: 'moe', router, gateUp: stackWeights(gateUps), down: stackWeights(downs) };
      } else {
        const gate = await linear(`${p}.mlp.gate_proj`);
        const up = await linear(`${p}.mlp.up_proj`);
        if (!canFuseRows(gate, config.intermediateSize)) throw new RangeError(`FP8 block-scaled MLPs need intermediate_size (${config.intermediateSize}) to be a multiple of 128`);
        mlp = { kind: 'dense', gateUp: concatWeights([gate, up], 0), down: await linear(`${p}.mlp.down_proj`) };
      }
      layers.push({
        inputNorm: await plain(`${p}.input_layernorm.weight`),
        postAttentionNorm: await plain(`${p}.post_attention_layernorm.weight`),
        attention,
        mlp,
      });
    }
    const norm = await plain('model.norm.weight');
    const lmHead = config.tieWordEmbeddings ? { data: embedTokens } : await linear('lm_head', false);
    return { embedTokens, layers, norm, lmHead };
  } catch (e) {
    for (const w of loaded) {
      if (!w.data.isDisposed) w.data.dispose();
      if (w.scale && !w.scale.isDisposed) w.scale.dispose();
    }
    throw e;
  }
}
