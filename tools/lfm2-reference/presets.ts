// The tiny LFM2 checkpoints of the float64 reference fixtures (test/fixtures/lfm2), shared by make-inputs.ts and
// test/models/lfm2-reference.test.ts: float32 weights, seed 1, regenerated identically by writeRandomLfm2Checkpoint.
import type { Lfm2Config } from '../../src/models/lfm2/config.js';

const COMMON = {
  vocabSize: 256,
  hiddenSize: 32,
  numAttentionHeads: 4,
  headDim: 8,
  normEps: 1e-5,
  ropeTheta: 10000,
  maxPositionEmbeddings: 128,
  torchDtype: 'float32' as const,
  bosTokenId: 1,
  padTokenId: 0,
  eosTokenIds: [7],
};

export interface Lfm2ReferenceCase {
  readonly config: Lfm2Config;
  readonly prompt: readonly number[];
  readonly greedySteps: number;
}

export const LFM2_REFERENCE_CASES: Readonly<Record<string, Lfm2ReferenceCase>> = {
  // Both layer kinds, dense then MoE layers, a non-zero expert_bias, routed_scaling_factor != 1, tied embeddings.
  'lfm2-moe-ref': {
    config: {
      ...COMMON,
      modelType: 'lfm2_moe',
      intermediateSize: 48,
      numHiddenLayers: 5,
      numKeyValueHeads: 2,
      layerTypes: ['conv', 'full_attention', 'conv', 'conv', 'full_attention'],
      tieWordEmbeddings: true,
      convBias: false,
      convLCache: 3,
      moe: {
        numExperts: 8,
        numExpertsPerTok: 3,
        moeIntermediateSize: 16,
        numDenseLayers: 2,
        normTopkProb: true,
        useExpertBias: true,
        routedScalingFactor: 1.5,
      },
    },
    prompt: [3, 17, 42, 5, 88, 1, 60],
    greedySteps: 6,
  },
  // Dense LFM2 with conv biases, 4 taps, one KV head and an untied lm_head.
  'lfm2-ref': {
    config: {
      ...COMMON,
      modelType: 'lfm2',
      intermediateSize: 64,
      numHiddenLayers: 3,
      numKeyValueHeads: 1,
      layerTypes: ['conv', 'full_attention', 'conv'],
      tieWordEmbeddings: false,
      convBias: true,
      convLCache: 4,
    },
    prompt: [9, 200, 31, 4, 77, 150],
    greedySteps: 5,
  },
};
