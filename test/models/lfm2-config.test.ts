// parseLfm2Config against transformers' Lfm2Config / Lfm2MoeConfig / Lfm2MLP rules: layer_types and the legacy
// full_attn_idxs, the legacy key aliases, LFM2's feed-forward width rule, real checkpoints' configs, and errors
// that name the field.
import { describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/errors.js';
import { adjustedFfDim, isLfm2MoeLayer, lfm2ToHfConfig, parseLfm2Config } from '../../src/models/lfm2/config.js';
import { LFM2_PRESETS } from '../../src/models/lfm2/random-checkpoint.js';

/** LFM2-8B-A1B's config.json (the fields that shape the model). */
const LFM2_8B_A1B = {
  architectures: ['Lfm2MoeForCausalLM'],
  model_type: 'lfm2_moe',
  vocab_size: 65536,
  hidden_size: 2048,
  intermediate_size: 7168,
  moe_intermediate_size: 1792,
  num_hidden_layers: 24,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  num_experts: 32,
  num_experts_per_tok: 4,
  num_dense_layers: 2,
  norm_topk_prob: true,
  use_expert_bias: true,
  routed_scaling_factor: 1.0,
  norm_eps: 1e-5,
  rope_theta: 1000000.0,
  max_position_embeddings: 128000,
  conv_L_cache: 3,
  conv_bias: false,
  bos_token_id: 1,
  eos_token_id: 7,
  pad_token_id: 0,
  tie_embedding: true,
  layer_types: Array.from({ length: 24 }, (_, i) => ([2, 6, 10, 14, 18, 21].includes(i) ? 'full_attention' : 'conv')),
};

/** LFM2-1.2B in the older key names (block_ff_dim, theta, full_attn_idxs). */
const LFM2_1_2B_LEGACY = {
  model_type: 'lfm2',
  vocab_size: 65536,
  hidden_size: 2048,
  block_ff_dim: 12288,
  block_auto_adjust_ff_dim: true,
  block_ffn_dim_multiplier: 1.0,
  block_multiple_of: 256,
  num_hidden_layers: 16,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  theta: 1000000.0,
  norm_eps: 1e-5,
  full_attn_idxs: [2, 5, 8, 10, 12, 14],
  tie_embedding: true,
  eos_token_id: 7,
};

describe('parseLfm2Config', () => {
  it("LFM2-8B-A1B: layer kinds, dense then MoE layers, the router's settings", () => {
    const c = parseLfm2Config(LFM2_8B_A1B);
    expect(c.layerTypes.filter((t) => t === 'full_attention').length).toBe(6);
    expect(c.layerTypes[2]).toBe('full_attention');
    expect(c.layerTypes[3]).toBe('conv');
    expect(c.headDim).toBe(64);
    expect(c.intermediateSize).toBe(7168); // MoE configs use intermediate_size as is
    expect(c.moe).toEqual({
      numExperts: 32,
      numExpertsPerTok: 4,
      moeIntermediateSize: 1792,
      numDenseLayers: 2,
      normTopkProb: true,
      useExpertBias: true,
      routedScalingFactor: 1,
    });
    expect([0, 1, 2, 23].map((i) => isLfm2MoeLayer(c, i))).toEqual([false, false, true, true]);
    expect(c.tieWordEmbeddings).toBe(true);
    expect(c.eosTokenIds).toEqual([7]);
  });

  it('LFM2.5-8B-A1B: vocabulary and rope_theta come from the config (rope_parameters too)', () => {
    const c = parseLfm2Config({ ...LFM2_8B_A1B, vocab_size: 128000, rope_theta: undefined, rope_parameters: { rope_type: 'default', rope_theta: 5000000 } });
    expect(c.vocabSize).toBe(128000);
    expect(c.ropeTheta).toBe(5e6);
    expect(c.ropeScaling).toBeUndefined();
  });

  it('legacy keys: block_ff_dim, theta, tie_embedding, full_attn_idxs; the 2/3 width rule', () => {
    const c = parseLfm2Config(LFM2_1_2B_LEGACY);
    expect(c.intermediateSize).toBe(8192);
    expect(c.ropeTheta).toBe(1e6);
    expect(c.tieWordEmbeddings).toBe(true);
    expect(c.layerTypes.map((t, i) => (t === 'full_attention' ? i : -1)).filter((i) => i >= 0)).toEqual([2, 5, 8, 10, 12, 14]);
    expect(adjustedFfDim(6656, 1, 256)).toBe(4608); // LFM2-350M
    expect(adjustedFfDim(12288, 1, 256)).toBe(8192); // LFM2-1.2B
    expect(adjustedFfDim(100, null, 256)).toBe(66); // no multiplier: no rounding either (transformers)
    expect(parseLfm2Config({ ...LFM2_1_2B_LEGACY, block_auto_adjust_ff_dim: false }).intermediateSize).toBe(12288);
    expect(parseLfm2Config({ ...LFM2_1_2B_LEGACY, block_ffn_dim_multiplier: null }).intermediateSize).toBe(8192);
  });

  it('without layer_types or full_attn_idxs every layer is attention', () => {
    const { full_attn_idxs: _, ...rest } = LFM2_1_2B_LEGACY;
    expect(parseLfm2Config(rest).layerTypes.every((t) => t === 'full_attention')).toBe(true);
  });

  it('the presets round-trip through config.json', () => {
    for (const c of Object.values(LFM2_PRESETS)) expect(parseLfm2Config(JSON.parse(JSON.stringify(lfm2ToHfConfig(c))))).toEqual(c);
  });

  it('errors name the field', () => {
    const bad = (patch: Record<string, unknown>, what: RegExp) => {
      expect(() => parseLfm2Config({ ...LFM2_8B_A1B, ...patch })).toThrow(CheckpointError);
      expect(() => parseLfm2Config({ ...LFM2_8B_A1B, ...patch })).toThrow(what);
    };
    bad({ layer_types: ['conv', 'full_attention'] }, /layer_types must be a list of num_hidden_layers \(24\) entries \(it has 2\)/);
    bad({ layer_types: [...LFM2_8B_A1B.layer_types.slice(1), 'mamba'] }, /layer_types must be a list of 'conv' \/ 'full_attention'/);
    bad({ num_experts_per_tok: 33 }, /num_experts_per_tok must be at most num_experts \(32\)/);
    bad({ num_key_value_heads: 7 }, /must be a multiple of num_key_value_heads \(7\)/);
    bad({ eos_token_id: 70000 }, /eos_token_id 70000 is outside vocab_size 65536/);
    bad({ conv_L_cache: 12 }, /conv_L_cache must be at most 9/);
    expect(() => parseLfm2Config({ ...LFM2_8B_A1B, model_type: 'qwen3' })).toThrow(/model_type 'qwen3' is not an LFM2 config/);
  });
});
