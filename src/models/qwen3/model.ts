// The Qwen3 / Qwen3-MoE forward, built from ops only: embeddings, RMSNorm (with Qwen3's per-head q/k norm), RoPE,
// grouped-query attention over a preallocated KV cache, SwiGLU MLP or a routed MoE block, lm_head. Activations are
// float32 whatever the weight dtype (the kernels read bf16/FP8 weights in place). A decode step queues its whole
// forward with no read back; the caller reads only the sampled token id.
import type { DeviceName } from '../../backends/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../io/checkpoint.js';
import type { Qwen3Config } from '../../io/hf-config.js';
import { cast } from '../../ops/convert.js';
import { tensor, zeros } from '../../ops/creation.js';
import { add, mul } from '../../ops/elementwise.js';
import { indexSelect } from '../../ops/index-select.js';
import { linear } from '../../ops/matmul.js';
import { expertLinear, moeRoute, moeRouter } from '../../ops/moe.js';
import { attention, rmsNorm, swiglu } from '../../ops/nn.js';
import { withTempsAsync } from '../../ops/util.js';
import { attentionInputs } from '../../ops/attention-inputs.js';
import { keep, tidy } from '../../core/scope.js';
import { dispatchCount } from '../../runtime-stats.js';
import { cat, clone, narrow, reshape, select } from '../../ops/shape-ops.js';
import { ropeTables } from './rope.js';
import type { DenseMlpWeights, LayerWeights, MoeWeights, Qwen3Weights } from './weights.js';

/** How the MoE block runs: fused (expert ids stay on the device) or a per-expert loop (the baseline it beats). */
export type MoeMode = 'fused' | 'per-expert';

export interface Qwen3ModelOptions {
  /** Positions the KV cache holds (prompt + generated tokens). */
  maxSequence: number;
  /** KV cache dtype (default float32). */
  kvDtype?: DType;
  moeMode?: MoeMode;
}

/** Keys and values of every layer, allocated once at [maxSequence, kvHeads, headDim]. */
export class KvCache {
  readonly keys: Tensor[];
  readonly values: Tensor[];
  /** Positions filled so far. */
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

/** The cache position of the next s tokens, checked against its capacity. */
function reserve(cache: KvCache, s: number): number {
  const start = cache.length;
  if (start + s > cache.capacity) throw new RangeError(`the KV cache holds ${cache.capacity} positions; ${start} used, ${s} more requested`);
  return start;
}

/** x . W^T (+ residual, added in the kernel's epilogue). */
function project(x: Tensor, w: Weight, residual?: Tensor): Tensor {
  return linear(x, w.data, undefined, { ...(w.scale ? { weightScale: w.scale, recipe: w.recipe } : {}), residual });
}

export interface ForwardOptions {
  /** Logits of the last position only (default true). */
  lastOnly?: boolean;
  /**
   * An int32 [1] device tensor holding cache.length, read by the kernels instead of baking the position into their
   * uniforms: the attention then runs over the whole cache (the causal mask hides rows not written yet). This is
   * what lets a decode step be captured once and replayed (generate/decode-session.ts).
   */
  position?: Tensor;
}

export class Qwen3Model {
  readonly device: DeviceName;
  private readonly cos: Tensor;
  private readonly sin: Tensor;
  moeMode: MoeMode;
  /** GPU dispatches of the last fused forward: in all, and per decoder layer. */
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
    this.cos = table(tables.cos);
    this.sin = table(tables.sin);
  }

  newCache(): KvCache {
    return new KvCache(this.config, this.options.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  /**
   * Runs tokens (int32 [S], on this device: from a tokenizer or the previous step's sample) at the cache's
   * positions, appends their keys and values, and returns float32 logits [S, vocab] (or [1, vocab] for the last
   * position only when lastOnly).
   */
  async forward(tokens: Tensor, cache: KvCache, options: ForwardOptions | boolean = {}): Promise<Tensor> {
    const o = typeof options === 'boolean' ? { lastOnly: options } : options;
    if (this.moeMode === 'per-expert') return this.forwardPerExpert(tokens, cache, o.lastOnly ?? true);
    return this.forwardSync(tokens, cache, o);
  }

  /** The forward with no reads (fused MoE): every op queued, nothing awaited. */
  forwardSync(tokens: Tensor, cache: KvCache, options: ForwardOptions = {}): Tensor {
    const s = tokens.shape[0];
    const start = reserve(cache, s);
    const c = this.config;
    const w = this.weights;
    const d0 = dispatchCount();
    let layerDispatches = 0;
    const logits = tidy(() => {
      let h = cast(indexSelect(w.embedTokens, 0, tokens), 'float32');
      const l0 = dispatchCount();
      for (let i = 0; i < c.numHiddenLayers; i++) {
        const lw = w.layers[i];
        const next = tidy(() => {
          const x = this.attentionBlock(h, lw, cache, i, start, options.position);
          return this.mlp(rmsNorm(x, lw.postAttentionNorm, c.rmsNormEps), lw.mlp, x);
        });
        h.dispose(); // layer by layer, so a long prefill holds one hidden state at a time
        h = next;
      }
      layerDispatches = dispatchCount() - l0;
      return this.head(h, options.lastOnly ?? true);
    });
    cache.length = start + s;
    this.lastForward = { dispatches: dispatchCount() - d0, perLayer: layerDispatches / Math.max(1, c.numHiddenLayers) };
    return logits;
  }

  private head(h: Tensor, lastOnly: boolean): Tensor {
    const s = h.shape[0];
    const last = lastOnly && s > 1 ? narrow(h, 0, s - 1, 1) : h;
    return project(rmsNorm(last, this.weights.norm, this.config.rmsNormEps), this.weights.lmHead);
  }

  /** h + o_proj(attention(q, k, v)) with q/k norm, RoPE and the cache write fused into one kernel. */
  private attentionBlock(h: Tensor, lw: LayerWeights, cache: KvCache, index: number, start: number, position?: Tensor): Tensor {
    const c = this.config;
    return tidy(() => {
      const s = h.shape[0];
      const a = lw.attention;
      const x = rmsNorm(h, lw.inputNorm, c.rmsNormEps);
      const qkv = 'data' in a.qkv ? project(x, a.qkv) : cat([project(x, a.qkv.q), project(x, a.qkv.k), project(x, a.qkv.v)], 1);
      const keys = cache.keys[index];
      const values = cache.values[index];
      const q = attentionInputs(qkv, {
        heads: c.numAttentionHeads,
        kvHeads: c.numKeyValueHeads,
        headDim: c.headDim,
        qNorm: a.qNorm,
        kNorm: a.kNorm,
        eps: c.rmsNormEps,
        cos: this.cos,
        sin: this.sin,
        keys,
        values,
        position: position ?? start,
      });
      // With a device position the whole cache is attended and the causal mask hides rows not yet written.
      const attn = position
        ? attention(q, keys, values, { causal: true, queryOffset: position })
        : attention(q, narrow(keys, 0, 0, start + s), narrow(values, 0, 0, start + s), { causal: true, queryOffset: start });
      return project(reshape(attn, [s, c.numAttentionHeads * c.headDim]), a.o, h);
    });
  }

  /** residual + MLP(x), the residual added in the last kernel's epilogue. */
  private mlp(x: Tensor, mlp: DenseMlpWeights | MoeWeights, residual: Tensor): Tensor {
    if (mlp.kind === 'dense') return project(swiglu(project(x, mlp.gateUp)), mlp.down, residual);
    return this.moe(x, mlp, residual);
  }

  /**
   * Router + top-k, the selected experts' gate|up with SwiGLU in its epilogue, down + weighted combine + residual:
   * three dispatches, no read back.
   */
  private moe(x: Tensor, mlp: MoeWeights, residual: Tensor): Tensor {
    const moe = this.config.moe!;
    // The router stays in high precision (official FP8 checkpoints keep it so); an FP8 one goes through linear.
    const { ids, weights } = mlp.router.scale
      ? moeRoute(project(x, mlp.router), moe.numExpertsPerTok, { normalize: moe.normTopkProb })
      : moeRouter(x, mlp.router.data, moe.numExpertsPerTok, { normalize: moe.normTopkProb });
    const act = expertLinear(x, mlp.gateUp.data, ids, { scale: mlp.gateUp.scale, activation: 'swiglu' });
    return expertLinear(act, mlp.down.data, ids, { scale: mlp.down.scale, combine: weights, residual });
  }

  /** The eager baseline: the same attention, then the per-expert MoE loop that reads the routing back. */
  private async forwardPerExpert(tokens: Tensor, cache: KvCache, lastOnly: boolean): Promise<Tensor> {
    const s = tokens.shape[0];
    const start = reserve(cache, s);
    const c = this.config;
    const w = this.weights;
    const d0 = dispatchCount();
    let h = tidy(() => cast(indexSelect(w.embedTokens, 0, tokens), 'float32'));
    const l0 = dispatchCount();
    for (let i = 0; i < c.numHiddenLayers; i++) {
      const lw = w.layers[i];
      const x = tidy(() => this.attentionBlock(h, lw, cache, i, start));
      h.dispose();
      const normed = rmsNorm(x, lw.postAttentionNorm, c.rmsNormEps);
      if (lw.mlp.kind === 'dense') {
        const dense = lw.mlp;
        h = tidy(() => this.mlp(normed, dense, x));
      } else {
        const mlp = await this.moePerExpert(normed, lw.mlp);
        h = tidy(() => add(x, mlp));
        mlp.dispose();
      }
      normed.dispose();
      x.dispose();
    }
    const perLayer = (dispatchCount() - l0) / Math.max(1, c.numHiddenLayers);
    cache.length = start + s;
    const logits = tidy(() => this.head(h, lastOnly));
    h.dispose();
    this.lastForward = { dispatches: dispatchCount() - d0, perLayer };
    return logits;
  }

  /**
   * The baseline the fused block is measured against, as eager frameworks run MoE: read the routing back, then
   * one gate|up, SwiGLU, down and scaled add per selected expert and token.
   */
  private async moePerExpert(x: Tensor, mlp: MoeWeights): Promise<Tensor> {
    const moe = this.config.moe!;
    return withTempsAsync(async (keep) => {
      const logits = keep(project(x, mlp.router));
      const route = moeRoute(logits, moe.numExpertsPerTok, { normalize: moe.normTopkProb });
      keep(route.ids);
      keep(route.weights);
      const ids = await route.ids.toArray();
      const weights = await route.weights.toArray();
      const k = moe.numExpertsPerTok;
      const rows: Tensor[] = [];
      for (let t = 0; t < x.shape[0]; t++) {
        const xt = keep(narrow(x, 0, t, 1));
        let acc: Tensor | undefined;
        for (let j = 0; j < k; j++) {
          const e = ids[t * k + j];
          const expert = (w: Weight): Weight => ({ data: keep(select(w.data, 0, e)), scale: w.scale && keep(select(w.scale, 0, e)), recipe: w.recipe });
          const y = keep(project(keep(swiglu(keep(project(xt, expert(mlp.gateUp))))), expert(mlp.down)));
          const scaled = keep(mul(y, weights[t * k + j]));
          acc = acc ? keep(add(acc, scaled)) : scaled;
        }
        rows.push(acc!);
      }
      return rows.length === 1 ? clone(rows[0]) : cat(rows, 0);
    });
  }

  dispose(): void {
    this.cos.dispose();
    this.sin.dispose();
  }
}
