"""A float64 numpy port of OpenAI's Whisper as Hugging Face transformers implements it
(WhisperForConditionalGeneration), used as an independent golden reference for src/models/whisper/.

Ported from transformers, src/transformers/models/whisper/modeling_whisper.py (read at commit
001dff24bbb05f8f964e9fdd0b142dda3a86a0df; the module structure has not changed since in the parts used here) and
configuration_whisper.py: WhisperEncoder (conv1 k3 p1 + GELU, conv2 k3 s2 p1 + GELU, + embed_positions.weight,
pre-LN WhisperEncoderLayer x N, layer_norm), WhisperDecoder (embed_tokens + WhisperPositionalEmbedding
weight[past : past + S] -- the decoder's embed_scale is computed but never applied --, pre-LN WhisperDecoderLayer:
causal self-attention, cross-attention over the encoder output, fc1 / activation / fc2, then layer_norm),
WhisperAttention (q_proj(x) * head_dim**-0.5, k_proj without bias, softmax, out_proj), proj_out tied to
embed_tokens unless tie_word_embeddings is false. nn.LayerNorm's eps 1e-5; ACT2FN's gelu (erf), gelu_new and
gelu_pytorch_tanh (tanh form), relu, silu. Every tensor is float64; the checkpoint's float32 values are widened
exactly.

Usage:
  python3 tools/whisper-reference/whisper_reference.py [fixtureRoot] [outDir]
    fixtureRoot (default $TMPDIR/whisper-fixture): one folder per case holding config.json, model.safetensors and
    inputs.json = {"features": [...], "feature_shape": [1, M, F], "decoder_input_ids": [...], "greedy_steps": N}
    (written by tools/whisper-reference/make-inputs.ts).
    outDir (default test/fixtures/whisper): <case>.safetensors with features F32 [1, M, F], decoder_input_ids I32 [S],
    encoder_hidden F32 [P, d], logits F32 [S, V], greedy I32 [N], greedy_logits F32 [N, V] (each greedy step a
    whole-sequence forward, no cache: the test's cached decode must agree).
  python3 tools/whisper-reference/whisper_reference.py --self-test
    checks the attention against a per-head loop, the causal mask against truncated prefixes, and conv1d against a
    direct sum.
"""

import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reference_common import linear, read_safetensors, write_safetensors  # noqa: E402

TRANSFORMERS_COMMIT = "001dff24bbb05f8f964e9fdd0b142dda3a86a0df"
LAYER_NORM_EPS = 1e-5

_erf = np.vectorize(math.erf)


def act(name, x):
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name in ("silu", "swish"):
        return x / (1.0 + np.exp(-x))
    raise ValueError(f"activation_function {name!r} is not ported")


def resolve_config(raw):
    if raw.get("model_type") != "whisper":
        raise ValueError(f"model_type is {raw.get('model_type')!r}, expected 'whisper'")
    c = {
        "vocab_size": raw.get("vocab_size", 51865),
        "num_mel_bins": raw.get("num_mel_bins", 80),
        "d_model": raw.get("d_model", 384),
        "encoder_layers": raw.get("encoder_layers", 4),
        "encoder_attention_heads": raw.get("encoder_attention_heads", 6),
        "decoder_layers": raw.get("decoder_layers", 4),
        "decoder_attention_heads": raw.get("decoder_attention_heads", 6),
        "max_source_positions": raw.get("max_source_positions", 1500),
        "max_target_positions": raw.get("max_target_positions", 448),
        "activation_function": raw.get("activation_function", "gelu"),
        "tie_word_embeddings": raw.get("tie_word_embeddings", True),
    }
    return c


def layer_norm(x, w, b):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LAYER_NORM_EPS) * w + b


def conv1d(x, w, b, stride, padding):
    """torch F.conv1d for one example: x [C, L], w [O, C, K] -> [O, Lout]."""
    c, n = x.shape
    o, _, k = w.shape
    xp = np.pad(x, ((0, 0), (padding, padding)))
    lout = (n + 2 * padding - k) // stride + 1
    cols = np.stack([xp[:, t * stride : t * stride + k] for t in range(lout)], axis=0)  # [Lout, C, K]
    return np.einsum("lck,ock->ol", cols, w) + b[:, None]


def attention(t, p, x, kv, heads, causal):
    """WhisperAttention: x [S, d] queries, kv [T, d] keys/values source; causal over positions (S == T here)."""
    s, d = x.shape
    hd = d // heads
    q = (linear(x, t[p + "q_proj.weight"], t[p + "q_proj.bias"]) * hd**-0.5).reshape(s, heads, hd).transpose(1, 0, 2)
    k = linear(kv, t[p + "k_proj.weight"]).reshape(kv.shape[0], heads, hd).transpose(1, 0, 2)
    v = linear(kv, t[p + "v_proj.weight"], t[p + "v_proj.bias"]).reshape(kv.shape[0], heads, hd).transpose(1, 0, 2)
    scores = q @ k.transpose(0, 2, 1)  # [H, S, T]
    if causal:
        mask = np.triu(np.ones((s, kv.shape[0]), dtype=bool), k=1)
        scores = np.where(mask[None], -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    out = (probs @ v).transpose(1, 0, 2).reshape(s, d)
    return linear(out, t[p + "out_proj.weight"], t[p + "out_proj.bias"])


def encoder(c, t, features):
    e = "model.encoder."
    x = features[0]
    h = act("gelu", conv1d(x, t[e + "conv1.weight"], t[e + "conv1.bias"], 1, 1))
    h = act("gelu", conv1d(h, t[e + "conv2.weight"], t[e + "conv2.bias"], 2, 1))
    h = h.T + t[e + "embed_positions.weight"]
    for i in range(c["encoder_layers"]):
        p = f"{e}layers.{i}."
        y = layer_norm(h, t[p + "self_attn_layer_norm.weight"], t[p + "self_attn_layer_norm.bias"])
        h = h + attention(t, p + "self_attn.", y, y, c["encoder_attention_heads"], False)
        y = layer_norm(h, t[p + "final_layer_norm.weight"], t[p + "final_layer_norm.bias"])
        y = act(c["activation_function"], linear(y, t[p + "fc1.weight"], t[p + "fc1.bias"]))
        h = h + linear(y, t[p + "fc2.weight"], t[p + "fc2.bias"])
    return layer_norm(h, t[e + "layer_norm.weight"], t[e + "layer_norm.bias"])


def decoder(c, t, ids, enc):
    d = "model.decoder."
    s = len(ids)
    h = t[d + "embed_tokens.weight"][ids] + t[d + "embed_positions.weight"][:s]
    for i in range(c["decoder_layers"]):
        p = f"{d}layers.{i}."
        y = layer_norm(h, t[p + "self_attn_layer_norm.weight"], t[p + "self_attn_layer_norm.bias"])
        h = h + attention(t, p + "self_attn.", y, y, c["decoder_attention_heads"], True)
        y = layer_norm(h, t[p + "encoder_attn_layer_norm.weight"], t[p + "encoder_attn_layer_norm.bias"])
        h = h + attention(t, p + "encoder_attn.", y, enc, c["decoder_attention_heads"], False)
        y = layer_norm(h, t[p + "final_layer_norm.weight"], t[p + "final_layer_norm.bias"])
        y = act(c["activation_function"], linear(y, t[p + "fc1.weight"], t[p + "fc1.bias"]))
        h = h + linear(y, t[p + "fc2.weight"], t[p + "fc2.bias"])
    h = layer_norm(h, t[d + "layer_norm.weight"], t[d + "layer_norm.bias"])
    head = t[d + "embed_tokens.weight"] if c["tie_word_embeddings"] else t["proj_out.weight"]
    return h @ head.T


def run_case(src, out_path):
    with open(os.path.join(src, "config.json")) as f:
        c = resolve_config(json.load(f))
    with open(os.path.join(src, "inputs.json")) as f:
        inputs = json.load(f)
    t = read_safetensors(os.path.join(src, "model.safetensors"))
    features = np.array(inputs["features"], dtype=np.float64).reshape(inputs["feature_shape"])
    expected = 2 * c["max_source_positions"]
    if features.shape != (1, c["num_mel_bins"], expected):
        raise ValueError(f"features {features.shape}, expected (1, {c['num_mel_bins']}, {expected})")
    ids = list(inputs["decoder_input_ids"])
    enc = encoder(c, t, features)
    logits = decoder(c, t, ids, enc)
    seq = list(ids)
    greedy, greedy_logits = [], []
    for _ in range(inputs["greedy_steps"]):
        row = decoder(c, t, seq, enc)[-1]
        tok = int(np.argmax(row))
        greedy.append(tok)
        greedy_logits.append(row)
        seq.append(tok)
    write_safetensors(
        out_path,
        [
            ("features", features, "F32"),
            ("decoder_input_ids", np.array(ids), "I32"),
            ("encoder_hidden", enc, "F32"),
            ("logits", logits, "F32"),
            ("greedy", np.array(greedy), "I32"),
            ("greedy_logits", np.stack(greedy_logits), "F32"),
        ],
        {"transformers_commit": TRANSFORMERS_COMMIT},
    )
    print(f"{out_path}: logits {logits.shape} [{logits.min():.4f}, {logits.max():.4f}], greedy {greedy}")


def main(root, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cases = sorted(n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "config.json")))
    if not cases:
        raise SystemExit(f"no case folders with config.json under {root}")
    for name in cases:
        run_case(os.path.join(root, name), os.path.join(out_dir, f"{name}.safetensors"))


def self_test():
    rng = np.random.default_rng(0)
    # conv1d against a direct sum
    x, w, b = rng.standard_normal((3, 9)), rng.standard_normal((4, 3, 3)), rng.standard_normal(4)
    got = conv1d(x, w, b, 2, 1)
    xp = np.pad(x, ((0, 0), (1, 1)))
    want = np.array([[sum(w[o, ci, k] * xp[ci, 2 * t + k] for ci in range(3) for k in range(3)) + b[o] for t in range(got.shape[1])] for o in range(4)])
    assert np.allclose(got, want, atol=1e-12), "conv1d"
    # attention: a per-head loop, and the causal rows equal attention over truncated prefixes
    d, heads, s = 8, 2, 5
    t = {f"a.{n}_proj.weight": rng.standard_normal((d, d)) for n in "qkvo"}
    t["a.out_proj.weight"] = t.pop("a.o_proj.weight")
    for n in ("q", "v", "out"):
        t[f"a.{n}_proj.bias"] = rng.standard_normal(d)
    y = rng.standard_normal((s, d))
    full = attention(t, "a.", y, y, heads, True)
    for i in range(1, s + 1):
        part = attention(t, "a.", y[:i], y[:i], heads, True)
        assert np.allclose(part[-1], full[i - 1], atol=1e-12), "causal prefix"
    print("self-test passed")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        self_test()
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.gettempdir(), "whisper-fixture")
        out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "test", "fixtures", "whisper")
        main(root, os.path.normpath(out))
