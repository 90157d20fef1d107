// LoRA adapters (Hu et al. 2021, as PEFT implements them): for each targeted projection W [out, in], trainable
// A [r, in] and B [out, r] with y = x W^T + (alpha / r) (x A^T) B^T. A starts as PEFT's kaiming-uniform
// (bound 1 / sqrt(in)) and B at zero, so training starts from the base model exactly. The base weights are never
// written during training; merge() folds the adapter into them for inference.
import type { DeviceName } from '../runtime/backend.js';
import type { Generator } from '../core/random.js';
import type { Tensor } from '../core/tensor.js';
import { tidy } from '../core/scope.js';
import { noGrad } from '../autograd/grad-mode.js';
import { rand, zeros } from '../ops/creation.js';
import { linear, dequantizeWeight } from '../ops/matmul.js';
import { quantize } from '../ops/quantize.js';
import { dequantizeInt4, quantizeInt4 } from '../ops/int4.js';
import { TensorGpuError } from '../core/errors.js';
import { flatParameters } from '../optim/flat-parameters.js';
import { copyInto } from '../ops/shape-ops.js';
import { stack } from '../ops/layout.js';
import type { Weight } from '../formats/checkpoint.js';
import type { TrainingFamily, TrainingView } from './decoder-training.js';
import { siteParts, sitePlacements, type ProjectionDelta, type ProjectionSite } from '../models/layers/projection-site.js';
import type { SiteAwareDelta } from '../models/layers/training-moe.js';
import { QWEN3_LORA_TARGETS } from '../models/qwen3/training.js';
import { LFM2_LORA_TARGETS } from '../models/lfm2/training.js';
import { QWEN3_5_LORA_TARGETS } from '../models/qwen3_5/training.js';

export interface LoraConfig {
  readonly rank: number;
  /** The delta is scaled by alpha / rank (alpha / sqrt(rank) with rsLora). */
  readonly alpha: number;
  /**
   * PEFT's target_modules: a site gets an adapter when its path is one of them or ends with '.' + one of them
   * ('q_proj' matches every attention's q_proj, 'shared_expert.gate_proj' only the shared experts').
   */
  readonly targetModules: readonly string[];
  readonly rsLora?: boolean;
}

/**
 * PEFT's defaults of each family (every attention and MLP projection, and the DeltaNet's, the conv's), by family:
 * the public record of what each family's training blocks carry as loraTargets.all.
 */
export const DEFAULT_LORA_TARGETS: Readonly<Record<TrainingFamily, readonly string[]>> = {
  qwen3: QWEN3_LORA_TARGETS.all,
  lfm2: LFM2_LORA_TARGETS.all,
  qwen3_5: QWEN3_5_LORA_TARGETS.all,
};

/** Whether a site is one of PEFT's target_modules (its whole path, or a suffix of it after a dot). */
export function targets(site: ProjectionSite, modules: readonly string[]): boolean {
  return modules.some((m) => site.name === m || site.name.endsWith(`.${m}`));
}

/**
 * What `tensorgpu train` adapts by default: every projection of a dense model; for an MoE model the attention
 * (and conv) projections only, since gate/up/down would put an adapter on every expert (name them to get that).
 */
export function defaultLoraTargets(view: Pick<TrainingView, 'layers' | 'loraTargets'>): readonly string[] {
  return view.layers.some((l) => l.ff.kind === 'moe') ? view.loraTargets.mixers : view.loraTargets.all;
}

export interface LoraPair {
  /** [rank, inFeatures] */
  readonly a: Tensor;
  /** [outFeatures, rank] */
  readonly b: Tensor;
}

/**
 * The adapters of one projection of every routed expert (`...experts.<e>.gate_proj` for e = 0..E-1), kept as two
 * stacked trainable tensors: A [E, r, in] and B [E, out, r]. The grouped MoE training forward runs them with
 * expertLinear (a few dispatches for all experts); each expert's own A and B are views of them.
 */
export interface LoraExpertStack extends LoraPair {
  /** The member sites' names, expert 0 first. */
  readonly sites: readonly string[];
}

/** A routed expert's site path with its expert index taken out (the key of its projection's stack), else undefined. */
const stackKey = (s: ProjectionSite) =>
  s.expert !== undefined && !s.interleaved && /\.experts\.\d+\./.test(s.name) ? s.name.replace(/\.experts\.\d+\./, '.experts.*.') : undefined;

/** The chosen sites of each routed-expert projection, when they are experts 0..E-1 of one weight's rows (E >= 2). */
function expertStacks(chosen: readonly ProjectionSite[]): ProjectionSite[][] {
  const byKey = new Map<string, ProjectionSite[]>();
  for (const s of chosen) {
    const key = stackKey(s);
    if (key !== undefined) byKey.set(key, [...(byKey.get(key) ?? []), s]);
  }
  return [...byKey.values()].filter(
    (g) =>
      g.length >= 2 && g.every((s, e) => s.expert === e && s.weight === g[0].weight && s.rowOffset === g[0].rowOffset && s.outFeatures === g[0].outFeatures),
  );
}

export class LoraAdapter {
  /** Member site name -> its stack and expert index. */
  private readonly stackOf = new Map<string, { stack: LoraExpertStack; expert: number }>();

  constructor(
    readonly config: LoraConfig,
    /** By site name (an expert kept in a stack: views of its slices, for merge and export). */
    readonly modules: ReadonlyMap<string, LoraPair>,
    /** Per-expert adapters kept stacked (the trainable tensors of their sites). */
    readonly stacks: readonly LoraExpertStack[] = [],
  ) {
    if (!Number.isInteger(config.rank) || config.rank < 1) throw new RangeError(`LoRA rank must be a positive integer, got ${config.rank}`);
    if (!(config.alpha > 0)) throw new RangeError(`LoRA alpha must be > 0, got ${config.alpha}`);
    for (const stack of stacks) stack.sites.forEach((name, expert) => this.stackOf.set(name, { stack, expert }));
  }

  /**
   * Fresh adapters on every site whose module is targeted (A kaiming-uniform, B zeros; float32, requiring grad),
   * all in one parameter arena. The routed experts' adapters of one projection are kept stacked (LoraExpertStack);
   * their values are those of per-site adapters drawn in site order.
   */
  static create(sites: readonly ProjectionSite[], config: LoraConfig, options: { device?: DeviceName; generator?: Generator } = {}): LoraAdapter {
    const chosen = sites.filter((s) => targets(s, config.targetModules));
    if (chosen.length === 0)
      throw new RangeError(
        `LoRA: no projection matches target modules [${config.targetModules.join(', ')}] (the model has ${[...new Set(sites.map((s) => s.module))].join(', ')})`,
      );
    const device = options.device;
    // Every A drawn in site order, whatever holds it.
    const pairs = new Map(
      chosen.map((s) => {
        const bound = 1 / Math.sqrt(s.inFeatures);
        const a = tidy(() =>
          rand([config.rank, s.inFeatures], { device, generator: options.generator })
            .mul(2 * bound)
            .sub(bound),
        );
        return [s.name, { a, b: zeros([s.outFeatures, config.rank], { device }) }] as const;
      }),
    );
    try {
      return LoraAdapter.fromPairs(config, chosen, pairs);
    } finally {
      for (const { a, b } of pairs.values()) for (const t of [a, b]) t.dispose();
    }
  }

  /**
   * An adapter holding copies of `pairs` (float32, by site name) for the sites that have one, in site order: every
   * A and B (a stack where the routed experts of a projection all have one) in one trainable parameter arena. The
   * caller keeps `pairs`.
   */
  static fromPairs(config: LoraConfig, sites: readonly ProjectionSite[], pairs: ReadonlyMap<string, LoraPair>): LoraAdapter {
    const chosen = sites.filter((s) => pairs.has(s.name));
    const groupOf = new Map(expertStacks(chosen).flatMap((g) => g.map((s) => [s.name, g] as const)));
    // A and B of every module (a stack where its experts are stacked) live in one arena, in parameters() order
    // (their gradients in another): one AdamW dispatch per step.
    const units: { sites: ProjectionSite[]; stacked: boolean }[] = [];
    for (const s of chosen) {
      const g = groupOf.get(s.name);
      if (!g) units.push({ sites: [s], stacked: false });
      else if (g[0] === s) units.push({ sites: g, stacked: true });
    }
    const initial = noGrad(() =>
      units.flatMap(({ sites: members, stacked }) => {
        const [a, b] = [(m: ProjectionSite) => pairs.get(m.name)!.a, (m: ProjectionSite) => pairs.get(m.name)!.b];
        return stacked ? [stack(members.map(a)), stack(members.map(b))] : [a(members[0]), b(members[0])];
      }),
    );
    const params = flatParameters(initial);
    units.forEach(({ stacked }, i) => {
      if (stacked) for (const t of initial.slice(2 * i, 2 * i + 2)) t.dispose();
    });
    const modules = new Map<string, LoraPair>();
    const stacks: LoraExpertStack[] = [];
    units.forEach(({ sites: members, stacked }, i) => {
      const [a, b] = [params[2 * i], params[2 * i + 1]];
      if (!stacked) return modules.set(members[0].name, { a, b });
      stacks.push({ a, b, sites: members.map((m) => m.name) });
      members.forEach((m, e) =>
        modules.set(
          m.name,
          noGrad(() => ({ a: a.select(0, e), b: b.select(0, e) })),
        ),
      );
    });
    // modules in site order, as a per-site adapter lists them.
    return new LoraAdapter(config, new Map(chosen.map((s) => [s.name, modules.get(s.name)!])), stacks);
  }

  get scaling(): number {
    return this.config.alpha / (this.config.rsLora ? Math.sqrt(this.config.rank) : this.config.rank);
  }

  /** The trainable tensors, A then B of each module in site order (of a stack, its two tensors where its expert 0 is). */
  parameters(): Tensor[] {
    const out: Tensor[] = [];
    for (const [name, m] of this.modules) {
      const stacked = this.stackOf.get(name);
      if (!stacked) out.push(m.a, m.b);
      else if (stacked.expert === 0) out.push(stacked.stack.a, stacked.stack.b);
    }
    return out;
  }

  /**
   * A module's gradients after backward: its pair's own, or for an expert kept in a stack its slices of the stacks'
   * gradients (views; zeros for an expert no token chose). Undefined where no gradient reached it.
   */
  gradients(name: string): { a?: Tensor; b?: Tensor } {
    const stacked = this.stackOf.get(name);
    if (!stacked) {
      const m = this.modules.get(name);
      return { a: m?.a.grad, b: m?.b.grad };
    }
    const { stack, expert } = stacked;
    return { a: stack.a.grad?.select(0, expert), b: stack.b.grad?.select(0, expert) };
  }

  /** The delta the training forward adds at each site: scaling * (x A^T) B^T. */
  readonly delta: SiteAwareDelta = Object.assign(
    ((site, x) => {
      const stacked = this.stackOf.get(site.name);
      // An expert of a stack: its slices of the trainable stacks (views that carry the gradient back to them).
      const m = stacked ? { a: stacked.stack.a.select(0, stacked.expert), b: stacked.stack.b.select(0, stacked.expert) } : this.modules.get(site.name);
      return m && linear(linear(x, m.a), m.b).mul(this.scaling);
    }) satisfies ProjectionDelta,
    {
      // Sites it leaves alone (an MoE's experts under attention-only targets) may run fused ops without a delta.
      covers: (site: ProjectionSite) => this.modules.has(site.name),
      expertStack: (sites: readonly ProjectionSite[]) => {
        const first = this.stackOf.get(sites[0]?.name ?? '');
        if (!first || first.stack.sites.length !== sites.length || sites.some((s, e) => first.stack.sites[e] !== s.name)) return undefined;
        return { a: first.stack.a, b: first.stack.b, scaling: this.scaling };
      },
    },
  );

  /**
   * Folds the adapter into the base weights in place (W += scaling B A, rows of stacked weights at their offset).
   * Float weights are updated in their dtype; FP8 weights are dequantized, updated and re-quantized with the same
   * recipe, their scales rewritten; packed 4-bit weights likewise with the same group size (codes, scales, zeros).
   */
  merge(sites: readonly ProjectionSite[]): void {
    // Grouped by the 2-D weight they write (an expert's slice of a stacked weight is its own); a site whose rows
    // the loader split (Qwen3.5's q_proj) writes each part where it went.
    type Part = { site: ProjectionSite; part: number; rowOffset: number; outFeatures: number };
    const groups = new Map<string, { weight: Weight; expert?: number; sites: Part[] }>();
    const ids = new Map<Weight, number>();
    for (const s of sites) {
      if (!this.modules.has(s.name)) continue;
      sitePlacements(s).forEach(({ weight, rowOffset, rows }, part) => {
        if (!ids.has(weight)) ids.set(weight, ids.size);
        const key = `${ids.get(weight)}:${s.expert ?? -1}`;
        const g = groups.get(key) ?? { weight, expert: s.expert, sites: [] };
        g.sites.push({ site: s, part, rowOffset, outFeatures: rows });
        groups.set(key, g);
      });
    }
    noGrad(() => {
      for (const { weight, expert, sites: parts } of groups.values()) {
        tidy(() => {
          const slice = (t: Tensor) => (expert === undefined ? t : t.select(0, expert));
          const data = slice(weight.data);
          const deltaOf = ({ site, part }: Part) => {
            const m = this.modules.get(site.name)!;
            return siteParts(site, m.b, 0)[part].matmul(m.a).mul(this.scaling);
          };
          if (!weight.scale) {
            for (const s of parts) {
              const rows = data.narrow(0, s.rowOffset, s.outFeatures);
              copyInto(rows, rows.to('float32').add(deltaOf(s)));
            }
            return;
          }
          const scale = slice(weight.scale);
          const q4 = weight.int4;
          if (q4) {
            // QLoRA: dequantize, add, re-quantize with the same group size (new codes, scales and zero points).
            if (q4.perm) throw new TensorGpuError(`LoRA merge: act-order (g_idx) 4-bit weights are not re-quantized yet (${parts[0].site.name})`);
            const zero = slice(q4.zero);
            const full4 = dequantizeInt4({ data, scale, zero, groupSize: q4.groupSize });
            for (const s of parts) {
              const rows = full4.narrow(0, s.rowOffset, s.outFeatures);
              copyInto(rows, rows.add(deltaOf(s)));
            }
            const q = quantizeInt4(full4, q4.groupSize);
            copyInto(data, q.data);
            copyInto(scale, q.scale.to(scale.dtype));
            copyInto(zero, q.zero);
            return;
          }
          const full = dequantizeWeight(data, scale, weight.recipe ?? 'block');
          for (const s of parts) {
            const rows = full.narrow(0, s.rowOffset, s.outFeatures);
            copyInto(rows, rows.add(deltaOf(s)));
          }
          const granularity = weight.recipe === 'row' ? 'row' : weight.recipe === 'tensor' ? 'tensor' : 'block128';
          const q = quantize(full, { dtype: data.dtype as 'float8_e4m3fn', granularity });
          copyInto(data, q.data);
          copyInto(scale, q.scale.reshape(scale.shape));
        });
      }
    });
  }

  dispose(): void {
    // A stacked expert's pair are views of the stacks: both released (dispose is idempotent).
    for (const m of this.modules.values()) for (const t of [m.a, m.b]) t.dispose();
    for (const s of this.stacks) for (const t of [s.a, s.b]) t.dispose();
  }
}
