// A projection as an adapter, a merge and an export see it (a LoRA site): its Hugging Face module path and where its
// rows sit in the weights the loader arranged (q|k|v and gate|up stacked by rows, experts stacked, Qwen3.5's q_proj
// split into its queries and gates), and the training forward's linear with the adapter's delta added at each site.
// Each family names its sites (models/<family>/training.ts); train/ only reads them.
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { weightScaleOptions } from './blocks.js';
import { zeros } from '../../ops/creation.js';
import { linear } from '../../ops/matmul.js';
import { cat } from '../../ops/shape-ops.js';

/** One linear layer as an adapter sees it: where it lives in the checkpoint and in the (stacked) loaded weight. */
export interface ProjectionSite {
  /** The Hugging Face module path, e.g. 'model.layers.0.self_attn.q_proj'. */
  readonly name: string;
  /** Its last component ('q_proj'), the usual entry of PEFT's target_modules (which match a path's dotted suffix). */
  readonly module: string;
  readonly inFeatures: number;
  readonly outFeatures: number;
  /** The loaded weight holding its rows (q|k|v and gate|up are stacked at load); with `interleaved`, parts[0]'s. */
  readonly weight: Weight;
  readonly rowOffset: number;
  /** For an MoE expert: its index into the stacked [E, N, K] weight. */
  readonly expert?: number;
  /**
   * Rows the loader took apart (Qwen3.5's q_proj: per head [query | gate] in the checkpoint, regrouped at load into
   * all queries, then all gates). The site's outFeatures rows, in the checkpoint's order, are `heads` runs of
   * parts.length blocks of `width` rows; block j of head h is rows parts[j].rowOffset + h * width .. + width of
   * parts[j].weight. Adapters keep the checkpoint's order (as PEFT saves them); the forward, merge and export map it.
   */
  readonly interleaved?: { readonly heads: number; readonly width: number; readonly parts: readonly { readonly weight: Weight; readonly rowOffset: number }[] };
}

/** An adapter's contribution x -> delta [S, outFeatures] at a site, or undefined where it has none. */
export type ProjectionDelta = (site: ProjectionSite, x: Tensor) => Tensor | undefined;

export function site(name: string, weight: Weight, rowOffset: number, outFeatures: number, expert?: number): ProjectionSite {
  return {
    name,
    module: name.slice(name.lastIndexOf('.') + 1),
    inFeatures: weight.data.shape[weight.data.ndim - 1] * (weight.int4 ? 8 : 1),
    outFeatures,
    weight,
    rowOffset,
    expert,
  };
}

/**
 * t's `dim` (of a site's outFeatures, in the checkpoint's order) split into the site's parts: for a plain site t
 * itself, for an interleaved one each part's [heads * width] rows in the order its weight holds them.
 */
export function siteParts(s: ProjectionSite, t: Tensor, dim: number): Tensor[] {
  const il = s.interleaved;
  if (!il) return [t];
  const n = il.parts.length;
  const shape = t.shape;
  const grouped = t.reshape([...shape.slice(0, dim), il.heads, n, il.width, ...shape.slice(dim + 1)]);
  return il.parts.map((_, j) => grouped.select(dim + 1, j).reshape([...shape.slice(0, dim), il.heads * il.width, ...shape.slice(dim + 1)]));
}

/** The inverse of siteParts along dim 0: the parts' rows back in the checkpoint's order. */
export function joinSiteParts(s: ProjectionSite, parts: readonly Tensor[]): Tensor {
  const il = s.interleaved;
  if (!il) return parts[0];
  const rest = parts[0].shape.slice(1);
  return cat(
    parts.map((p) => p.reshape([il.heads, 1, il.width, ...rest])),
    1,
  ).reshape([s.outFeatures, ...rest]);
}

/** A site's rows of its (stacked) weight, in the checkpoint's order; an expert site's of its expert. */
export function siteRows(s: ProjectionSite): Tensor {
  const pieces = sitePlacements(s).map((p) => (s.expert === undefined ? p.weight.data : p.weight.data.select(0, s.expert)).narrow(0, p.rowOffset, p.rows));
  return joinSiteParts(s, pieces);
}

/** Where each part of a site lives: the weight, its first row and row count (one entry unless interleaved). */
export function sitePlacements(s: ProjectionSite): { weight: Weight; rowOffset: number; rows: number }[] {
  const il = s.interleaved;
  return il
    ? il.parts.map((p) => ({ weight: p.weight, rowOffset: p.rowOffset, rows: il.heads * il.width }))
    : [{ weight: s.weight, rowOffset: s.rowOffset, rows: s.outFeatures }];
}

/** x W^T (+ bias, + residual) plus the adapter's delta at this site. */
export function projectSite(x: Tensor, s: ProjectionSite, delta: ProjectionDelta | undefined, residual?: Tensor, bias?: Tensor): Tensor {
  const y = linear(x, s.weight.data, bias, { ...weightScaleOptions(s.weight), residual });
  const d = delta?.(s, x);
  return d ? y.add(d) : y;
}

/** Sites stacked in one weight: one linear, the deltas (zeros where a site has none) added side by side. */
export function projectSites(x: Tensor, sites: readonly ProjectionSite[], delta: ProjectionDelta | undefined): Tensor {
  const w = sites[0].weight;
  if (!sites.every((s) => s.weight === w))
    return cat(
      sites.map((s) => projectSite(x, s, delta)),
      1,
    );
  return withDeltas(linear(x, w.data, undefined, weightScaleOptions(w)), x, sites, delta);
}

/** y (the sites' outputs side by side) plus their deltas at x, zeros where a site has none. */
export function withDeltas(y: Tensor, x: Tensor, sites: readonly ProjectionSite[], delta: ProjectionDelta | undefined): Tensor {
  const deltas = sites.map((s) => delta?.(s, x));
  if (deltas.every((d) => d === undefined)) return y;
  if (deltas.length === 1) return y.add(deltas[0]!);
  return y.add(
    cat(
      deltas.map((d, i) => d ?? zeros([x.shape[0], sites[i].outFeatures], { device: x.device })),
      1,
    ),
  );
}
