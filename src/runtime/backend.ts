// The contract between the op layer and a device. Ops validate shapes/dtypes and compute output metadata;
// a backend only runs kernels on storage handles. The CPU backend is the oracle every GPU kernel is tested against.
import type { StorageArray } from '../core/codecs.js';
import type { DType } from '../core/dtype.js';
import type { Shape, View } from '../core/shape.js';

export type DeviceName = 'cpu' | 'webgpu';

/** A view of a storage handle with its dtype: what kernels read. */
export interface Operand<H> {
  readonly handle: H;
  readonly dtype: DType;
  readonly view: View;
}

/** A JS number operand of a binary op: passed to kernels as a uniform, never as a buffer or a fill dispatch. */
export interface ScalarOperand {
  readonly scalar: number;
  /** float32 or int32: the value is rounded to it first (a wrapped number, as PyTorch treats it). */
  readonly dtype: DType;
}

export function isScalarOperand<T extends object>(x: T | ScalarOperand): x is ScalarOperand {
  return (x as ScalarOperand).scalar !== undefined;
}

export const UNARY_OPS = [
  'neg',
  'abs',
  'exp',
  'log',
  'sqrt',
  'rsqrt',
  'silu',
  'gelu',
  'gelu_tanh',
  'tanh',
  'sigmoid',
  'relu',
  'sin',
  'cos',
  'erf',
  'floor',
  'ceil',
  'round',
  'sign',
  'reciprocal',
] as const;
export type UnaryOp = (typeof UNARY_OPS)[number];

export const ARITHMETIC_OPS = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum'] as const;
export const COMPARISON_OPS = ['eq', 'ne', 'lt', 'le', 'gt', 'ge'] as const;
export type ArithmeticOp = (typeof ARITHMETIC_OPS)[number];
export type ComparisonOp = (typeof COMPARISON_OPS)[number];
/** Elementwise derivatives for backward rules: op(x, g) = g * f'(x). */
export const GRAD_OPS = ['silu_grad', 'gelu_grad', 'gelu_tanh_grad'] as const;
export type GradOp = (typeof GRAD_OPS)[number];
/** Remainders and floor division: integer math stays integer (torch.remainder, torch.fmod, torch.floor_divide). */
export const DIVISION_OPS = ['remainder', 'fmod', 'floor_divide'] as const;
export type DivisionOp = (typeof DIVISION_OPS)[number];
export type BinaryOp = ArithmeticOp | ComparisonOp | GradOp | DivisionOp;

export type ReduceOp = 'sum' | 'mean' | 'max' | 'min' | 'argmax' | 'argmin' | 'prod';

/** Dims of a batched matmul after broadcasting: a is [...batch, m, k], b is [...batch, k, n]. */
export interface MatmulDims {
  readonly batch: Shape;
  readonly m: number;
  readonly n: number;
  readonly k: number;
}

/** How a dequantization scale applies: one value, one per row of a / column of b, or one per 128-long K block. */
export type ScaleRecipe = 'tensor' | 'row' | 'block';

/**
 * Scales and epilogue terms of a scaled matmul (torch._scaled_mm). Scale handles hold contiguous float32:
 * a: tensor [1], row [m], block [m, ceil(k/128)]; b: tensor [1], row [n], block [ceil(n/128), ceil(k/128)].
 */
/** Activations a matmul can apply in its epilogue (MatmulScaling.unary, linear's `activation`). */
export const EPILOGUE_UNARY_OPS = ['silu', 'gelu', 'gelu_tanh', 'relu', 'tanh', 'sigmoid'] as const;
export type EpilogueUnary = (typeof EPILOGUE_UNARY_OPS)[number];

export interface MatmulScaling<H> {
  readonly scaleA?: { readonly handle: H; readonly recipe: ScaleRecipe };
  readonly scaleB?: { readonly handle: H; readonly recipe: ScaleRecipe };
  /** Contiguous [n], added to every row. */
  readonly bias?: Operand<H>;
  /** One float32 multiplied into the result before the output cast. */
  readonly scaleResult?: H;
  /** [m, n] added last (a residual connection): contiguous from element 0; batch-less products only. */
  readonly residual?: Operand<H>;
  /**
   * 'swiglu': the n columns are gate columns then up columns (a stacked gate|up weight) and the result is
   * [m, n/2] = silu(gate) * up, the residual (then [m, n/2]) added after; batch-less products only.
   */
  readonly activation?: 'swiglu';
  /**
   * An activation of each result, after the scales and bias, before the residual: act(a . b + bias) + residual, each
   * value computed in float32 as the elementwise op computes it (compile() folds `act(matmul)` into this).
   */
  readonly unary?: EpilogueUnary;
  /**
   * b is a packed 4-bit weight (formats/int4.ts): b's handle holds the int32 words of the [n, k] weight, b.view the
   * words' [k/8, n] transposed view (k/8 rows, as the dense weight's [k, n]); these are its contiguous group scales
   * and zero points [n, k/groupSize] and, under act-order, the activation column of each stored column [k].
   */
  readonly int4B?: { readonly scale: Operand<H>; readonly zero: Operand<H>; readonly groupSize: number; readonly perm?: Operand<H> };
}

/**
 * Everything sampling needs, already resolved to float32 values (multiplying by inverses, never dividing, so CPU
 * and GPU round alike). invTemperature 0 = greedy; topK 0, topP 1, minP 0, penalties 1/0/0 = off.
 */
export interface SamplingParams {
  readonly invTemperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly minP: number;
  /** Uniform in [0, 1) from the caller's seeded generator. */
  readonly u: number;
  readonly repetition: number;
  readonly invRepetition: number;
  readonly presence: number;
  readonly frequency: number;
}

/** Blockwise FP8 quantization of a 2-D tensor: one scale per blockRows x blockCols block (edge blocks clipped). */
export interface QuantizeBlocks {
  readonly dtype: 'float8_e4m3fn' | 'float8_e5m2';
  readonly blockRows: number;
  readonly blockCols: number;
  /** The format's largest finite value: scale = max(amax, 1e-12) / fmax. */
  readonly fmax: number;
}

export interface AttentionOptions {
  /** Multiplies q.k (usually 1/sqrt(D)). */
  readonly scale: number;
  readonly causal: boolean;
  /**
   * Absolute position of query 0 relative to key 0 (Skv - Sq for a KV cache holding the queries' keys); the
   * backend's `queryOffsetFrom` device scalar, when given, is added to it.
   */
  readonly queryOffset: number;
}

/**
 * Rows of several sequences in a paged KV cache (models/layers/paged-kv.ts): the keys and values operands are the
 * pools [pages * pageSize, kvHeads, headDim] shared by all sequences. `index` (int32, contiguous) holds for each
 * token / query row t the pair [position_t, where its sequence's page table starts in index], then the page tables;
 * position j of a sequence lives at pool row table[j / pageSize] * pageSize + j % pageSize. Built on the host from
 * the sequences' pages (ops/paged-cache.ts pagedIndex); the device does not check it.
 */
export interface PagedKv<H> {
  readonly index: Operand<H>;
  readonly pageSize: number;
  /** Keys of the longest sequence: attention's Skv (row t sees keys 0..position_t of its own sequence). */
  readonly maxLength: number;
}

/** How a router turns logits into top-k expert weights (see Backend.moeRoute). */
export interface RouteOptions<H> {
  /** 'softmax' over experts (Qwen3-MoE) or an elementwise 'sigmoid' (LFM2-MoE, DeepSeek-V3). */
  scoring: 'softmax' | 'sigmoid';
  /** float32 [E] added to the scores for the choice only (LFM2's expert_bias). */
  selectionBias?: Operand<H>;
  normalize: boolean;
  /** Added to the chosen weights' sum before dividing (LFM2: 1e-6; Qwen3: 0). */
  normalizeEps: number;
  /** Multiplies the final weights (routed_scaling_factor). */
  scale: number;
  /**
   * The logits (or router rows) are E+1: the last is a shared expert's gate logit (Qwen3.5-MoE's
   * shared_expert_gate). Scoring, bias, top-k, normalization and scale see the first E only; the outputs are
   * [T, topK+1], the last slot id E with weight sigmoid(that logit), neither normalized nor scaled.
   */
  sharedExpert?: boolean;
}

export interface ExpertLinearOptions<H> {
  /** float32 block scales [E, ceil(N/128), ceil(K/128)] of an FP8 weight. */
  readonly scale?: H;
  /**
   * The weight [E, N, K] is the transpose (a view) of the FP8 stack [E, K, N] the scales belong to: they are
   * [E, ceil(K/128), ceil(N/128)], element (n, k) scaled by scale[e, k / 128, n / 128] (a backward's dx).
   */
  readonly scaleTransposed?: boolean;
  /** float32 [T, k] routing weights: sum the slots of each token, weighted. */
  readonly combine?: Operand<H>;
  readonly outDtype: DType;
  /**
   * 'swiglu' (without combine): the weight's N rows are gate rows then up rows, and the output is
   * silu(gate) * up, [T*k, N/2], as swiglu of the plain output would give.
   */
  readonly activation?: 'swiglu';
  /** [T, N] added last (with combine): a residual connection, contiguous from element 0. */
  readonly residual?: Operand<H>;
  /**
   * The weight is packed 4-bit (formats/int4.ts's layout): int32 words [E, N, K/8], with contiguous group scales
   * [E, N, K/groupSize] (a float dtype) and zero points (uint8), and an act-order permutation [K] all experts share.
   */
  readonly int4?: {
    readonly scale: Operand<H>;
    readonly zero: Operand<H>;
    readonly groupSize: number;
    readonly perm?: Operand<H>;
    /**
     * Multiply by the stack's transpose: x [.., N], out [.., K] in the stored column order (perm not applied: the
     * caller permutes; a backward's dx). The weight operand is the packed stack itself.
     */
    readonly transposed?: boolean;
  };
}

/**
 * Geometry of a convolution over the spatial dims (t, h, w) of a 5-D input [N, C, T, H, W] (a 2-D convolution is
 * one with T = 1 and kt = 1). Each array has 3 entries, in (t, h, w) order.
 */
export interface ConvGeometry {
  readonly stride: readonly number[];
  readonly dilation: readonly number[];
  /**
   * Zeros before each spatial dim. Zeros after it need no field: they only make the output larger (outShape), and
   * the kernel's bounds checks read every position outside the input as 0, so no padded copy ever exists.
   */
  readonly padBefore: readonly number[];
  readonly groups: number;
}

/** Geometry of a transposed 1-D convolution (Backend.convTranspose1d); outputPadding only lengthens outShape. */
export interface ConvTranspose1dGeometry {
  readonly stride: number;
  /** Positions cropped from both ends of the full transposed output. */
  readonly padding: number;
  readonly dilation: number;
  readonly groups: number;
}

/** How pad fills positions outside the input (torch F.pad modes). */
export type PadMode = 'constant' | 'replicate' | 'reflect';

/** How upsample2x fills the new positions (torch F.interpolate modes; bilinear with align_corners=false). */
export type UpsampleMode = 'nearest' | 'bilinear';

/**
 * The scalars of one Adam / AdamW step of one parameter (Backend.adamStep), computed by the optimizer in float64
 * from the parameter's step count t, as PyTorch does with Python floats.
 */
export interface AdamStepHyper {
  /** Multiplies the parameter first: AdamW's decoupled decay, 1 - lr * weightDecay (1 for Adam). */
  readonly decay: number;
  /** Adam's L2 term: weightDecay * param is added to the gradient (0 for AdamW). */
  readonly weightDecay: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  /** lr / (1 - beta1^t). */
  readonly stepSize: number;
  /** sqrt(1 - beta2^t). */
  readonly biasCorrection2Sqrt: number;
  readonly maximize: boolean;
  /** The state's first step: m, v (and vmax) hold nothing yet and are read as zeros (never filled first). */
  readonly first: boolean;
}

/** The scalars of one SGD step of one parameter (Backend.sgdStep). */
export interface SgdStepHyper {
  readonly lr: number;
  readonly momentum: number;
  readonly dampening: number;
  readonly nesterov: boolean;
  readonly weightDecay: number;
  readonly maximize: boolean;
  /** The momentum buffer's first step: it holds nothing yet and becomes the gradient (torch clones it). */
  readonly first: boolean;
}

/**
 * What a row of an fft reads: 'complex' z_j = x[j]; 'real' z_j = (x[j], 0); 'hermitian' bins 0..L-1 of a
 * Hermitian spectrum (z_j = x[j] for j <= n/2, z_{n-j} = conj(z_j), the imaginary parts of bin 0 and of bin n/2 for
 * even n ignored, as torch's irfft); 'frames' the STFT's frames of a signal (Backend.stft).
 */
export type FftInput = 'complex' | 'real' | 'hermitian';
/** What a row of an fft writes: all n bins, the n/2 + 1 bins of a real signal's spectrum, or the n real parts. */
export type FftOutput = 'complex' | 'half' | 'real';

/** One DFT per row (Backend.fft): X_k = scale * sum_j z_j exp(-+2 pi i j k / n). */
export interface FftArgs {
  /** The transform length (>= 1): rows shorter than n read zeros past their end, longer ones are cut. */
  readonly n: number;
  /** exp(+2 pi i jk / n) (no 1/n: that is in scale). */
  readonly inverse: boolean;
  readonly input: FftInput;
  readonly output: FftOutput;
  readonly scale: number;
}

/** torch.stft's framing (Backend.stft): frame f is samples f * hop - padLeft + j, j < nFft, of each signal. */
export interface StftArgs {
  readonly nFft: number;
  readonly hop: number;
  readonly frames: number;
  /** center: nFft / 2 samples of padding before the signal (and the frame count covers as many after it). */
  readonly padLeft: number;
  /** Samples outside the signal: 'reflect' mirrors about the edge without repeating it, 'constant' reads 0. */
  readonly padMode: 'reflect' | 'constant';
  /** nFft / 2 + 1 bins (onesided) or all nFft. */
  readonly onesided: boolean;
  /** Multiplies X (normalized: nFft^-0.5). */
  readonly scale: number;
  /** X as complex pairs, |X|^2 ('power') or |X| ('magnitude'). */
  readonly output: 'complex' | 'power' | 'magnitude';
}

/** Which norm clipGradNorm measures: 1 (sum of |g|), 2 (Euclidean) or Infinity (max |g|). */
export type GradNormType = number;

export interface Backend<H = unknown> {
  readonly device: DeviceName;
  /** Storage holding `data` (codes/bits as in StorageArray) for data.length elements. */
  upload(dtype: DType, data: StorageArray): H;
  /**
   * Storage for n elements whose bytes (little-endian storage codes) arrive later through writeBytes: a tensor
   * streamed from a file in chunks, never whole in host memory.
   */
  allocBytes(dtype: DType, n: number): H;
  /** Copies bytes into storage at byteOffset (a multiple of 4 unless it is the last write). */
  writeBytes(handle: H, byteOffset: number, bytes: Uint8Array): void;
  /** Resolves when every queued write and kernel has finished (so staging memory for uploads is released). */
  synchronize(): Promise<void>;
  /** Storage for n elements, every element set to `value` (encoded in dtype). */
  fill(dtype: DType, n: number, value: number): H;
  /** Releases storage (to a pool on GPU). Called once, when no tensor uses it any more. */
  free(handle: H): void;
  /** The view's elements in row-major order, as storage codes. */
  read(src: Operand<H>): Promise<StorageArray>;
  /** A contiguous copy of the view converted to outDtype (saturate: fp8 clamps instead of overflowing to NaN/Inf). */
  cast(src: Operand<H>, outDtype: DType, saturate: boolean): H;
  /** Writes src (same shape) into the view dst of existing storage, converting to dst's dtype. */
  copyInto(src: Operand<H>, dst: Operand<H>): void;
  unary(op: UnaryOp, x: Operand<H>, outDtype: DType): H;
  /**
   * Broadcast views a, b (or a JS number on either side) to outShape; computes in float32 when any dtype involved is
   * floating, else int32.
   */
  binary(op: BinaryOp, a: Operand<H> | ScalarOperand, b: Operand<H> | ScalarOperand, outShape: Shape, outDtype: DType): H;
  /**
   * where(cond, a, b) over views broadcast to outShape; cond is bool. When a and b (numbers included) are of
   * outDtype, codes are selected as they are.
   */
  where(cond: Operand<H>, a: Operand<H> | ScalarOperand, b: Operand<H> | ScalarOperand, outShape: Shape, outDtype: DType): H;
}
