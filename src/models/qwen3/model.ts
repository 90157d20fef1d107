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
import { expertLinear, moeRoute } from '../../ops/moe.js';
import { attention, rmsNorm, rope, swiglu } from '../../ops/nn.js';
import { withTemps, withTempsAsync } from '../../ops/util.js';
import { cat, clone, copyInto, narrow, reshape, select } from '../../ops/shape-ops.js';
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
    this.keys = Array.from({ length: config.numHiddenLayers }, () => zeros(shape, { dtype, device }));
    this.values = Array.from({ length: config.numHiddenLayers }, () => zeros(shape, { dtype, device }));
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t.dispose();
  }
}

function project(x: Tensor, w: Weight): Tensor {
  return linear(x, w.data, undefined, w.scale ? { weightScale: w.scale, recipe: w.recipe } : {});
}

export class Qwen3Model {
  readonly device: DeviceName;
  private readonly cos: Tensor;
  private readonly sin: Tensor;
  moeMode: MoeMode;

  constructor(
    readonly config: Qwen3Config,
    readonly weights: Qwen3Weights,
    readonly options: Qwen3ModelOptions,
  ) {
    this.device = weights.embedTokens.device;
    this.moeMode = options.moeMode ?? 'fused';
    const c = config;
    const tables = ropeTables(c.headDim, c.ropeTheta, c.ropeScaling, c.maxPositionEmbeddings, options.maxSequence);
    const table = (values: Float32Array) => {
      const flat = tensor(values, { device: this.device });
      const shaped = reshape(flat, [tables.positions, tables.half]);
      flat.dispose(); // the view keeps the storage
      return shaped;
    };
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
  async forward(tokens: Tensor, cache: KvCache, lastOnly = true): Promise<Tensor> {
    const s = tokens.shape[0];
    const start = cache.length;
    if (start + s > cache.capacity) throw new RangeError(`the KV cache holds ${cache.capacity} positions; ${start} used, ${s} more requested`);
    const c = this.config;
    const w = this.weights;
    let h = withTemps((keep) => cast(keep(indexSelect(w.embedTokens, 0, tokens)), 'float32'));
    for (let i = 0; i < c.numHiddenLayers; i++) {
      const next = await this.layer(h, w.layers[i], cache, i, start);
      h.dispose();
      h = next;
    }
    cache.length = start + s;
    return withTemps((keep) => {
      keep(h);
      const last = lastOnly && s > 1 ? keep(narrow(h, 0, s - 1, 1)) : h;
      const normed = keep(rmsNorm(last, w.norm, c.rmsNormEps));
      return project(normed, w.lmHead);
    });
  }

  private async layer(h: Tensor, lw: LayerWeights, cache: KvCache, index: number, start: number): Promise<Tensor> {
    const c = this.config;
    return withTempsAsync(async (keep) => {
      const s = h.shape[0];
      const x = keep(rmsNorm(h, lw.inputNorm, c.rmsNormEps));
      const a = lw.attention;
      const heads = (t: Tensor, n: number) => keep(reshape(keep(t), [s, n, c.headDim]));
      const q = keep(rope(keep(rmsNorm(heads(project(x, a.q), c.numAttentionHeads), a.qNorm, c.rmsNormEps)), this.cos, this.sin, start));
      const k = keep(rope(keep(rmsNorm(heads(project(x, a.k), c.numKeyValueHeads), a.kNorm, c.rmsNormEps)), this.cos, this.sin, start));
      const v = heads(project(x, a.v), c.numKeyValueHeads);
      copyInto(keep(narrow(cache.keys[index], 0, start, s)), k);
      copyInto(keep(narrow(cache.values[index], 0, start, s)), v);
      const keys = keep(narrow(cache.keys[index], 0, 0, start + s));
      const values = keep(narrow(cache.values[index], 0, 0, start + s));
      const attn = keep(attention(q, keys, values, { causal: true, queryOffset: start }));
      const o = keep(project(keep(reshape(attn, [s, c.numAttentionHeads * c.headDim])), a.o));
      const h1 = keep(add(h, o));
      const x2 = keep(rmsNorm(h1, lw.postAttentionNorm, c.rmsNormEps));
      const mlp = keep(lw.mlp.kind === 'dense' ? this.dense(x2, lw.mlp) : this.moeMode === 'fused' ? this.moe(x2, lw.mlp) : await this.moePerExpert(x2, lw.mlp));
      return add(h1, mlp);
    });
  }

  private dense(x: Tensor, mlp: DenseMlpWeights): Tensor {
    return withTemps((keep) => project(keep(swiglu(keep(project(x, mlp.gateUp)))), mlp.down));
  }

  /** Router, top-k, the selected experts' gate|up, SwiGLU, down + weighted combine: 5 dispatches, no read back. */
  private moe(x: Tensor, mlp: MoeWeights): Tensor {
    const moe = this.config.moe!;
    return withTemps((keep) => {
      const logits = keep(project(x, mlp.router));
      const { ids, weights } = moeRoute(logits, moe.numExpertsPerTok, { normalize: moe.normTopkProb });
      keep(ids);
      keep(weights);
      const gateUp = keep(expertLinear(x, mlp.gateUp.data, ids, { scale: mlp.gateUp.scale }));
      const act = keep(swiglu(gateUp));
      return expertLinear(act, mlp.down.data, ids, { scale: mlp.down.scale, combine: weights });
    });
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
