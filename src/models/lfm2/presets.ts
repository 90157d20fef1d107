// The LFM2 family's built-in presets (`--model builtin:<name>`, `tensorgpu checkpoint random --preset`): small widths
// with LFM2-8B-A1B's shape (conv and attention layers, dense then MoE layers, 32 experts top 4, tied embeddings, a
// 65536-token vocabulary) and the dense LFM2 shape. The family table (models/families.ts) collects them;
// random-checkpoint.ts writes their weights and builtin.ts the stand-in tokenizer they ship with.
import type { Lfm2Config } from './config.js';

const COMMON = {
  vocabSize: 65536,
  normEps: 1e-5,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 128000,
  tieWordEmbeddings: true,
  convBias: false,
  convLCache: 3,
  torchDtype: 'bfloat16' as const,
  bosTokenId: 1,
  padTokenId: 0,
  eosTokenIds: [7],
};

/**
 * Hidden 128 keeps the 65536-row tied embedding cheap; the MoE intermediate size stays 128 and the dense one 384 so
 * every linear quantizes to 128x128 FP8 blocks (`--dtype fp8`).
 */
export const LFM2_PRESETS: Readonly<Record<string, Lfm2Config>> = {
  'lfm2-moe-tiny': {
    ...COMMON,
    modelType: 'lfm2_moe',
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 6,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    // LFM2-8B-A1B's pattern at a quarter of its depth: mostly conv, attention every few layers.
    layerTypes: ['conv', 'conv', 'full_attention', 'conv', 'conv', 'full_attention'],
    moe: { numExperts: 32, numExpertsPerTok: 4, moeIntermediateSize: 128, numDenseLayers: 2, normTopkProb: true, useExpertBias: true, routedScalingFactor: 1 },
  },
  'lfm2-tiny': {
    ...COMMON,
    modelType: 'lfm2',
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 4,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    layerTypes: ['conv', 'full_attention', 'conv', 'full_attention'],
  },
};
