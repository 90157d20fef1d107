"""Pieces the float64 NumPy reference ports under tools/ share (tools/lfm2-reference, tools/qwen3_5-reference): a
safetensors reader and writer (BF16 widened exactly, written with round-to-nearest-even as torch does), and the small
functions of transformers' math they all use. Each port puts tools/ on sys.path and imports from here.
"""

import json
import struct

import numpy as np

_ST_READ = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8"}


def read_safetensors(path):
    """name -> float64 array (ints stay ints); BF16 is widened exactly by shifting into the top half of an f32."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        raw = data[base + lo : base + hi]
        if e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in _ST_READ:
            arr = np.frombuffer(raw, dtype=_ST_READ[e["dtype"]])
        else:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {e['dtype']}")
        arr = arr.reshape(e["shape"])
        out[name] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr.astype(np.int64)
    return out


def _to_bf16_bits(a):
    """float32 -> bfloat16 bit patterns, round to nearest even (what torch's .to(torch.bfloat16) does for finite values)."""
    u = np.ascontiguousarray(a, dtype="<f4").view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2")


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, array, dtype) with dtype 'F32', 'I32' or 'BF16'. Little-endian, header padded to 8 bytes."""
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    at = 0
    blobs = []
    for name, arr, dtype in tensors:
        if dtype == "F32":
            b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        elif dtype == "I32":
            b = np.ascontiguousarray(arr, dtype="<i4").tobytes()
        elif dtype == "BF16":
            b = _to_bf16_bits(arr).tobytes()
        else:
            raise ValueError(f"write_safetensors: unsupported dtype {dtype} for '{name}'")
        header[name] = {"dtype": dtype, "shape": [int(d) for d in np.shape(arr)], "data_offsets": [at, at + len(b)]}
        at += len(b)
        blobs.append(b)
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def sigmoid(x):
    # exp(-softplus(-x)): no overflow for large |x|, same value as 1 / (1 + exp(-x)) to an ulp.
    return np.exp(-np.logaddexp(0.0, -x))


def silu(x):
    return x * sigmoid(x)


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def topk_indices(scores, k):
    """torch.topk(scores, k, dim=-1) indices, largest first; a stable sort keeps the lower index first on ties."""
    return np.argsort(-scores, axis=-1, kind="stable")[:, :k]
