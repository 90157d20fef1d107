// The Qwen3.5 / Qwen3.5-MoE text model (transformers' Qwen3_5MoeTextModel) over the shared decoder forward, its
// layers in blocks.ts: each layer is h + mixer(input_layernorm(h)) with the mixer a Gated DeltaNet or a gated full attention, then
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
import { gatedDeltaNetStateBytes, newGatedDeltaNetState, type GatedDeltaNetState } from '../../ops/gated-delta-net.js';
import { reserve, type ModelCache, type MoeMode, type PagedCausalLM } from '../causal-lm.js';
import type { Routing } from '../layers/blocks.js';
import { decoderForwardPaged, type PagedStepInputs } from '../layers/decoder-blocks.js';
import { runDecoder } from '../layers/decoder-forward.js';
import { project } from '../layers/blocks.js';
import { cast } from '../../ops/convert.js';
import { indexSelect } from '../../ops/index-select.js';
import { rmsNorm } from '../../ops/nn.js';
import { narrow } from '../../ops/shape-ops.js';
import { attentionKvRows, byLayerKind, DecoderModel } from '../layers/decoder-model.js';
import { kvBytesPerPosition, PagedKvPool, type KvGeometry, type PagedKvPoolOptions, type PagedSlot } from '../layers/paged-kv.js';
import { DeltaNetStateSlots } from './state-slots.js';
import type { Qwen35Config } from './config.js';
import { qwen35MtpWeightTensors, qwen35WeightTensors, type Qwen35Weights } from './weights.js';
import { MTP_PREFIX } from './layout.js';
import { Qwen35Mtp, qwen35FeedForward } from './mtp.js';
import { deltaNetGeometry, Qwen35Blocks } from './blocks.js';

export interface Qwen35ModelOptions {
  /** Positions the KV cache holds (prompt + generated tokens). */
  maxSequence: number;
  /** KV cache dtype (default float32). */
  kvDtype?: DType;
  moeMode?: MoeMode;
}

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

  stateTensors(): Tensor[] {
    return this.states.flatMap((s) => (s ? [s.conv, s.recurrent] : []));
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t?.dispose();
    for (const s of this.states) {
      s?.conv.dispose();
      s?.recurrent.dispose();
    }
  }
}

export class Qwen35Model extends DecoderModel<Qwen35Cache> implements PagedCausalLM {
  readonly routing: Routing | undefined;
  readonly blocks: Qwen35Blocks;

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
    this.blocks = new Qwen35Blocks(config, weights, this.rope, this.routing);
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

  /** KV pages for the attention layers, `sequences` state slots (and `snapshots` more) for the DeltaNet layers. */
  newKvPool(options: PagedKvPoolOptions): PagedKvPool {
    const linear = this.config.layerTypes.length - this.kvGeometry.layers;
    const states = new DeltaNetStateSlots(linear, deltaNetGeometry(this.config), options.sequences ?? 16, this.device, options.snapshots ?? 0);
    return new PagedKvPool(this.kvGeometry, { dtype: this.options.kvDtype, ...options }, this.device, states);
  }

  forwardPaged(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool): Tensor {
    return this.forwardPagedStep(tokens, slots, pool);
  }

  forwardPagedStep(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool, inputs?: PagedStepInputs): Tensor {
    const run = decoderForwardPaged(this.blocks, tokens, slots, pool, inputs);
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer, byKind: byLayerKind(run.layers, (i) => this.layerKind(i)) };
    return run.logits;
  }

  weightTensors(): Tensor[] {
    return qwen35WeightTensors(this.weights);
  }

  /**
   * The multi-token-prediction layer (speculative decoding's `mtp` drafter), or why there is none: the first
   * tensor missing from the checkpoint.
   */
  multiTokenPredictor(): Qwen35Mtp | { missing: string; mtpLayers: number } {
    if (!this.weights.mtp) return { missing: `${MTP_PREFIX}fc.weight`, mtpLayers: this.config.mtpLayers };
    this.mtp ??= new Qwen35Mtp(this, this.weights.mtp, { capacity: this.options.maxSequence, dtype: this.options.kvDtype ?? 'float32' });
    return this.mtp;
  }

  private mtp?: Qwen35Mtp;

  /**
   * The forward (fused MoE, eager) that also keeps the hidden states after the final norm at every row, float32
   * [S, hidden]: what the MTP layer reads. The logits are the plain forward's.
   */
  forwardWithHidden(tokens: Tensor, cache: ModelCache, options: { lastOnly?: boolean } = {}): { logits: Tensor; hidden: Tensor } {
    const c = cache as Qwen35Cache;
    const s = tokens.shape[0];
    const start = reserve(c, s);
    const b = this.blocks;
    let hidden: Tensor | undefined;
    const run = runDecoder(
      {
        numLayers: b.numLayers,
        embed: (t) => cast(indexSelect(b.embedTokens, 0, t), 'float32'),
        mix: (h, i) => b.mix(h, i, c, { start }),
        feedForward: (x, i) => tidy(() => qwen35FeedForward(b, x, i)),
        head: (h) => {
          hidden = keep(rmsNorm(h, b.norm, b.eps));
          return project((options.lastOnly ?? true) && s > 1 ? narrow(hidden, 0, s - 1, 1) : hidden, b.lmHead);
        },
      },
      tokens,
    );
    c.length = start + s;
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer, byKind: byLayerKind(run.layers, (i) => this.layerKind(i)) };
    return { logits: run.logits, hidden: hidden! };
  }

  override dispose(): void {
    super.dispose();
    if (this.weights.mtp) for (const t of qwen35MtpWeightTensors(this.weights.mtp)) t.dispose();
  }

  protected feedForwards() {
    return this.weights.layers.map((l) => l.mlp);
  }

  protected embedding() {
    return this.weights;
  }
}
