// The Qwen3.5 / Qwen3.5-MoE text forward (transformers' Qwen3_5MoeTextModel) from the shared decoder loop: each
// layer is h + mixer(input_layernorm(h)) with the mixer a Gated DeltaNet or a gated full attention, then
// h + mlp(post_attention_layernorm(h)) with a dense SwiGLU or the MoE block (softmax router, top-k renormalised, the
// shared expert scaled by sigmoid(shared_expert_gate(x))). The norms' 1 + w is folded into their weights at load.
// A DeltaNet layer is 3 dispatches after its norm: the stacked [qkv|z|b|a] projection, gatedDeltaNet (conv, delta
// rule and gated norm, both states updated on the device) and out_proj with the residual; an attention layer is the
// stacked [q|k|v|gate] projection, attentionInputs (q/k norm, partial RoPE, the cache write), attention with the
// sigmoid gate in its epilogue, and o_proj with the residual. Only the attention layers keep a KV cache.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import { keep, tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { attentionInputs } from '../../ops/attention-inputs.js';
import {
  gatedDeltaNet,
  gatedDeltaNetStateBytes,
  newGatedDeltaNetState,
  type GatedDeltaNetBatch,
  type GatedDeltaNetGeometry,
  type GatedDeltaNetState,
} from '../../ops/gated-delta-net.js';
import { attention, rmsNorm } from '../../ops/nn.js';
import { cat, narrow, reshape } from '../../ops/shape-ops.js';
import type { ModelCache, MoeMode, PagedCausalLM } from '../causal-lm.js';
import { decoderForwardPaged, project, type DecoderStack, type Routing } from '../layers/blocks.js';
import { attentionKvRows, byLayerKind, DecoderModel } from '../layers/decoder-model.js';
import { kvBytesPerPosition, PagedKvPool, type KvGeometry, type PagedKvPoolOptions, type PagedSlot } from '../layers/paged-kv.js';
import type { PagedIndex } from '../../ops/paged-cache.js';
import { DeltaNetStateSlots } from './state-slots.js';
import { deltaNetWidths } from './layout.js';
import type { Qwen35Config } from './config.js';
import { qwen35WeightTensors, type DeltaNetWeights, type GatedAttentionWeights, type Qwen35Weights } from './weights.js';

export interface Qwen35ModelOptions {
  /** Positions the KV cache holds (prompt + generated tokens). */
  maxSequence: number;
  /** KV cache dtype (default float32). */
  kvDtype?: DType;
  moeMode?: MoeMode;
}

export const deltaNetGeometry = (c: Qwen35Config): GatedDeltaNetGeometry => ({
  keyHeads: c.linear.numKeyHeads,
  valueHeads: c.linear.numValueHeads,
  keyDim: c.linear.keyHeadDim,
  valueDim: c.linear.valueHeadDim,
  convKernel: c.linear.convKernel,
});

/** KV rows of the attention layers [capacity, kvHeads, headDim], and each DeltaNet layer's conv and recurrent state. */
export class Qwen35Cache implements ModelCache {
  /** Indexed by layer; undefined for DeltaNet layers. */
  readonly keys: (Tensor | undefined)[];
  readonly values: (Tensor | undefined)[];
  /** Indexed by layer; undefined for attention layers. */
  readonly states: (GatedDeltaNetState | undefined)[];
  length = 0;

  constructor(
    config: Qwen35Config,
    readonly capacity: number,
    dtype: DType,
    device: DeviceName,
  ) {
    const attention = config.layerTypes.map((t) => t === 'full_attention');
    ({ keys: this.keys, values: this.values } = attentionKvRows(attention, [capacity, config.numKeyValueHeads, config.headDim], dtype, device));
    const g = deltaNetGeometry(config);
    this.states = attention.map((a) => {
      if (a) return undefined;
      const s = newGatedDeltaNetState(g, device);
      return { conv: keep(s.conv), recurrent: keep(s.recurrent) };
    });
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t?.dispose();
    for (const s of this.states) {
      s?.conv.dispose();
      s?.recurrent.dispose();
    }
  }
}

/** x . W^T for a weight stacked by rows, or its parts concatenated along the output (stored FP8 blocks that straddle). */
function projectStacked(x: Tensor, w: Weight | readonly Weight[]): Tensor {
  return 'data' in w
    ? project(x, w as Weight)
    : cat(
        (w as readonly Weight[]).map((p) => project(x, p)),
        1,
      );
}

export class Qwen35Model extends DecoderModel<Qwen35Cache> implements PagedCausalLM {
  readonly routing: Routing | undefined;
  /** Each layer's index among the layers of its kind (its KV pool, or its DeltaNet state pool). */
  private readonly kindIndex: readonly number[];

  constructor(
    readonly config: Qwen35Config,
    readonly weights: Qwen35Weights,
    readonly options: Qwen35ModelOptions,
  ) {
    // Partial rotary: tables of width rotaryDim / 2 rotate the first rotaryDim dims of each head.
    super(
      weights.embedTokens,
      { headDim: config.rotaryDim, theta: config.ropeTheta, maxPositionEmbeddings: config.maxPositionEmbeddings },
      options.maxSequence,
      options.moeMode,
    );
    const moe = config.moe;
    const inStack = weights.layers.some((l) => l.mlp.kind === 'moe' && l.mlp.sharedInStack);
    this.routing = moe && { topK: moe.numExpertsPerTok, scoring: 'softmax', normalize: true, sharedExpert: inStack };
    const seen: Record<string, number> = {};
    this.kindIndex = config.layerTypes.map((t) => (seen[t] = (seen[t] ?? -1) + 1));
  }

  protected override layerKind(i: number): string {
    return this.config.layerTypes[i];
  }

  newCache(): Qwen35Cache {
    return new Qwen35Cache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  /** Bytes of one sequence's DeltaNet states (all layers): constant in the context. */
  stateBytesPerSequence(): number {
    const linear = this.config.layerTypes.filter((t) => t === 'linear_attention').length;
    return linear * gatedDeltaNetStateBytes(deltaNetGeometry(this.config));
  }

  /** The KV cache's shape: the attention layers only. */
  get kvGeometry(): KvGeometry {
    const c = this.config;
    return { layers: c.layerTypes.filter((t) => t === 'full_attention').length, kvHeads: c.numKeyValueHeads, headDim: c.headDim };
  }

  /** Bytes the KV cache takes per position (the attention layers only). */
  kvBytesPerPosition(dtype: DType = this.options.kvDtype ?? 'float32'): number {
    return kvBytesPerPosition(this.kvGeometry, dtype);
  }

  /** KV pages for the attention layers and `sequences` state slots for the DeltaNet layers. */
  newKvPool(options: PagedKvPoolOptions): PagedKvPool {
    const linear = this.config.layerTypes.length - this.kvGeometry.layers;
    const states = new DeltaNetStateSlots(linear, deltaNetGeometry(this.config), options.sequences ?? 16, this.device);
    return new PagedKvPool(this.kvGeometry, { dtype: this.options.kvDtype, ...options }, this.device, states);
  }

  forwardPaged(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool): Tensor {
    const run = decoderForwardPaged(this.pagedStack(pool, slots), tokens, slots, pool.pageSize);
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer, byKind: byLayerKind(run.layers, (i) => this.layerKind(i)) };
    return run.logits;
  }

  /**
   * The layers over a paged pool for a batch of sequences (their rows consecutive): attention through the page
   * tables, each DeltaNet layer over every sequence's rows with that sequence's state slot.
   */
  private pagedStack(pool: PagedKvPool, slots: readonly PagedSlot[]): DecoderStack {
    const c = this.config;
    const w = this.weights;
    const states = pool.states as DeltaNetStateSlots;
    return {
      ...this.stack(undefined as unknown as Qwen35Cache),
      mix: () => {
        throw new TypeError('Qwen35Model: this stack runs over a paged pool (mixPaged)');
      },
      mixPaged: (h, i, pages) =>
        tidy(() => {
          const layer = w.layers[i];
          const x = rmsNorm(h, layer.inputNorm, c.rmsNormEps);
          const m = layer.mixer;
          const k = this.kindIndex[i];
          if (m.kind === 'full_attention') return this.gatedAttention(x, h, m, pool.keys[k], pool.values[k], { pages });
          // One sequence (a prefill chunk) runs as the contiguous cache does (the chunked form for long chunks);
          // a decode batch is one dispatch over every sequence's slot.
          if (slots.length === 1) return this.deltaNet(x, h, m, states.state(k, slots[0].sequence.stateSlot!));
          const batch = { rows: slots.map((s) => s.rows), slots: slots.map((s) => s.sequence.stateSlot!) };
          return this.deltaNet(x, h, m, { conv: states.conv[k], recurrent: states.recurrent[k] }, batch);
        }),
    };
  }

  protected stack(cache: Qwen35Cache): DecoderStack {
    const c = this.config;
    const w = this.weights;
    return {
      embedTokens: w.embedTokens,
      numLayers: c.numHiddenLayers,
      norm: w.norm,
      eps: c.rmsNormEps,
      lmHead: w.lmHead,
      routing: this.routing,
      mix: (h, i, start, position) =>
        tidy(() => {
          const layer = w.layers[i];
          const x = rmsNorm(h, layer.inputNorm, c.rmsNormEps);
          const m = layer.mixer;
          if (m.kind === 'linear_attention') return this.deltaNet(x, h, m, cache.states[i]!);
          return this.gatedAttention(x, h, m, cache.keys[i]!, cache.values[i]!, { start, position });
        }),
      feedForward: (i) => ({ norm: w.layers[i].postNorm, weights: w.layers[i].mlp }),
    };
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

  weightTensors(): Tensor[] {
    return qwen35WeightTensors(this.weights);
  }

  protected feedForwards() {
    return this.weights.layers.map((l) => l.mlp);
  }

  protected embedding() {
    return this.weights;
  }
}
