// Launchers of the fused optimizer kernels: one dispatch per parameter tensor per step updates the parameter and
// its float32 state in place (adam.wgsl, sgd.wgsl), and gradient clipping's global norm (grad-norm-partial.wgsl,
// grad-norm-total.wgsl) and in-place scale (grad-scale.wgsl) without reading anything back.
//
// In-place writes of a packed dtype (f16/bf16: two elements a word) go a whole word at a time: invocation w owns
// storage word word0 + w, decodes each lane of the tensor's element range, updates it and writes the word back
// (lanes outside the range keep their codes), so no two invocations ever write one word and a view that starts
// mid-word needs no atomics. The body supplies `fn param_update(i, x) -> f32` for element i of the tensor.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { isContiguous, numel, type View } from '../../core/shape.js';
import type { AdamStepHyper, SgdStepHyper } from '../../runtime/backend.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { decodeFn, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** Grad views of at most this rank are read through their strides in place (strided_offset's limit). */
const MAX_STRIDED_RANK = 8;

/** LANES / BITS / MASK of the in-place tensor's dtype, for the word loop. */
function wordConstants(dtype: DType): Record<string, number> {
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  return { LANES: lanes, BITS: bits, MASK: bits === 32 ? 0xffffffff : 2 ** bits - 1 };
}

/**
 * The word loop (`update_word`, the grid's invoke function) over the in-place binding `param`, and `grad_at(i)`:
 * element i of the gradient, contiguous from p.g_off or through its strides.
 */
function wordLoop(dtype: DType, grad?: { strided: boolean }): string {
  let s = decodeFn('decode_param', dtype, 'f32');
  if (grad) {
    const at = grad.strided ? 'strided_offset(i, p.g_off, p.g_rank, p.g_shape, p.g_strides)' : 'p.g_off + i';
    s += `fn grad_at(i: u32) -> f32 {\n  return load_grad(${at});\n}\n`;
  }
  s += `
fn update_word(w: u32) {
  let word_index = p.word0 + w;
  var word = param[word_index];
  for (var l = 0u; l < LANES; l++) {
    let e = word_index * LANES + l;
    if (e < p.p_off || e - p.p_off >= p.n) {
      continue;
    }
    let shift = l * BITS;
    let y = param_update(e - p.p_off, decode_param((word >> shift) & MASK));
    word = (word & ~(MASK << shift)) | (encode_param(y) << shift);
  }
  param[word_index] = word;
}
`;
  return s;
}

/** Params shared by the word-loop kernels: the element range [p_off, p_off + n) and the words it spans. */
function wordRange(view: View, dtype: DType): { n: number; p_off: number; word0: number; words: number } {
  const n = numel(view.shape);
  const lanes = lanesPerWord(dtype);
  const word0 = Math.floor(view.offset / lanes);
  const words = n === 0 ? 0 : Math.floor((view.offset + n - 1) / lanes) - word0 + 1;
  return { n, p_off: view.offset, word0, words };
}

/** The gradient's offset and, read through its strides, its rank, shape and strides (zeros past its rank). */
function gradParams(g: GpuOperand, strided: boolean): { g_off: number; g_rank: number; g_shape: number[]; g_strides: number[] } {
  if (!strided) return { g_off: g.view.offset, g_rank: 0, g_shape: [], g_strides: [] };
  return { g_off: g.view.offset, g_rank: g.view.shape.length, g_shape: [...g.view.shape], g_strides: [...g.view.strides] };
}

const GRAD_PARAMS = { g_off: 'u32', g_rank: 'u32', g_shape: 'u32[8]', g_strides: 'u32[8]' } as const;
const RANGE_PARAMS = { n: 'u32', word0: 'u32', words: 'u32', p_off: 'u32' } as const;

// The host path's per-step numbers come as uniforms; the capturable path reads the state's step counter (t, 1 - b1^t,
// 1 - b2^t after this step's optimCount) and the lr from device buffers, so one recorded dispatch serves every step.
const ADAM_HOST = `fn decay_factor() -> f32 {
  return p.decay;
}
fn is_first() -> bool {
  return p.first != 0u;
}
fn neg_step() -> f32 {
  return p.neg_step;
}
fn bc2_sqrt() -> f32 {
  return p.bc2_sqrt;
}
`;
const ADAM_CAPTURABLE = `fn decay_factor() -> f32 {
  return 1.0 - lr[0] * p.decoupled_wd;
}
fn is_first() -> bool {
  return counter[0] == 1.0;
}
fn neg_step() -> f32 {
  return -lr[0] / counter[1];
}
fn bc2_sqrt() -> f32 {
  return sqrt(counter[2]);
}
`;

/** The device step counter and lr of a capturable step (see optimCountKernel). */
export interface CapturableBuffers {
  readonly counter: GpuBuffer;
  readonly lr: GpuBuffer;
  /** AdamW's weight decay (decay = 1 - lr * it on the device); 0 for Adam and SGD. */
  readonly decoupledWd: number;
}

const adam = defineKernel({
  name: 'adam',
  source: 'adam.wgsl',
  variant: { dtype: 'dtype', gdtype: 'dtype', strided: 'boolean', amsgrad: 'boolean', capturable: 'boolean' },
  params: {
    ...RANGE_PARAMS,
    ...GRAD_PARAMS,
    decay: 'f32',
    wd: 'f32',
    omb1: 'f32',
    b2: 'f32',
    omb2: 'f32',
    neg_step: 'f32',
    bc2_sqrt: 'f32',
    eps: 'f32',
    maximize: 'u32',
    first: 'u32',
    decoupled_wd: 'f32', // capturable: decay = 1 - lr * decoupled_wd
  },
  outputs: {
    param: { packed: 'dtype' },
    m: 'f32',
    v: 'f32',
    vmax: { type: 'f32', when: (v) => v.amsgrad },
  },
  inputs: { grad: { packed: 'gdtype' }, counter: { type: 'f32', when: (v) => v.capturable }, lr: { type: 'f32', when: (v) => v.capturable } },
  grid: { threads: 'words', invoke: 'update_word' },
  constants: (v) => wordConstants(v.dtype),
  functions: (v) => wordLoop(v.dtype, { strided: v.strided }) + (v.capturable ? ADAM_CAPTURABLE : ADAM_HOST),
  code: (v) => ({
    AMSGRAD: v.amsgrad ? 'let vm = select(vmax[i], 0.0, first);\n  vd = select(max(vm, vv), vm + vv, is_nan(vm) || is_nan(vv));\n  vmax[i] = vd;' : '',
  }),
});

const sgd = defineKernel({
  name: 'sgd',
  source: 'sgd.wgsl',
  variant: { dtype: 'dtype', gdtype: 'dtype', strided: 'boolean', momentum: 'boolean', capturable: 'boolean' },
  params: { ...RANGE_PARAMS, ...GRAD_PARAMS, neg_lr: 'f32', wd: 'f32', momentum: 'f32', omd: 'f32', nesterov: 'u32', maximize: 'u32', first: 'u32' },
  outputs: { param: { packed: 'dtype' }, buf: { type: 'f32', when: (v) => v.momentum } },
  inputs: { grad: { packed: 'gdtype' }, counter: { type: 'f32', when: (v) => v.capturable }, lr: { type: 'f32', when: (v) => v.capturable } },
  grid: { threads: 'words', invoke: 'update_word' },
  constants: (v) => wordConstants(v.dtype),
  functions: (v) =>
    wordLoop(v.dtype, { strided: v.strided }) +
    (v.capturable
      ? 'fn neg_lr() -> f32 {\n  return -lr[0];\n}\nfn is_first() -> bool {\n  return counter[0] == 1.0;\n}\n'
      : 'fn neg_lr() -> f32 {\n  return p.neg_lr;\n}\nfn is_first() -> bool {\n  return p.first != 0u;\n}\n'),
  code: (v) => ({
    MOMENTUM: v.momentum
      ? 'var b = g;\n  if (!is_first()) {\n    b = buf[i] * p.momentum + p.omd * g;\n  }\n  buf[i] = b;\n  g = select(b, g + p.momentum * b, p.nesterov != 0u);'
      : '',
  }),
});

/** Runs fn with the gradient as the kernels read it: in place, unless its rank is past strided_offset's. */
function withGrad<R>(ctx: GpuContext, g: GpuOperand, fn: (g: GpuOperand, strided: boolean) => R): R {
  if (isContiguous(g.view)) return fn(g, false);
  if (g.view.shape.length <= MAX_STRIDED_RANK) return fn(g, true);
  return withContiguous(ctx, g, (cg) => fn(cg, false));
}

/** One dispatch: param (contiguous, any offset) and its float32 state m, v (and vmax) updated in place. */
export function adamStepKernel(
  ctx: GpuContext,
  param: GpuOperand,
  grad: GpuOperand,
  m: GpuBuffer,
  v: GpuBuffer,
  vmax: GpuBuffer | undefined,
  h: AdamStepHyper,
  capturable?: CapturableBuffers,
): void {
  const range = wordRange(param.view, param.dtype);
  if (range.n === 0) return;
  withGrad(ctx, grad, (g, strided) =>
    adam.run(
      ctx,
      { dtype: param.dtype, gdtype: g.dtype, strided, amsgrad: vmax !== undefined, capturable: capturable !== undefined },
      {
        ...range,
        ...gradParams(g, strided),
        decay: h.decay,
        wd: h.weightDecay,
        omb1: 1 - h.beta1,
        b2: h.beta2,
        omb2: 1 - h.beta2,
        neg_step: -h.stepSize,
        bc2_sqrt: h.biasCorrection2Sqrt,
        eps: h.eps,
        maximize: h.maximize ? 1 : 0,
        first: h.first ? 1 : 0,
        decoupled_wd: capturable?.decoupledWd ?? 0,
      },
      { param: param.buffer, m, v, vmax, grad: g.buffer, counter: capturable?.counter, lr: capturable?.lr },
    ),
  );
}

/** One dispatch: param (contiguous, any offset) and its float32 momentum buffer, when given, updated in place. */
export function sgdStepKernel(
  ctx: GpuContext,
  param: GpuOperand,
  grad: GpuOperand,
  buf: GpuBuffer | undefined,
  h: SgdStepHyper,
  capturable?: CapturableBuffers,
): void {
  const range = wordRange(param.view, param.dtype);
  if (range.n === 0) return;
  withGrad(ctx, grad, (g, strided) =>
    sgd.run(
      ctx,
      { dtype: param.dtype, gdtype: g.dtype, strided, momentum: buf !== undefined, capturable: capturable !== undefined },
      {
        ...range,
        ...gradParams(g, strided),
        neg_lr: -h.lr,
        wd: h.weightDecay,
        momentum: h.momentum,
        omd: 1 - h.dampening,
        nesterov: h.nesterov ? 1 : 0,
        maximize: h.maximize ? 1 : 0,
        first: h.first ? 1 : 0,
      },
      { param: param.buffer, buf, grad: g.buffer, counter: capturable?.counter, lr: capturable?.lr },
    ),
  );
}

const optimCount = defineKernel({
  name: 'optim-count',
  source: 'optim-count.wgsl',
  variant: {},
  params: { b1: 'f32', omb1: 'f32', b2: 'f32', omb2: 'f32' },
  outputs: { counter: 'f32' },
  inputs: {},
  grid: 'custom',
  workgroupSize: 1,
});

/**
 * A capturable step's counter, float32 [t, 1 - beta1^t, 1 - beta2^t], advanced on the device by one step: t + 1 and
 * c' = c * beta + (1 - beta) for each bias correction (the recurrence of 1 - beta^t, which keeps its relative
 * accuracy where 1 - beta^t is small, unlike 1 - pow(beta, t) in float32). One dispatch of one invocation.
 */
export function optimCountKernel(ctx: GpuContext, counter: GpuBuffer, beta1: number, beta2: number): void {
  optimCount.run(ctx, {}, { b1: beta1, omb1: 1 - beta1, b2: beta2, omb2: 1 - beta2 }, { counter }, { workgroups: [1, 1, 1] });
}

// ---- gradient clipping ----

export type GradNormKind = 'l1' | 'l2' | 'inf';

/**
 * norm_term (one element's share), norm_combine (associative) and norm_finish of a norm, and workgroup_norm(t, s):
 * the workgroup reduction both gradient-norm passes end in, every invocation's s combined by norm_combine.
 */
function normFunctions(kind: GradNormKind): string {
  const term = kind === 'l2' ? 'x * x' : 'abs(x)';
  // max that keeps a NaN (WGSL's max may drop it), as torch's max does.
  const combine = kind === 'inf' ? 'select(max(a, b), a + b, is_nan(a) || is_nan(b))' : 'a + b';
  const finish = kind === 'l2' ? 'sqrt(s)' : 's';
  return (
    `fn norm_term(x: f32) -> f32 {\n  return ${term};\n}\nfn norm_combine(a: f32, b: f32) -> f32 {\n  return ${combine};\n}\nfn norm_finish(s: f32) -> f32 {\n  return ${finish};\n}\n` +
    workgroupReduce({ name: 'workgroup_norm', type: 'f32', combine: 'norm_combine(a, b)' })
  );
}

const NORM_KINDS = ['l1', 'l2', 'inf'] as const;

const gradNormPartial = defineKernel({
  name: 'grad-norm-partial',
  source: 'grad-norm-partial.wgsl',
  variant: { dtype: 'dtype', norm: NORM_KINDS },
  params: { n: 'u32', g_off: 'u32', slot0: 'u32', groups: 'u32' },
  outputs: { partial: 'f32' },
  inputs: { g: { packed: 'dtype' } },
  grid: 'custom',
  functions: (v) => normFunctions(v.norm),
});

const gradNormTotal = defineKernel({
  name: 'grad-norm-total',
  source: 'grad-norm-total.wgsl',
  variant: { norm: NORM_KINDS },
  params: { slots: 'u32', max_norm: 'f32' },
  outputs: { norm_out: 'f32', coef: 'f32' },
  inputs: { partial: 'f32' },
  grid: 'custom',
  functions: (v) => normFunctions(v.norm),
});

const gradScale = defineKernel({
  name: 'grad-scale',
  source: 'grad-scale.wgsl',
  variant: { dtype: 'dtype' },
  params: RANGE_PARAMS,
  outputs: { param: { packed: 'dtype' } },
  inputs: { coef: 'f32' },
  grid: { threads: 'words', invoke: 'update_word' },
  constants: (v) => wordConstants(v.dtype),
  functions: (v) => wordLoop(v.dtype),
});

/** Workgroups of 256 for one gradient's partial norms: about 4 elements an invocation, at most 64 workgroups. */
const MAX_PARTIALS = 64;
function partialGroups(n: number): number {
  return Math.min(MAX_PARTIALS, Math.ceil(n / (256 * 4)));
}

/**
 * The global norm of the gradients (contiguous views, any offset) and each scaled in place by
 * min(1, maxNorm / (norm + 1e-6)): a partial-norm dispatch per gradient, one to combine them, a scale dispatch per
 * gradient. Returns the norm as float32 [1] on the device.
 */
export function clipGradNormKernel(ctx: GpuContext, grads: readonly GpuOperand[], maxNorm: number, norm: GradNormKind): GpuBuffer {
  const groups = grads.map((g) => partialGroups(numel(g.view.shape)));
  const slots = groups.reduce((a, b) => a + b, 0);
  const normOut = ctx.alloc(4);
  const coef = ctx.alloc(4);
  const partial = ctx.alloc(Math.max(4, slots * 4));
  try {
    let slot0 = 0;
    grads.forEach((g, i) => {
      if (groups[i] === 0) return;
      gradNormPartial.run(
        ctx,
        { dtype: g.dtype, norm },
        { n: numel(g.view.shape), g_off: g.view.offset, slot0, groups: groups[i] },
        { partial, g: g.buffer },
        { workgroups: [groups[i], 1, 1] },
      );
      slot0 += groups[i];
    });
    gradNormTotal.run(ctx, { norm }, { slots, max_norm: maxNorm }, { norm_out: normOut, coef, partial }, { workgroups: [1, 1, 1] });
    for (const g of grads) {
      const range = wordRange(g.view, g.dtype);
      if (range.n > 0) gradScale.run(ctx, { dtype: g.dtype }, range, { param: g.buffer, coef });
    }
  } finally {
    ctx.release(partial);
    ctx.release(coef);
  }
  return normOut;
}
