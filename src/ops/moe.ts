// Mixture-of-experts ops whose expert choice stays on the device: the router's top-k, and a linear layer that reads
// each slot's expert id on the GPU (gather), optionally summing a token's slots with its routing weights
// (combine). An MoE block is then a handful of dispatches with no read back, whatever the number of experts.
import { runKernel } from '../kernels/registry.js';
import type { RouteOptions } from '../runtime/backend.js';
import { DTypeError, ShapeError, TensorGpuError } from '../core/errors.js';
import { isFp8 } from '../core/dtype.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { compact } from './shape-ops.js';
import { full, zeros } from './creation.js';
import { scatter } from './scatter.js';
import { commonBackend, requireDTypes, wrap } from './util.js';
import { noGrad } from '../autograd/grad-mode.js';
import { needsGrad, record } from '../autograd/node.js';
import { notDifferentiable } from '../autograd/function.js';
import { float32 } from './grad-rules.js';
import { checkInt4 } from './int4.js';
import { swiglu } from './nn.js';

const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

export interface RouteOpOptions {
  /** Divide the chosen weights by their sum (+ normalizeEps): Qwen3-MoE's / LFM2-MoE's norm_topk_prob. */
  normalize?: boolean;
  /** 'softmax' over the experts (default; Qwen3-MoE) or an elementwise 'sigmoid' (LFM2-MoE). */
  scoring?: 'softmax' | 'sigmoid';
  /** float32 [E] added to the scores for the choice only; weights stay the unbiased scores (LFM2's expert_bias). */
  selectionBias?: Tensor;
  /** Added to the sum before normalizing (default 0; LFM2-MoE: 1e-6). */
  normalizeEps?: number;
  /** Multiplies the final weights (routed_scaling_factor; default 1). */
  scale?: number;
  /**
   * A shared expert gated by sigmoid (Qwen3.5-MoE / Qwen3-Next's shared_expert_gate, a [1, H] linear): the logits
   * have E+1 columns (the router weight E+1 rows, shared_expert_gate stacked last), the last being the gate's logit.
   * Scoring, selectionBias ([E]), top-k, normalize and scale apply to the first E only; ids and weights become
   * [T, topK+1] whose last slot is id E with weight sigmoid(gate logit) (neither normalized nor scaled), so a
   * shared expert stacked as expert E of the expert weights runs in the same expertLinear dispatches.
   */
  sharedExpert?: boolean;
}

/**
 * Router top-k: a float32 score per expert (softmax over the row, or sigmoid), the topK experts by score +
 * selectionBias (descending; ties go to the lower id, as torch.topk on CPU), weighted by their scores, renormalized
 * when `normalize`, times `scale`. A row with a NaN logit (for softmax also +Inf, or only -Inf logits) has no
 * scores: it gets ids 0..topK-1 with NaN weights on every device. With `sharedExpert`, logits are [T, E+1] and
 * the result [T, topK+1] (see RouteOpOptions.sharedExpert); the shared slot is sigmoid(its logit) even in a NaN row.
 */
export function moeRoute(logits: Tensor, topK: number, options: RouteOpOptions = {}): { ids: Tensor; weights: Tensor } {
  const backend = commonBackend('moeRoute', logits, ...(options.selectionBias ? [options.selectionBias] : []));
  requireDTypes('moeRoute', logits, FLOAT_DTYPES);
  if (logits.ndim !== 2) throw new ShapeError(`moeRoute: logits must be [T, E], got ${formatShape(logits.shape)}`);
  const [t, columns] = logits.shape;
  const e = routedExperts('moeRoute', 'logits', logits.shape, columns, options);
  checkTopK('moeRoute', topK, e);
  const slots = topK + (options.sharedExpert ? 1 : 0);
  return withRouteOptions('moeRoute', options, e, (route) => {
    const [ids, weights] = runKernel('moeRoute', backend, { logits: logits.operand(), topK, options: route });
    return { ids: wrap(backend, ids, 'int32', [t, slots]), weights: wrap(backend, weights, 'float32', [t, slots]) };
  });
}

/**
 * The MoE router in one kernel: logits = x [T, H] . weight [E, H]^T (float32, as linear stores them), then moeRoute's
 * scoring + top-k. Same result as moeRoute(linear(x, weight), ...) up to the float32 summation order of the logits.
 * With `sharedExpert` the weight is [E+1, H] (the router rows, then shared_expert_gate's row), all E+1 logits are
 * computed in the same dispatch, and ids/weights are [T, topK+1].
 */
export function moeRouter(x: Tensor, weight: Tensor, topK: number, options: RouteOpOptions = {}): { ids: Tensor; weights: Tensor } {
  const backend = commonBackend('moeRouter', x, weight, ...(options.selectionBias ? [options.selectionBias] : []));
  requireDTypes('moeRouter', x, FLOAT_DTYPES);
  requireDTypes('moeRouter', weight, FLOAT_DTYPES);
  if (x.ndim !== 2 || weight.ndim !== 2 || x.shape[1] !== weight.shape[1]) {
    throw new ShapeError(`moeRouter: x must be [T, H] and weight [E, H], got ${formatShape(x.shape)} and ${formatShape(weight.shape)}`);
  }
  const [t] = x.shape;
  const e = routedExperts('moeRouter', 'weight', weight.shape, weight.shape[0], options);
  checkTopK('moeRouter', topK, e);
  const slots = topK + (options.sharedExpert ? 1 : 0);
  return withRouteOptions('moeRouter', options, e, (route) => {
    const [ids, weights] = runKernel('moeRouter', backend, { x: x.operand(), weight: weight.operand(), topK, options: route });
    return { ids: wrap(backend, ids, 'int32', [t, slots]), weights: wrap(backend, weights, 'float32', [t, slots]) };
  });
}

/** The routed experts E: all `rows` logits, or with sharedExpert all but the last (which must leave at least one). */
function routedExperts(op: string, what: string, shape: readonly number[], rows: number, o: RouteOpOptions): number {
  if (o.sharedExpert !== undefined && typeof o.sharedExpert !== 'boolean')
    throw new TypeError(`${op}: sharedExpert must be a boolean, got ${String(o.sharedExpert)}`);
  if (!o.sharedExpert) return rows;
  if (rows < 2)
    throw new ShapeError(
      `${op}: with sharedExpert the ${what} needs E+1 >= 2 experts (the routed ones, then the shared expert's gate), got ${formatShape(shape)}`,
    );
  return rows - 1;
}

function checkTopK(op: string, topK: number, e: number): void {
  if (!Number.isInteger(topK) || topK < 1 || topK > e) throw new RangeError(`${op}: topK must be in 1..${e}, got ${topK}`);
}

/** Validates the route options and runs `body` with the backend's form (the bias compacted). */
function withRouteOptions<R>(op: string, o: RouteOpOptions, experts: number, body: (route: RouteOptions<unknown>) => R): R {
  const scoring = o.scoring ?? 'softmax';
  if (scoring !== 'softmax' && scoring !== 'sigmoid') throw new RangeError(`${op}: scoring must be 'softmax' or 'sigmoid', got ${String(scoring)}`);
  const normalizeEps = o.normalizeEps ?? 0;
  const scale = o.scale ?? 1;
  if (!Number.isFinite(normalizeEps) || normalizeEps < 0) throw new RangeError(`${op}: normalizeEps must be a finite number >= 0, got ${normalizeEps}`);
  if (!Number.isFinite(scale)) throw new RangeError(`${op}: scale must be finite, got ${scale}`);
  const bias = o.selectionBias;
  if (bias) {
    requireDTypes(`${op} selectionBias`, bias, ['float32']);
    if (bias.ndim !== 1 || bias.shape[0] !== experts) {
      const shared = o.sharedExpert ? ', none for the shared expert' : '';
      throw new ShapeError(`${op}: selectionBias must be [${experts}] (one per routed expert${shared}), got ${formatShape(bias.shape)}`);
    }
  }
  const packed = bias && compact(bias);
  try {
    return body({ scoring, normalize: o.normalize ?? false, normalizeEps, scale, selectionBias: packed?.operand(), sharedExpert: o.sharedExpert ?? false });
  } finally {
    packed?.dispose();
  }
}

export interface ExpertLinearOpOptions {
  /**
   * float32 [E, ceil(N/128), ceil(K/128)] block scales of an FP8 weight (the stacked `weight_scale_inv`); with int4,
   * the group scales [E, N, K/g] in a float dtype.
   */
  scale?: Tensor;
  /**
   * The weight is packed 4-bit, int32 words [E, N, K/8] (formats/int4.ts's layout: the stacked experts of a GPTQ /
   * AWQ / compressed-tensors checkpoint, or quantized at load): zero points uint8 [E, N, K/g] and, for act-order
   * experts, the column permutation [K] they all share. Dequantized in registers, each group's scale read once.
   */
  int4?: { zero: Tensor; groupSize: number; perm?: Tensor };
  /** float32 [T, k] routing weights: sum each token's k slots, weighted (the MoE combine). */
  combine?: Tensor;
  /**
   * 'swiglu' (without combine): W[e]'s N rows are gate rows then up rows (the stacked gate|up of an MoE layer) and
   * the result is silu(gate) * up, [T*k, N/2], in the same kernel: swiglu(expertLinear(...)) in one dispatch.
   */
  activation?: 'swiglu';
  /** [T, N] added to the combined result in the kernel (with combine): the layer's residual connection. */
  residual?: Tensor;
}

/**
 * x . W[e]^T for the expert e each slot chose, the ids read on the device. weight: stacked experts [E, N, K]; ids:
 * int32 [T, k]; x: [T, K] (each token's row for all its slots) or [T*k, K] (a row per slot). Returns [T*k, N], or
 * [T, N] with combine. The result has x's dtype. An expert id outside 0..E-1 throws on the CPU; on the GPU (which
 * cannot raise without a read back) that slot contributes zeros.
 *
 * The plain form (no combine, activation, residual or int4) is differentiable in x and a float weight: dx is the
 * same grouped GEMM over the transposed stack (summing a token's slots when x has a row per token; an FP8 stack's
 * block scales read transposed), d weight one expertWeightGrad dispatch; a few dispatches whatever the number of
 * experts (the MoE training forward and the LoRA adapters stacked per expert run through it:
 * models/layers/training-moe.ts). An FP8 stack is frozen (no weight gradient).
 */
export function expertLinear(x: Tensor, weight: Tensor, ids: Tensor, options: ExpertLinearOpOptions = {}): Tensor {
  const { scale, combine, activation, residual, int4 } = options;
  const plain = !combine && !activation && !residual;
  if (plain && needsGrad(x, weight)) return differentiableExpertLinear(x, weight, ids, scale, int4);
  return expertLinearForward(x, weight, ids, options);
}

/**
 * expertLinear's plain form with its backward (see expertLinear). An FP8 stack (block scales) or a packed 4-bit one
 * is frozen: x's gradient runs the kernels over its transpose (FP8: the scales read transposed; 4-bit: the codes
 * read down the stored rows, then act-order's column permutation applied).
 */
function differentiableExpertLinear(x: Tensor, weight: Tensor, ids: Tensor, scale: Tensor | undefined, int4: ExpertLinearOpOptions['int4']): Tensor {
  if (scale && weight.requiresGrad) throw new TensorGpuError(`expertLinear: an ${weight.dtype} weight has no gradient (it is frozen; train an adapter)`);
  const out = noGrad(() => expertLinearForward(x, weight, ids, { scale, int4 }));
  const perToken = x.shape[0] === ids.shape[0] && ids.shape[1] > 1;
  const needs = [x.requiresGrad, weight.requiresGrad];
  const saved = [x, weight, ids, ...(scale ? [scale] : []), ...(int4 ? [int4.zero, ...(int4.perm ? [int4.perm] : [])] : [])];
  return record(out, 'expertLinear', [x, weight], saved, (g, [sX, sW, sIds, sScale, sZero, sPerm]) => {
    const gf = float32(g);
    // A token's row served all its slots: its gradient is the sum of theirs (a combine with weight 1).
    const ones = needs[0] && perToken ? full(sIds.shape, 1, { device: g.device }) : undefined;
    let dx: Tensor | undefined;
    if (needs[0] && int4) {
      const stored = expertLinearForward(gf, sW, sIds, { combine: ones, scale: sScale, int4: { zero: sZero, groupSize: int4.groupSize, perm: sPerm } }, 'int4');
      dx = sPerm ? unpermuteColumns(stored, sPerm) : stored;
    } else if (needs[0]) dx = expertLinearForward(gf, sW.transpose(1, 2), sIds, { combine: ones, scale: sScale }, 'fp8');
    ones?.dispose();
    const [dW] = needs[1] ? expertWeightGrad(sIds, sW.shape[0], [{ g: gf, x: sX }]) : [undefined];
    if (gf !== g) gf.dispose();
    return [dx, dW];
  });
}

/** y float32 [R, K] in a packed stack's stored column order -> the logical order (act-order: stored column j is perm[j]). */
function unpermuteColumns(y: Tensor, perm: Tensor): Tensor {
  const [rows, k] = y.shape;
  const base = zeros([rows, k], { device: y.device });
  try {
    return scatter(base, 1, perm.reshape([1, k]).expand([rows, k]), y);
  } finally {
    base.dispose();
    y.dispose();
  }
}

/**
 * expertLinear's forward. transposed: 'fp8', the weight is the transpose (a view) of the FP8 stack its scales belong
 * to; 'int4', multiply by the packed 4-bit stack's transpose (x [.., N], out [.., K] in stored column order).
 */
function expertLinearForward(x: Tensor, weight: Tensor, ids: Tensor, options: ExpertLinearOpOptions, transposed?: 'fp8' | 'int4'): Tensor {
  const { scale, combine, activation, residual, int4 } = options;
  const extra = [scale, combine, residual, int4?.zero, int4?.perm].filter((u): u is Tensor => u !== undefined);
  const backend = commonBackend('expertLinear', x, weight, ids, ...extra);
  requireDTypes('expertLinear', x, FLOAT_DTYPES);
  requireDTypes('expertLinear', ids, ['int32']);
  if (weight.ndim !== 3) throw new ShapeError(`expertLinear: weight must be stacked experts [E, N, K], got ${formatShape(weight.shape)}`);
  const [e, rows] = weight.shape;
  const stored = int4 ? weight.shape[2] * 8 : weight.shape[2];
  // The product's width and length: the stack's N and K, or (a packed stack's transpose) K and N.
  const [n, k] = transposed === 'int4' ? [stored, rows] : [rows, stored];
  if (ids.ndim !== 2) throw new ShapeError(`expertLinear: ids must be [T, k], got ${formatShape(ids.shape)}`);
  const [t, slots] = ids.shape;
  if (x.ndim !== 2 || x.shape[1] !== k || (x.shape[0] !== t && x.shape[0] !== t * slots)) {
    throw new ShapeError(
      `expertLinear: x must be [${t}, ${k}] or [${t * slots}, ${k}] for ids ${formatShape(ids.shape)} and weight ${formatShape(weight.shape)}, got ${formatShape(x.shape)}`,
    );
  }
  if (int4) {
    if (!scale) throw new DTypeError('expertLinear: an int4 weight needs its group scales (options.scale)');
    checkInt4('expertLinear', { data: weight, scale, ...int4 });
  } else if (isFp8(weight.dtype)) {
    if (!scale) throw new DTypeError(`expertLinear: an ${weight.dtype} weight needs its block scales (options.scale)`);
    const want = transposed === 'fp8' ? [e, Math.ceil(k / 128), Math.ceil(n / 128)] : [e, Math.ceil(n / 128), Math.ceil(k / 128)];
    requireDTypes('expertLinear scale', scale, ['float32']);
    if (scale.shape.join() !== want.join()) throw new ShapeError(`expertLinear: scale must be [${want.join(', ')}], got ${formatShape(scale.shape)}`);
  } else {
    requireDTypes('expertLinear', weight, FLOAT_DTYPES);
    if (scale) throw new DTypeError(`expertLinear: scale applies to FP8 weights only, got a ${weight.dtype} weight`);
  }
  if (combine) {
    requireDTypes('expertLinear combine', combine, ['float32']);
    if (combine.shape.join() !== ids.shape.join())
      throw new ShapeError(`expertLinear: combine must be ${formatShape(ids.shape)} like ids, got ${formatShape(combine.shape)}`);
  }
  if (activation !== undefined) {
    if (activation !== 'swiglu') throw new RangeError(`expertLinear: activation must be 'swiglu', got ${String(activation)}`);
    if (combine) throw new ShapeError('expertLinear: the swiglu activation applies to per-slot outputs, not with combine');
    if (n % 2 !== 0) throw new ShapeError(`expertLinear: swiglu needs an even N (gate rows then up rows), got weight ${formatShape(weight.shape)}`);
  }
  if (residual) {
    if (!combine) throw new ShapeError('expertLinear: residual applies to the combined [T, N] output; give combine too');
    requireDTypes('expertLinear residual', residual, FLOAT_DTYPES);
    if (residual.shape.join() !== [t, n].join()) throw new ShapeError(`expertLinear: residual must be [${t}, ${n}], got ${formatShape(residual.shape)}`);
  }
  // Views when already contiguous from element 0 (a loaded checkpoint's stacks): no dispatch.
  const packed = [scale, residual, int4 && weight, int4?.zero, int4?.perm].map((u) => u && compact(u));
  const [packedScale, packedResidual, packedWeight, packedZero, packedPerm] = packed;
  try {
    const handle = runKernel('expertLinear', backend, {
      x: x.operand(),
      weight: (packedWeight ?? weight).operand(),
      ids: ids.operand(),
      options: {
        scale: int4 ? undefined : packedScale?.storage.handle,
        scaleTransposed: transposed === 'fp8',
        combine: combine?.operand(),
        outDtype: x.dtype,
        activation,
        residual: packedResidual?.operand(),
        ...(int4
          ? {
              int4: {
                scale: packedScale!.operand(),
                zero: packedZero!.operand(),
                groupSize: int4.groupSize,
                perm: packedPerm?.operand(),
                transposed: transposed === 'int4',
              },
            }
          : {}),
      },
    });
    return wrap(backend, handle, x.dtype, [combine ? t : t * slots, activation ? n / 2 : n]);
  } finally {
    for (const u of packed) u?.dispose();
  }
}

export interface MoeExpertsOptions {
  /** [T, H] added to the combined result (the layer's residual connection); its gradient is the output's. */
  residual?: Tensor;
}

/**
 * The routed SwiGLU experts of an MoE block, all experts together:
 * out[t] = residual[t] + sum_j weights[t, j] * down[e] . swiglu(gateUp[e] . x[t]), e = ids[t, j].
 * x [T, H]; gateUp [E, 2I, H] (gate rows then up rows of each stacked expert) and down [E, H, I], float weights
 * without block scales; ids int32 [T, k] (from moeRoute, read on the device: no read back), weights float32 [T, k].
 * Differentiable in x, weights, residual and the expert weights: the backward is the grouped expert GEMM run on
 * transposed expert weights (dx), a per-slot dot (d weights) and expertWeightGrad (d gateUp, d down: one routing
 * plan and one grouped dispatch per stack), a few dispatches per block whatever the number of experts. The expert
 * weights' gradients are float32 sums, cast to the weights' dtype as linear's are. Adapters on expert projections
 * compose the block from differentiable expertLinears instead (models/layers/training-moe.ts).
 */
export function moeExperts(x: Tensor, gateUp: Tensor, down: Tensor, ids: Tensor, weights: Tensor, options: MoeExpertsOptions = {}): Tensor {
  const { residual } = options;
  commonBackend('moeExperts', x, gateUp, down, ids, weights, ...(residual ? [residual] : []));
  requireDTypes('moeExperts', x, FLOAT_DTYPES);
  requireDTypes('moeExperts', gateUp, FLOAT_DTYPES);
  requireDTypes('moeExperts', down, FLOAT_DTYPES);
  requireDTypes('moeExperts', ids, ['int32']);
  requireDTypes('moeExperts weights', weights, ['float32']);
  if (x.ndim !== 2 || gateUp.ndim !== 3 || down.ndim !== 3 || ids.ndim !== 2) {
    throw new ShapeError(
      `moeExperts: x must be [T, H], gateUp [E, 2I, H], down [E, H, I] and ids [T, k], got ${formatShape(x.shape)}, ${formatShape(gateUp.shape)}, ${formatShape(down.shape)}, ${formatShape(ids.shape)}`,
    );
  }
  const [t, h] = x.shape;
  const [e, twoI] = gateUp.shape;
  if (gateUp.shape[2] !== h || twoI % 2 !== 0 || down.shape.join() !== [e, h, twoI / 2].join() || ids.shape[0] !== t) {
    throw new ShapeError(
      `moeExperts: for x ${formatShape(x.shape)} gateUp must be [E, 2I, ${h}] and down [E, ${h}, I], ids [${t}, k], got ${formatShape(gateUp.shape)}, ${formatShape(down.shape)}, ${formatShape(ids.shape)}`,
    );
  }
  if (weights.shape.join() !== ids.shape.join())
    throw new ShapeError(`moeExperts: weights must be ${formatShape(ids.shape)} like ids, got ${formatShape(weights.shape)}`);
  if (residual && residual.shape.join() !== [t, h].join())
    throw new ShapeError(`moeExperts: residual must be [${t}, ${h}], got ${formatShape(residual.shape)}`);
  if (!needsGrad(x, weights, residual, gateUp, down)) {
    const act = expertLinear(x, gateUp, ids, { activation: 'swiglu' });
    try {
      return expertLinear(act, down, ids, { combine: weights, residual });
    } finally {
      act.dispose();
    }
  }
  // Recording off: one node for the block, saving the pre-activations and activations of every slot.
  const [hgu, act, out] = noGrad(() => {
    const pre = expertLinear(x, gateUp, ids);
    const a = swiglu(pre);
    return [pre, a, expertLinear(a, down, ids, { combine: weights, residual })];
  });
  const needs = [x.requiresGrad, weights.requiresGrad, residual?.requiresGrad ?? false, gateUp.requiresGrad, down.requiresGrad];
  const saved = [hgu, act, ids, weights, gateUp, down, x];
  const inputs = [x, weights, residual, gateUp, down];
  const node = record(out, 'moeExperts', inputs, saved, (g, [sHgu, sAct, sIds, sWeights, sGateUp, sDown, sX]) => {
    const gf = float32(g);
    // The output's gradient through each slot's down projection, before its routing weight: [T*k, I].
    const dAct = needs[0] || needs[1] || needs[3] ? expertLinear(gf, sDown.transpose(1, 2), sIds) : undefined;
    const dWeights = needs[1] ? dAct!.mul(sAct).sum(-1).reshape(sIds.shape) : undefined;
    // swiglu's backward is linear in its incoming gradient: the routing weight is applied once, in the combine
    // (dx) or as each slot's weight in the outer products (d gateUp, d down).
    const dPre = needs[0] || needs[3] ? swigluBackward(sHgu, dAct!) : undefined;
    dAct?.dispose();
    const dx = needs[0] ? expertLinear(dPre!, sGateUp.transpose(1, 2), sIds, { combine: sWeights }) : undefined;
    const terms = [...(needs[3] ? [{ g: dPre!, x: sX }] : []), ...(needs[4] ? [{ g: gf, x: sAct }] : [])];
    const stacks = terms.length > 0 ? expertWeightGrad(sIds, e, terms, { combine: sWeights }) : [];
    dPre?.dispose();
    if (gf !== g) gf.dispose();
    const dGateUp = needs[3] ? stacks[0] : undefined;
    const dDown = needs[4] ? stacks[stacks.length - 1] : undefined;
    // A view of g: the sweep disposes the gradient it passed in.
    return [dx, dWeights, needs[2] ? g.reshape(g.shape) : undefined, dGateUp, dDown];
  });
  // The node holds views of what it saved.
  hgu.dispose();
  act.dispose();
  return node;
}

export interface ExpertWeightGradOptions {
  /** float32 [T, k]: each slot's outer product times its weight (the routing weights of the combine). */
  combine?: Tensor;
}

/**
 * The gradients of stacked expert weights [E, N, K] of expert-indexed linear layers (expertLinear) over the same ids
 * int32 [T, k], one float32 [E, N, K] per term: grad[e] = sum over the slots s with ids[s] = e of
 * combine[s] * g_row(s)^T outer x_row(s), with g [T or T*k, N] the layer output's gradient and x [T or T*k, K] its
 * input (a row per token, shared by its slots, or a row per slot), as linear's dW = g^T x over each expert's slots.
 * An expert no slot chose gets zeros. On WebGPU the slots are grouped by expert on the device (the grouped GEMM's
 * routing plan, built once for all terms, so at most 1024 experts) and each term is one dispatch; no read back. A
 * backward building block: not differentiable itself.
 */
export function expertWeightGrad(ids: Tensor, experts: number, terms: readonly { g: Tensor; x: Tensor }[], options: ExpertWeightGradOptions = {}): Tensor[] {
  const { combine } = options;
  const backend = commonBackend('expertWeightGrad', ids, ...terms.flatMap(({ g, x }) => [g, x]), ...(combine ? [combine] : []));
  requireDTypes('expertWeightGrad', ids, ['int32']);
  if (ids.ndim !== 2) throw new ShapeError(`expertWeightGrad: ids must be [T, k], got ${formatShape(ids.shape)}`);
  if (!Number.isInteger(experts) || experts < 1) throw new RangeError(`expertWeightGrad: experts must be an integer >= 1, got ${experts}`);
  const [t, slots] = ids.shape;
  for (const { g, x } of terms) {
    requireDTypes('expertWeightGrad g', g, FLOAT_DTYPES);
    requireDTypes('expertWeightGrad x', x, FLOAT_DTYPES);
    const rows = (u: Tensor) => u.ndim === 2 && (u.shape[0] === t || u.shape[0] === t * slots);
    if (!rows(g) || !rows(x))
      throw new ShapeError(
        `expertWeightGrad: g and x must be [${t}, N] / [${t}, K] or [${t * slots}, ...] for ids ${formatShape(ids.shape)}, got ${formatShape(g.shape)} and ${formatShape(x.shape)}`,
      );
  }
  if (combine) {
    requireDTypes('expertWeightGrad combine', combine, ['float32']);
    if (combine.shape.join() !== ids.shape.join())
      throw new ShapeError(`expertWeightGrad: combine must be ${formatShape(ids.shape)} like ids, got ${formatShape(combine.shape)}`);
  }
  if (needsGrad(ids, combine, ...terms.flatMap(({ g, x }) => [g, x])))
    throw new TensorGpuError('expertWeightGrad is not differentiable: call it under noGrad() or detach() its inputs');
  if (terms.length === 0) return [];
  const handles = runKernel('expertWeightGrad', backend, {
    ids: ids.operand(),
    experts,
    terms: terms.map(({ g, x }) => ({ g: g.operand(), x: x.operand() })),
    combine: combine?.operand(),
  });
  return handles.map((h, i) => wrap(backend, h, 'float32', [experts, terms[i].g.shape[1], terms[i].x.shape[1]]));
}

/**
 * SwiGLU's backward in one kernel: the gradient at the gate|up input x [..., 2I] (any float dtype) of
 * swiglu(x) for the output's gradient g [..., I]: float32 [..., 2I], the gate half g b silu'(a), the up half
 * g silu(a). (nn.ts's swigluGrad composes the same from five ops.)
 */
export function swigluBackward(x: Tensor, g: Tensor): Tensor {
  const backend = commonBackend('swigluBackward', x, g);
  requireDTypes('swigluBackward', x, FLOAT_DTYPES);
  requireDTypes('swigluBackward g', g, ['float32']);
  const want = [...x.shape.slice(0, -1), x.shape[x.ndim - 1] / 2];
  if (x.ndim === 0 || x.shape[x.ndim - 1] % 2 !== 0 || g.shape.join() !== want.join())
    throw new ShapeError(`swigluBackward: x must be [..., 2I] and g [..., I], got ${formatShape(x.shape)} and ${formatShape(g.shape)}`);
  return notDifferentiable('swigluBackward', [x, g], () =>
    wrap(backend, runKernel('swigluBackward', backend, { x: x.operand(), g: g.operand() }), 'float32', x.shape),
  );
}
