// CPU references of the MoE routing and expert-indexed linear layer: the oracle for the fused WGSL kernels.
import type { ExpertLinearOptions, Operand } from '../backend.js';
import type { StorageArray } from '../../core/codecs.js';

type Handle = StorageArray;

export function moeRouteReference(logits: Operand<Handle>, topK: number, normalize: boolean): [Handle, Handle] {
  throw new Error('moeRoute: not implemented yet');
}

export function expertLinearReference(x: Operand<Handle>, weight: Operand<Handle>, ids: Operand<Handle>, options: ExpertLinearOptions<Handle>): Handle {
  throw new Error('expertLinear: not implemented yet');
}
