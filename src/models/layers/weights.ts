// Weight sets shared by the decoder families (Qwen3, LFM2): attention with q|k|v stacked, a SwiGLU MLP with
// gate|up fused, MoE experts stacked into [E, 2I, H] and [E, H, I] so one dispatch serves every chosen expert, and
// the loader that streams them from a checkpoint, quantizing on request and releasing what it loaded on failure.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Tensor } from '../../core/tensor.js';
import { quantizeWeightInt4, type Checkpoint, type Weight } from '../../formats/checkpoint.js';
import { isFp8 } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import { quantize as quantizeTensor } from '../../ops/quantize.js';
import { cat, unsqueeze } from '../../ops/shape-ops.js';
import type { WeightSpec } from '../random-weights.js';
import { hasInt4Weight, int4WeightShape } from '../../formats/int4.js';

export interface AttentionWeights {
  /**
   * q, k and v stacked into one [(Hq + 2 Hkv) * D, H] weight (one GEMV per token), or the three apart when FP8
   * 128-row blocks would straddle a seam.
   */
  readonly qkv: Weight | { readonly q: Weight; readonly k: Weight; readonly v: Weight };
  /** The output projection (Qwen3's o_proj, LFM2's out_proj). */
  readonly o: Weight;
  /** Per-head RMSNorm weights of q and k [D] (Qwen3's q_norm/k_norm, LFM2's q_layernorm/k_layernorm). */
  readonly qNorm: Tensor;
  readonly kNorm: Tensor;
}

export interface DenseMlpWeights {
  readonly kind: 'dense';
  /** [2I, H]: gate rows then up rows (LFM2: w1 then w3). */
  readonly gateUp: Weight;
  /** [H, I] (LFM2: w2). */
  readonly down: Weight;
}

export interface MoeWeights {
  readonly kind: 'moe';
  /** Router [E, H]. */
  readonly router: Weight;
  /** float32 [E] added to the router's scores for the choice only (LFM2-MoE's expert_bias). */
  readonly selectionBias?: Tensor;
  /** Stacked experts: [E, 2I, H] (gate rows then up rows of each expert) and its block scales when FP8. */
  readonly gateUp: Weight;
  /** [E, H, I]. */
  readonly down: Weight;
  /**
   * A shared expert run beside the routed ones, its output scaled by sigmoid(gate . x) (Qwen3.5-MoE), when it could
   * not be stacked as an extra expert of gateUp / down.
   */
  readonly shared?: { readonly mlp: DenseMlpWeights; readonly gate: Weight };
}

export interface WeightLoadingOptions {
  device?: DeviceName;
  /** Quantize float linear weights at load: FP8 (128x128 blocks) or packed 4 bits (groups of groupSize along K). */
  quantize?: 'float8_e4m3fn' | 'int4';
  /** int4 group size (default 128). */
  groupSize?: number;
  /** int4: each quantized weight's relative error (checkpoint load reports it). */
  onQuantError?: (prefix: string, relError: number) => void;
  /** Convert unquantized linear weights (and norms, embeddings) to this dtype at load. */
  dtype?: DType;
  onBytes?: (bytes: number) => void;
}

/** A weight's tensors: its data and, when quantized, its scales. */
export function weightParts(w: Weight): Tensor[] {
  return [w.data, ...(w.scale ? [w.scale] : []), ...(w.int4 ? [w.int4.zero, ...(w.int4.perm ? [w.int4.perm] : [])] : [])];
}

export function attentionTensors(a: AttentionWeights): Tensor[] {
  const qkv = 'data' in a.qkv ? weightParts(a.qkv) : [...weightParts(a.qkv.q), ...weightParts(a.qkv.k), ...weightParts(a.qkv.v)];
  return [a.qNorm, a.kNorm, ...qkv, ...weightParts(a.o)];
}

export function mlpTensors(m: DenseMlpWeights | MoeWeights): Tensor[] {
  const routing = m.kind === 'moe' ? [...weightParts(m.router), ...(m.selectionBias ? [m.selectionBias] : [])] : [];
  return [...routing, ...weightParts(m.gateUp), ...weightParts(m.down)];
}

/**
 * Concatenates weights along dim (their data, and their scales along the same dim), disposing the parts. Packed
 * 4-bit parts concatenate their zero points too; act-order parts keep the first one's permutation (the caller checked
 * that they share it: rowStack).
 */
export function concatWeights(parts: Weight[], dim: number): Weight {
  const q = parts[0].int4;
  if (q) {
    if (!parts.every((p) => p.int4 && p.int4.groupSize === q.groupSize && p.scale?.dtype === parts[0].scale?.dtype))
      throw new CheckpointError('cannot stack 4-bit weights of different group sizes or scale dtypes', {});
    const zero = cat(
      parts.map((p) => p.int4!.zero),
      dim,
    );
    for (const p of parts) p.int4!.zero.dispose();
    for (const p of parts.slice(1)) p.int4!.perm?.dispose();
    const rest = concatWeights(
      parts.map((p) => ({ data: p.data, scale: p.scale })),
      dim,
    );
    return { ...rest, int4: { groupSize: q.groupSize, zero, ...(q.perm ? { perm: q.perm } : {}) } };
  }
  const data = cat(
    parts.map((p) => p.data),
    dim,
  );
  const scale = parts[0].scale
    ? cat(
        parts.map((p) => p.scale!),
        dim,
      )
    : undefined;
  for (const p of parts) {
    p.data.dispose();
    p.scale?.dispose();
  }
  return { data, scale, recipe: parts[0].recipe };
}

/**
 * Stacks [N, K] weights into [E, N, K] (scales into [E, ...]). Act-order 4-bit parts keep the first one's
 * permutation: the caller checked that they share it (WeightLoader.experts; the expert kernels read one [K] perm).
 */
export function stackWeights(parts: Weight[]): Weight {
  const lifted = parts.map((p) => ({
    data: unsqueeze(p.data, 0),
    scale: p.scale && unsqueeze(p.scale, 0),
    recipe: p.recipe,
    ...(p.int4 ? { int4: { groupSize: p.int4.groupSize, zero: unsqueeze(p.int4.zero, 0), ...(p.int4.perm ? { perm: p.int4.perm } : {}) } } : {}),
  }));
  for (const p of parts) {
    p.data.dispose();
    p.scale?.dispose();
    p.int4?.zero.dispose();
  }
  return concatWeights(lifted, 0);
}

/** Row blocks fuse unless FP8 128-row blocks would straddle the seam (rows not a multiple of 128). */
export function canFuseRows(w: Weight, rows: number): boolean {
  if (w.int4) return true; // groups run along K: rows stack freely (act-order parts are checked in rowStack)
  return !w.scale || (w.recipe === 'block' && rows % 128 === 0) || w.recipe === 'row';
}

/**
 * Checks that the checkpoint holds every tensor of the layout with its shape (FP8 weights may carry scales next to
 * them; extra tensors are ignored), so a missing expert or a mis-sized conv is an error naming the tensor before
 * anything is uploaded.
 */
export function checkLayout(ck: Checkpoint, specs: readonly WeightSpec[]): void {
  for (const spec of specs) {
    const base = spec.name.endsWith('.weight') ? spec.name.slice(0, -'.weight'.length) : undefined;
    if (!ck.has(spec.name) && base !== undefined && hasInt4Weight(ck, base)) {
      // A 4-bit weight: its [N, K] from the packed tensor's header; the reader checks the rest at load.
      const nk = int4WeightShape(ck, base);
      if (nk?.join() !== spec.shape.join())
        throw new CheckpointError(`4-bit weight '${base}' is [${nk?.join(', ') ?? '?'}], the config implies [${spec.shape.join(', ')}]`, {
          file: ck.dir,
          tensor: base,
        });
      continue;
    }
    if (!ck.has(spec.name)) throw new CheckpointError(`checkpoint has no tensor '${spec.name}'`, { file: ck.dir, tensor: spec.name });
    const e = ck.entry(spec.name);
    if (e.shape.join() !== spec.shape.join()) {
      throw new CheckpointError(`tensor '${spec.name}' is [${e.shape.join(', ')}], the config implies [${spec.shape.join(', ')}]`, {
        file: e.file,
        tensor: spec.name,
      });
    }
  }
}

/**
 * Whether act-order 4-bit weights share one column permutation (q, k, v or gate, up of one input usually do: GPTQ
 * orders columns by the same Hessian), so their rows can stack; true when none is act-order.
 */
async function samePermutation(parts: readonly Weight[]): Promise<boolean> {
  const perms = parts.map((p) => p.int4?.perm);
  if (perms.every((p) => p === undefined)) return true;
  if (perms.some((p) => p === undefined)) return false;
  const first = await perms[0]!.toArray();
  for (const p of perms.slice(1)) {
    const other = await p!.toArray();
    if (other.some((v, i) => v !== first[i])) return false;
  }
  return true;
}

/**
 * Streams tensors of one checkpoint onto the device with the loading options, remembering what it loaded so a
 * failure part way (a missing tensor, a bad header) releases everything.
 */
export class WeightLoader {
  private readonly loaded: Tensor[] = [];

  constructor(
    private readonly ck: Checkpoint,
    private readonly options: WeightLoadingOptions,
  ) {}

  /** A tensor as stored (converted to options.dtype when given). */
  async plain(name: string, dtype = this.options.dtype): Promise<Tensor> {
    const t = await this.ck.load(name, { device: this.options.device, dtype, onBytes: this.options.onBytes });
    this.loaded.push(t);
    return t;
  }

  /** `${prefix}.weight` with its scales; quantized to FP8 on request unless canQuantize is false (routers, heads). */
  async linear(prefix: string, canQuantize = true): Promise<Weight> {
    const { device, dtype, onBytes, quantize, groupSize, onQuantError } = this.options;
    const w = await this.ck.loadWeight(prefix, { device, dtype, onBytes, quantize: canQuantize ? quantize : undefined, groupSize, onQuantError });
    this.loaded.push(...weightParts(w));
    return w;
  }

  /**
   * The weights of `prefixes` stacked by rows into one [sum N, K] weight. FP8 made at load quantizes the stack
   * whole, so its 128-row blocks need not line up with the seams; stored FP8 weights stack only when every seam
   * falls on a block edge, and come back apart otherwise.
   */
  private async rowStack(prefixes: readonly string[]): Promise<{ stacked: Weight } | { parts: Weight[] }> {
    const quantize = this.options.quantize;
    const storedFp8 = prefixes.some((p) => {
      if (!this.ck.has(`${p}.weight`)) return false; // a 4-bit weight (or missing: loadWeight says so)
      const dtype = this.ck.entry(`${p}.weight`).dtype;
      return dtype !== undefined && isFp8(dtype);
    });
    if (quantize && !storedFp8) {
      const parts: Weight[] = [];
      for (const p of prefixes) parts.push(await this.linear(p, false));
      const plain = concatWeights(parts, 0);
      if (quantize === 'int4') {
        const w = await quantizeWeightInt4(plain.data, prefixes.join('|'), this.options);
        if (!w) return { stacked: this.track(plain) };
        plain.data.dispose();
        return { stacked: this.track(w) };
      }
      const q = quantizeTensor(plain.data, { dtype: quantize, granularity: 'block128' });
      plain.data.dispose();
      return { stacked: this.track({ data: q.data, scale: q.scale, recipe: 'block' }) };
    }
    const parts: Weight[] = [];
    for (const p of prefixes) parts.push(await this.linear(p));
    const aligned = parts.every((w, i) => i === parts.length - 1 || canFuseRows(w, w.data.shape[0])) && (await samePermutation(parts));
    return aligned ? { stacked: this.track(concatWeights(parts, 0)) } : { parts };
  }

  /** q, k, v stacked into one weight (apart only for stored FP8 blocks that straddle a seam). */
  async attention(names: { q: string; k: string; v: string; o: string; qNorm: string; kNorm: string }): Promise<AttentionWeights> {
    const qkv = await this.rowStack([names.q, names.k, names.v]);
    return {
      qkv: 'stacked' in qkv ? qkv.stacked : { q: qkv.parts[0], k: qkv.parts[1], v: qkv.parts[2] },
      o: await this.linear(names.o),
      qNorm: await this.plain(names.qNorm),
      kNorm: await this.plain(names.kNorm),
    };
  }

  /** gate and up stacked into one [2I, H] weight. */
  private async gateUp(gate: string, up: string, what: string): Promise<Weight> {
    const stack = await this.rowStack([gate, up]);
    if (!('stacked' in stack))
      throw new RangeError(
        stack.parts[0].int4
          ? `act-order 4-bit ${what} need gate and up to share one column permutation (g_idx)`
          : `FP8 block-scaled ${what} need their intermediate size (${stack.parts[0].data.shape[0]}) to be a multiple of 128`,
      );
    return stack.stacked;
  }

  /** A SwiGLU MLP from its gate, up and down projections (prefixes without `.weight`). */
  async denseMlp(gate: string, up: string, down: string): Promise<DenseMlpWeights> {
    return { kind: 'dense', gateUp: await this.gateUp(gate, up, 'MLPs'), down: await this.linear(down) };
  }

  /** numExperts experts, each from `expert(e)`'s gate, up and down prefixes, stacked. */
  async experts(numExperts: number, expert: (e: number) => { gate: string; up: string; down: string }): Promise<Pick<MoeWeights, 'gateUp' | 'down'>> {
    const gateUps: Weight[] = [];
    const downs: Weight[] = [];
    for (let e = 0; e < numExperts; e++) {
      const names = expert(e);
      gateUps.push(await this.gateUp(names.gate, names.up, 'experts'));
      downs.push(await this.linear(names.down));
    }
    for (const [parts, what] of [
      [gateUps, 'gate/up'],
      [downs, 'down'],
    ] as const) {
      if (!(await samePermutation(parts)))
        throw new CheckpointError(
          `act-order (desc_act) 4-bit experts need every expert's ${what} projection to share one column permutation (g_idx), and these differ (the fused expert kernels read one)`,
          { file: this.ck.dir, tensor: `${expert(0).gate}.g_idx` },
        );
    }
    return { gateUp: this.track(stackWeights(gateUps)), down: this.track(stackWeights(downs)) };
  }

  /** Tracks a tensor derived from loaded ones (a view that holds their storage) for release on failure. */
  adopt(t: Tensor): Tensor {
    this.loaded.push(t);
    return t;
  }

  /** Releases every tensor loaded so far that is still alive (after a failure). */
  release(): void {
    for (const t of this.loaded) if (!t.isDisposed) t.dispose();
  }

  private track(w: Weight): Weight {
    this.loaded.push(...weightParts(w));
    return w;
  }
}
