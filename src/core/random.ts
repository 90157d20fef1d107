// A seeded generator shared by every device: random tensors are drawn on the host and uploaded, so the same seed
// gives the same values on CPU and WebGPU (tests compare backends on identical inputs).

/** xoshiro128**: small state, good statistical quality, exact in 32-bit integer arithmetic. */
export class Generator {
  private s = new Uint32Array(4);
  private spareNormal: number | undefined;

  constructor(seed = 0x2545f491) {
    this.manualSeed(seed);
  }

  manualSeed(seed: number): this {
    // splitmix32 expands one seed into four non-zero state words.
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (z ^ (z >>> 16)) >>> 0 || 1;
    }
    this.spareNormal = undefined;
    return this;
  }

  nextU32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform in [0, 1) with 24 random bits, so every value is exact in float32. */
  uniform(): number {
    return (this.nextU32() >>> 8) / 16777216;
  }

  /** Standard normal (Box-Muller, caching the second value). */
  normal(): number {
    if (this.spareNormal !== undefined) {
      const v = this.spareNormal;
      this.spareNormal = undefined;
      return v;
    }
    const u1 = 1 - this.uniform(); // (0, 1]: log is finite
    const u2 = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spareNormal = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

export const defaultGenerator = new Generator();

/**
 * A generator for one named tensor: FNV-1a of the name mixed with the seed, so a generated checkpoint's values
 * depend only on (seed, name), not on write order or sharding.
 */
export function generatorFor(seed: number, name: string): Generator {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return new Generator(h >>> 0);
}

/** Seeds the default generator (torch.manual_seed). */
export function manualSeed(seed: number): void {
  defaultGenerator.manualSeed(seed);
}
