// The Whisper family's built-in preset (`--model builtin:whisper-tiny`): whisper-tiny's structure at a smaller width
// (2 + 2 layers of d_model 64, 4 heads) with the real audio geometry (80 mel bins, 1500 encoder positions: 30 s
// windows of 3000 frames; 448 decoder positions) and a 2632-token stand-in vocabulary whose special tokens follow
// the multilingual layout (standin-tokenizer.ts). Random weights: its text is gibberish.
import type { WhisperConfig } from './config.js';
import { WHISPER_TINY_TEXT_TOKENS, WHISPER_TINY_VOCAB_SIZE } from './standin-tokenizer.js';

const EOT = WHISPER_TINY_TEXT_TOKENS;

export const WHISPER_PRESETS: Readonly<Record<string, WhisperConfig>> = {
  'whisper-tiny': {
    modelType: 'whisper',
    vocabSize: WHISPER_TINY_VOCAB_SIZE,
    numMelBins: 80,
    dModel: 64,
    encoderLayers: 2,
    encoderAttentionHeads: 4,
    encoderFfnDim: 256,
    decoderLayers: 2,
    decoderAttentionHeads: 4,
    decoderFfnDim: 256,
    maxSourcePositions: 1500,
    maxTargetPositions: 448,
    activationFunction: 'gelu',
    scaleEmbedding: false,
    tieWordEmbeddings: true,
    padTokenId: EOT,
    bosTokenId: EOT,
    eosTokenId: EOT,
    decoderStartTokenId: EOT + 1,
    suppressTokens: [],
    // ' ' is id 220 in any GPT-2-ordered byte alphabet, as in Whisper's.
    beginSuppressTokens: [220, EOT],
    torchDtype: 'float32',
  },
};
