// The LFM2 / LFM2-MoE model (transformers' Lfm2Model / Lfm2MoeModel) over the shared decoder forward, its layers in
// blocks.ts: each layer is h = x + op(operator_norm(x)) with op a gated short conv or GQA attention (q/k layernorm,
// RoPE), then h + feed_forward(ffn_norm(h)), dense SwiGLU (w2(silu(w1 x) * w3 x)) or MoE with LFM2's sigmoid router
// (top-k of sigmoid + expert_bias, weights / (sum + 1e-6) * routed_scaling_factor). The conv state lives on the
// device and its kernel updates it, so a decode step is the same dispatches at every position and is captured like
// Qwen3's. Continuous batching (serve's BatchScheduler) runs it over a paged pool: KV pages for the attention layers,
// a conv-state slot per sequence for the conv layers (state-slots.ts).
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Lfm2Config } from './config.js';
import { zeros } from '../../ops/creation.js';
import { keep } from '../../core/scope.js';
import type { ModelCache, MoeMode, PagedCausalLM } from '../causal-lm.js';
import type { Routing } from '../layers/blocks.js';
import { decoderForwardPaged, type PagedStepInputs } from '../layers/decoder-blocks.js';
import { attentionKvRows, byLayerKind, DecoderModel } from '../layers/decoder-model.js';
import { kvBytesPerPosition, PagedKvPool, type KvGeometry, type PagedKvPoolOptions, type PagedSlot } from '../layers/paged-kv.js';
import { ConvStateSlots } from './state-slots.js';
import { lfm2WeightTensors, type Lfm2Weights } from './weights.js';
import { Lfm2Blocks } from './blocks.js';

export interface Lfm2ModelOptions {
  /** Positions the cache holds (prompt + generated tokens). */
  maxSequence: number;
  /** KV cache dtype (default float32). */
  kvDtype?: DType;
  moeMode?: MoeMode;
}

/** Keys and values of the attention layers, [maxSequence, kvHeads, headDim], and each conv layer's last L-1 Bx rows. */
export class Lfm2Cache implements ModelCache {
  /** Indexed by layer; undefined for conv layers. */
  readonly keys: (Tensor | undefined)[];
  readonly values: (Tensor | undefined)[];
  /** float32 [L-1, H] per conv layer (undefined for attention layers), zeros before the first token. */
  readonly convStates: (Tensor | undefined)[];
  length = 0;

  constructor(
    config: Lfm2Config,
    readonly capacity: number,
    dtype: DType,
    device: DeviceName,
  ) {
    const attention = config.layerTypes.map((t) => t === 'full_attention');
    ({ keys: this.keys, values: this.values } = attentionKvRows(attention, [capacity, config.numKeyValueHeads, config.headDim], dtype, device));
    this.convStates = attention.map((a) => (a ? undefined : keep(zeros([config.convLCache - 1, config.hiddenSize], { device }))));
  }

  stateTensors(): Tensor[] {
    return this.convStates.filter((t): t is Tensor => t !== undefined);
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values, ...this.convStates]) t?.dispose();
  }
}

export class Lfm2Model extends DecoderModel<Lfm2Cache> implements PagedCausalLM {
  /** The MoE router (undefined for dense models). */
  readonly routing: Routing | undefined;
  readonly blocks: Lfm2Blocks;

  constructor(
    readonly config: Lfm2Config,
    readonly weights: Lfm2Weights,
    readonly options: Lfm2ModelOptions,
  ) {
    super(
      weights.embedTokens,
      { headDim: config.headDim, theta: config.ropeTheta, scaling: config.ropeScaling, maxPositionEmbeddings: config.maxPositionEmbeddings },
      options.maxSequence,
      options.moeMode,
    );
    const moe = config.moe;
    this.routing = moe && { topK: moe.numExpertsPerTok, scoring: 'sigmoid', normalize: moe.normTopkProb, normalizeEps: 1e-6, scale: moe.routedScalingFactor };
    this.blocks = new Lfm2Blocks(config, weights, this.rope, this.routing);
  }

  newCache(): Lfm2Cache {
    return new Lfm2Cache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  protected override layerKind(i: number): string {
    return this.config.layerTypes[i];
  }

  private get convLayers(): number {
    return this.config.layerTypes.filter((t) => t !== 'full_attention').length;
  }

  /** Bytes of one sequence's conv states (all conv layers): constant in the context. */
  stateBytesPerSequence(): number {
    return this.convLayers * (this.config.convLCache - 1) * this.config.hiddenSize * 4;
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

  /** KV pages for the attention layers, `sequences` conv-state slots (and `snapshots` more) for the conv layers. */
  newKvPool(options: PagedKvPoolOptions): PagedKvPool {
    const c = this.config;
    const states = new ConvStateSlots(this.convLayers, c.convLCache - 1, c.hiddenSize, options.sequences ?? 16, this.device, options.snapshots ?? 0);
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
    return lfm2WeightTensors(this.weights);
  }

  protected feedForwards() {
    return this.weights.layers.map((l) => l.feedForward);
  }

  protected embedding() {
    return this.weights;
  }
}
