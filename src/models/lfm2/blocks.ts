// LFM2 / LFM2-MoE's layers for the shared decoder forward: h + op(operator_norm(h)) with op the gated short conv
// (its state on the device, updated by its kernel) or GQA attention (q/k layernorm, RoPE) over the contiguous
// cache; then the dense or MoE feed-forward after ffn_norm (sigmoid router). Training's blocks are training.ts.
import type { Tensor } from '../../core/tensor.js';
import { tidy } from '../../core/scope.js';
import { linear } from '../../ops/matmul.js';
import { rmsNorm } from '../../ops/nn.js';
import { shortConv, type ShortConvSegments } from '../../ops/short-conv.js';
import { attentionBlock, pagedAttentionBlock, weightScaleOptions, type AttentionGeometry, type Routing } from '../layers/blocks.js';
import type { CacheRows, DecoderBlocks, PagedBatch, PagedDecoderBlocks } from '../layers/decoder-blocks.js';
import type { PagedKvPool } from '../layers/paged-kv.js';
import type { ConvStateSlots } from './state-slots.js';
import type { DecoderTrainingBlocks, TrainableDecoderBlocks } from '../layers/training-blocks.js';
import type { Lfm2Config } from './config.js';
import type { Lfm2Cache } from './model.js';
import { lfm2TrainingBlocks } from './training.js';
import type { Lfm2Weights, ShortConvWeights } from './weights.js';

export class Lfm2Blocks implements DecoderBlocks<Lfm2Cache>, PagedDecoderBlocks, TrainableDecoderBlocks {
  readonly embedTokens: Tensor;
  readonly numLayers: number;
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Lfm2Weights['lmHead'];
  readonly geometry: AttentionGeometry;
  /** Each layer's index among the layers of its kind (its KV pool, or its conv state pool). */
  private readonly kindIndex: readonly number[];

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
    const seen: Record<string, number> = {};
    this.kindIndex = config.layerTypes.map((t) => (seen[t] = (seen[t] ?? -1) + 1));
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

  /**
   * Layer i over a paged pool for a batch of sequences (their rows consecutive): attention through the page tables,
   * a conv layer over every sequence's rows with that sequence's state slot, one dispatch each for the whole batch.
   */
  mixPaged(h: Tensor, i: number, pool: PagedKvPool, { pages, stateSegments, slots }: PagedBatch): Tensor {
    return tidy(() => {
      const l = this.weights.layers[i];
      const op = l.op;
      const k = this.kindIndex[i];
      const x = rmsNorm(h, l.operatorNorm, this.eps);
      if (op.kind === 'attention')
        return pagedAttentionBlock(x, h, op.attention, this.geometry, this.rope, { keys: pool.keys[k], values: pool.values[k] }, pages);
      const states = pool.states as ConvStateSlots;
      return conv(x, h, op.conv, states.conv[k], { index: stateSegments!, count: slots.length });
    });
  }

  training(): DecoderTrainingBlocks {
    return lfm2TrainingBlocks(this);
  }
}

/**
 * h + out_proj(C * conv(B * x)): in_proj, the conv kernel (state read and updated), out_proj with the residual; with
 * segments, `state` is the pool and each sequence continues its slot.
 */
function conv(x: Tensor, h: Tensor, cw: ShortConvWeights, state: Tensor, segments?: ShortConvSegments): Tensor {
  const bcx = linear(x, cw.inProj.data, cw.inBias, weightScaleOptions(cw.inProj));
  const y = shortConv(bcx, cw.taps, state, cw.tapsBias, segments);
  return linear(y, cw.outProj.data, cw.outBias, { ...weightScaleOptions(cw.outProj), residual: h });
}
