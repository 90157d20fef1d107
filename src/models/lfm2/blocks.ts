// LFM2 / LFM2-MoE's layers for the shared decoder forward: h + op(operator_norm(h)) with op the gated short conv
// (its state on the device, updated by its kernel) or GQA attention (q/k layernorm, RoPE) over the contiguous
// cache; then the dense or MoE feed-forward after ffn_norm (sigmoid router). Training's blocks are training.ts.
import type { Tensor } from '../../core/tensor.js';
import { tidy } from '../../core/scope.js';
import { linear } from '../../ops/matmul.js';
import { rmsNorm } from '../../ops/nn.js';
import { shortConv } from '../../ops/short-conv.js';
import { attentionBlock, weightScaleOptions, type AttentionGeometry, type Routing } from '../layers/blocks.js';
import type { CacheRows, DecoderBlocks } from '../layers/decoder-blocks.js';
import type { DecoderTrainingBlocks, TrainableDecoderBlocks } from '../layers/training-blocks.js';
import type { Lfm2Config } from './config.js';
import type { Lfm2Cache } from './model.js';
import { lfm2TrainingBlocks } from './training.js';
import type { Lfm2Weights, ShortConvWeights } from './weights.js';

export class Lfm2Blocks implements DecoderBlocks<Lfm2Cache>, TrainableDecoderBlocks {
  readonly embedTokens: Tensor;
  readonly numLayers: number;
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Lfm2Weights['lmHead'];
  readonly geometry: AttentionGeometry;

  constructor(
    readonly config: Lfm2Config,
    readonly weights: Lfm2Weights,
    readonly rope: { readonly cos: Tensor; readonly sin: Tensor },
    readonly routing: Routing | undefined,
  ) {
    ({ embedTokens: this.embedTokens, norm: this.norm, lmHead: this.lmHead } = weights);
    this.numLayers = config.numHiddenLayers;
    this.eps = config.normEps;
    this.geometry = { heads: config.numAttentionHeads, kvHeads: config.numKeyValueHeads, headDim: config.headDim, eps: config.normEps };
  }

  feedForward(i: number) {
    return { norm: this.weights.layers[i].ffnNorm, weights: this.weights.layers[i].feedForward };
  }

  mix(h: Tensor, i: number, cache: Lfm2Cache, { start, position }: CacheRows): Tensor {
    return tidy(() => {
      const l = this.weights.layers[i];
      const op = l.op;
      const x = rmsNorm(h, l.operatorNorm, this.eps);
      if (op.kind === 'conv') return conv(x, h, op.conv, cache.convStates[i]!);
      return attentionBlock(x, h, op.attention, this.geometry, this.rope, { keys: cache.keys[i]!, values: cache.values[i]!, start, position });
    });
  }

  training(): DecoderTrainingBlocks {
    return lfm2TrainingBlocks(this);
  }
}

/** h + out_proj(C * conv(B * x)): in_proj, the conv kernel (state read and updated), out_proj with the residual. */
function conv(x: Tensor, h: Tensor, cw: ShortConvWeights, state: Tensor): Tensor {
  const bcx = linear(x, cw.inProj.data, cw.inBias, weightScaleOptions(cw.inProj));
  const y = shortConv(bcx, cw.taps, state, cw.tapsBias);
  return linear(y, cw.outProj.data, cw.outBias, { ...weightScaleOptions(cw.outProj), residual: h });
}
