// LFM2 / LFM2-MoE weights on a device, arranged for the forward (models/layers/weights.ts): the conv's in_proj,
// taps [H, L] and out_proj; attention with q|k|v stacked; w1|w3 fused into one gate|up weight; each MoE layer's
// experts stacked, its router and expert_bias kept in high precision. A tied lm_head is the embedding's own buffer.
import type { Tensor } from '../../core/tensor.js';
import type { Checkpoint, Weight } from '../../formats/checkpoint.js';
import { isLfm2MoeLayer, type Lfm2Config } from './config.js';
import { reshape } from '../../ops/shape-ops.js';
import { lfm2WeightSpecs } from './layout.js';
import {
  attentionTensors,
  checkLayout,
  mlpTensors,
  weightParts,
  WeightLoader,
  type AttentionWeights,
  type DenseMlpWeights,
  type MoeWeights,
  type WeightLoadingOptions,
} from '../layers/weights.js';

export interface ShortConvWeights {
  /** [3H, H]: the B, C and x projections stacked, as stored. */
  readonly inProj: Weight;
  readonly inBias?: Tensor;
  /** [H, L] (conv.conv.weight [H, 1, L] viewed). */
  readonly taps: Tensor;
  readonly tapsBias?: Tensor;
  readonly outProj: Weight;
  readonly outBias?: Tensor;
}

export interface Lfm2LayerWeights {
  readonly operatorNorm: Tensor;
  readonly ffnNorm: Tensor;
  readonly op: { readonly kind: 'conv'; readonly conv: ShortConvWeights } | { readonly kind: 'attention'; readonly attention: AttentionWeights };
  readonly feedForward: DenseMlpWeights | MoeWeights;
}

export interface Lfm2Weights {
  readonly embedTokens: Tensor;
  readonly layers: readonly Lfm2LayerWeights[];
  /** model.embedding_norm: the final norm, despite its name. */
  readonly norm: Tensor;
  readonly lmHead: Weight;
}

export function lfm2WeightTensors(w: Lfm2Weights): Tensor[] {
  const out: Tensor[] = [w.embedTokens, w.norm, ...(w.lmHead.data === w.embedTokens ? [] : weightParts(w.lmHead))];
  for (const l of w.layers) {
    out.push(l.operatorNorm, l.ffnNorm, ...mlpTensors(l.feedForward));
    if (l.op.kind === 'attention') out.push(...attentionTensors(l.op.attention));
    else {
      const c = l.op.conv;
      out.push(...weightParts(c.inProj), c.taps, ...weightParts(c.outProj), ...[c.inBias, c.tapsBias, c.outBias].filter((t): t is Tensor => t !== undefined));
    }
  }
  return out;
}

export async function loadLfm2Weights(ck: Checkpoint, config: Lfm2Config, options: WeightLoadingOptions = {}): Promise<Lfm2Weights> {
  checkLayout(ck, lfm2WeightSpecs(config));
  const load = new WeightLoader(ck, options);
  try {
    const embedTokens = await load.plain('model.embed_tokens.weight');
    const layers: Lfm2LayerWeights[] = [];
    for (let i = 0; i < config.numHiddenLayers; i++) {
      const p = `model.layers.${i}`;
      let op: Lfm2LayerWeights['op'];
      if (config.layerTypes[i] === 'conv') {
        const bias = (name: string) => (config.convBias ? load.plain(name) : Promise.resolve(undefined));
        const inProj = await load.linear(`${p}.conv.in_proj`);
        const inBias = await bias(`${p}.conv.in_proj.bias`);
        const stored = await load.plain(`${p}.conv.conv.weight`);
        const taps = load.adopt(reshape(stored, [stored.shape[0], stored.shape[stored.ndim - 1]]));
        stored.dispose(); // the [H, L] view holds the storage
        const tapsBias = await bias(`${p}.conv.conv.bias`);
        const outProj = await load.linear(`${p}.conv.out_proj`);
        const outBias = await bias(`${p}.conv.out_proj.bias`);
        op = { kind: 'conv', conv: { inProj, inBias, taps, tapsBias, outProj, outBias } };
      } else {
        const a = `${p}.self_attn`;
        const attention = await load.attention({
          q: `${a}.q_proj`,
          k: `${a}.k_proj`,
          v: `${a}.v_proj`,
          o: `${a}.out_proj`,
          qNorm: `${a}.q_layernorm.weight`,
          kNorm: `${a}.k_layernorm.weight`,
        });
        op = { kind: 'attention', attention };
      }
      const ff = `${p}.feed_forward`;
      let feedForward: DenseMlpWeights | MoeWeights;
      if (config.moe && isLfm2MoeLayer(config, i)) {
        const moe = config.moe;
        // Router and selection bias stay in high precision (the bias in float32: it only ranks, but finely).
        const router = await load.linear(`${ff}.gate`, false);
        const selectionBias = moe.useExpertBias ? await load.plain(`${ff}.expert_bias`, 'float32') : undefined;
        const experts = await load.experts(moe.numExperts, (e) => ({
          gate: `${ff}.experts.${e}.w1`,
          up: `${ff}.experts.${e}.w3`,
          down: `${ff}.experts.${e}.w2`,
        }));
        feedForward = { kind: 'moe', router, selectionBias, ...experts };
      } else {
        feedForward = await load.denseMlp(`${ff}.w1`, `${ff}.w3`, `${ff}.w2`);
      }
      layers.push({ operatorNorm: await load.plain(`${p}.operator_norm.weight`), ffnNorm: await load.plain(`${p}.ffn_norm.weight`), op, feedForward });
    }
    const norm = await load.plain('model.embedding_norm.weight');
    const lmHead = config.tieWordEmbeddings ? { data: embedTokens } : await load.linear('lm_head', false);
    return { embedTokens, layers, norm, lmHead };
  } catch (e) {
    load.release();
    throw e;
  }
}
