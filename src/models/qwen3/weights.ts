// Qwen3 / Qwen3-MoE weights on a device, arranged for the forward (models/layers/weights.ts): linear weights as
// stored ([out, in], FP8 with their scales), q|k|v stacked, each MoE layer's experts stacked into [E, 2I, H] gate|up
// and [E, H, I] down tensors so one dispatch serves every selected expert, the dense MLP's gate and up fused.
import type { Tensor } from '../../core/tensor.js';
import type { Checkpoint, Weight } from '../../formats/checkpoint.js';
import { isMoeLayer, type Qwen3Config } from './config.js';
import {
  attentionTensors,
  mlpTensors,
  weightParts,
  WeightLoader,
  type AttentionWeights,
  type DenseMlpWeights,
  type MoeWeights,
  type WeightLoadingOptions,
} from '../layers/weights.js';

export type { AttentionWeights, DenseMlpWeights, MoeWeights, WeightLoadingOptions };

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

/** Every tensor a weight set holds (for disposal and memory accounting). */
export function weightTensors(w: Qwen3Weights): Tensor[] {
  const out: Tensor[] = [w.embedTokens, w.norm, ...(w.lmHead.data === w.embedTokens ? [] : weightParts(w.lmHead))];
  for (const l of w.layers) out.push(l.inputNorm, l.postAttentionNorm, ...attentionTensors(l.attention), ...mlpTensors(l.mlp));
  return out;
}

export function disposeWeights(w: Qwen3Weights): void {
  for (const t of weightTensors(w)) t.dispose();
}

export async function loadQwen3Weights(ck: Checkpoint, config: Qwen3Config, options: WeightLoadingOptions = {}): Promise<Qwen3Weights> {
  const load = new WeightLoader(ck, options);
  try {
    const embedTokens = await load.plain('model.embed_tokens.weight');
    const layers: LayerWeights[] = [];
    for (let i = 0; i < config.numHiddenLayers; i++) {
      const p = `model.layers.${i}`;
      const a = `${p}.self_attn`;
      const attention = await load.attention({
        q: `${a}.q_proj`,
        k: `${a}.k_proj`,
        v: `${a}.v_proj`,
        o: `${a}.o_proj`,
        qNorm: `${a}.q_norm.weight`,
        kNorm: `${a}.k_norm.weight`,
      });
      let mlp: DenseMlpWeights | MoeWeights;
      if (config.moe && isMoeLayer(config, i)) {
        // The router stays in high precision, as in the official FP8 checkpoints.
        const router = await load.linear(`${p}.mlp.gate`, false);
        const experts = await load.experts(config.moe.numExperts, (e) => {
          const x = `${p}.mlp.experts.${e}`;
          return { gate: `${x}.gate_proj`, up: `${x}.up_proj`, down: `${x}.down_proj` };
        });
        mlp = { kind: 'moe', router, ...experts };
      } else {
        mlp = await load.denseMlp(`${p}.mlp.gate_proj`, `${p}.mlp.up_proj`, `${p}.mlp.down_proj`);
      }
      layers.push({
        inputNorm: await load.plain(`${p}.input_layernorm.weight`),
        postAttentionNorm: await load.plain(`${p}.post_attention_layernorm.weight`),
        attention,
        mlp,
      });
    }
    const norm = await load.plain('model.norm.weight');
    const lmHead = config.tieWordEmbeddings ? { data: embedTokens } : await load.linear('lm_head', false);
    return { embedTokens, layers, norm, lmHead };
  } catch (e) {
    load.release();
    throw e;
  }
}
