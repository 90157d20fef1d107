// Independent references for tests: written from the format definitions, never by calling the code under test.

export type Fp8 = 'float8_e4m3fn' | 'float8_e5m2';

/** Value of an FP8 code from the OFP8 definition (e4m3fn: bias 7, only S.1111.111 is NaN; e5m2: IEEE-like, bias 15). */
export function fp8Value(code: number, dtype: Fp8): number {
  const sign = code & 0x80 ? -1 : 1;
  if (dtype === 'float8_e4m3fn') {
    const e = (code >> 3) & 0xf;
    const m = code & 7;
    if (e === 15 && m === 7) return NaN;
    return sign * (e === 0 ? m * 2 ** -9 : (1 + m / 8) * 2 ** (e - 7));
  }
  const e = (code >> 2) & 0x1f;
  const m = code & 3;
  if (e === 31) return m === 0 ? sign * Infinity : NaN;
  return sign * (e === 0 ? m * 2 ** -16 : (1 + m / 4) * 2 ** (e - 15));
}

/** A seeded stream of 32-bit values (mulberry32), independent of the library's generator. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}
