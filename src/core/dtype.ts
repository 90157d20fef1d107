import { DTypeError } from './errors.js';

export const DTYPES = ['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'int32', 'uint8', 'bool'] as const;

export type DType = (typeof DTYPES)[number];

export interface DTypeInfo {
  /** Bytes one element occupies in storage: FP8 really takes one byte. */
  readonly itemBytes: 1 | 2 | 4;
  readonly isFloating: boolean;
  /** Rank in the promotion lattice (bool < uint8 < int32 < low-precision floats < float32). */
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
};

export function parseDType(name: string): DType {
  if ((DTYPES as readonly string[]).includes(name)) return name as DType;
  const alias = ALIASES[name];
  if (alias) return alias;
  throw new DTypeError(`unknown dtype '${name}'; expected one of ${DTYPES.join(', ')}`);
}

export function isFloating(dtype: DType): boolean {
  return DTYPE_INFO[dtype].isFloating;
}

export function isFp8(dtype: DType): boolean {
  return dtype === 'float8_e4m3fn' || dtype === 'float8_e5m2';
}

/** Elements of this dtype packed in one 32-bit storage word (GPU buffers are arrays of u32). */
export function lanesPerWord(dtype: DType): 1 | 2 | 4 {
  return (4 / DTYPE_INFO[dtype].itemBytes) as 1 | 2 | 4;
}

/**
 * Result dtype of a binary op, following PyTorch's category rules: floats win over ints over bool; two
 * different 16-bit floats meet at float32. FP8 takes part in no arithmetic (as in PyTorch): callers reject it.
 */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  const ka = DTYPE_INFO[a].kind;
  const kb = DTYPE_INFO[b].kind;
  if (ka === 'float' && kb === 'float') {
    if (a === 'float32' || b === 'float32') return 'float32';
    return 'float32'; // float16 with bfloat16 (or an fp8 pair): no common 16-bit type
  }
  if (ka === 'float') return a;
  if (kb === 'float') return b;
  if (ka === 'int' && kb === 'int') return a === 'int32' || b === 'int32' ? 'int32' : 'uint8';
  return ka === 'int' ? a : b;
}
