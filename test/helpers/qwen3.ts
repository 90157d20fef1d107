// A Qwen3-MoE with the real Qwen3 vocabulary and tokenizer at a width the CPU backend runs in milliseconds per
// token: for tests of generation and the model commands.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { qwen3TokenizerFiles } from '../../src/tokenizer/tokenizer.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';

export const TINY_CHAT_MOE: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 151936,
  hiddenSize: 32,
  intermediateSize: 64,
  numHiddenLayers: 2,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 512,
  tieWordEmbeddings: true,
  attentionBias: false,
  bosTokenId: 151643,
  eosTokenIds: [151645, 151643],
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 16, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};

/**
 * A Qwen3-MoE 64 wide with a 384-token vocabulary: every projection's K a multiple of 32, so it quantizes to 4-bit
 * groups of 32 (the int4 tests), and small enough for the CPU backend.
 */
export const SMALL_QWEN3_MOE: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 384,
  hiddenSize: 64,
  intermediateSize: 128,
  numHiddenLayers: 2,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  headDim: 32,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 512,
  tieWordEmbeddings: true,
  attentionBias: false,
  eosTokenIds: [1],
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 64, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};

/** Writes TINY_CHAT_MOE with random weights and the Qwen3 tokenizer files into a fresh temp directory. */
export async function writeTinyChatModel(seed: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-tiny-chat-'));
  await writeRandomQwen3Checkpoint(dir, TINY_CHAT_MOE, { seed, extraFiles: await qwen3TokenizerFiles() });
  return dir;
}
