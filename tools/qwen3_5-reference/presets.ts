// The tiny Qwen3.5 checkpoints of the float64 reference fixtures (test/fixtures/qwen3_5), shared by make-inputs.ts
// and test/models/qwen3_5-reference.test.ts: float32 weights, seed 1, regenerated identically by
// writeRandomQwen35Checkpoint, in the release layout (nested text_config, model.language_model., fused experts).
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';

const COMMON = {
  vocabSize: 256,
  hiddenSize: 32,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 16,
  rotaryDim: 4,
  ropeTheta: 10000,
  mropeSection: [1, 1, 0],
  rmsNormEps: 1e-6,
  maxPositionEmbeddings: 128,
  linear: { numKeyHeads: 2, numValueHeads: 4, keyHeadDim: 8, valueHeadDim: 12, convKernel: 4 },
  torchDtype: 'float32' as const,
  eosTokenIds: [7],
  mtpLayers: 0,
  hasVision: false,
};

export interface Qwen35ReferenceCase {
  readonly config: Qwen35Config;
  readonly prompt: readonly number[];
  readonly greedySteps: number;
  /** A split prefill: piece sizes that add up to the prompt. */
  readonly split: readonly number[];
}

export const QWEN3_5_REFERENCE_CASES: Readonly<Record<string, Qwen35ReferenceCase>> = {
  // Both layer kinds (DeltaNet first, attention after), MoE with a shared expert of the experts' width (stacked as
  // expert E), 2 value heads per key head, a quarter of the head rotated, untied head.
  'qwen3.6-moe-ref': {
    config: {
      ...COMMON,
      modelType: 'qwen3_5_moe',
      intermediateSize: 1,
      numHiddenLayers: 5,
      layerTypes: ['linear_attention', 'linear_attention', 'full_attention', 'linear_attention', 'full_attention'],
      tieWordEmbeddings: false,
      moe: { numExperts: 8, numExpertsPerTok: 3, moeIntermediateSize: 16, sharedExpertIntermediateSize: 16 },
    },
    prompt: [3, 17, 42, 5, 88, 1, 60, 200, 31, 4, 77, 150],
    greedySteps: 6,
    split: [7, 5],
  },
  // A shared expert wider than the routed ones (run beside the fused block), tied embeddings.
  'qwen3.6-moe-wide-shared-ref': {
    config: {
      ...COMMON,
      modelType: 'qwen3_5_moe',
      intermediateSize: 1,
      numHiddenLayers: 4,
      layerTypes: ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'],
      tieWordEmbeddings: true,
      moe: { numExperts: 6, numExpertsPerTok: 2, moeIntermediateSize: 8, sharedExpertIntermediateSize: 24 },
    },
    prompt: [9, 200, 31, 4, 77, 150, 2, 11],
    greedySteps: 4,
    split: [1, 4, 3],
  },
  // Dense Qwen3.5.
  'qwen3.5-ref': {
    config: {
      ...COMMON,
      modelType: 'qwen3_5',
      intermediateSize: 48,
      numHiddenLayers: 4,
      layerTypes: ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'],
      tieWordEmbeddings: false,
    },
    prompt: [5, 6, 7, 100, 101, 240, 13, 12, 14],
    greedySteps: 5,
    split: [4, 5],
  },
};
