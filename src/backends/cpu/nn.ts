// CPU references of the transformer building blocks (RMSNorm, RoPE, attention, SwiGLU): float64 loops, the oracle
// for the WGSL kernels.
import type { AttentionOptions, Operand } from '../backend.js';
import type { StorageArray } from '../../core/codecs.js';

type Handle = StorageArray;

export function rmsNormReference(x: Operand<Handle>, weight: Operand<Handle> | undefined, eps: number): Handle {
  throw new Error('rmsNorm: not implemented yet');
}

export function ropeReference(x: Operand<Handle>, cos: Operand<Handle>, sin: Operand<Handle>, positionOffset: number): Handle {
  throw new Error('rope: not implemented yet');
}

export function attentionReference(q: Operand<Handle>, k: Operand<Handle>, v: Operand<Handle>, options: AttentionOptions): Handle {
  throw new Error('attention: not implemented yet');
}

export function swigluReference(x: Operand<Handle>): Handle {
  throw new Error('swiglu: not implemented yet');
}
