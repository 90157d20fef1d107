// The LFM2 / LFM2-MoE forward (transformers' Lfm2Model / Lfm2MoeModel) from the shared decoder blocks: each layer is
// h = x + op(operator_norm(x)) with op a gated short conv or GQA attention (q/k layernorm, RoPE), then
// h + feed_forward(ffn_norm(h)), dense SwiGLU (w2(silu(w1 x) * w3 x)) or MoE with LFM2's sigmoid router (top-k of
// sigmoid + expert_bias, weights / (sum + 1e-6) * routed_scaling_factor). The conv state lives on the device and
// its kernel updates it, so a decode step is the same dispatches at every position and is captured like Qwen3's.
import type { DeviceName } from '../../backends/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Lfm2Config } from '../../io/lfm2-config.js';
import { tensor, zeros } from '../../ops/creation.js';
import { linear } from '../../ops/matmul.js';
import { rmsNorm } from '../../ops/nn.js';
import { reshape } from '../../ops/shape-ops.js';
import { shortConv } from '../../ops/short-conv.js';
import { keep, tidy } from '../../core/scope.js';
import { activeBytes, reserve, type CausalLM, type ForwardOptions, type ModelCache, type MoeMode } from '../causal-lm.js';
import { attentionBlock, decoderForward, decoderForwardPerExpert, type DecoderRun, type DecoderStack, type Routing } from '../layers/blocks.js';
import { weightParts } from '../layers/weights.js';
import { ropeTables } from '../qwen3/rope.js';
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
    const kvShape = [capacity, config.numKeyValueHeads, config.headDim];
    const attn = (i: number) => config.layerTypes[i] === 'full_attention';
    const layers = Array.from({ length: config.numHiddenLayers }, (_, i) => i);
    this.keys = layers.map((i) => (attn(i) ? keep(zeros(kvShape, { dtype, device })) : undefined));
    this.values = layers.map((i) => (attn(i) ? keep(zeros(kvShape, { dtype, device })) : undefined));
    this.convStates = layers.map((i) => (attn(i) ? undefined : keep(zeros([config.convLCache - 1, config.hiddenSize], { device }))));
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values, ...this.convStates]) t?.dispose();
  }
}

export class Lfm2Model implements CausalLM {
  readonly device: DeviceName;
  private readonly rope: { cos: Tensor; sin: Tensor };
  private readonly routing: Routing | undefined;
  moeMode: MoeMode;
  lastForward = { dispatches: 0, perLayer: 0 };

  constructor(
    readonly config: Lfm2Config,
    readonly weights: Lfm2Weights,
    readonly options: Lfm2ModelOptions,
  ) {
    this.device = weights.embedTokens.device;
    this.moeMode = options.moeMode ?? 'fused';
    const c = config;
    const tables = ropeTables(c.headDim, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings, options.maxSequence);
    const table = (values: Float32Array) => keep(tidy(() => reshape(tensor(values, { device: this.device }), [tables.positions, tables.half])));
    this.rope = { cos: table(tables.cos), sin: table(tables.sin) };
    const moe = c.moe;
    this.routing = moe && { topK: moe.numExpertsPerTok, scoring: 'sigmoid', normalize: moe.normTopkProb, normalizeEps: 1e-6, scale: moe.routedScalingFactor };
  }

  newCache(): Lfm2Cache {
    return new Lfm2Cache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  async forward(tokens: Tensor, cache: ModelCache, options: ForwardOptions | boolean = {}): Promise<Tensor> {
    const o = typeof options === 'boolean' ? { lastOnly: options } : options;
    if (this.moeMode !== 'per-expert' || !this.config.moe) return this.forwardSync(tokens, cache, o);
    const lc = cache as Lfm2Cache;
    const start = reserve(lc, tokens.shape[0]);
    const run = await decoderForwardPerExpert(this.stack(lc), tokens, start, o.lastOnly ?? true);
    return this.finish(lc, start + tokens.shape[0], run);
  }

  forwardSync(tokens: Tensor, cache: ModelCache, options: ForwardOptions = {}): Tensor {
    const lc = cache as Lfm2Cache;
    const start = reserve(lc, tokens.shape[0]);
    return this.finish(lc, start + tokens.shape[0], decoderForward(this.stack(lc), tokens, start, options.position, options.lastOnly ?? true));
  }

  private finish(lc: Lfm2Cache, length: number, run: DecoderRun): Tensor {
    lc.length = length;
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer };
    return run.logits;
  }

  /** The layers over this cache: h + op(operator_norm(h)), then the dense or MoE feed-forward. */
  private stack(cache: Lfm2Cache): DecoderStack {
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
    const scaled = (w: typeof cw.inProj) => (w.scale ? { weightScale: w.scale, recipe: w.recipe } : {});
    const bcx = linear(x, cw.inProj.data, cw.inBias, scaled(cw.inProj));
    const y = shortConv(bcx, cw.taps, state, cw.tapsBias);
    return linear(y, cw.outProj.data, cw.outBias, { ...scaled(cw.outProj), residual: h });
  }

  weightTensors(): Tensor[] {
    return lfm2WeightTensors(this.weights);
  }

  activeWeightBytes(): number {
    const w = this.weights;
    const experts = w.layers.flatMap((l) => (l.feedForward.kind === 'moe' ? [...weightParts(l.feedForward.gateUp), ...weightParts(l.feedForward.down)] : []));
    const moe = this.config.moe;
    return activeBytes({ all: this.weightTensors(), embedding: w.embedTokens, tiedHead: w.lmHead.data === w.embedTokens, experts, activeFraction: moe ? moe.numExpertsPerTok / moe.numExperts : 1 });
  }

  /** Frees the RoPE tables and the weights. */
  dispose(): void {
    this.rope.cos.dispose();
    this.rope.sin.dispose();
    for (const t of this.weightTensors()) t.dispose();
  }
}
