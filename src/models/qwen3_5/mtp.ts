// Qwen3.5 / Qwen3.6's multi-token-prediction layer (`mtp.*`), run as a speculative drafter (vLLM's
// Qwen3_5MultiTokenPredictor; transformers does not run it). Row r of its input pairs the target's hidden state at
// position r (after the target's final norm: what its lm_head reads) with the embedding of the token at r + 1:
// x = fc(concat(norm_emb(embed(t[r+1])), norm_hidden(h[r]))), one full attention decoder layer at position r with a
// KV cache of its own, then its own final norm; the logits (the token at r + 2) come from the target's lm_head, and
// the normed output is the hidden state of the next drafting step. Every norm is zero-centred (1 + w, folded at load).
import type { DType } from '../../core/dtype.js';
import { tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { cast } from '../../ops/convert.js';
import { indexSelect } from '../../ops/index-select.js';
import { rmsNorm } from '../../ops/nn.js';
import { cat, narrow } from '../../ops/shape-ops.js';
import { denseMlp, fusedMoe, project, type Routing } from '../layers/blocks.js';
import { Qwen35Blocks } from './blocks.js';
import type { Qwen35Config } from './config.js';
import { Qwen35Cache } from './model.js';
import type { Qwen35MtpWeights, Qwen35Weights } from './weights.js';

/** x + layer i's feed-forward over its normed input (the fused MoE: no read back). */
export function qwen35FeedForward(blocks: Qwen35Blocks, x: Tensor, i: number): Tensor {
  const ff = blocks.feedForward(i);
  const normed = rmsNorm(x, ff.norm, blocks.eps);
  return ff.weights.kind === 'dense' ? denseMlp(normed, ff.weights, x) : fusedMoe(normed, ff.weights, blocks.routing!, x);
}

export interface MtpStep {
  /** float32 [1, vocab]: the last row's logits. */
  readonly logits: Tensor;
  /** float32 [1, hidden]: the last row's output after the MTP's norm (the next step's hidden state). */
  readonly hidden: Tensor;
}

/** The MTP layer of a loaded model: its first decoder layer (the releases have one), sharing embedding, head and RoPE. */
export class Qwen35Mtp {
  readonly config: Qwen35Config;
  readonly blocks: Qwen35Blocks;

  constructor(
    target: {
      readonly config: Qwen35Config;
      readonly weights: Qwen35Weights;
      readonly rope: { cos: Tensor; sin: Tensor };
      readonly routing: Routing | undefined;
    },
    readonly weights: Qwen35MtpWeights,
    private readonly cacheOptions: { capacity: number; dtype: DType },
  ) {
    this.config = { ...target.config, numHiddenLayers: 1, layerTypes: ['full_attention'] };
    const { embedTokens, lmHead } = target.weights;
    this.blocks = new Qwen35Blocks(this.config, { embedTokens, lmHead, norm: weights.norm, layers: weights.layers.slice(0, 1) }, target.rope, target.routing);
  }

  /** The MTP layer's own KV rows (one full attention layer), as long as the target's cache. */
  newCache(): Qwen35Cache {
    return new Qwen35Cache(this.config, this.cacheOptions.capacity, this.cacheOptions.dtype, this.blocks.embedTokens.device);
  }

  /**
   * Rows (tokens int32 [S], the hidden states they pair with float32 [S, H]) at the cache's rows from its length;
   * the cache grows by S. Queues its ops, reads nothing.
   */
  forward(tokens: Tensor, hidden: Tensor, cache: Qwen35Cache): MtpStep {
    const s = tokens.shape[0]!;
    const start = cache.length;
    if (start + s > cache.capacity) throw new RangeError(`the MTP cache holds ${cache.capacity} positions; ${start} used, ${s} more requested`);
    if (hidden.shape[0] !== s) throw new RangeError(`MTP forward: ${s} tokens but ${hidden.shape[0]} hidden rows`);
    const w = this.weights;
    const b = this.blocks;
    const out = tidy(() => {
      const e = cast(indexSelect(b.embedTokens, 0, tokens), 'float32');
      let x = project(cat([rmsNorm(e, w.preFcNormEmbedding, b.eps), rmsNorm(hidden, w.preFcNormHidden, b.eps)], 1), w.fc);
      x = qwen35FeedForward(b, b.mix(x, 0, cache, { start }), 0);
      const normed = rmsNorm(s > 1 ? narrow(x, 0, s - 1, 1) : x, b.norm, b.eps);
      return { logits: project(normed, b.lmHead), hidden: normed };
    });
    cache.length = start + s;
    return out;
  }
}
