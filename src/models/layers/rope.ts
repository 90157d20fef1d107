// Rotary-embedding tables: cos/sin [positions, rotaryDim/2] computed once on the host in float64 and stored as
// float32, so every backend rotates with identical values (and the GPU never evaluates sin/cos of large angles,
// where WGSL's precision is unspecified). Scaling follows transformers' rope_init functions.
import { ShapeError } from '../../core/errors.js';
import type { RopeScaling } from '../qwen3/config.js';

export interface RopeTables {
  /** float32 [positions, rotaryDim/2] each (rotaryDim = headDim unless partial rotary). */
  readonly cos: Float32Array;
  readonly sin: Float32Array;
  readonly positions: number;
  readonly half: number;
}

/** Inverse frequencies and the attention factor that multiplies cos/sin (YaRN), per rope_scaling. */
export function ropeFrequencies(
  headDim: number,
  theta: number,
  scaling: RopeScaling | undefined,
  maxPositionEmbeddings: number,
): { invFreq: Float64Array; attentionFactor: number } {
  const half = headDim / 2;
  const base = Float64Array.from({ length: half }, (_, i) => theta ** ((2 * i) / headDim));
  const type = scaling?.type ?? 'default';
  if (type === 'default') return { invFreq: base.map((b) => 1 / b), attentionFactor: 1 };
  const factor = scaling!.factor;
  if (type === 'linear') return { invFreq: base.map((b) => 1 / (factor * b)), attentionFactor: 1 };
  if (type === 'yarn') {
    const p = scaling!.params;
    const original = p.original_max_position_embeddings ?? maxPositionEmbeddings;
    const mscale = (scale: number, m = 1) => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);
    const attentionFactor = p.attention_factor ?? (p.mscale && p.mscale_all_dim ? mscale(factor, p.mscale) / mscale(factor, p.mscale_all_dim) : mscale(factor));
    const correctionDim = (rotations: number) => (headDim * Math.log(original / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
    const truncate = p.truncate === undefined || p.truncate !== 0;
    let low = correctionDim(p.beta_fast ?? 32);
    let high = correctionDim(p.beta_slow ?? 1);
    if (truncate) [low, high] = [Math.floor(low), Math.ceil(high)];
    low = Math.max(low, 0);
    high = Math.min(high, headDim - 1);
    if (low === high) high += 0.001;
    const invFreq = base.map((b, i) => {
      const extrapolation = 1 - Math.min(1, Math.max(0, (i - low) / (high - low)));
      return (1 / (factor * b)) * (1 - extrapolation) + (1 / b) * extrapolation;
    });
    return { invFreq, attentionFactor };
  }
  throw new RangeError(`rope_scaling type '${type}' is not supported (supported: default, linear, yarn)`);
}

/**
 * transformers' rotary dim for partial rotary (Qwen3.5's partial_rotary_factor): int(headDim * factor), the dims
 * RoPE rotates; the rest of each head passes through.
 */
export function rotaryDimOf(headDim: number, partialRotaryFactor = 1): number {
  return Math.floor(headDim * partialRotaryFactor);
}

/**
 * cos/sin tables [positions, rotaryDim / 2]. rotaryDim (default headDim) below headDim gives partial-rotary tables,
 * built as transformers builds them: every frequency, YaRN's correction range included, over rotaryDim
 * (inv_freq = 1 / theta^(arange(0, R, 2) / R) for the default rope).
 */
export function ropeTables(
  headDim: number,
  theta: number,
  scaling: RopeScaling | undefined,
  maxPositionEmbeddings: number,
  positions: number,
  rotaryDim = headDim,
): RopeTables {
  if (!Number.isInteger(rotaryDim) || rotaryDim < 2 || rotaryDim > headDim || rotaryDim % 2 !== 0) {
    throw new ShapeError(`ropeTables: rotaryDim must be an even integer in [2, ${headDim}] (headDim), got ${rotaryDim}`);
  }
  const { invFreq, attentionFactor } = ropeFrequencies(rotaryDim, theta, scaling, maxPositionEmbeddings);
  const half = rotaryDim / 2;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      // The angle rounded to float32 first, as transformers computes position * inv_freq in float32.
      const angle = Math.fround(p * Math.fround(invFreq[i]));
      cos[p * half + i] = Math.cos(angle) * attentionFactor;
      sin[p * half + i] = Math.sin(angle) * attentionFactor;
    }
  }
  return { cos, sin, positions, half };
}
