import { DTypeError } from './errors.js';
import type { View } from './shape.js';

/** The dtypes packed in 32-bit words (1, 2 or 4 a word), which every generic kernel takes. */
export const DTYPES = ['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'int32', 'uint8', 'bool'] as const;
/** Dtypes of two words an element (int64), with their own kernels (kernels/int64/) and a narrower set of ops. */
export const WIDE_DTYPES = ['int64'] as const;

export type DType = (typeof DTYPES)[number] | (typeof WIDE_DTYPES)[number];

export interface DTypeInfo {
  /** Bytes one element occupies in storage: FP8 really takes one byte, int64 two 32-bit words (lo, hi). */
  readonly itemBytes: 1 | 2 | 4 | 8;
  readonly isFloating: boolean;
  /** Rank in the promotion lattice (bool < uint8 < int32 < int64 < low-precision floats < float32). */
  readonly kind: 'bool' | 'int' | 'float';
}

export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
  float32: { itemBytes: 4, isFloating: true, kind: 'float' },
  float16: { itemBytes: 2, isFloating: true, kind: 'float' },
  bfloat16: { itemBytes: 2, isFloating: true, kind: 'float' },
  float8_e4m3fn: { itemBytes: 1, isFloating: true, kind: 'float' },
  float8_e5m2: { itemBytes: 1, isFloating: true, kind: 'float' },
  int32: { itemBytes: 4, isFloating: false, kind: 'int' },
  uint8: { itemBytes: 1, isFloating: false, kind: 'int' },
  bool: { itemBytes: 1, isFloating: false, kind: 'bool' },
  int64: { itemBytes: 8, isFloating: false, kind: 'int' },
};

/** Short aliases accepted wherever a dtype is named (PyTorch spellings and common abbreviations). */
const ALIASES: Readonly<Record<string, DType>> = {
  f32: 'float32',
  float: 'float32',
  f16: 'float16',
  half: 'float16',
  bf16: 'bfloat16',
  fp8: 'float8_e4m3fn',
  e4m3: 'float8_e4m3fn',
  float8_e4m3: 'float8_e4m3fn',
  e5m2: 'float8_e5m2',
  i32: 'int32',
  int: 'int32',
  u8: 'uint8',
  i64: 'int64',
  long: 'int64',
};

export function parseDType(name: string): DType {
  if ((DTYPES as readonly string[]).includes(name) || (WIDE_DTYPES as readonly string[]).includes(name)) return name as DType;
  const alias = ALIASES[name];
  if (alias) return alias;
  throw new DTypeError(`unknown dtype '${name}'; expected one of ${[...DTYPES, ...WIDE_DTYPES].join(', ')}`);
}

export function isFloating(dtype: DType): boolean {
  return DTYPE_INFO[dtype].isFloating;
}

export function isFp8(dtype: DType): boolean {
  return dtype === 'float8_e4m3fn' || dtype === 'float8_e5m2';
}

/**
 * Elements of this dtype packed in one 32-bit storage word (GPU buffers are arrays of u32). int64 takes two words an
 * element, which no packed-word kernel handles: it has its own kernels (kernels/int64/), so asking is a DTypeError.
 */
export function lanesPerWord(dtype: DType): 1 | 2 | 4 {
  if (dtype === 'int64')
    throw new DTypeError('int64 takes two 32-bit words an element and has no packed-word kernel (cast it, or use an op that supports int64)');
  return (4 / DTYPE_INFO[dtype].itemBytes) as 1 | 2 | 4;
}

/** 32-bit words of storage `n` elements of dtype occupy (at least one: a buffer is never empty). */
export function storageWords(dtype: DType, n: number): number {
  return Math.max(1, Math.ceil((n * DTYPE_INFO[dtype].itemBytes) / 4));
}

/**
 * An int64 view as the int32 view of its words: element [..i] is the pair [..i, 0] (lo) and [..i, 1] (hi). Every
 * data movement (copies, reads, gathers of rows, where) of int64 runs as this view on the int32 kernels.
 */
export function int64WordView(view: View): View {
  return { shape: [...view.shape, 2], strides: [...view.strides.map((s) => s * 2), 1], offset: view.offset * 2 };
}

/**
 * The promoted dtype of two dtypes (torch.promote_types): floats win over ints over bool; two different 16-bit floats
 * meet at float32; uint8 with int32 is int32. FP8 promotes with nothing but itself, as in PyTorch: a DTypeError.
 */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  if (isFp8(a) || isFp8(b))
    throw new DTypeError(`no promotion between ${a} and ${b}: FP8 is a storage format (torch.promote_types refuses it too); cast first`);
  const ka = DTYPE_INFO[a].kind;
  const kb = DTYPE_INFO[b].kind;
  if (ka === 'float' && kb === 'float') return 'float32'; // float16 with bfloat16: no common 16-bit type
  if (ka === 'float') return a;
  if (kb === 'float') return b;
  if (ka === 'int' && kb === 'int') return a === 'int64' || b === 'int64' ? 'int64' : a === 'int32' || b === 'int32' ? 'int32' : 'uint8';
  return ka === 'int' ? a : b;
}

/**
 * One operand of torch.result_type: a tensor with dims, a 0-d tensor, or a JS number (PyTorch's "wrapped number":
 * an integer-valued number counts as torch's int64, which is int32 here, a fractional one, NaN or Inf as the default
 * float32).
 */
export type PromotionOperand = { readonly dtype: DType; readonly ndim: number } | number;

const KIND_RANK = { bool: 0, int: 1, float: 2 } as const;

/** The dtype a JS number stands for in promotion. */
export function numberDType(value: number): DType {
  return Number.isInteger(value) ? 'int32' : 'float32';
}

/**
 * torch.result_type over operands in three priority groups: tensors with dims, then 0-d tensors, then JS numbers.
 * Each group promotes within itself; a lower-priority group changes the result only when it is of a higher kind
 * (bool < int < float), and then the two promote (c10's combine_categories). So float16 [4] + 0-d float32 is
 * float16, uint8 [2] + 0-d int32 is uint8, int32 [2] + 0-d float16 is float16, bool [2] + 1 is int32.
 */
export function resultType(...operands: readonly PromotionOperand[]): DType {
  let dims: DType | undefined;
  let zeroDim: DType | undefined;
  let wrapped: DType | undefined;
  const join = (acc: DType | undefined, d: DType) => (acc === undefined ? d : promoteTypes(acc, d));
  for (const o of operands) {
    if (typeof o === 'number') wrapped = join(wrapped, numberDType(o));
    else if (o.ndim === 0) zeroDim = join(zeroDim, o.dtype);
    else dims = join(dims, o.dtype);
  }
  const result = combineCategories(dims, combineCategories(zeroDim, wrapped));
  if (result === undefined) throw new DTypeError('resultType needs at least one operand');
  return result;
}

/** c10's combine_categories: `higher` (a higher-priority group's dtype) wins unless `lower` is of a higher kind. */
function combineCategories(higher: DType | undefined, lower: DType | undefined): DType | undefined {
  if (higher === undefined) return lower;
  if (lower === undefined) return higher;
  if (KIND_RANK[DTYPE_INFO[lower].kind] > KIND_RANK[DTYPE_INFO[higher].kind]) return promoteTypes(higher, lower);
  return higher;
}

/** Whether every value of dtype `from` is exactly representable in `to` (a cast to it loses nothing). */
export function castIsExact(from: DType, to: DType): boolean {
  if (from === to || from === 'bool') return true;
  if (from === 'uint8') return to !== 'float8_e4m3fn' && to !== 'float8_e5m2';
  if (from === 'int32') return to === 'int64'; // not even float32 holds 2^24 + 1
  if (from === 'int64') return false;
  if (to === 'float32') return isFloating(from);
  return isFp8(from) && (to === 'float16' || to === 'bfloat16'); // FP8's 2-3 mantissa bits and exponents fit both
}

/**
 * torch.can_cast(from, to): whether an in-place op may write a result of dtype `from` into a tensor of dtype `to`
 * (no kind goes down: float into an int tensor, int into a bool one are refused).
 */
export function canCast(from: DType, to: DType): boolean {
  return KIND_RANK[DTYPE_INFO[from].kind] <= KIND_RANK[DTYPE_INFO[to].kind];
}
