// The Qwen3 / Qwen3-MoE forward from the shared decoder blocks (models/layers/blocks.ts): embeddings, RMSNorm,
// attention with Qwen3's per-head q/k norm and RoPE over a preallocated KV cache, a SwiGLU MLP or a routed MoE block
// (softmax router), lm_head. Activations are float32 whatever the weight dtype (the kernels read bf16/FP8 weights in
// place). A decode step queues its whole forward with no read back; the caller reads only the sampled token id.
import type { DeviceName } from '../../backends/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Qwen3Config } from '../../io/hf-config.js';
import { tensor, zeros } from '../../ops/creation.js';
import { rmsNorm } from '../../ops/nn.js';
import { keep, tidy } from '../../core/scope.js';
import { reshape } from '../../ops/shape-ops.js';
import { activeBytes, reserve, type CausalLM, type ForwardOptions, type ModelCache, type MoeMode } from '../causal-lm.js';
import { attentionBlock, decoderForward, decoderForwardPerExpert, type DecoderRun, type DecoderStack, type Routing } from '../layers/blocks.js';
import { ropeTables } from './rope.js';
import { disposeWeights, weightTensors, type Qwen3Weights } from './weights.js';

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

export class Qwen3Model implements CausalLM {
  readonly device: DeviceName;
  private readonly rope: { cos: Tensor; sin: Tensor };
  private readonly routing: Routing | undefined;
  moeMode: MoeMode;
  lastForward = { dispatches: 0, perLayer: 0 };

  constructor(
    readonly config: Qwen3Config,
    readonly weights: Qwen3Weights,
    readonly options: Qwen3ModelOptions,
  ) {
    this.device = weights.embedTokens.device;
    this.moeMode = options.moeMode ?? 'fused';
    const c = config;
    const tables = ropeTables(c.headDim, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings, options.maxSequence);
    const table = (values: Float32Array) => keep(tidy(() => reshape(tensor(values, { device: this.device }), [tables.positions, tables.half])));
    this.rope = { cos: table(tables.cos), sin: table(tables.sin) };
    this.routing = c.moe && { topK: c.moe.numExpertsPerTok, scoring: 'softmax', normalize: c.moe.normTopkProb };
  }

  newCache(): KvCache {
    return new KvCache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  async forward(tokens: Tensor, cache: ModelCache, options: ForwardOptions | boolean = {}): Promise<Tensor> {
    const o = typeof options === 'boolean' ? { lastOnly: options } : options;
    if (this.moeMode !== 'per-expert' || !this.config.moe) return this.forwardSync(tokens, cache, o);
    const kv = cache as KvCache;
    const start = reserve(kv, tokens.shape[0]);
    const run = await decoderForwardPerExpert(this.stack(kv), tokens, start, o.lastOnly ?? true);
    return this.finish(kv, start + tokens.shape[0], run);
  }

  forwardSync(tokens: Tensor, cache: ModelCache, options: ForwardOptions = {}): Tensor {
    const kv = cache as KvCache;
    const start = reserve(kv, tokens.shape[0]);
    return this.finish(kv, start + tokens.shape[0], decoderForward(this.stack(kv), tokens, start, options.position, options.lastOnly ?? true));
  }

  private finish(kv: KvCache, length: number, run: DecoderRun): Tensor {
    kv.length = length;
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer };
    return run.logits;
  }

  /** The layers over this cache: h + o_proj(attention(input_layernorm(h))), then the MLP or MoE block. */
  private stack(kv: KvCache): DecoderStack {
    const c = this.config;
    const w = this.weights;
    const geometry = { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: c.headDim, eps: c.rmsNormEps };
    return {
      embedTokens: w.embedTokens,
      numLayers: c.numHiddenLayers,
      norm: w.norm,
      eps: c.rmsNormEps,
      lmHead: w.lmHead,
      routing: this.routing,
      mix: (h, i, start, position) =>
        tidy(() => attentionBlock(rmsNorm(h, w.layers[i].inputNorm, c.rmsNormEps), h, w.layers[i].attention, geometry, this.rope, { keys: kv.keys[i], values: kv.values[i], start, position })),
      feedForward: (i) => ({ norm: w.layers[i].postAttentionNorm, weights: w.layers[i].mlp }),
    };
  }

  weightTensors(): Tensor[] {
    return weightTensors(this.weights);
  }

  activeWeightBytes(): number {
    const w = this.weights;
    const experts = w.layers.flatMap((l) => (l.mlp.kind === 'moe' ? [l.mlp.gateUp, l.mlp.down].flatMap((x) => [x.data, ...(x.scale ? [x.scale] : [])]) : []));
    const moe = this.config.moe;
    return activeBytes({ all: this.weightTensors(), embedding: w.embedTokens, tiedHead: w.lmHead.data === w.embedTokens, experts, activeFraction: moe ? moe.numExpertsPerTok / moe.numExperts : 1 });
  }

  /** Frees the RoPE tables and the weights. */
  dispose(): void {
    this.rope.cos.dispose();
    this.rope.sin.dispose();
    disposeWeights(this.weights);
  }
}
