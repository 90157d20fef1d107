// Qwen3 / Qwen3-MoE's layers for the shared decoder forward: h + o_proj(attention(input_layernorm(h))) with the
// per-head q/k norm and RoPE, over the model's contiguous KV cache or a paged pool; then the dense or MoE
// feed-forward after post_attention_layernorm (softmax router). Training's blocks are training.ts.
import type { Tensor } from '../../core/tensor.js';
import { tidy } from '../../core/scope.js';
import { rmsNorm } from '../../ops/nn.js';
import { attentionBlock, pagedAttentionBlock, type AttentionGeometry, type Routing } from '../layers/blocks.js';
import type { CacheRows, DecoderBlocks, PagedBatch, PagedDecoderBlocks } from '../layers/decoder-blocks.js';
import type { PagedKvPool } from '../layers/paged-kv.js';
import type { DecoderTrainingBlocks, TrainableDecoderBlocks } from '../layers/training-blocks.js';
import type { Qwen3Config } from './config.js';
import type { KvCache } from './model.js';
import { qwen3TrainingBlocks } from './training.js';
import type { Qwen3Weights } from './weights.js';

export class Qwen3Blocks implements DecoderBlocks<KvCache>, PagedDecoderBlocks, TrainableDecoderBlocks {
  readonly embedTokens: Tensor;
  readonly numLayers: number;
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Qwen3Weights['lmHead'];
  readonly geometry: AttentionGeometry;

  constructor(
    readonly config: Qwen3Config,
    readonly weights: Qwen3Weights,
    readonly rope: { readonly cos: Tensor; readonly sin: Tensor },
    readonly routing: Routing | undefined,
  ) {
    ({ embedTokens: this.embedTokens, norm: this.norm, lmHead: this.lmHead } = weights);
    this.numLayers = config.numHiddenLayers;
    this.eps = config.rmsNormEps;
    this.geometry = { heads: config.numAttentionHeads, kvHeads: config.numKeyValueHeads, headDim: config.headDim, eps: config.rmsNormEps };
  }

  feedForward(i: number) {
    return { norm: this.weights.layers[i].postAttentionNorm, weights: this.weights.layers[i].mlp };
  }

  mix(h: Tensor, i: number, kv: KvCache, { start, position }: CacheRows): Tensor {
    const l = this.weights.layers[i];
    return tidy(() =>
      attentionBlock(rmsNorm(h, l.inputNorm, this.eps), h, l.attention, this.geometry, this.rope, { keys: kv.keys[i], values: kv.values[i], start, position }),
    );
  }

  mixPaged(h: Tensor, i: number, pool: PagedKvPool, { pages }: PagedBatch): Tensor {
    const l = this.weights.layers[i];
    return tidy(() =>
      pagedAttentionBlock(rmsNorm(h, l.inputNorm, this.eps), h, l.attention, this.geometry, this.rope, { keys: pool.keys[i], values: pool.values[i] }, pages),
    );
  }

  training(): DecoderTrainingBlocks {
    return qwen3TrainingBlocks(this);
  }
}
