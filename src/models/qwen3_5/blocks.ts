// Qwen3.5 / Qwen3.5-MoE's layers for the shared decoder forward: h + mixer(input_layernorm(h)) with the mixer a
// Gated DeltaNet or a gated full attention, over the model's contiguous cache or a paged pool (KV pages for the
// attention layers, state slots for the DeltaNet layers); then the dense or MoE feed-forward after
// post_attention_layernorm. Training's blocks are training.ts.
import type { Tensor } from '../../core/tensor.js';
import { tidy } from '../../core/scope.js';
import type { Weight } from '../../formats/checkpoint.js';
import { attentionInputs } from '../../ops/attention-inputs.js';
import { gatedDeltaNet, type GatedDeltaNetBatch, type GatedDeltaNetGeometry, type GatedDeltaNetState } from '../../ops/gated-delta-net.js';
import { attention, rmsNorm } from '../../ops/nn.js';
import type { PagedIndex } from '../../ops/paged-cache.js';
import { cat, narrow, reshape } from '../../ops/shape-ops.js';
import { project, type Routing } from '../layers/blocks.js';
import type { CacheRows, DecoderBlocks, PagedBatch, PagedDecoderBlocks } from '../layers/decoder-blocks.js';
import type { PagedKvPool } from '../layers/paged-kv.js';
import type { DecoderTrainingBlocks, TrainableDecoderBlocks } from '../layers/training-blocks.js';
import type { Qwen35Config } from './config.js';
import { deltaNetWidths } from './layout.js';
import type { Qwen35Cache } from './model.js';
import type { DeltaNetStateSlots } from './state-slots.js';
import { qwen35TrainingBlocks } from './training.js';
import type { DeltaNetWeights, GatedAttentionWeights, Qwen35Weights } from './weights.js';

export const deltaNetGeometry = (c: Qwen35Config): GatedDeltaNetGeometry => ({
  keyHeads: c.linear.numKeyHeads,
  valueHeads: c.linear.numValueHeads,
  keyDim: c.linear.keyHeadDim,
  valueDim: c.linear.valueHeadDim,
  convKernel: c.linear.convKernel,
});

/** x . W^T for a weight stacked by rows, or its parts concatenated along the output (stored FP8 blocks that straddle). */
function projectStacked(x: Tensor, w: Weight | readonly Weight[]): Tensor {
  return 'data' in w
    ? project(x, w as Weight)
    : cat(
        (w as readonly Weight[]).map((p) => project(x, p)),
        1,
      );
}

export class Qwen35Blocks implements DecoderBlocks<Qwen35Cache>, PagedDecoderBlocks, TrainableDecoderBlocks {
  readonly embedTokens: Tensor;
  readonly numLayers: number;
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Weight;
  /** Each layer's index among the layers of its kind (its KV pool, or its DeltaNet state pool). */
  private readonly kindIndex: readonly number[];

  constructor(
    readonly config: Qwen35Config,
    readonly weights: Qwen35Weights,
    readonly rope: { readonly cos: Tensor; readonly sin: Tensor },
    readonly routing: Routing | undefined,
  ) {
    ({ embedTokens: this.embedTokens, norm: this.norm, lmHead: this.lmHead } = weights);
    this.numLayers = config.numHiddenLayers;
    this.eps = config.rmsNormEps;
    const seen: Record<string, number> = {};
    this.kindIndex = config.layerTypes.map((t) => (seen[t] = (seen[t] ?? -1) + 1));
  }

  feedForward(i: number) {
    return { norm: this.weights.layers[i].postNorm, weights: this.weights.layers[i].mlp };
  }

  mix(h: Tensor, i: number, cache: Qwen35Cache, { start, position }: CacheRows): Tensor {
    return tidy(() => {
      const layer = this.weights.layers[i];
      const x = rmsNorm(h, layer.inputNorm, this.eps);
      const m = layer.mixer;
      if (m.kind === 'linear_attention') return this.deltaNet(x, h, m, cache.states[i]!);
      return this.gatedAttention(x, h, m, cache.keys[i]!, cache.values[i]!, { start, position });
    });
  }

  /**
   * Layer i over a paged pool for a batch of sequences (their rows consecutive): attention through the page
   * tables, a DeltaNet layer over every sequence's rows with that sequence's state slot.
   */
  mixPaged(h: Tensor, i: number, pool: PagedKvPool, { pages, slots, stateSegments }: PagedBatch): Tensor {
    const states = pool.states as DeltaNetStateSlots;
    return tidy(() => {
      const layer = this.weights.layers[i];
      const x = rmsNorm(h, layer.inputNorm, this.eps);
      const m = layer.mixer;
      const k = this.kindIndex[i];
      if (m.kind === 'full_attention') return this.gatedAttention(x, h, m, pool.keys[k], pool.values[k], { pages });
      // One sequence of several rows (a prefill chunk) runs as the contiguous cache does (the chunked form for long
      // chunks); decode rows are one dispatch over every sequence's slot, the slots read from the segment table on
      // the device, so a captured step replays for whichever sequences (and padding rows' scratch slot) it is fed.
      if (slots.length === 1 && slots[0].rows > 1) return this.deltaNet(x, h, m, states.state(k, slots[0].sequence.stateSlot!));
      // (A captured step's padding rows hold no slot: its table names the scratch slot, and only the table is read.)
      const ids = slots.map((s) => s.sequence.stateSlot);
      const batch = { rows: slots.map((s) => s.rows), slots: ids.every((k) => k !== undefined) ? ids : undefined, index: stateSegments };
      return this.deltaNet(x, h, m, { conv: states.conv[k], recurrent: states.recurrent[k] }, batch);
    });
  }

  training(): DecoderTrainingBlocks {
    return qwen35TrainingBlocks(this);
  }

  /**
   * h + out_proj(gated norm(delta rule(conv(qkv)))) from one stacked projection; with a batch, `state` holds the
   * pools and each sequence's rows continue its slot.
   */
  private deltaNet(x: Tensor, h: Tensor, m: DeltaNetWeights, state: GatedDeltaNetState, batch?: GatedDeltaNetBatch): Tensor {
    const c = this.config;
    const { convDim, valueDim } = deltaNetWidths(c);
    const hv = c.linear.numValueHeads;
    const proj = projectStacked(x, m.inProj);
    const inputs = {
      qkv: narrow(proj, 1, 0, convDim),
      z: narrow(proj, 1, convDim, valueDim),
      b: narrow(proj, 1, convDim + valueDim, hv),
      a: narrow(proj, 1, convDim + valueDim + hv, hv),
    };
    const y = gatedDeltaNet(
      inputs,
      { conv: m.conv, aLog: m.aLog, dtBias: m.dtBias, norm: m.norm },
      state,
      { ...deltaNetGeometry(c), eps: c.rmsNormEps },
      batch,
    );
    return project(y, m.outProj, h);
  }

  /**
   * h + o_proj(attention(q, k, v) * sigmoid(gate)) with q/k norm, partial RoPE and the cache write in one kernel: at
   * the cache rows from `start` (or the device position), or over a paged pool with every row's position and page
   * table from the batch index.
   */
  private gatedAttention(
    x: Tensor,
    h: Tensor,
    m: GatedAttentionWeights,
    keys: Tensor,
    values: Tensor,
    at: { start: number; position?: Tensor } | { pages: PagedIndex },
  ): Tensor {
    const c = this.config;
    const s = x.shape[0];
    const d = c.headDim;
    const qkvWidth = (c.numAttentionHeads + 2 * c.numKeyValueHeads) * d;
    const proj = projectStacked(x, m.qkvg);
    const gate = narrow(proj, 1, qkvWidth, c.numAttentionHeads * d);
    const { pages, start = 0, position } = 'pages' in at ? { pages: at.pages } : { ...at, pages: undefined };
    const q = attentionInputs(narrow(proj, 1, 0, qkvWidth), {
      heads: c.numAttentionHeads,
      kvHeads: c.numKeyValueHeads,
      headDim: d,
      qNorm: m.qNorm,
      kNorm: m.kNorm,
      eps: c.rmsNormEps,
      cos: this.rope.cos,
      sin: this.rope.sin,
      keys,
      values,
      position: position ?? start,
      pages,
    });
    const attn = pages
      ? attention(q, keys, values, { pages, gate })
      : position
        ? attention(q, keys, values, { causal: true, queryOffset: position, gate })
        : attention(q, narrow(keys, 0, 0, start + s), narrow(values, 0, 0, start + s), { causal: true, queryOffset: start, gate });
    return project(reshape(attn, [s, c.numAttentionHeads * d]), m.o, h);
  }
}
