import { EPILOGUE_UNARY_OPS, type EpilogueUnary, type ScaleRecipe } from '../runtime/backend.js';
import { runKernel } from '../kernels/registry.js';
import { isFp8 } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { broadcastShapes, broadcastView, formatShape, transposed2d } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { compact, reshape, unsqueeze } from './shape-ops.js';
import { checkInt4, dequantizeInt4 } from './int4.js';
import { commonBackend, requireDTypes, wrap } from './util.js';
import { differentiable } from '../autograd/function.js';
import { sumTo, unaryRule } from './grad-rules.js';
import { swigluGrad } from './nn.js';
import { gelu, mul, relu, sigmoid, silu, tanh } from './elementwise.js';
import { sum } from './reduce.js';
import { cast } from './convert.js';

const MATMUL_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

/**
 * torch.matmul: [..., m, k] @ [..., k, n] with broadcast batch dims; 1-D operands gain and then lose a dim.
 * Accumulates in float32 whatever the input dtype; FP8 operands go through scaledMm instead.
 */
export function matmul(x: Tensor, y: Tensor): Tensor {
  if (isIntegerMatmul(x, y)) return integerMatmul(x, y);
  return differentiable(
    'matmul',
    [x, y],
    () => matmulForward(x, y),
    (g, s) => matmulRule(g, s.inputs[0] as Tensor, s.inputs[1] as Tensor, s.needs),
    { inputs: [0, 1] },
  );
}

const INTEGER_MATMUL_DTYPES: ReadonlySet<string> = new Set(['int32', 'uint8', 'int64']);
const isIntegerMatmul = (x: Tensor, y: Tensor) => INTEGER_MATMUL_DTYPES.has(x.dtype) && INTEGER_MATMUL_DTYPES.has(y.dtype);

/**
 * torch.matmul of integer tensors (CPU torch has it; CUDA does not), composed: [..., m, k, 1] * [..., 1, k, n]
 * summed over k in int64, then in the promoted dtype (an int32 result past int32's range wraps, as torch's). It materializes m * k * n products: meant for the small integer matmuls ported code has, not for speed.
 */
function integerMatmul(x: Tensor, y: Tensor): Tensor {
  if (x.ndim === 0 || y.ndim === 0) throw new ShapeError(`matmul: both operands need at least 1 dim, got ${formatShape(x.shape)} and ${formatShape(y.shape)}`);
  const a = x.ndim === 1 ? unsqueeze(x, 0) : x;
  const b = y.ndim === 1 ? unsqueeze(y, 1) : y;
  const owned: Tensor[] = [];
  const own = (t: Tensor) => (owned.push(t), t);
  try {
    const [m, k] = a.shape.slice(-2);
    const [k2, n] = b.shape.slice(-2);
    if (k !== k2) throw new ShapeError(`matmul: inner dims differ: ${formatShape(x.shape)} @ ${formatShape(y.shape)} (${k} vs ${k2})`);
    const products = own(mul(own(unsqueeze(a, -1)), own(unsqueeze(b, -3))));
    // The sum is int64 (torch's sum of ints); the matmul keeps the operands' promoted dtype, wrapping as torch's.
    const wide = own(sum(products, -2));
    const out = wide.dtype === products.dtype ? wide : own(cast(wide, products.dtype));
    const batch = out.shape.slice(0, -2);
    const result = reshape(out, [...batch, ...(x.ndim > 1 ? [m] : []), ...(y.ndim > 1 ? [n] : [])]);
    return result;
  } finally {
    for (const t of owned) t.dispose();
    if (a !== x) a.dispose();
    if (b !== y) b.dispose();
  }
}

/** d(x @ y): g @ y^T and x^T @ g, with 1-D operands' dims restored and broadcast batch dims summed away. */
function matmulRule(g: Tensor, x: Tensor, y: Tensor, needs: readonly boolean[]): (Tensor | undefined)[] {
  const a = x.ndim === 1 ? unsqueeze(x, 0) : x;
  const b = y.ndim === 1 ? unsqueeze(y, 1) : y;
  const [m, n] = [a.shape[a.ndim - 2], b.shape[b.ndim - 1]];
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const g2 = reshape(g, [...batch, m, n]);
  const ga = needs[0] ? sumTo(matmulForward(g2, b.transpose(-2, -1)), a.shape).reshape(x.shape) : undefined;
  const gb = needs[1] ? sumTo(matmulForward(a.transpose(-2, -1), g2), b.shape).reshape(y.shape) : undefined;
  return [ga, gb];
}

function matmulForward(x: Tensor, y: Tensor): Tensor {
  const backend = commonBackend('matmul', x, y);
  requireDTypes('matmul', x, MATMUL_DTYPES);
  requireDTypes('matmul', y, MATMUL_DTYPES);
  if (x.dtype !== y.dtype) throw new DTypeError(`matmul: both operands must have one dtype, got ${x.describe()} and ${y.describe()}`);
  if (x.ndim === 0 || y.ndim === 0) throw new ShapeError(`matmul: both operands need at least 1 dim, got ${formatShape(x.shape)} and ${formatShape(y.shape)}`);
  const a = x.ndim === 1 ? unsqueeze(x, 0) : x;
  const b = y.ndim === 1 ? unsqueeze(y, 1) : y;
  try {
    const [m, k] = a.shape.slice(-2);
    const [k2, n] = b.shape.slice(-2);
    if (k !== k2) throw new ShapeError(`matmul: inner dims differ: ${formatShape(x.shape)} @ ${formatShape(y.shape)} (${k} vs ${k2})`);
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const opA = { ...a.operand(), view: broadcastView(a.layout, [...batch, m, k]) };
    const opB = { ...b.operand(), view: broadcastView(b.layout, [...batch, k, n]) };
    const out = wrap(backend, runKernel('matmul', backend, { a: opA, b: opB, dims: { batch, m, n, k }, outDtype: x.dtype }), x.dtype, [...batch, m, n]);
    if (x.ndim > 1 && y.ndim > 1) return out;
    // Drop the dim each 1-D operand gained (both for vector @ vector, giving a 0-d result as torch.matmul does).
    const squeezed = reshape(out, [...batch, ...(x.ndim > 1 ? [m] : []), ...(y.ndim > 1 ? [n] : [])]);
    out.dispose();
    return squeezed;
  } finally {
    if (a !== x) a.dispose();
    if (b !== y) b.dispose();
  }
}

export interface LinearOptions {
  /**
   * Dequantization scale of an FP8 weight (weight-only FP8: the activations stay in their float dtype): [1]
   * per tensor, [N] or [N, 1] per output channel, or [ceil(N/128), ceil(K/128)] 128x128 blocks (HF
   * `weight_scale_inv`). float32.
   */
  weightScale?: Tensor;
  /** How weightScale applies when its shape could mean two recipes (e.g. [1, 1]); inferred otherwise. */
  recipe?: ScaleRecipe;
  /**
   * Added to the result in the kernel's epilogue (a residual connection, `h + o_proj(x)`): same shape as the
   * output, any float dtype. Saves the separate add's dispatch and its pass over memory.
   */
  residual?: Tensor;
  /**
   * 'swiglu': the weight's N rows are gate rows then up rows (a stacked gate|up projection) and the result is
   * silu(x . gate^T) * (x . up^T), [..., N/2], the residual (if any) added after: one dispatch on the decode GEMV.
   * 'gelu', 'gelu_tanh', 'silu', 'relu', 'tanh', 'sigmoid': act(x . W^T + bias) in the kernel's epilogue (computed on
   * the float32 result, as the op after a float32 linear would), the residual (if any) added after; every path
   * (GEMV, GEMM, CPU) in one dispatch.
   */
  activation?: 'swiglu' | EpilogueUnary;
  /**
   * The weight is packed 4-bit (formats/int4.ts): `weight` its int32 words [N, K/8], weightScale its group scales
   * [N, K/groupSize], these its zero points (uint8, same shape) and, under act-order, the activation column of each
   * stored column (int32 [K]). The GEMV and GEMM dequantize in registers; frozen like FP8 weights.
   */
  int4?: { readonly zero: Tensor; readonly groupSize: number; readonly perm?: Tensor };
}

function weightRecipe(scale: Tensor, n: number, k: number, given?: ScaleRecipe): ScaleRecipe {
  const s = scale.shape.join();
  const fits: Record<ScaleRecipe, boolean> = {
    tensor: scale.numel === 1,
    row: s === `${n}` || s === `${n},1`,
    block: s === `${Math.ceil(n / 128)},${Math.ceil(k / 128)}`,
  };
  if (given) {
    if (!fits[given]) throw new ShapeError(`linear: a ${given} weight scale for an [${n}, ${k}] weight cannot have shape ${formatShape(scale.shape)}`);
    return given;
  }
  const recipe = (['tensor', 'row', 'block'] as const).find((r) => fits[r]);
  if (!recipe) {
    throw new ShapeError(
      `linear: weight scale ${formatShape(scale.shape)} fits no recipe for an [${n}, ${k}] weight ([1], [${n}], [${n}, 1] or [${Math.ceil(n / 128)}, ${Math.ceil(k / 128)}])`,
    );
  }
  return recipe;
}

/**
 * A dense layer, torch.nn.functional.linear: x [..., K] @ weight[N, K]^T (+ bias [N]) -> [..., N] in x's dtype.
 * Unlike matmul, x and the weight may differ in dtype (e.g. float32 activations with a bfloat16 weight): the kernel
 * reads each in its own format and accumulates in float32, so no cast pass runs. An FP8 weight takes its
 * dequantization scale in options (weight-only FP8). Decode shapes (at most 4 rows) take the GEMV path, reading
 * every weight byte once.
 */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor, options: LinearOptions = {}): Tensor {
  // The FP8 / 4-bit scale and a 4-bit weight's zero points and permutation are saved with x and the weight: backward
  // dequantizes with them after the caller may have disposed its views (an expert's slices of stacked ones).
  const q = options.int4;
  return differentiable(
    'linear',
    [x, weight, bias, options.residual, options.weightScale, q?.zero, q?.perm],
    () => linearForward(x, weight, bias, options),
    (g, s) =>
      linearRule(g, s.inputs[0] as Tensor, s.inputs[1] as Tensor, s.inputs[2] as Tensor | undefined, s.needs, {
        ...options,
        weightScale: s.inputs[4] as Tensor | undefined,
        int4: q && { ...q, zero: s.inputs[5] as Tensor, perm: s.inputs[6] as Tensor | undefined },
      }),
    { inputs: [0, 1, 2, 4, 5, 6] },
  );
}

/** The epilogue activations as ops (linear's backward runs their own rules). */
const EPILOGUE_ACTIVATIONS: Record<EpilogueUnary, (x: Tensor) => Tensor> = {
  silu,
  gelu: (x) => gelu(x),
  gelu_tanh: (x) => gelu(x, { approximate: 'tanh' }),
  relu,
  tanh,
  sigmoid,
};

/**
 * d linear: dx = g @ W (a linear over W^T, any weight dtype; an FP8 weight dequantized for it), dW = g^T @ x,
 * db = sum of g's rows, dresidual = g. With the fused swiglu, the pre-activation is recomputed (one more linear)
 * rather than kept from the forward. FP8 weights are frozen: they have no gradient.
 */
function linearRule(g: Tensor, x: Tensor, weight: Tensor, bias: Tensor | undefined, needs: readonly boolean[], options: LinearOptions): (Tensor | undefined)[] {
  const [n, k] = options.int4 ? [weight.shape[0], weight.shape[1] * 8] : weight.shape;
  const quantized = options.weightScale !== undefined;
  if (quantized && needs[1]) throw new DTypeError(`linear: an ${weight.dtype} weight has no gradient (FP8 weights are frozen; train adapters on top of them)`);
  const gOut = needs[3] ? reshape(g, g.shape) : undefined;
  if (options.activation === 'swiglu') {
    const pre = linearForward(x, weight, undefined, { weightScale: options.weightScale, recipe: options.recipe, int4: options.int4 });
    g = swigluGrad(pre, g);
  } else if (options.activation) {
    // The pre-activation recomputed (bias included), then the op's own backward rule.
    const pre = linearForward(x, weight, bias, { weightScale: options.weightScale, recipe: options.recipe, int4: options.int4 });
    const act = EPILOGUE_ACTIVATIONS[options.activation](pre);
    g = unaryRule(options.activation, g, pre, act);
  }
  const rows = reshape(g, [g.numel / n, n]);
  const xs = reshape(x, [x.numel / k, k]);
  const w = options.int4
    ? dequantizeInt4({ data: weight, scale: options.weightScale!, ...options.int4 })
    : quantized
      ? dequantizeWeight(weight, options.weightScale!, weightRecipe(options.weightScale!, n, k, options.recipe))
      : weight;
  const gx = needs[0] ? linearForward(g, w.transpose(0, 1), undefined, {}) : undefined;
  const gw = needs[1] ? matmulForward(rows.transpose(0, 1), xs.dtype === rows.dtype ? xs : xs.to(rows.dtype)) : undefined;
  const gb = needs[2] ? rows.sum(0) : undefined;
  return [gx, gw, gb, gOut];
}

/** An FP8 [N, K] weight as float32 values: codes times their tensor, row or 128x128 block scale. */
export function dequantizeWeight(weight: Tensor, scale: Tensor, recipe: ScaleRecipe): Tensor {
  const [n, k] = weight.shape;
  const w = weight.to('float32');
  if (recipe === 'tensor') return w.mul(scale.reshape([]));
  if (recipe === 'row') return w.mul(scale.reshape(n, 1));
  const [nb, kb] = scale.shape;
  const blocks = scale
    .reshape(nb, 1, kb, 1)
    .expand(nb, 128, kb, 128)
    .reshape(nb * 128, kb * 128);
  return w.mul(blocks.narrow(0, 0, n).narrow(1, 0, k));
}

function linearForward(x: Tensor, weight: Tensor, bias?: Tensor, options: LinearOptions = {}): Tensor {
  const scale = options.weightScale;
  const residual = options.residual;
  const backend = commonBackend('linear', x, weight, ...(bias ? [bias] : []), ...(scale ? [scale] : []), ...(residual ? [residual] : []));
  requireDTypes('linear', x, MATMUL_DTYPES);
  if (weight.ndim !== 2) throw new ShapeError(`linear: weight must be [N, K], got ${formatShape(weight.shape)}`);
  const int4 = options.int4;
  const [n, k] = int4 ? checkInt4Linear(weight, scale, int4) : weight.shape;
  let recipe: ScaleRecipe | undefined;
  if (int4) {
    // checked above
  } else if (isFp8(weight.dtype)) {
    if (!scale) throw new DTypeError(`linear: an ${weight.dtype} weight needs its dequantization scale (options.weightScale)`);
    requireDTypes('linear weightScale', scale, ['float32']);
    recipe = weightRecipe(scale, n, k, options.recipe);
  } else {
    requireDTypes('linear', weight, MATMUL_DTYPES);
    if (scale) throw new DTypeError(`linear: weightScale applies to FP8 weights only, got ${weight.describe()}`);
  }
  if (x.ndim === 0 || x.shape[x.ndim - 1] !== k)
    throw new ShapeError(`linear: x ${formatShape(x.shape)} does not end in K = ${k} of weight ${formatShape(weight.shape)}`);
  if (bias) {
    requireDTypes('linear', bias, MATMUL_DTYPES);
    if (bias.ndim !== 1 || bias.shape[0] !== n) throw new ShapeError(`linear: bias must have shape [${n}], got ${formatShape(bias.shape)}`);
  }
  const lead = x.shape.slice(0, -1);
  const activation = options.activation;
  if (activation !== undefined && activation !== 'swiglu' && !(EPILOGUE_UNARY_OPS as readonly string[]).includes(activation))
    throw new RangeError(`linear: activation must be 'swiglu' or one of ${EPILOGUE_UNARY_OPS.join(', ')}, got ${String(activation)}`);
  const swiglu = activation === 'swiglu';
  if (swiglu) {
    if (n % 2 !== 0) throw new ShapeError(`linear: swiglu needs an even N (gate rows then up rows), got weight ${formatShape(weight.shape)}`);
    if (bias) throw new ShapeError('linear: swiglu does not take a bias');
  }
  const outCols = swiglu ? n / 2 : n;
  if (residual) {
    requireDTypes('linear residual', residual, MATMUL_DTYPES);
    if (residual.shape.join() !== [...lead, outCols].join())
      throw new ShapeError(`linear: residual must have the output's shape ${formatShape([...lead, outCols])}, got ${formatShape(residual.shape)}`);
  }
  const m = lead.reduce((p, d) => p * d, 1);
  const rows = reshape(x, [m, k]);
  const b = bias && compact(bias);
  const s = scale && compact(scale);
  const r = residual && compact(residual);
  const z = int4 && compact(int4.zero);
  const pm = int4?.perm && compact(int4.perm);
  try {
    const wT = { ...weight.operand(), view: transposed2d(weight.layout) };
    const scaling = {
      ...(b ? { bias: b.operand() } : {}),
      ...(s && recipe ? { scaleB: { handle: s.storage.handle, recipe } } : {}),
      ...(s && z && int4 ? { int4B: { scale: s.operand(), zero: z.operand(), groupSize: int4.groupSize, ...(pm ? { perm: pm.operand() } : {}) } } : {}),
      ...(r ? { residual: { ...r.operand(), view: { shape: [m, outCols], strides: [outCols, 1], offset: 0 } } } : {}),
      ...(swiglu ? { activation: 'swiglu' as const } : activation ? { unary: activation } : {}),
    };
    const handle = runKernel('matmul', backend, { a: rows.operand(), b: wT, dims: { batch: [], m, n, k }, outDtype: x.dtype, scaling });
    const out = wrap(backend, handle, x.dtype, [m, outCols]);
    if (lead.length === 1) return out;
    const shaped = reshape(out, [...lead, outCols]);
    out.dispose();
    return shaped;
  } finally {
    rows.dispose();
    b?.dispose();
    s?.dispose();
    r?.dispose();
    z?.dispose();
    pm?.dispose();
  }
}

/** [N, K] of a packed 4-bit weight, its scale and zero points checked against it. */
function checkInt4Linear(weight: Tensor, scale: Tensor | undefined, int4: NonNullable<LinearOptions['int4']>): [number, number] {
  if (!scale) throw new DTypeError('linear: an int4 weight needs its group scales (options.weightScale)');
  const { n, k } = checkInt4('linear', { data: weight, scale, ...int4 });
  return [n, k];
}
