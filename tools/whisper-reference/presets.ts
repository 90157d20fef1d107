// The tiny Whisper checkpoints of the float64 reference fixtures (test/fixtures/whisper), shared by make-inputs.ts
// and test/models/whisper-reference.test.ts: float32 weights, seed 1, regenerated identically by
// writeRandomWhisperCheckpoint; the input features come from a fixed formula, rounded to float32.
import type { WhisperConfig } from '../../src/models/whisper/config.js';

const COMMON = {
  modelType: 'whisper' as const,
  vocabSize: 96,
  numMelBins: 16,
  dModel: 32,
  encoderLayers: 2,
  decoderLayers: 2,
  encoderFfnDim: 64,
  decoderFfnDim: 48,
  maxSourcePositions: 12,
  maxTargetPositions: 24,
  scaleEmbedding: false,
  padTokenId: 80,
  bosTokenId: 80,
  eosTokenId: 80,
  decoderStartTokenId: 81,
  suppressTokens: [],
  beginSuppressTokens: [5, 80],
  torchDtype: 'float32' as const,
};

export interface WhisperReferenceCase {
  readonly config: WhisperConfig;
  /** decoder_input_ids of the whole-sequence forward. */
  readonly decoderInputIds: readonly number[];
  /** Greedy tokens continued from decoderInputIds (each step a whole-sequence forward in the port). */
  readonly greedySteps: number;
}

export const WHISPER_REFERENCE_CASES: Readonly<Record<string, WhisperReferenceCase>> = {
  // whisper-tiny's shape: tied proj_out, exact GELU, 4 heads everywhere.
  'whisper-ref': {
    config: { ...COMMON, encoderAttentionHeads: 4, decoderAttentionHeads: 4, activationFunction: 'gelu', tieWordEmbeddings: true },
    decoderInputIds: [81, 82, 90, 17, 3, 44],
    greedySteps: 5,
  },
  // An untied proj_out, the tanh GELU, and different head counts in encoder and decoder.
  'whisper-ref-untied': {
    config: { ...COMMON, encoderAttentionHeads: 2, decoderAttentionHeads: 8, activationFunction: 'gelu_new', tieWordEmbeddings: false },
    decoderInputIds: [81, 7, 7, 60],
    greedySteps: 4,
  },
};

/** The input features [numMelBins, 2 * maxSourcePositions]: smooth bands plus a ramp, float32, in [-1, 1.5]. */
export function referenceFeatures(c: WhisperConfig): Float32Array {
  const m = c.numMelBins;
  const f = 2 * c.maxSourcePositions;
  const out = new Float32Array(m * f);
  for (let i = 0; i < m; i++)
    for (let t = 0; t < f; t++) out[i * f + t] = Math.fround(Math.sin(0.37 * i + 0.21 * t) + 0.5 * Math.cos(0.05 * i * t) + (t / f) * 0.25);
  return out;
}
