// The LFM2 / LFM2-MoE forward (transformers' Lfm2Model / Lfm2MoeModel) from the shared decoder blocks: each layer is
// h = x + op(operator_norm(x)) with op a gated short conv or GQA attention (q/k layernorm, RoPE), then
// h + feed_forward(ffn_norm(h)), dense SwiGLU (w2(silu(w1 x) * w3 x)) or MoE with LFM2's sigmoid router (top-k of
// sigmoid + expert_bias, weights / (sum + 1e-6) * routed_scaling_factor). The conv state lives on the device and
// its kernel updates it, so a decode step is the same dispatches at every position and is captured like Qwen3's.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Lfm2Config } from './config.js';
import { zeros } from '../../ops/creation.js';
import { linear } from '../../ops/matmul.js';
import { rmsNorm } from '../../ops/nn.js';
import { shortConv } from '../../ops/short-conv.js';
import { keep, tidy } from '../../core/scope.js';
import type { ModelCache, MoeMode } from '../causal-lm.js';
import { attentionBlock, weightScaleOptions, type DecoderStack, type Routing } from '../layers/blocks.js';
import { attentionKvRows, DecoderModel } from '../layers/decoder-model.js';
import { lfm2WeightTensors, type Lfm2Weights, type ShortConvWeights } from './weights.js';

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

  dispose(): void {
    for (const t of [...this.keys, ...this.values, ...this.convStates]) t?.dispose();
  }
}

export class Lfm2Model extends DecoderModel<Lfm2Cache> {
  /** The MoE router (undefined for dense models). */
  readonly routing: Routing | undefined;

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
  }

  newCache(): Lfm2Cache {
    return new Lfm2Cache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  /** h + op(operator_norm(h)), op the short conv or attention; then the dense or MoE feed-forward after ffn_norm. */
  protected stack(cache: Lfm2Cache): DecoderStack {
    const c = this.config;
    const w = this.weights;
    const geometry = { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: c.headDim, eps: c.normEps };
    return {
      embedTokens: w.embedTokens,
      numLayers: c.numHiddenLayers,
      norm: w.norm,
      eps: c.normEps,
      lmHead: w.lmHead,
      routing: this.routing,
      mix: (h, i, start, position) =>
        tidy(() => {
          const op = w.layers[i].op;
          const x = rmsNorm(h, w.layers[i].operatorNorm, c.normEps);
          if (op.kind === 'conv') return this.conv(x, h, op.conv, cache.convStates[i]!);
          return attentionBlock(x, h, op.attention, geometry, this.rope, { keys: cache.keys[i]!, values: cache.values[i]!, start, position });
        }),
      feedForward: (i) => ({ norm: w.layers[i].ffnNorm, weights: w.layers[i].feedForward }),
    };
  }

  /** h + out_proj(C * conv(B * x)): in_proj, the conv kernel (state read and updated), out_proj with the residual. */
  private conv(x: Tensor, h: Tensor, cw: ShortConvWeights, state: Tensor): Tensor {
    const bcx = linear(x, cw.inProj.data, cw.inBias, weightScaleOptions(cw.inProj));
    const y = shortConv(bcx, cw.taps, state, cw.tapsBias);
    return linear(y, cw.outProj.data, cw.outBias, { ...weightScaleOptions(cw.outProj), residual: h });
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
