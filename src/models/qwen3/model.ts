// The Qwen3 / Qwen3-MoE model over the shared decoder forward (its layers in blocks.ts): embeddings, RMSNorm,
// attention with Qwen3's per-head q/k norm and RoPE over a preallocated KV cache, a SwiGLU MLP or a routed MoE block
// (softmax router), lm_head. Activations are float32 whatever the weight dtype (the kernels read bf16/FP8 weights in
// place). A decode step queues its whole forward with no read back; the caller reads only the sampled token id.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Qwen3Config } from './config.js';
import { zeros } from '../../ops/creation.js';
import { keep } from '../../core/scope.js';
import type { ForwardOptions, ModelCache, MoeMode, PagedCausalLM } from '../causal-lm.js';
import type { Routing } from '../layers/blocks.js';
import { decoderForwardPaged, type PagedStepInputs } from '../layers/decoder-blocks.js';
import { kvCacheShape } from '../../core/kv-fp8.js';
import { kvBytesPerPosition, PagedKvPool, type KvGeometry, type PagedKvPoolOptions, type PagedSlot } from '../layers/paged-kv.js';
import { DecoderModel } from '../layers/decoder-model.js';
import { weightTensors, type Qwen3Weights } from './weights.js';
import { Qwen3Blocks } from './blocks.js';

export type { ForwardOptions, MoeMode };

export interface Qwen3ModelOptions {
  /** Positions the KV cache holds (prompt + generated tokens). */
  maxSequence: number;
  /** KV cache dtype (default float32). */
  kvDtype?: DType;
  moeMode?: MoeMode;
}

/** Keys and values of every layer, allocated once at [maxSequence, kvHeads, headDim]. */
export class KvCache implements ModelCache {
  readonly keys: Tensor[];
  readonly values: Tensor[];
  length = 0;

  constructor(
    config: Qwen3Config,
    readonly capacity: number,
    dtype: DType,
    device: DeviceName,
  ) {
    const shape = kvCacheShape(capacity, config.numKeyValueHeads, config.headDim, dtype);
    this.keys = Array.from({ length: config.numHiddenLayers }, () => keep(zeros(shape, { dtype, device })));
    this.values = Array.from({ length: config.numHiddenLayers }, () => keep(zeros(shape, { dtype, device })));
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t.dispose();
  }
}

export class Qwen3Model extends DecoderModel<KvCache> implements PagedCausalLM {
  /** The MoE router (undefined for dense models). */
  readonly routing: Routing | undefined;
  readonly blocks: Qwen3Blocks;

  constructor(
    readonly config: Qwen3Config,
    readonly weights: Qwen3Weights,
    readonly options: Qwen3ModelOptions,
  ) {
    super(
      weights.embedTokens,
      { headDim: config.headDim, theta: config.ropeTheta, scaling: config.ropeScaling, maxPositionEmbeddings: config.maxPositionEmbeddings },
      options.maxSequence,
      options.moeMode,
    );
    this.routing = config.moe && { topK: config.moe.numExpertsPerTok, scoring: 'softmax', normalize: config.moe.normTopkProb };
    this.blocks = new Qwen3Blocks(config, weights, this.rope, this.routing);
  }

  newCache(): KvCache {
    return new KvCache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  get kvGeometry(): KvGeometry {
    return { layers: this.config.numHiddenLayers, kvHeads: this.config.numKeyValueHeads, headDim: this.config.headDim };
  }

  kvBytesPerPosition(dtype: DType = this.options.kvDtype ?? 'float32'): number {
    return kvBytesPerPosition(this.kvGeometry, dtype);
  }

  newKvPool(options: PagedKvPoolOptions): PagedKvPool {
    return new PagedKvPool(this.kvGeometry, { dtype: this.options.kvDtype, ...options }, this.device);
  }

  forwardPaged(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool): Tensor {
    return this.forwardPagedStep(tokens, slots, pool);
  }

  forwardPagedStep(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool, inputs?: PagedStepInputs): Tensor {
    const run = decoderForwardPaged(this.blocks, tokens, slots, pool, inputs);
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer };
    return run.logits;
  }

  weightTensors(): Tensor[] {
    return weightTensors(this.weights);
  }

  protected feedForwards() {
    return this.weights.layers.map((l) => l.mlp);
  }

  protected embedding() {
    return this.weights;
  }
}
