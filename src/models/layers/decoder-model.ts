// What every decoder family's model class shares: RoPE tables on the device, the fused and per-expert forwards over
// the family's DecoderBlocks, dispatch accounting, the active-bytes figure and disposal. A family supplies its
// cache, its blocks (how a layer mixes tokens, which feed-forward follows) and its weight list.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import { kvCacheShape } from '../../core/kv-fp8.js';
import { keep, tidy } from '../../core/scope.js';
import { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import type { RopeScaling } from '../qwen3/config.js';
import { tensor, zeros } from '../../ops/creation.js';
import { reshape } from '../../ops/shape-ops.js';
import {
  activeBytes,
  reserve,
  type CausalLM,
  type LastForward,
  type CausalLMConfig,
  type ForwardOptions,
  type ModelCache,
  type MoeMode,
} from '../causal-lm.js';
import { compile, type CompiledFunction } from '../../compile/compile.js';
import { dispatchCount } from '../../runtime/stats.js';
import { ropeTables } from './rope.js';
import { decoderForward, decoderForwardPerExpert, type DecoderBlocks } from './decoder-blocks.js';
import type { DecoderRun } from './decoder-forward.js';
import { weightParts, type DenseMlpWeights, type MoeWeights } from './weights.js';

export interface RopeGeometry {
  readonly headDim: number;
  readonly theta: number;
  readonly scaling?: RopeScaling;
  readonly maxPositionEmbeddings: number;
}

export abstract class DecoderModel<Cache extends ModelCache> implements CausalLM {
  abstract readonly config: CausalLMConfig;
  readonly device: DeviceName;
  /** RoPE cos/sin tables [maxSequence, headDim / 2] (the training forward reads them too). */
  readonly rope: { cos: Tensor; sin: Tensor };
  moeMode: MoeMode;
  lastForward: LastForward = { dispatches: 0, perLayer: 0 };
  /** The compiled forward (ForwardOptions.compile), made on first use; one signature per prompt length. */
  private compiled?: CompiledFunction<[Tensor, number, boolean, readonly Tensor[]], Tensor>;
  /** The cache the compiled forward runs over during one call (its tensors are the call's inputs). */
  private compiledCache?: Cache;

  protected constructor(embedTokens: Tensor, rope: RopeGeometry, maxSequence: number, moeMode: MoeMode | undefined) {
    this.device = embedTokens.device;
    this.moeMode = moeMode ?? 'fused';
    const tables = ropeTables(rope.headDim, rope.theta, rope.scaling, rope.maxPositionEmbeddings, maxSequence);
    const table = (values: Float32Array) => keep(tidy(() => reshape(tensor(values, { device: this.device }), [tables.positions, tables.half])));
    this.rope = { cos: table(tables.cos), sin: table(tables.sin) };
  }

  abstract newCache(): Cache;

  /** Positions the RoPE tables cover: the longest key range a batched step may attend over. */
  get ropePositions(): number {
    return this.rope.cos.shape[0]!;
  }

  /** Layer i's kind, for the per-kind dispatch counts (hybrid families override it). */
  protected layerKind(_i: number): string {
    return 'decoder';
  }
  /** The family's layers: every form of the forward runs them through the shared loop. */
  abstract readonly blocks: DecoderBlocks<Cache>;
  abstract weightTensors(): Tensor[];
  /** Every layer's feed-forward (for the active-bytes figure). */
  protected abstract feedForwards(): readonly (DenseMlpWeights | MoeWeights)[];
  protected abstract embedding(): { embedTokens: Tensor; lmHead: Weight };

  async forward(tokens: Tensor, cache: ModelCache, options: ForwardOptions | boolean = {}): Promise<Tensor> {
    const o = typeof options === 'boolean' ? { lastOnly: options } : options;
    if (this.moeMode !== 'per-expert' || !this.config.moe) return this.forwardSync(tokens, cache, o);
    const c = cache as Cache;
    const start = reserve(c, tokens.shape[0]);
    return this.finish(c, start + tokens.shape[0], await decoderForwardPerExpert(this.blocks, tokens, c, start, o.lastOnly ?? true));
  }

  forwardSync(tokens: Tensor, cache: ModelCache, options: ForwardOptions = {}): Tensor {
    const c = cache as Cache;
    const start = reserve(c, tokens.shape[0]);
    if (options.compile && !options.position) return this.forwardCompiled(tokens, c, start, options.lastOnly ?? true);
    return this.finish(c, start + tokens.shape[0], decoderForward(this.blocks, tokens, c, { start, position: options.position }, options.lastOnly ?? true));
  }

  /**
   * The forward through compile(). Every new cache is a new object, so the cache is not an argument (its identity
   * would be part of the signature and each sequence would trace again): its tensors are, and the function reads
   * the cache object through compiledCache. A replay binds this cache's tensors where the recorded cache's were,
   * so the KV rows (and conv / DeltaNet states) are read and written in this sequence's cache. cache.length is set
   * here, outside: a replay runs kernels, not the host code that would set it.
   */
  private forwardCompiled(tokens: Tensor, cache: Cache, start: number, lastOnly: boolean): Tensor {
    this.compiled ??= compile(
      (t: Tensor, s: number, last: boolean, _state: readonly Tensor[]) => decoderForward(this.blocks, t, this.compiledCache!, { start: s }, last).logits,
      { label: `${this.config.modelType} forward`, maxSignatures: COMPILED_SIGNATURES },
    );
    const d0 = dispatchCount();
    this.compiledCache = cache;
    let logits: Tensor;
    try {
      logits = this.compiled(tokens, start, lastOnly, cacheTensors(cache));
    } finally {
      this.compiledCache = undefined;
    }
    cache.length = start + tokens.shape[0];
    const dispatches = dispatchCount() - d0;
    this.lastForward = { dispatches, perLayer: dispatches / Math.max(1, this.config.numHiddenLayers) };
    return logits;
  }

  /** What compile() says about the compiled forward (each prompt length's signature), or undefined before its first use. */
  explainCompiled(): string | undefined {
    return this.compiled?.explain();
  }

  private finish(cache: Cache, length: number, run: DecoderRun): Tensor {
    cache.length = length;
    this.lastForward = { dispatches: run.dispatches, perLayer: run.perLayer, byKind: byLayerKind(run.layers, (i) => this.layerKind(i)) };
    return run.logits;
  }

  activeWeightBytes(): number {
    const { embedTokens, lmHead } = this.embedding();
    const experts = this.feedForwards().flatMap((f) => (f.kind === 'moe' ? [...weightParts(f.gateUp), ...weightParts(f.down)] : []));
    const moe = this.config.moe;
    return activeBytes({
      all: this.weightTensors(),
      embedding: embedTokens,
      tiedHead: lmHead.data === embedTokens,
      experts,
      activeFraction: moe ? moe.numExpertsPerTok / moe.numExperts : 1,
    });
  }

  /** Frees the RoPE tables and the weights. */
  dispose(): void {
    this.compiled?.reset();
    this.compiled = undefined;
    this.rope.cos.dispose();
    this.rope.sin.dispose();
    for (const t of this.weightTensors()) t.dispose();
  }
}

/**
 * Prompt lengths whose compiled forward is kept at once (the least recently used is dropped): each keeps its
 * recording and the intermediates it binds, so the bound is on memory as much as on tracing.
 */
const COMPILED_SIGNATURES = 8;

/** Every tensor a cache holds (KV rows, conv and DeltaNet states), in field order: the compiled forward's inputs. */
export function cacheTensors(cache: ModelCache): Tensor[] {
  const out: Tensor[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (v instanceof Tensor) out.push(v);
    else if (Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else if (v !== null && typeof v === 'object' && depth < 3) for (const x of Object.values(v)) walk(x, depth + 1);
  };
  for (const x of Object.values(cache)) walk(x, 0);
  return out;
}

/** The most dispatches any layer of each kind took. */
export function byLayerKind(layers: readonly number[], kind: (i: number) => string): Record<string, number> {
  const out: Record<string, number> = {};
  layers.forEach((n, i) => {
    const k = kind(i);
    out[k] = Math.max(out[k] ?? 0, n);
  });
  return out;
}

/**
 * The KV rows of a hybrid model's attention layers, [capacity, kvHeads, headDim] each, undefined for its other
 * layers (LFM2's conv layers, Qwen3.5's DeltaNet layers), indexed by layer.
 */
export function attentionKvRows(
  isAttention: readonly boolean[],
  shape: readonly number[],
  dtype: DType,
  device: DeviceName,
): { keys: (Tensor | undefined)[]; values: (Tensor | undefined)[] } {
  // An FP8 cache's rows are wider than headDim: codes, then their scale (core/kv-fp8.ts).
  const rowShape = kvCacheShape(shape[0]!, shape[1]!, shape[2]!, dtype);
  const rows = () => isAttention.map((a) => (a ? keep(zeros(rowShape, { dtype, device })) : undefined));
  return { keys: rows(), values: rows() };
}
