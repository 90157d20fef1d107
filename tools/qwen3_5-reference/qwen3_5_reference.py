"""A float64 numpy port of the text forward of Qwen3.5 (model_type "qwen3_5") and Qwen3.5-MoE ("qwen3_5_moe", the
hybrid Gated DeltaNet + gated attention family of Qwen3.6-35B-A3B) as Hugging Face transformers implements them, used
as an independent golden reference for the TypeScript runtime.

Ported from huggingface/transformers (the math only; the numpy is written from scratch, torch ops replaced and every
tensor float64):
  src/transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py   at 5fd974ea3af798c79b3b70d2fd9e52fb58869894
  src/transformers/models/qwen3_5/modeling_qwen3_5.py           at 009e78d6e89fd6f3e68cf81ba95ccc682c8cdda9 (the stored
      copy at 5fd974ea was not available; this later one has the same math, see "prefill with a cache" below)
  src/transformers/models/qwen3_5_moe/configuration_qwen3_5_moe.py and
  src/transformers/models/qwen3_5/configuration_qwen3_5.py      at 008e574391258935f3ecc3035c882e73bbcac419
  src/transformers/modeling_rope_utils.py (RotaryEmbeddingConfigMixin.convert_rope_params_to_dict /
      standardize_rope_params), src/transformers/configuration_utils.py (PreTrainedConfig.__post_init__ order,
      remap_legacy_layer_types) and src/transformers/conversion_mapping.py (checkpoint key conversions), as stored.

What is computed (S tokens, batch axis dropped):
  x = embed_tokens[ids]; per layer: x += mixer(norm_in(x)); x += mlp(norm_post(x)); logits = lm_head(norm(x)).
  Norms (input_layernorm, post_attention_layernorm, q_norm, k_norm, final norm): zero-centred RMSNorm
    x * rsqrt(mean(x^2) + eps) * (1 + w).
  linear_attention (Qwen3_5[Moe]GatedDeltaNet):
    [q|k|v] = in_proj_qkv(x) (plain concatenation, key_dim, key_dim, value_dim); z = in_proj_z(x); b = in_proj_b(x);
    a = in_proj_a(x). The q|k|v channels go through a causal depthwise conv1d (kernel K = linear_conv_kernel_dim, no
    bias) then SiLU. q, k are l2-normalised per head (x * rsqrt(sum(x^2) + 1e-6)) and q is scaled by 1/sqrt(dk); each
    q/k head serves Hv/Hk consecutive v heads (repeat_interleave). beta = sigmoid(b); g = -exp(A_log) * softplus(a +
    dt_bias) with torch's softplus (threshold 20: x itself above 20). The gated delta rule per v head, state S [dk, dv]:
      S <- S * exp(g_t); S <- S + k_t (beta_t (v_t - S^T k_t))^T; o_t = S^T q_t
    computed either chunked (torch_chunk_gated_delta_rule, chunk size a parameter, default 64) or one token at a time
    (torch_recurrent_gated_delta_rule), both from an initial state. Then the gated norm (Qwen3_5[Moe]RMSNormGated) on
    each v head: w * (o * rsqrt(mean(o^2) + eps)) * silu(z) (plain w, gate after the norm), then out_proj.
  full_attention (Qwen3_5[Moe]Attention): q_proj gives per head [query | gate] (2 * head_dim rows per head); q_norm,
    k_norm per head; partial RoPE on the first rotary_dim = 2 * len(inv_freq) dims (rotate_half over that slice,
    the rest passes through); causal softmax(q k^T / sqrt(head_dim)) v with GQA (kv head j // n_rep); the
    [S, heads * head_dim] output times sigmoid(gate) before o_proj. Optional q/k/v/o biases (attention_bias).
  mlp: dense (qwen3_5): down(silu(gate(x)) * up(x)) with intermediate_size on every layer. MoE (qwen3_5_moe, every
    layer sparse): router softmax over all experts, top-k, the k weights divided by their sum (no epsilon, no
    norm_topk_prob switch); expert e: gate_up_proj[e] is [gate | up] ([2I, H]), down_proj[e] is [H, I]; plus the
    shared expert (an MLP with shared_expert_intermediate_size) scaled by sigmoid(shared_expert_gate(x)).
  RoPE: inv_freq = 1 / theta ** (arange(0, dim, 2) / dim), dim = int(head_dim * partial_rotary_factor), and the angle
    position * inv_freq are computed in float32 as transformers does (its rotary embedding forces float32); cos/sin are
    then taken in float64 of that float32 angle (transformers takes them in float32). Text-only positions are the
    same on the three mrope axes (position_ids = cache_position expanded to 3 rows; the generate() path adds a zero
    rope_delta), so apply_interleaved_mrope copies equal values and mrope is exactly plain 1-D RoPE here.

Cache (one per sequence): per linear_attention layer the conv window (the last K inputs of the conv, [convDim, K], as
transformers stores it; the next output reads the last K - 1 of them) and the recurrent state [Hv, dk, dv]; per
full_attention layer the K/V rows; and the number of tokens seen.

Prefill with a cache (where this port differs from transformers on purpose): at 5fd974ea transformers' GatedDeltaNet
uses the cache only when seq_len == 1 (use_precomputed_states); a forward of several tokens starts the conv from zeros
and the chunked rule from initial_state=None even when the cache already holds state, and overwrites the cache. Our
runtime prefills a prompt in pieces, so forward() here starts every piece from the cached conv window and recurrent
state (the mathematically correct continuation; split prefill equals whole prefill). transformers' later
modeling_qwen3_5.py (009e78d6) does the same (update_conv_state over the cached window, initial_state from the cache).
forward(..., transformers_prefill=True) reproduces the 5fd974ea behaviour for comparison.

Where transformers differs from (or adds to) the brief's semantics list, all followed here:
  * tie_word_embeddings: Qwen3_5[Moe]ForConditionalGeneration ties lm_head to embed_tokens by the TOP-LEVEL
    config.tie_word_embeddings (a field of Qwen3_5[Moe]Config, default False; v5's get_expanded_tied_weights_keys
    reads self.config). text_config.tie_word_embeddings (also default False) is read only by the text-only
    *ForCausalLM classes; a disagreement is reported. When tied, a stored lm_head.weight is ignored (warned if it
    differs).
  * attn_output_gate is not a transformers field: the gate is always there (q_proj always has 2 * heads * head_dim
    rows). A config that says attn_output_gate: false is refused.
  * mrope_interleaved is ignored (apply_interleaved_mrope always runs); mrope_section defaults to [11, 11, 10]; neither
    matters for text-only positions.
  * partial_rotary_factor: rope_parameters.partial_rotary_factor, else text_config.partial_rotary_factor, else 0.25
    (the __post_init__ "default for BC"). rope_theta: rope_parameters.rope_theta, else text_config.rope_theta, else
    10000.0 (RotaryEmbeddingConfigMixin.default_theta). rope_scaling, when given and non-empty, replaces
    rope_parameters. Only rope_type "default" is ported.
  * softplus has torch's threshold (returns x for x > 20).
  * The router has no norm_topk_prob switch and no epsilon; every qwen3_5_moe layer is MoE (no mlp_only_layers /
    decoder_sparse_step as in Qwen3-Next: such keys are ignored, with a warning).
  * layer_types: legacy names are remapped ("mamba" -> "linear_attention", "attention" -> "full_attention"); when
    absent they follow full_attention_interval (default 4): layer i is full_attention when (i + 1) % interval == 0.
  * hidden_act must be "silu" (the only activation these checkpoints use; others are refused).
  * Experts stored one by one (mlp.experts.{e}.{gate,up,down}_proj.weight): transformers' conversion_mapping.py has no
    converter for qwen3_5_moe (only "qwen3_5_moe_text" -> the "qwen3_5_text" renaming of model.language_model. to
    model.), so such a checkpoint would load with gate_up_proj/down_proj missing. This reader refuses it likewise.
    (Qwen's own releases store the main layers fused; per-expert keys appear in re-saved derivatives and in mtp.*.)
  * transformers' cache (get_seq_length / has_previous_state) needs at least one full_attention and one
    linear_attention layer; this port counts tokens itself and accepts either stack.

Usage:
  python3 tools/qwen3_5-reference/qwen3_5_reference.py [fixtureRoot] [outDir]
    fixtureRoot (default $TMPDIR/qwen3_5-fixture): one folder per case holding config.json (release layout),
    model.safetensors (F32 or BF16) and inputs.json = {"prompt": [ids], "greedy_steps": N, "split": [sizes]}.
    outDir (default test/fixtures/qwen3_5): <case>.safetensors with
      prompt I32 [S]; logits F32 [S, V] (one whole-prompt prefill, chunked rule, chunk size 64);
      greedy I32 [N], greedy_logits F32 [N, V] (greedy continuation decoded one token at a time through the cache with
      the recurrent rule; row 0 is the prompt's last logits row);
      split_logits F32 [S, V] (the prompt prefilled through the cache as consecutive pieces of the sizes in split).
  python3 tools/qwen3_5-reference/qwen3_5_reference.py --self-test
    builds random tiny checkpoints in both layouts in a temp dir and runs the whole path plus the internal checks.
"""

import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reference_common import linear, read_safetensors, rotate_half, sigmoid, silu, topk_indices, write_safetensors  # noqa: E402

TRANSFORMERS_COMMITS = {
    "modeling_qwen3_5_moe.py": "5fd974ea3af798c79b3b70d2fd9e52fb58869894",
    "modeling_qwen3_5.py": "009e78d6e89fd6f3e68cf81ba95ccc682c8cdda9",
    "configuration_qwen3_5[_moe].py": "008e574391258935f3ecc3035c882e73bbcac419",
}
TEXT_PREFIX = "model.language_model."
IGNORED_PREFIXES = ("model.visual.", "mtp.")
DEFAULT_CHUNK_SIZE = 64
L2NORM_EPS = 1e-6
SOFTPLUS_THRESHOLD = 20.0
# Cache paths, split prefill and the chunked rule must equal their references to this, relative to max(1, max |logit|).
CACHE_TOLERANCE = 1e-10
# Chunked vs recurrent delta rule on random inputs (absolute; values are O(1)).
DELTA_RULE_TOLERANCE = 1e-11

# ---------------------------------------------------------------------------------------------------------------
# config (Qwen3_5[Moe]Config with its text_config, their defaults and __post_init__ rules)

_LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}


def resolve_config(raw, warn=print):
    """The text model's settings from a release-layout config.json (top level + text_config)."""
    model_type = raw.get("model_type")
    if model_type not in ("qwen3_5", "qwen3_5_moe"):
        raise ValueError(f"config.json model_type is {model_type!r}, expected 'qwen3_5' or 'qwen3_5_moe'")
    moe = model_type == "qwen3_5_moe"
    t = raw.get("text_config")
    if not isinstance(t, dict):
        # Qwen3_5[Moe]Config would build a default text config and ignore flat keys; refuse instead.
        raise ValueError("config.json has no text_config object: expected the release layout (text fields nested)")
    archs = raw.get("architectures") or []
    if archs and not any(a.endswith("ForConditionalGeneration") for a in archs):
        warn(f"  warning: architectures {archs}: this port follows *ForConditionalGeneration (top-level tying)")

    def get(key, default):
        # A key given as null stays None, as a Python kwarg would.
        return t.get(key, default)

    c = {"model_type": model_type, "moe": moe}
    c["vocab_size"] = get("vocab_size", 248320)
    c["hidden_size"] = get("hidden_size", 2048 if moe else 4096)
    c["num_hidden_layers"] = get("num_hidden_layers", 40 if moe else 32)
    c["num_attention_heads"] = get("num_attention_heads", 16)
    c["num_key_value_heads"] = get("num_key_value_heads", 2 if moe else 4)
    c["hidden_act"] = get("hidden_act", "silu")
    c["rms_norm_eps"] = get("rms_norm_eps", 1e-6)
    c["attention_bias"] = bool(get("attention_bias", False))
    # Attention reads getattr(config, "head_dim", ...): the field always exists (default 256). The rotary embedding reads
    # `head_dim or hidden // heads`; a null head_dim would break attention in transformers, we fall back as rotary does.
    c["head_dim"] = get("head_dim", 256) or c["hidden_size"] // c["num_attention_heads"]
    c["linear_conv_kernel_dim"] = get("linear_conv_kernel_dim", 4)
    c["linear_key_head_dim"] = get("linear_key_head_dim", 128)
    c["linear_value_head_dim"] = get("linear_value_head_dim", 128)
    c["linear_num_key_heads"] = get("linear_num_key_heads", 16)
    c["linear_num_value_heads"] = get("linear_num_value_heads", 32)
    if moe:
        c["moe_intermediate_size"] = get("moe_intermediate_size", 512)
        c["shared_expert_intermediate_size"] = get("shared_expert_intermediate_size", 512)
        c["num_experts_per_tok"] = get("num_experts_per_tok", 8)
        c["num_experts"] = get("num_experts", 256)
        if get("mlp_only_layers", None) or get("decoder_sparse_step", 1) not in (1, None):
            warn("  warning: mlp_only_layers / decoder_sparse_step are not Qwen3.5-MoE fields; every layer is MoE")
        if get("norm_topk_prob", True) is False:
            warn("  warning: norm_topk_prob is not a Qwen3.5-MoE field; the router always renormalises the top-k")
    else:
        c["intermediate_size"] = get("intermediate_size", 12288)
    if c["hidden_act"] != "silu":
        raise ValueError(f"hidden_act {c['hidden_act']!r} is not ported (only 'silu')")
    if get("attn_output_gate", True) is False:
        raise ValueError("attn_output_gate: false, but transformers' Qwen3.5 attention always has the output gate")

    layer_types = get("layer_types", None)
    if layer_types is None:
        interval = get("full_attention_interval", 4)
        layer_types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(c["num_hidden_layers"])]
    else:
        layer_types = [_LEGACY_LAYER_TYPES.get(k, k) for k in layer_types]
    if len(layer_types) != c["num_hidden_layers"] or any(k not in ("linear_attention", "full_attention") for k in layer_types):
        raise ValueError(f"layer_types {layer_types} do not fit num_hidden_layers {c['num_hidden_layers']}")
    c["layer_types"] = list(layer_types)

    # RoPE (convert_rope_params_to_dict): rope_scaling (if truthy) replaces rope_parameters; rope_theta and
    # partial_rotary_factor are setdefault'ed into the dict from the text_config's own keys, else their defaults.
    rope = dict(get("rope_scaling", None) or get("rope_parameters", None) or {})
    if rope and set(rope).issubset({"linear_attention", "full_attention"}):
        raise ValueError("per-layer-type rope_parameters are not supported (transformers' rotary reads one dict)")
    rope.setdefault("rope_theta", get("rope_theta", 10000.0))
    rope.setdefault("partial_rotary_factor", get("partial_rotary_factor", 0.25))
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise ValueError(f"rope_type {rope_type!r} is not ported (only 'default')")
    c["rope_theta"] = float(rope["rope_theta"])
    c["partial_rotary_factor"] = float(rope["partial_rotary_factor"])
    c["mrope_section"] = list(rope.get("mrope_section", [11, 11, 10]))

    # Tying: the top-level field decides for *ForConditionalGeneration (see the module docstring).
    c["tie_word_embeddings"] = bool(raw.get("tie_word_embeddings", False))
    if "tie_word_embeddings" in t and bool(t["tie_word_embeddings"]) != c["tie_word_embeddings"]:
        warn(
            f"  warning: text_config.tie_word_embeddings={t['tie_word_embeddings']} but the top level says "
            f"{raw.get('tie_word_embeddings', '(absent: False)')}; transformers' ForConditionalGeneration uses the top level"
        )

    nH, nKV = c["num_attention_heads"], c["num_key_value_heads"]
    if nH % nKV:
        raise ValueError(f"num_attention_heads {nH} is not a multiple of num_key_value_heads {nKV}")
    if c["linear_num_value_heads"] % c["linear_num_key_heads"]:
        raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
    rot = int(c["head_dim"] * c["partial_rotary_factor"])
    if rot <= 0 or 2 * ((rot + 1) // 2) > c["head_dim"]:
        raise ValueError(f"rotary dim {rot} does not fit head_dim {c['head_dim']}")
    return c


# ---------------------------------------------------------------------------------------------------------------
# primitives


def softplus(x):
    """torch.nn.functional.softplus(x) (beta 1, threshold 20): x itself where x > 20."""
    return np.where(x > SOFTPLUS_THRESHOLD, x, np.logaddexp(0.0, np.minimum(x, SOFTPLUS_THRESHOLD)))


def rms_norm_zc(x, w, eps):
    """Qwen3_5[Moe]RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def gated_rms_norm(x, z, w, eps):
    """Qwen3_5[Moe]RMSNormGated: w * (x * rsqrt(mean(x^2) + eps)) * silu(z), over the last axis."""
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)) * silu(z)


def l2norm(x, eps=L2NORM_EPS):
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


# ---------------------------------------------------------------------------------------------------------------
# gated delta rule. Inputs [T, H, d] with q/k already repeated to the v heads, g and beta [T, H]; returns out [T, H, dv]
# and the final state [H, dk, dv].


def recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=None, use_qk_l2norm=True):
    """torch_recurrent_gated_delta_rule: one token at a time."""
    if use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    T, H, dk = k.shape
    dv = v.shape[-1]
    q = q * (1.0 / dk**0.5)
    state = np.zeros((H, dk, dv)) if initial_state is None else np.array(initial_state, dtype=np.float64)
    out = np.empty((T, H, dv))
    for t in range(T):
        state = state * np.exp(g[t])[:, None, None]
        kv_mem = np.einsum("hkv,hk->hv", state, k[t])
        delta = (v[t] - kv_mem) * beta[t][:, None]
        state = state + k[t][:, :, None] * delta[:, None, :]
        out[t] = np.einsum("hkv,hk->hv", state, q[t])
    return out, state


def _unit_lower_solve(a, b):
    """X with (I + a) X = b, a strictly lower triangular over the last two axes of a ([..., C, C]); forward
    substitution, row by row (the system transformers inverts by its row loop or solve_triangular)."""
    x = np.empty_like(b)
    for r in range(a.shape[-1]):
        x[..., r, :] = b[..., r, :] - np.einsum("...m,...md->...d", a[..., r, :r], x[..., :r, :])
    return x


def chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=DEFAULT_CHUNK_SIZE, initial_state=None, use_qk_l2norm=True):
    """torch_chunk_gated_delta_rule: the sequence in chunks of chunk_size (right-padded with zeros, which leave the
    state unchanged: padded k, beta are 0 and padded g is 0)."""
    if use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    T, H, dk = k.shape
    dv = v.shape[-1]
    C = int(chunk_size)
    q, k, v = (np.transpose(x, (1, 0, 2)) for x in (q, k, v))  # [H, T, d]
    g, beta = g.T, beta.T  # [H, T]
    q = q * (1.0 / dk**0.5)
    pad = (C - T % C) % C
    q, k, v = (np.pad(x, ((0, 0), (0, pad), (0, 0))) for x in (q, k, v))
    g, beta = (np.pad(x, ((0, 0), (0, pad))) for x in (g, beta))
    N = (T + pad) // C
    k_beta = k * beta[..., None]
    v_beta = v * beta[..., None]
    q, k, k_beta, v_beta = (x.reshape(H, N, C, x.shape[-1]) for x in (q, k, k_beta, v_beta))
    g = np.cumsum(g.reshape(H, N, C), axis=-1)  # cumulative log-decay inside each chunk

    lower = np.tril(np.ones((C, C), dtype=bool))  # i >= j
    diff = g[..., :, None] - g[..., None, :]
    decay = np.where(lower, np.exp(np.where(lower, diff, 0.0)), 0.0)  # exp(g_i - g_j) for j <= i, else 0

    # intra-chunk UT transform: T = (I + strictly_lower(k_beta k^T * decay))^-1
    a = np.tril((k_beta @ np.swapaxes(k, -1, -2)) * decay, -1)
    new_values = _unit_lower_solve(a, v_beta)
    k_cumdecay = _unit_lower_solve(a, k_beta * np.exp(g)[..., None])

    state = np.zeros((H, dk, dv)) if initial_state is None else np.array(initial_state, dtype=np.float64)
    out = np.empty((H, N, C, dv))
    for n in range(N):
        qn, kn, gn = q[:, n], k[:, n], g[:, n]
        attn = (qn @ np.swapaxes(kn, -1, -2)) * decay[:, n]  # decay is 0 above the diagonal
        v_new = new_values[:, n] - k_cumdecay[:, n] @ state
        inter = (qn * np.exp(gn)[..., None]) @ state
        out[:, n] = inter + attn @ v_new
        g_last = gn[:, -1]
        state = state * np.exp(g_last)[:, None, None] + np.swapaxes(
            kn * np.exp(g_last[:, None] - gn)[..., None], -1, -2
        ) @ v_new
    out = out.reshape(H, N * C, dv)[:, :T]
    return np.transpose(out, (1, 0, 2)), state


def check_delta_rules(rng, shapes=((37, 4, 8, 6), (70, 2, 16, 16), (5, 3, 4, 4)), chunk_sizes=(4, 64)):
    """Chunked vs recurrent on random inputs with a random initial state; returns the largest |difference|."""
    worst = 0.0
    for T, H, dk, dv in shapes:
        q = rng.standard_normal((T, H, dk))
        k = rng.standard_normal((T, H, dk))
        v = rng.standard_normal((T, H, dv))
        g = -np.exp(rng.standard_normal((T, H))) * 0.5  # log-decays <= 0
        beta = sigmoid(rng.standard_normal((T, H)))
        s0 = 0.3 * rng.standard_normal((H, dk, dv))
        ref_out, ref_state = recurrent_gated_delta_rule(q, k, v, g, beta, s0)
        for cs in chunk_sizes:
            out, state = chunk_gated_delta_rule(q, k, v, g, beta, cs, s0)
            d = max(float(np.abs(out - ref_out).max()), float(np.abs(state - ref_state).max()))
            print(f"  delta rule T={T} H={H} dk={dk} dv={dv} chunk {cs}: chunked vs recurrent max |diff| {d:.2e}")
            assert d <= DELTA_RULE_TOLERANCE, f"chunked (chunk {cs}) differs from recurrent by {d:.3e}"
            worst = max(worst, d)
        # the same rule split in two pieces through the state equals the whole
        cut = T // 3
        o1, s1 = chunk_gated_delta_rule(q[:cut], k[:cut], v[:cut], g[:cut], beta[:cut], 4, s0)
        o2, s2 = chunk_gated_delta_rule(q[cut:], k[cut:], v[cut:], g[cut:], beta[cut:], 4, s1)
        d = max(float(np.abs(np.concatenate([o1, o2]) - ref_out).max()), float(np.abs(s2 - ref_state).max()))
        assert d <= DELTA_RULE_TOLERANCE, f"chunked rule in two pieces differs by {d:.3e}"
        worst = max(worst, d)
    return worst


# ---------------------------------------------------------------------------------------------------------------
# weights and cache


class Weights:
    """The state dict, recording which names the model read so leftovers (a misnamed tensor) are reported."""

    def __init__(self, tensors):
        self.t = tensors
        self.used = set()

    def __contains__(self, name):
        return name in self.t

    def __call__(self, name, shape=None):
        if name not in self.t:
            raise KeyError(f"checkpoint has no tensor '{name}'")
        self.used.add(name)
        a = self.t[name]
        if shape is not None and tuple(a.shape) != tuple(shape):
            raise ValueError(f"tensor '{name}' has shape {list(a.shape)}, expected {list(shape)}")
        return a


class HybridCache:
    """Per sequence: conv windows [convDim, K] and recurrent states [Hv, dk, dv] of the linear_attention layers, K/V
    rows [kv_heads, T, head_dim] of the full_attention layers, and the number of tokens seen."""

    def __init__(self, c):
        n = len(c["layer_types"])
        self.tokens_seen = 0
        self.conv_states = [None] * n
        self.recurrent_states = [None] * n
        self.key_cache = [None] * n
        self.value_cache = [None] * n

    def update_kv(self, k, v, i):
        if self.key_cache[i] is None:
            self.key_cache[i], self.value_cache[i] = k, v
        else:
            self.key_cache[i] = np.concatenate([self.key_cache[i], k], axis=1)
            self.value_cache[i] = np.concatenate([self.value_cache[i], v], axis=1)
        return self.key_cache[i], self.value_cache[i]


# ---------------------------------------------------------------------------------------------------------------
# model


class Qwen35Reference:
    def __init__(self, c, tensors, warn=print):
        self.c = c
        w = self.w = Weights(tensors)
        H, V, D = c["hidden_size"], c["vocab_size"], c["head_dim"]
        nH, nKV = c["num_attention_heads"], c["num_key_value_heads"]
        Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
        self.key_dim, self.value_dim = Hk * dk, Hv * dv
        self.conv_dim = 2 * self.key_dim + self.value_dim
        bias = c["attention_bias"]
        P = TEXT_PREFIX

        self.embed = w(P + "embed_tokens.weight", (V, H))
        self.layers = []
        for i, kind in enumerate(c["layer_types"]):
            p = f"{P}layers.{i}."
            layer = {
                "kind": kind,
                "input_norm": w(p + "input_layernorm.weight", (H,)),
                "post_norm": w(p + "post_attention_layernorm.weight", (H,)),
            }
            if kind == "full_attention":
                a = p + "self_attn."
                layer["q"] = w(a + "q_proj.weight", (2 * nH * D, H))
                layer["k"] = w(a + "k_proj.weight", (nKV * D, H))
                layer["v"] = w(a + "v_proj.weight", (nKV * D, H))
                layer["o"] = w(a + "o_proj.weight", (H, nH * D))
                layer["q_bias"] = w(a + "q_proj.bias", (2 * nH * D,)) if bias else None
                layer["k_bias"] = w(a + "k_proj.bias", (nKV * D,)) if bias else None
                layer["v_bias"] = w(a + "v_proj.bias", (nKV * D,)) if bias else None
                layer["o_bias"] = w(a + "o_proj.bias", (H,)) if bias else None
                layer["q_norm"] = w(a + "q_norm.weight", (D,))
                layer["k_norm"] = w(a + "k_norm.weight", (D,))
            else:
                a = p + "linear_attn."
                layer["in_qkv"] = w(a + "in_proj_qkv.weight", (self.conv_dim, H))
                layer["in_z"] = w(a + "in_proj_z.weight", (self.value_dim, H))
                layer["in_a"] = w(a + "in_proj_a.weight", (Hv, H))
                layer["in_b"] = w(a + "in_proj_b.weight", (Hv, H))
                layer["conv"] = w(a + "conv1d.weight", (self.conv_dim, 1, K))[:, 0, :]  # [convDim, K]
                layer["out_proj"] = w(a + "out_proj.weight", (H, self.value_dim))
                layer["norm"] = w(a + "norm.weight", (dv,))
                layer["A_log"] = w(a + "A_log", (Hv,))
                layer["dt_bias"] = w(a + "dt_bias", (Hv,))
            layer["mlp"] = self._load_moe(p + "mlp.") if c["moe"] else self._load_mlp(p + "mlp.", c["intermediate_size"])
            self.layers.append(layer)
        self.final_norm = w(P + "norm.weight", (H,))

        if c["tie_word_embeddings"]:
            self.lm_head = self.embed
            if "lm_head.weight" in w:
                stored = w("lm_head.weight", (V, H))
                if not np.array_equal(stored, self.embed):
                    warn("  warning: tie_word_embeddings is set but lm_head.weight differs from embed_tokens; using embed_tokens")
        else:
            self.lm_head = w("lm_head.weight", (V, H))

        unused = sorted(n for n in set(tensors) - w.used if not n.startswith(IGNORED_PREFIXES))
        if unused:
            raise ValueError(f"checkpoint tensors the model does not read: {unused[:8]}{' ...' if len(unused) > 8 else ''}")

        # compute_default_rope_parameters in float32: 1 / base ** (arange(0, dim, 2) / dim)
        dim = int(D * c["partial_rotary_factor"])
        exponent = np.arange(0, dim, 2).astype(np.float32) / np.float32(dim)
        self.inv_freq = (np.float32(1.0) / np.power(np.float32(c["rope_theta"]), exponent, dtype=np.float32)).astype(np.float32)
        self.rotary_dim = 2 * len(self.inv_freq)

    def _load_mlp(self, f, inter):
        H, w = self.c["hidden_size"], self.w
        return {
            "moe": False,
            "gate": w(f + "gate_proj.weight", (inter, H)),
            "up": w(f + "up_proj.weight", (inter, H)),
            "down": w(f + "down_proj.weight", (H, inter)),
        }

    def _load_moe(self, f):
        c, w = self.c, self.w
        H, E, I = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"]
        if f + "experts.gate_up_proj" not in w and (f + "experts.0.gate_proj.weight") in w:
            raise ValueError(
                f"{f}experts.* is stored one expert at a time; transformers' conversion_mapping has no qwen3_5_moe "
                "converter to fuse it into experts.gate_up_proj / experts.down_proj, so it would not load there either"
            )
        gu = w(f + "experts.gate_up_proj", (E, 2 * I, H))
        return {
            "moe": True,
            "router": w(f + "gate.weight", (E, H)),
            "gate": gu[:, :I],  # chunk(2, dim=-1) of the [2I] output: gate first, then up
            "up": gu[:, I:],
            "down": w(f + "experts.down_proj", (E, H, I)),
            "shared": self._load_mlp(f + "shared_expert.", c["shared_expert_intermediate_size"]),
            "shared_gate": w(f + "shared_expert_gate.weight", (1, H)),
        }

    # -- rotary ----------------------------------------------------------------------------------------------

    def rope(self, positions):
        """cos, sin [S, rotary_dim]: the angle position * inv_freq in float32 (as transformers), cos/sin in float64.
        (The three mrope rows are equal for text, so the interleaving leaves the angle as is.)"""
        freqs = positions.astype(np.float32)[:, None] * self.inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1).astype(np.float64)
        return np.cos(emb), np.sin(emb)

    # -- mixers ----------------------------------------------------------------------------------------------

    def attention(self, i, layer, h, cos, sin, cache, past):
        c = self.c
        S, D = h.shape[0], c["head_dim"]
        nH, nKV = c["num_attention_heads"], c["num_key_value_heads"]
        eps = c["rms_norm_eps"]
        qg = linear(h, layer["q"], layer["q_bias"]).reshape(S, nH, 2 * D)
        q, gate = qg[..., :D], qg[..., D:].reshape(S, nH * D)
        q = rms_norm_zc(q, layer["q_norm"], eps).transpose(1, 0, 2)  # [nH, S, D]
        k = rms_norm_zc(linear(h, layer["k"], layer["k_bias"]).reshape(S, nKV, D), layer["k_norm"], eps).transpose(1, 0, 2)
        v = linear(h, layer["v"], layer["v_bias"]).reshape(S, nKV, D).transpose(1, 0, 2)
        r = self.rotary_dim
        q = np.concatenate([q[..., :r] * cos + rotate_half(q[..., :r]) * sin, q[..., r:]], axis=-1)
        k = np.concatenate([k[..., :r] * cos + rotate_half(k[..., :r]) * sin, k[..., r:]], axis=-1)
        if cache is not None:
            k, v = cache.update_kv(k, v, i)
        rep = nH // nKV
        k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
        scores = (q @ k.transpose(0, 2, 1)) * D**-0.5
        T = k.shape[1]
        visible = np.arange(T)[None, :] <= (past + np.arange(S))[:, None]
        scores = np.where(visible[None], scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p = p / p.sum(axis=-1, keepdims=True)
        out = (p @ v).transpose(1, 0, 2).reshape(S, nH * D)
        return linear(out * sigmoid(gate), layer["o"], layer["o_bias"])

    def gated_delta_net(self, i, layer, h, cache, rule, chunk_size, transformers_prefill):
        c = self.c
        S = h.shape[0]
        Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
        mixed = linear(h, layer["in_qkv"])  # [S, convDim]
        z = linear(h, layer["in_z"]).reshape(S, Hv, dv)
        b = linear(h, layer["in_b"])
        a = linear(h, layer["in_a"])

        # transformers_prefill: what 5fd974ea does for seq_len > 1 (start from zeros, ignore the cache's state)
        use_cache_state = cache is not None and not (transformers_prefill and S > 1)
        if use_cache_state and cache.conv_states[i] is not None:
            prev = cache.conv_states[i].T  # [K, convDim], oldest first
        else:
            prev = np.zeros((K, self.conv_dim))
        window = np.concatenate([prev, mixed], axis=0)  # [K + S, convDim]
        # causal depthwise conv: output t (window row K + t) = sum_j w[:, j] * window[t + 1 + j]
        conv = sum(layer["conv"][:, j] * window[1 + j : 1 + j + S] for j in range(K))
        conv = silu(conv)
        if cache is not None:
            cache.conv_states[i] = window[-K:].T.copy()  # the last K inputs (zero-padded on the left if fewer)

        q = conv[:, : self.key_dim].reshape(S, Hk, dk)
        k = conv[:, self.key_dim : 2 * self.key_dim].reshape(S, Hk, dk)
        v = conv[:, 2 * self.key_dim :].reshape(S, Hv, dv)
        beta = sigmoid(b)
        g = -np.exp(layer["A_log"]) * softplus(a + layer["dt_bias"])
        rep = Hv // Hk
        q, k = np.repeat(q, rep, axis=1), np.repeat(k, rep, axis=1)  # repeat_interleave: consecutive v heads
        initial = cache.recurrent_states[i] if use_cache_state else None
        if rule == "recurrent":
            core, state = recurrent_gated_delta_rule(q, k, v, g, beta, initial)
        else:
            core, state = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size, initial)
        if cache is not None:
            cache.recurrent_states[i] = state
        core = gated_rms_norm(core, z, layer["norm"], c["rms_norm_eps"]).reshape(S, Hv * dv)
        return linear(core, layer["out_proj"])

    def mlp(self, m, h):
        if not m["moe"]:
            return linear(silu(linear(h, m["gate"])) * linear(h, m["up"]), m["down"])
        k = self.c["num_experts_per_tok"]
        logits = linear(h, m["router"])
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs = probs / probs.sum(axis=-1, keepdims=True)
        selected = topk_indices(probs, k)
        weights = np.take_along_axis(probs, selected, axis=-1)
        weights = weights / weights.sum(axis=-1, keepdims=True)
        out = np.zeros_like(h)
        for e in np.unique(selected):
            tok, slot = np.nonzero(selected == e)
            xe = h[tok]
            ye = linear(silu(linear(xe, m["gate"][e])) * linear(xe, m["up"][e]), m["down"][e])
            np.add.at(out, tok, ye * weights[tok, slot][:, None])
        shared = self.mlp(m["shared"], h)
        return out + sigmoid(linear(h, m["shared_gate"])) * shared

    # -- whole model -----------------------------------------------------------------------------------------

    def forward(self, ids, cache=None, rule=None, chunk_size=DEFAULT_CHUNK_SIZE, transformers_prefill=False):
        """Logits [S, V] for ids [S]. With a cache, positions continue from what it holds and every layer continues
        from its state, and the cache is updated. rule: 'chunk' or 'recurrent' for the delta rule; None picks
        'recurrent' for one token after a non-empty cache (transformers' use_precomputed_states) and 'chunk' otherwise."""
        c = self.c
        ids = np.asarray(ids, dtype=np.int64)
        S = len(ids)
        past = cache.tokens_seen if cache is not None else 0
        if rule is None:
            rule = "recurrent" if (cache is not None and past > 0 and S == 1) else "chunk"
        if rule not in ("chunk", "recurrent"):
            raise ValueError(f"rule {rule!r}")
        positions = np.arange(past, past + S)
        cos, sin = self.rope(positions)
        x = self.embed[ids]
        for i, layer in enumerate(self.layers):
            h = rms_norm_zc(x, layer["input_norm"], c["rms_norm_eps"])
            if layer["kind"] == "full_attention":
                x = x + self.attention(i, layer, h, cos, sin, cache, past)
            else:
                x = x + self.gated_delta_net(i, layer, h, cache, rule, chunk_size, transformers_prefill)
            x = x + self.mlp(layer["mlp"], rms_norm_zc(x, layer["post_norm"], c["rms_norm_eps"]))
        if cache is not None:
            cache.tokens_seen += S
        x = rms_norm_zc(x, self.final_norm, c["rms_norm_eps"])
        return x @ self.lm_head.T


# ---------------------------------------------------------------------------------------------------------------
# fixture generation


def _rel_diff(a, b):
    return float(np.abs(a - b).max()) / max(1.0, float(np.abs(b).max()))


def run_case(src, out_path, name):
    with open(os.path.join(src, "config.json")) as f:
        raw = json.load(f)
    with open(os.path.join(src, "inputs.json")) as f:
        inputs = json.load(f)
    c = resolve_config(raw)
    model = Qwen35Reference(c, read_safetensors(os.path.join(src, "model.safetensors")))
    prompt = np.asarray(inputs["prompt"], dtype=np.int64)
    steps = int(inputs["greedy_steps"])
    split = [int(n) for n in inputs.get("split") or []]
    S, V = len(prompt), c["vocab_size"]
    if S == 0 or steps < 0 or prompt.min() < 0 or prompt.max() >= V:
        raise ValueError(f"{name}: prompt must be non-empty ids in [0, {V}) and greedy_steps >= 0")
    if not split or any(n <= 0 for n in split) or sum(split) != S:
        raise ValueError(f"{name}: split {split} must be positive piece sizes summing to the prompt length {S}")

    # 1. whole-prompt prefill, chunked rule (chunk 64), then greedy decode one token at a time (recurrent rule)
    cache = HybridCache(c)
    logits = model.forward(prompt, cache, rule="chunk", chunk_size=DEFAULT_CHUNK_SIZE)
    greedy, greedy_logits = [], []
    last = logits[-1]
    for j in range(steps):
        token = int(np.argmax(last))  # first index of the max, as torch.argmax
        greedy.append(token)
        greedy_logits.append(last)
        if j + 1 < steps:
            last = model.forward([token], cache, rule="recurrent")[0]
    greedy = np.asarray(greedy, dtype=np.int64)
    greedy_logits = np.asarray(greedy_logits).reshape(steps, V)

    # 2. split prefill through the cache (each piece continues from the cached conv window and recurrent state)
    cache_split = HybridCache(c)
    split_logits, at = [], 0
    for n in split:
        split_logits.append(model.forward(prompt[at : at + n], cache_split, rule="chunk"))
        at += n
    split_logits = np.concatenate(split_logits, axis=0)
    d_split = _rel_diff(split_logits, logits)
    assert d_split <= CACHE_TOLERANCE, f"{name}: split prefill differs from whole prefill by {d_split:.3e}"

    # 3. the prompt one token at a time through the cache (recurrent rule)
    cache_step = HybridCache(c)
    stepped = np.concatenate([model.forward([t], cache_step, rule="recurrent") for t in prompt], axis=0)
    d_step = _rel_diff(stepped, logits)
    assert d_step <= CACHE_TOLERANCE, f"{name}: token-by-token prefill differs from whole prefill by {d_step:.3e}"

    # 4. incremental (cache) == a cache-free recompute of the whole sequence, every row
    full = model.forward(np.concatenate([prompt, greedy[:-1]]) if steps > 1 else prompt, None)
    incremental = np.concatenate([logits, greedy_logits[1:]], axis=0) if steps > 0 else logits
    d_inc = _rel_diff(incremental, full)
    assert d_inc <= CACHE_TOLERANCE, f"{name}: cached decode differs from a full recompute by {d_inc:.3e}"

    # 5. the chunk size does not matter: chunk 4 on the whole prompt
    d_chunk = _rel_diff(model.forward(prompt, None, rule="chunk", chunk_size=4), logits)
    assert d_chunk <= CACHE_TOLERANCE, f"{name}: chunk size 4 differs from chunk size 64 by {d_chunk:.3e}"

    write_safetensors(
        out_path,
        [
            ("prompt", prompt, "I32"),
            ("logits", logits, "F32"),
            ("greedy", greedy, "I32"),
            ("greedy_logits", greedy_logits, "F32"),
            ("split_logits", split_logits, "F32"),
        ],
        metadata={
            "generator": "tools/qwen3_5-reference/qwen3_5_reference.py",
            "transformers_commits": json.dumps(TRANSFORMERS_COMMITS),
            "chunk_size": DEFAULT_CHUNK_SIZE,
            "split": json.dumps(split),
        },
    )
    margins = [float(np.diff(np.sort(row)[-2:])[0]) for row in greedy_logits]
    max_logit = float(np.abs(logits).max())
    print(
        f"{name}: {c['model_type']} S={S} V={V} split {split} max|logit| {max_logit:.4f} greedy {greedy.tolist()} "
        f"min top1-top2 margin {min(margins) if margins else float('nan'):.3e}\n"
        f"  relative max |diff|: split-vs-whole {d_split:.1e}, token-by-token-vs-whole {d_step:.1e}, "
        f"incremental-vs-recompute {d_inc:.1e}, chunk4-vs-chunk64 {d_chunk:.1e}"
    )
    return {"model": model, "c": c, "logits": logits, "split": split, "prompt": prompt,
            "d_split": d_split, "d_step": d_step, "d_inc": d_inc, "d_chunk": d_chunk}


def main(root, out_dir, seed=20260101):
    if not os.path.isdir(root):
        raise SystemExit(f"fixture root {root} is not a folder (one case folder per fixture: config.json, "
                         "model.safetensors, inputs.json)")
    print("chunked vs recurrent gated delta rule (random inputs, random initial state):")
    worst = check_delta_rules(np.random.default_rng(seed))
    print(f"  worst {worst:.2e}")
    os.makedirs(out_dir, exist_ok=True)
    results = {}
    for case in sorted(os.listdir(root)):
        src = os.path.join(root, case)
        if not os.path.isfile(os.path.join(src, "config.json")):
            continue
        results[case] = run_case(src, os.path.join(out_dir, f"{case}.safetensors"), case)
    if not results:
        raise SystemExit(f"no case folders with config.json under {root}")
    return results, worst


# ---------------------------------------------------------------------------------------------------------------
# self-test: random tiny checkpoints in the release layout, run through main()


def _random_checkpoint(rng, raw, dtype):
    c = resolve_config(raw, warn=lambda *_: None)
    H, V, D = c["hidden_size"], c["vocab_size"], c["head_dim"]
    nH, nKV = c["num_attention_heads"], c["num_key_value_heads"]
    Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    conv_dim = 2 * Hk * dk + Hv * dv
    P = TEXT_PREFIX

    def lin(o, i):
        return rng.standard_normal((o, i)) / np.sqrt(i)

    def zc(n):  # zero-centred norm weights (used as 1 + w)
        return 0.2 * rng.standard_normal(n)

    def mlp(t, f, inter):
        t[f + "gate_proj.weight"], t[f + "up_proj.weight"], t[f + "down_proj.weight"] = lin(inter, H), lin(inter, H), lin(H, inter)

    t = {P + "embed_tokens.weight": rng.standard_normal((V, H)), P + "norm.weight": zc(H)}
    for i, kind in enumerate(c["layer_types"]):
        p = f"{P}layers.{i}."
        t[p + "input_layernorm.weight"], t[p + "post_attention_layernorm.weight"] = zc(H), zc(H)
        if kind == "full_attention":
            a = p + "self_attn."
            t[a + "q_proj.weight"], t[a + "k_proj.weight"] = lin(2 * nH * D, H), lin(nKV * D, H)
            t[a + "v_proj.weight"], t[a + "o_proj.weight"] = lin(nKV * D, H), lin(H, nH * D)
            t[a + "q_norm.weight"], t[a + "k_norm.weight"] = zc(D), zc(D)
        else:
            a = p + "linear_attn."
            t[a + "in_proj_qkv.weight"], t[a + "in_proj_z.weight"] = lin(conv_dim, H), lin(Hv * dv, H)
            t[a + "in_proj_a.weight"], t[a + "in_proj_b.weight"] = lin(Hv, H), lin(Hv, H)
            t[a + "conv1d.weight"] = rng.standard_normal((conv_dim, 1, K)) / np.sqrt(K)
            t[a + "out_proj.weight"] = lin(H, Hv * dv)
            t[a + "norm.weight"] = 1.0 + 0.2 * rng.standard_normal(dv)
            t[a + "A_log"] = np.log(rng.uniform(0.5, 4.0, Hv))
            t[a + "dt_bias"] = 1.0 + 0.5 * rng.standard_normal(Hv)
        f = p + "mlp."
        if c["moe"]:
            E, I = c["num_experts"], c["moe_intermediate_size"]
            t[f + "gate.weight"] = lin(E, H) * 2.0
            t[f + "experts.gate_up_proj"] = rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)
            t[f + "experts.down_proj"] = rng.standard_normal((E, H, I)) / np.sqrt(I)
            mlp(t, f + "shared_expert.", c["shared_expert_intermediate_size"])
            t[f + "shared_expert_gate.weight"] = lin(1, H)
        else:
            mlp(t, f, c["intermediate_size"])
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = rng.standard_normal((V, H)) / np.sqrt(H)
    # what the reader must skip
    t["model.visual.patch_embed.proj.weight"] = rng.standard_normal((4, 3))
    t["mtp.layers.0.mlp.experts.0.gate_proj.weight"] = rng.standard_normal((2, 2))
    return [(k, v, dtype) for k, v in sorted(t.items())]


SELF_TEST_CASES = {
    # qwen3_5_moe: both layer kinds (explicit layer_types), GQA 4:2, Hv = 2 * Hk, dk != dv, partial rotary 0.25 of
    # head_dim 16 (rotary dim 4), untied lm_head, 8 experts top-3 plus the shared expert, F32.
    "moe-tiny": (
        {
            "architectures": ["Qwen3_5MoeForConditionalGeneration"],
            "model_type": "qwen3_5_moe",
            "tie_word_embeddings": False,
            "text_config": {
                "model_type": "qwen3_5_moe_text", "vocab_size": 96, "hidden_size": 32, "num_hidden_layers": 4,
                "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6,
                "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
                "linear_value_head_dim": 6, "linear_conv_kernel_dim": 4, "num_experts": 8, "num_experts_per_tok": 3,
                "moe_intermediate_size": 12, "shared_expert_intermediate_size": 20, "attn_output_gate": True,
                "tie_word_embeddings": False, "hidden_act": "silu",
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                    "mrope_section": [1, 1, 0], "mrope_interleaved": True},
            },
            "vision_config": {"depth": 1},
        },
        "F32", {"prompt": [3, 17, 42, 5, 88, 1, 60, 9, 33, 71, 2], "greedy_steps": 6, "split": [7, 4]},
    ),
    # dense qwen3_5: layer_types from full_attention_interval 2 (L F L F L F), tied at the top level, absent
    # partial_rotary_factor / rms_norm_eps (defaults 0.25 / 1e-6), rope_theta given at text_config level, MQA,
    # Hv = 3 * Hk, stored as bfloat16, a 70-token prompt (two chunks of 64) split into 33 + 1 + 36.
    "dense-bf16": (
        {
            "architectures": ["Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5",
            "tie_word_embeddings": True,
            "text_config": {
                "vocab_size": 80, "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 6,
                "full_attention_interval": 2, "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 16,
                "linear_num_key_heads": 1, "linear_num_value_heads": 3, "linear_key_head_dim": 8,
                "linear_value_head_dim": 8, "linear_conv_kernel_dim": 3, "tie_word_embeddings": True,
                "rope_theta": 5000.0, "rope_parameters": {"rope_type": "default", "mrope_section": [11, 11, 10]},
            },
        },
        "BF16", {"prompt": [int(x) for x in np.random.default_rng(7).integers(0, 80, 70)], "greedy_steps": 5,
                 "split": [33, 1, 36]},
    ),
}


def _config_rules():
    quiet = lambda *_: None  # noqa: E731
    d = resolve_config({"model_type": "qwen3_5_moe", "text_config": {}}, warn=quiet)
    assert d["layer_types"][:4] == ["linear_attention"] * 3 + ["full_attention"] and len(d["layer_types"]) == 40
    assert d["partial_rotary_factor"] == 0.25 and d["rope_theta"] == 10000.0 and d["rms_norm_eps"] == 1e-6
    assert d["tie_word_embeddings"] is False and d["head_dim"] == 256 and d["num_experts"] == 256
    assert d["mrope_section"] == [11, 11, 10]
    dd = resolve_config({"model_type": "qwen3_5", "text_config": {}}, warn=quiet)
    assert dd["intermediate_size"] == 12288 and dd["hidden_size"] == 4096 and dd["num_key_value_heads"] == 4
    # rope_parameters wins over text_config keys, which win over the defaults
    r = resolve_config({"model_type": "qwen3_5", "text_config": {"partial_rotary_factor": 0.5, "rope_theta": 7.0,
                        "rope_parameters": {"rope_theta": 9.0}}}, warn=quiet)
    assert r["partial_rotary_factor"] == 0.5 and r["rope_theta"] == 9.0
    # legacy layer names; the top-level tie decides
    lg = resolve_config({"model_type": "qwen3_5", "tie_word_embeddings": True,
                         "text_config": {"num_hidden_layers": 2, "layer_types": ["mamba", "attention"],
                                         "tie_word_embeddings": False}}, warn=quiet)
    assert lg["layer_types"] == ["linear_attention", "full_attention"] and lg["tie_word_embeddings"] is True
    assert resolve_config({"model_type": "qwen3_5", "text_config": {"tie_word_embeddings": True}},
                          warn=quiet)["tie_word_embeddings"] is False
    for bad in ({"model_type": "qwen3_5", "text_config": {"attn_output_gate": False}},
                {"model_type": "qwen3_5", "text_config": {"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}},
                {"model_type": "qwen3_5", "hidden_size": 8},
                {"model_type": "qwen3_next", "text_config": {}}):
        try:
            resolve_config(bad, warn=quiet)
        except ValueError:
            continue
        raise AssertionError(f"resolve_config accepted {bad}")


def self_test():
    rng = np.random.default_rng(20260315)
    work = tempfile.mkdtemp(prefix="qwen3_5-reference-selftest-")
    fixtures, out_dir = os.path.join(work, "fixtures"), os.path.join(work, "out")
    print(f"self-test in {work}")
    _config_rules()

    checkpoints = {}
    for name, (raw, dtype, inputs) in SELF_TEST_CASES.items():
        d = os.path.join(fixtures, name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(raw, f, indent=1)
        with open(os.path.join(d, "inputs.json"), "w") as f:
            json.dump(inputs, f)
        entries = _random_checkpoint(rng, raw, dtype)
        write_safetensors(os.path.join(d, "model.safetensors"), entries)
        checkpoints[name] = entries

    results, _ = main(fixtures, out_dir)

    for name, (raw, dtype, inputs) in SELF_TEST_CASES.items():
        out = read_safetensors(os.path.join(out_dir, f"{name}.safetensors"))
        V, S, N = raw["text_config"]["vocab_size"], len(inputs["prompt"]), inputs["greedy_steps"]
        assert sorted(out) == ["greedy", "greedy_logits", "logits", "prompt", "split_logits"]
        assert out["prompt"].tolist() == inputs["prompt"]
        assert out["logits"].shape == (S, V) and out["split_logits"].shape == (S, V)
        assert out["greedy_logits"].shape == (N, V) and out["greedy"].shape == (N,)
        assert out["greedy"][0] == np.argmax(out["logits"][-1])
        assert np.array_equal(out["greedy"], np.argmax(out["greedy_logits"], axis=-1))
        assert np.array_equal(out["greedy_logits"][0], out["logits"][-1])
        written = dict((k, v) for k, v, _ in checkpoints[name])
        back = read_safetensors(os.path.join(fixtures, name, "model.safetensors"))
        emb = written[TEXT_PREFIX + "embed_tokens.weight"]
        emb_back = back[TEXT_PREFIX + "embed_tokens.weight"]
        assert np.abs(emb - emb_back).max() <= (2.0**-8 if dtype == "BF16" else 2.0**-23) * np.abs(emb).max()

    # transformers 5fd974ea's prefill (a piece of > 1 token restarts the conv and the delta rule from zeros) does not
    # continue a split prompt; ours does.
    for name, r in results.items():
        model, c, prompt, split = r["model"], r["c"], r["prompt"], r["split"]
        cache, rows, at = HybridCache(c), [], 0
        for n in split:
            rows.append(model.forward(prompt[at : at + n], cache, rule="chunk", transformers_prefill=True))
            at += n
        quirk = _rel_diff(np.concatenate(rows), r["logits"])
        assert quirk > 1e-6, f"{name}: transformers-style split prefill unexpectedly matches"
        print(f"{name}: transformers-5fd974ea-style split prefill (cache ignored for pieces > 1 token) off whole by "
              f"{quirk:.2e} relative (expected; this port continues from the cache)")

    # the gated delta net against a direct per-token loop written from the formulas (conv, l2norm, decay, gated norm)
    model, c = results["moe-tiny"]["model"], results["moe-tiny"]["c"]
    layer = model.layers[0]
    h = rng.standard_normal((9, c["hidden_size"]))
    got = model.gated_delta_net(0, layer, h, None, "chunk", 4, False)
    Hk, Hv, dk, dv, K = (c[k] for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                        "linear_value_head_dim", "linear_conv_kernel_dim"))
    x = h @ layer["in_qkv"].T
    y = np.zeros_like(x)
    for t in range(9):
        for j in range(K):
            src = t - (K - 1) + j
            if src >= 0:
                y[t] += layer["conv"][:, j] * x[src]
    y = y / (1 + np.exp(-y))
    kd = Hk * dk
    state = np.zeros((Hv, dk, dv))
    want = np.zeros((9, Hv * dv))
    for t in range(9):
        z = h[t] @ layer["in_z"].T
        for hv in range(Hv):
            hk = hv // (Hv // Hk)
            qv = y[t, hk * dk : (hk + 1) * dk]
            kv = y[t, kd + hk * dk : kd + (hk + 1) * dk]
            vv = y[t, 2 * kd + hv * dv : 2 * kd + (hv + 1) * dv]
            qv = qv / np.sqrt(qv @ qv + 1e-6) / np.sqrt(dk)
            kv = kv / np.sqrt(kv @ kv + 1e-6)
            av = h[t] @ layer["in_a"][hv] + layer["dt_bias"][hv]
            decay = np.exp(-np.exp(layer["A_log"][hv]) * np.log1p(np.exp(av)))
            bv = 1 / (1 + np.exp(-(h[t] @ layer["in_b"][hv])))
            s = state[hv] * decay
            s = s + np.outer(kv, bv * (vv - s.T @ kv))
            state[hv] = s
            o = s.T @ qv
            zz = z[hv * dv : (hv + 1) * dv]
            want[t, hv * dv : (hv + 1) * dv] = layer["norm"] * o / np.sqrt(np.mean(o * o) + c["rms_norm_eps"]) * zz / (1 + np.exp(-zz))
    want = want @ layer["out_proj"].T
    d = float(np.abs(got - want).max())
    print(f"gated delta net vs a direct per-token loop: max |diff| {d:.2e}")
    assert d < 1e-11, "gated delta net differs from the direct loop"

    # gated attention against a direct per-head loop ([query | gate] rows per head, partial RoPE pairs (i, i + r/2))
    layer = model.layers[1]
    S, D, nH, nKV = 6, c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
    pos0 = 3
    h = rng.standard_normal((S, c["hidden_size"]))
    cos, sin = model.rope(np.arange(pos0, pos0 + S))
    pre = HybridCache(c)  # three earlier positions' K/V so the positions and the mask are offset
    pre_h = rng.standard_normal((pos0, c["hidden_size"]))
    pc, ps = model.rope(np.arange(pos0))
    model.attention(1, layer, pre_h, pc, ps, pre, 0)
    got = model.attention(1, layer, h, cos, sin, pre, pos0)
    inv64 = 1.0 / c["rope_theta"] ** (np.arange(0, int(D * c["partial_rotary_factor"]), 2) / int(D * c["partial_rotary_factor"]))
    assert np.allclose(model.inv_freq, inv64, rtol=1e-6, atol=0)
    half = len(model.inv_freq)
    eps = c["rms_norm_eps"]

    def head_qkv(x, positions):
        qs, gs, ks, vs = [], [], [], []
        for n in range(nH):
            qn = x @ layer["q"][n * 2 * D : n * 2 * D + D].T
            gs.append(x @ layer["q"][n * 2 * D + D : (n + 1) * 2 * D].T)
            qs.append(qn / np.sqrt(np.mean(qn * qn, -1, keepdims=True) + eps) * (1 + layer["q_norm"]))
        for n in range(nKV):
            kn = x @ layer["k"][n * D : (n + 1) * D].T
            ks.append(kn / np.sqrt(np.mean(kn * kn, -1, keepdims=True) + eps) * (1 + layer["k_norm"]))
            vs.append(x @ layer["v"][n * D : (n + 1) * D].T)
        ang = (positions.astype(np.float32)[:, None] * model.inv_freq[None, :]).astype(np.float64)
        for arr in qs + ks:
            x1, x2 = arr[:, :half].copy(), arr[:, half : 2 * half].copy()
            arr[:, :half] = x1 * np.cos(ang) - x2 * np.sin(ang)
            arr[:, half : 2 * half] = x2 * np.cos(ang) + x1 * np.sin(ang)
        return qs, gs, ks, vs

    _, _, k_pre, v_pre = head_qkv(pre_h, np.arange(pos0))
    qs, gs, ks, vs = head_qkv(h, np.arange(pos0, pos0 + S))
    cat = np.zeros((S, nH * D))
    for n in range(nH):
        kv = n // (nH // nKV)
        kk, vv = np.concatenate([k_pre[kv], ks[kv]]), np.concatenate([v_pre[kv], vs[kv]])
        for s in range(S):
            sc = kk[: pos0 + s + 1] @ qs[n][s] / np.sqrt(D)
            pr = np.exp(sc - sc.max())
            pr /= pr.sum()
            cat[s, n * D : (n + 1) * D] = (pr @ vv[: pos0 + s + 1]) / (1 + np.exp(-gs[n][s]))
    want = cat @ layer["o"].T
    d = float(np.abs(got - want).max())
    print(f"gated attention (partial RoPE, GQA, offset positions) vs a direct per-head loop: max |diff| {d:.2e}")
    assert d < 1e-11, "gated attention differs from the direct loop"

    # sparse MoE block against a direct per-token loop
    m = model.layers[2]["mlp"]
    h = rng.standard_normal((5, c["hidden_size"]))
    got = model.mlp(m, h)
    want = np.zeros_like(h)

    def swiglu(x, gw, uw, dw):
        gg = x @ gw.T
        return dw @ (gg / (1 + np.exp(-gg)) * (x @ uw.T))

    for s in range(5):
        lg = m["router"] @ h[s]
        pr = np.exp(lg - lg.max())
        pr /= pr.sum()
        top = sorted(range(len(pr)), key=lambda e: -pr[e])[: c["num_experts_per_tok"]]
        wsum = sum(pr[e] for e in top)
        for e in top:
            want[s] += pr[e] / wsum * swiglu(h[s], m["gate"][e], m["up"][e], m["down"][e])
        sh = m["shared"]
        want[s] += swiglu(h[s], sh["gate"], sh["up"], sh["down"]) / (1 + np.exp(-(m["shared_gate"][0] @ h[s])))
    d = float(np.abs(got - want).max())
    print(f"sparse MoE block (softmax, top-k renormalised, shared expert gate) vs a direct per-token loop: max |diff| {d:.2e}")
    assert d < 1e-12, "MoE block differs from the direct loop"

    # experts stored one by one are refused (transformers has no qwen3_5_moe converter for them)
    raw, dtype, _ = SELF_TEST_CASES["moe-tiny"]
    t = dict((k, v) for k, v, _ in checkpoints["moe-tiny"])
    E, I = raw["text_config"]["num_experts"], raw["text_config"]["moe_intermediate_size"]
    for li in range(raw["text_config"]["num_hidden_layers"]):
        f = f"{TEXT_PREFIX}layers.{li}.mlp.experts."
        gu, dn = t.pop(f + "gate_up_proj"), t.pop(f + "down_proj")
        for e in range(E):
            t[f"{f}{e}.gate_proj.weight"], t[f"{f}{e}.up_proj.weight"] = gu[e, :I], gu[e, I:]
            t[f"{f}{e}.down_proj.weight"] = dn[e]
    try:
        Qwen35Reference(resolve_config(raw), t)
        raise AssertionError("per-expert expert weights were accepted")
    except ValueError as err:
        assert "one expert at a time" in str(err)
    print("per-expert expert layout refused, as transformers' conversion mapping would not fuse it")
    print("self-test passed")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        self_test()
    else:
        root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.gettempdir(), "qwen3_5-fixture")
        here = os.path.dirname(os.path.abspath(__file__))
        out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "test", "fixtures", "qwen3_5")
        main(root, out_dir)
