// Whisper's config.json parsing (every field checked, errors naming the field), the weight layout's names, and the
// built-in preset's stand-in tokenizer: special tokens in the multilingual structure relative to its text vocabulary.
import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/errors.js';
import { parseWhisperConfig, whisperToHfConfig } from '../../src/models/whisper/config.js';
import { whisperWeightSpecs } from '../../src/models/whisper/layout.js';
import { WHISPER_PRESETS } from '../../src/models/whisper/presets.js';
import { WHISPER_TINY_TEXT_TOKENS, WHISPER_TINY_VOCAB_SIZE, whisperTokenizerFiles } from '../../src/models/whisper/tokenizer-files.js';
import { WhisperTokenizer } from '../../src/models/whisper/tokenizer.js';
import { TextTokenizer } from '../../src/tokenizer/text-tokenizer.js';

/** openai/whisper-tiny's config.json (the fields the forward reads, as released). */
const TINY = {
  model_type: 'whisper',
  vocab_size: 51865,
  num_mel_bins: 80,
  d_model: 384,
  encoder_layers: 4,
  encoder_attention_heads: 6,
  encoder_ffn_dim: 1536,
  decoder_layers: 4,
  decoder_attention_heads: 6,
  decoder_ffn_dim: 1536,
  max_source_positions: 1500,
  max_target_positions: 448,
  activation_function: 'gelu',
  scale_embedding: false,
  pad_token_id: 50257,
  bos_token_id: 50257,
  eos_token_id: 50257,
  decoder_start_token_id: 50258,
  begin_suppress_tokens: [220, 50257],
  torch_dtype: 'float32',
};

describe('parseWhisperConfig', () => {
  it("reads whisper-tiny's config and writes it back", () => {
    const c = parseWhisperConfig(TINY);
    expect(c).toMatchObject({ dModel: 384, encoderLayers: 4, decoderAttentionHeads: 6, maxSourcePositions: 1500, eosTokenId: 50257, tieWordEmbeddings: true });
    expect(parseWhisperConfig(whisperToHfConfig(c))).toEqual(c);
  });

  it.each([
    [{ model_type: 'qwen3' }, /model_type 'qwen3' is not a Whisper config/],
    [{ d_model: 100 }, /encoder_attention_heads must be a divisor of d_model \(100\)/],
    [{ activation_function: 'mish' }, /activation_function must be one of gelu/],
    [{ eos_token_id: 60000 }, /eos_token_id must be a token id below vocab_size \(51865\)/],
    [{ encoder_layers: 0 }, /encoder_layers must be an integer >= 1/],
    [{ begin_suppress_tokens: ['a'] }, /begin_suppress_tokens must be an integer or a list of integers/],
    [{ scale_embedding: 'no' }, /scale_embedding must be true or false/],
  ])('%j is a CheckpointError naming the field', (patch, message) => {
    expect(() => parseWhisperConfig({ ...TINY, ...patch }, 'x/config.json')).toThrow(CheckpointError);
    expect(() => parseWhisperConfig({ ...TINY, ...patch }, 'x/config.json')).toThrow(message);
  });

  it("transformers' tensor names: k_proj without bias, proj_out only when untied", () => {
    const c = parseWhisperConfig(TINY);
    const names = whisperWeightSpecs(c).map((s) => s.name);
    expect(names).toContain('model.encoder.layers.3.self_attn.q_proj.bias');
    expect(names).not.toContain('model.encoder.layers.0.self_attn.k_proj.bias');
    expect(names).toContain('model.decoder.layers.1.encoder_attn.v_proj.bias');
    expect(names).toContain('model.decoder.layers.0.encoder_attn_layer_norm.weight');
    expect(names).not.toContain('proj_out.weight');
    expect(whisperWeightSpecs({ ...c, tieWordEmbeddings: false }).map((s) => s.name)).toContain('proj_out.weight');
    expect(whisperWeightSpecs(c).find((s) => s.name === 'model.encoder.conv1.weight')!.shape).toEqual([384, 80, 3]);
  });
});

describe("the built-in preset's stand-in tokenizer", () => {
  it('special tokens follow the text tokens in the multilingual order; text round-trips', async () => {
    const files = await whisperTokenizerFiles();
    const text = new TextTokenizer(
      JSON.parse(files['tokenizer.json']) as Record<string, unknown>,
      JSON.parse(files['tokenizer_config.json']) as Record<string, unknown>,
    );
    const t = new WhisperTokenizer(text, true);
    const T = WHISPER_TINY_TEXT_TOKENS;
    // whisper-tiny: eot 50257 = text tokens, sot +1, en +2, 99 languages, then the tasks ...
    expect([t.eot, t.sot, t.languageTokens.get('en'), t.languageTokens.get('su')]).toEqual([T, T + 1, T + 2, T + 100]);
    expect(t.languageTokens.has('yue')).toBe(false);
    expect([t.translate, t.transcribe, t.sotLm, t.sotPrev, t.noSpeech, t.noTimestamps, t.timestampBegin]).toEqual([
      T + 101,
      T + 102,
      T + 103,
      T + 104,
      T + 105,
      T + 106,
      T + 107,
    ]);
    expect(WHISPER_TINY_VOCAB_SIZE).toBe(T + 107 + 1501);
    expect(WHISPER_PRESETS['whisper-tiny'].vocabSize).toBe(WHISPER_TINY_VOCAB_SIZE);
    expect(t.sotSequence('de', 'translate')).toEqual([T + 1, T + 4, T + 101]);
    expect(t.blankTokens).toEqual([220, T]);
    const ids = t.encode(' Hello, world!');
    expect(ids.every((id) => id < T)).toBe(true);
    expect(t.decodeText([...ids, t.timestampBegin, t.eot])).toBe(' Hello, world!');
    expect(t.nonSpeechTokens().length).toBeGreaterThan(20);
  });
});
