// scaledMm: torch._scaled_mm / F.scaled_mm for FP8 operands, plus the 128x128 block scales of HF FP8 checkpoints.
import { runKernel } from '../kernels/registry.js';
import type { MatmulScaling, ScaleRecipe } from '../runtime/backend.js';
import { isFp8, type DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { compact } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';

export type ScaledMmOutDtype = 'float32' | 'float16' | 'bfloat16' | 'float8_e4m3fn';

export interface ScaledMmOptions {
  /** float32 dequantization scale of a: one value, [M, 1] per row, or [M, ceil(K/128)] per 1x128 group. */
  scaleA: Tensor;
  /**
   * float32 dequantization scale of b: one value, [1, N] (or [N, 1]) per column, or [ceil(N/128), ceil(K/128)] per
   * 128x128 block of the [N, K] weight.
   */
  scaleB: Tensor;
  /** Output dtype (default bfloat16, as F.scaled_mm). An FP8 output saturates. */
  outDtype?: ScaledMmOutDtype;
  /** Added to every row: shape [N], float32/float16/bfloat16. */
  bias?: Tensor;
  /** A float32 scalar multiplied into the result before the cast; only with an FP8 output (torch's scale_result). */
  scaleResult?: Tensor;
  /** How each scale applies, when its shape alone is ambiguous (inferred otherwise). */
  recipeA?: ScaleRecipe;
  recipeB?: ScaleRecipe;
}

const OUT_DTYPES: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float8_e4m3fn'];
const BIAS_DTYPES: readonly DType[] = ['float32', 'float16', 'bfloat16'];

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** The recipe a scale's shape implies; `candidates` pairs each recipe with the shape it needs. */
function recipeOf(which: string, scale: Tensor, candidates: [ScaleRecipe, number[]][], explicit?: ScaleRecipe): ScaleRecipe {
  if (scale.dtype !== 'float32') throw new DTypeError(`scaledMm: ${which} must be float32, got ${scale.describe()}`);
  const fits = (r: ScaleRecipe, shape: number[]) => (r === 'tensor' ? scale.numel === 1 : sameShape(scale.shape, shape));
  if (explicit) {
    const want = candidates.find(([r]) => r === explicit)!;
    if (!fits(...want))
      throw new ShapeError(
        `scaledMm: ${which} for recipe '${explicit}' must have shape ${explicit === 'tensor' ? 'with one element' : formatShape(want[1])}, got ${formatShape(scale.shape)}`,
      );
    return explicit;
  }
  const matches = candidates.filter(([r, shape]) => fits(r, shape)).map(([r]) => r);
  if (matches.length === 0) {
    const expected = candidates.map(([r, shape]) => `${r}: ${r === 'tensor' ? 'one element' : formatShape(shape)}`).join(', ');
    throw new ShapeError(`scaledMm: ${which} has shape ${formatShape(scale.shape)}; expected ${expected}`);
  }
  // One element is the same scale everywhere, whichever recipe also fits. For a, row [M, 1] and block [M, 1]
  // coincide only when K <= 128, where both mean the same; for b, row [1, N] vs block shapes differ in meaning.
  if (matches.includes('tensor')) return 'tensor';
  if (matches.length > 1 && which === 'scaleA') return 'row';
  if (matches.length > 1) {
    throw new ShapeError(`scaledMm: ${which} of shape ${formatShape(scale.shape)} fits recipes ${matches.join(' and ')}; pass recipeB to choose`);
  }
  return matches[0];
}

/**
 * out = (a * scaleA) @ (b * scaleB) [+ bias] [* scaleResult], accumulated in float32 (torch._scaled_mm).
 * a: [M, K] and b: [K, N] in float8_e4m3fn or float8_e5m2; b is typically a checkpoint weight [N, K] passed as w.T,
 * which takes the decode GEMV path for M <= 4 without any copy.
 */
export function scaledMm(a: Tensor, b: Tensor, options: ScaledMmOptions): Tensor {
  const { scaleA, scaleB, bias, scaleResult } = options;
  const outDtype = options.outDtype ?? 'bfloat16';
  const backend = commonBackend('scaledMm', a, b, scaleA, scaleB, ...(bias ? [bias] : []), ...(scaleResult ? [scaleResult] : []));
  for (const [name, t] of [
    ['a', a],
    ['b', b],
  ] as const) {
    if (!isFp8(t.dtype)) throw new DTypeError(`scaledMm: ${name} must be float8_e4m3fn or float8_e5m2, got ${t.describe()}; quantize it first`);
    if (t.ndim !== 2) throw new ShapeError(`scaledMm: ${name} must be 2-D, got ${formatShape(t.shape)}`);
  }
  const [m, k] = a.shape;
  const [k2, n] = b.shape;
  if (k !== k2) throw new ShapeError(`scaledMm: a ${formatShape(a.shape)} and b ${formatShape(b.shape)} cannot be multiplied (${k} vs ${k2})`);
  if (!OUT_DTYPES.includes(outDtype)) throw new DTypeError(`scaledMm: outDtype must be one of ${OUT_DTYPES.join(', ')}, got ${outDtype}`);
  const kb = Math.ceil(k / 128);
  const recipeA = recipeOf(
    'scaleA',
    scaleA,
    [
      ['tensor', [1]],
      ['row', [m, 1]],
      ['block', [m, kb]],
    ],
    options.recipeA,
  );
  // A per-column scale of b is [1, N] (torch); [N, 1], what quantize(w, {granularity: 'row'}) gives for the [N, K]
  // weight, means the same and is accepted as is.
  const rowB = n > 1 && scaleB.ndim === 2 && scaleB.shape[0] === n && scaleB.shape[1] === 1 ? [n, 1] : [1, n];
  const recipeB = recipeOf(
    'scaleB',
    scaleB,
    [
      ['tensor', [1]],
      ['row', rowB],
      ['block', [Math.ceil(n / 128), kb]],
    ],
    options.recipeB,
  );
  if (bias) {
    if (!BIAS_DTYPES.includes(bias.dtype)) throw new DTypeError(`scaledMm: bias must be float32, float16 or bfloat16, got ${bias.describe()}`);
    if (!sameShape(bias.shape, [n])) throw new ShapeError(`scaledMm: bias must have shape [${n}], got ${formatShape(bias.shape)}`);
  }
  if (scaleResult) {
    if (outDtype !== 'float8_e4m3fn') throw new DTypeError(`scaledMm: scaleResult only applies to a float8_e4m3fn output, got outDtype ${outDtype}`);
    if (scaleResult.dtype !== 'float32') throw new DTypeError(`scaledMm: scaleResult must be float32, got ${scaleResult.describe()}`);
    if (scaleResult.numel !== 1) throw new ShapeError(`scaledMm: scaleResult must be one float32 value, got ${scaleResult.describe()}`);
  }
  const owned = [scaleA, scaleB, ...(bias ? [bias] : []), ...(scaleResult ? [scaleResult] : [])].map(compact);
  try {
    const [sa, sb] = owned;
    const scaling: MatmulScaling<unknown> = {
      scaleA: { handle: sa.operand().handle, recipe: recipeA },
      scaleB: { handle: sb.operand().handle, recipe: recipeB },
      bias: bias ? owned[2].operand() : undefined,
      scaleResult: scaleResult ? owned[owned.length - 1].operand().handle : undefined,
    };
    const handle = runKernel('matmul', backend, { a: a.operand(), b: b.operand(), dims: { batch: [], m, n, k }, outDtype, scaling });
    return wrap(backend, handle, outDtype, [m, n]);
  } finally {
    for (const t of owned) t.dispose();
  }
}
