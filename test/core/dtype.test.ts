// dtype metadata: names and aliases, the promotion lattice binary ops follow, and packing into 32-bit GPU words.
import { describe, expect, it } from 'vitest';
import { DTYPE_INFO, DTYPES, isFloating, isFp8, lanesPerWord, parseDType, promoteTypes, type DType } from '../../src/core/dtype.js';
import { DTypeError } from '../../src/core/errors.js';

describe('dtypes', () => {
  it('parseDType accepts every name and the PyTorch-style aliases; anything else is a DTypeError naming it', () => {
    for (const d of DTYPES) expect(parseDType(d)).toBe(d);
    const aliases: Record<string, DType> = {
      f32: 'float32',
      float: 'float32',
      half: 'float16',
      f16: 'float16',
      bf16: 'bfloat16',
      fp8: 'float8_e4m3fn',
      e5m2: 'float8_e5m2',
      int: 'int32',
      u8: 'uint8',
    };
    for (const [name, d] of Object.entries(aliases)) expect(parseDType(name)).toBe(d);
    expect(() => parseDType('double')).toThrow(DTypeError);
    expect(() => parseDType('Float32')).toThrow(/unknown dtype 'Float32'/);
  });

  it('promotion: floats over ints over bool; two different low-precision floats meet at float32', () => {
    const cases: [DType, DType, DType][] = [
      ['float16', 'float16', 'float16'],
      ['float16', 'bfloat16', 'float32'],
      ['bfloat16', 'float32', 'float32'],
      ['int32', 'float16', 'float16'],
      ['uint8', 'bfloat16', 'bfloat16'],
      ['uint8', 'int32', 'int32'],
      ['bool', 'uint8', 'uint8'],
      ['bool', 'int32', 'int32'],
      ['bool', 'float32', 'float32'],
      ['bool', 'bool', 'bool'],
    ];
    for (const [a, b, want] of cases) {
      expect(promoteTypes(a, b), `${a} + ${b}`).toBe(want);
      expect(promoteTypes(b, a), `${b} + ${a}`).toBe(want);
    }
  });

  it('storage sizes and word packing', () => {
    expect(DTYPES.map((d) => DTYPE_INFO[d].itemBytes)).toEqual([4, 2, 2, 1, 1, 4, 1, 1]);
    expect(DTYPES.map(lanesPerWord)).toEqual([1, 2, 2, 4, 4, 1, 4, 4]);
    expect(DTYPES.filter(isFloating)).toEqual(['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2']);
    expect(DTYPES.filter(isFp8)).toEqual(['float8_e4m3fn', 'float8_e5m2']);
  });
});
