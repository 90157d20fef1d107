// The Qwen3 / Qwen3-MoE forward from the shared decoder blocks (models/layers/blocks.ts): embeddings, RMSNorm,
// attention with Qwen3's per-head q/k norm and RoPE over a preallocated KV cache, a SwiGLU MLP or a routed MoE block
// (softmax router), lm_head. Activations are float32 whatever the weight dtype (the kernels read bf16/FP8 weights in
// place). A decode step queues its whole forward with no read back; the caller reads only the sampled token id.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Qwen3Config } from './config.js';
import { zeros } from '../../ops/creation.js';
import { rmsNorm } from '../../ops/nn.js';
import { keep, tidy } from '../../core/scope.js';
import type { ForwardOptions, ModelCache, MoeMode, PagedCausalLM } from '../causal-lm.js';
import { attentionBlock, decoderForwardPaged, pagedAttentionBlock, type DecoderStack, type Routing } from '../layers/blocks.js';
import { kvBytesPerPosition, PagedKvPool, type KvGeometry, type PagedKvPoolOptions, type PagedSlot } from '../layers/paged-kv.js';
import { DecoderModel } from '../layers/decoder-model.js';
import { weightTensors, type Qwen3Weights } from './weights.js';

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
    const shape = [capacity, config.numKeyValueHeads, config.headDim];
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
    const run = decoderForwardPaged(this.pagedStack(pool), tokens, slots, pool.pageSize);
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer };
    return run.logits;
  }

  private get geometry() {
    const c = this.config;
    return { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: c.headDim, eps: c.rmsNormEps };
  }

  /** The layers over a paged pool: only mixPaged is defined (a contiguous cache takes stack()). */
  private pagedStack(pool: PagedKvPool): DecoderStack {
    const c = this.config;
    const w = this.weights;
    return {
      ...this.stack(undefined),
      mix: () => {
        throw new TypeError('Qwen3Model: this stack runs over a paged pool (mixPaged)');
      },
      mixPaged: (h, i, pages) =>
        tidy(() =>
          pagedAttentionBlock(
            rmsNorm(h, w.layers[i].inputNorm, c.rmsNormEps),
            h,
            w.layers[i].attention,
            this.geometry,
            this.rope,
            { keys: pool.keys[i], values: pool.values[i] },
            pages,
          ),
        ),
    };
  }

  /** h + o_proj(attention(input_layernorm(h))), then the MLP or MoE block after post_attention_layernorm. */
  protected stack(kv: KvCache | undefined): DecoderStack {
    const c = this.config;
    const w = this.weights;
    const geometry = this.geometry;
    return {
      embedTokens: w.embedTokens,
      numLayers: c.numHiddenLayers,
      norm: w.norm,
      eps: c.rmsNormEps,
      lmHead: w.lmHead,
      routing: this.routing,
      mix: (h, i, start, position) =>
        tidy(() =>
          attentionBlock(rmsNorm(h, w.layers[i].inputNorm, c.rmsNormEps), h, w.layers[i].attention, geometry, this.rope, {
            keys: kv!.keys[i],
            values: kv!.values[i],
            start,
            position,
          }),
        ),
      feedForward: (i) => ({ norm: w.layers[i].postAttentionNorm, weights: w.layers[i].mlp }),
    };
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
