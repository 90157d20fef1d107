"""The case table for tensorgpu's PyTorch semantics tests (test/ops/torch-semantics.test.ts), written from torch's
documented rules rather than by running torch (it is not installed here):

  - torch.promote_types: the promotion lattice of c10/core/ScalarType.cpp (`_promoteTypesLookup`), restricted to the
    dtypes tensorgpu has (float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, int32, uint8, bool), as data below.
    float8 types promote with nothing but themselves (torch raises "Promotion for Float8 Types is not supported").
  - torch.result_type: aten/src/ATen/native/TypeProperties.cpp (update_result_type_state, combine_categories):
    tensors with dims, then 0-d tensors, then Python scalars ("wrapped numbers": an int is int64 -- int32 here, which
    has no int64 yet -- a float the default float32); a lower-priority group changes the result only when it is of a
    higher category (bool < integral < floating), and then the two promote.
  - values: operands converted to the common dtype before the op (TensorIterator's promote_inputs_to_common_dtype);
    float16 rounding by numpy, bfloat16 by round-to-nearest-even on the float32 bits, integer sums in exact Python
    integers.

Run: python3 tools/torch-semantics-reference/torch_semantics.py  (writes test/fixtures/torch-semantics/cases.json)
"""

import json
import os

import numpy as np

DTYPES = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int32", "uint8", "bool"]
KIND = {"float32": 2, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 2, "float8_e5m2": 2, "int32": 1, "uint8": 1, "bool": 0}

# torch.promote_types over these dtypes (rows: a, columns: b, in DTYPES order); None: torch raises.
F, H, B, E4, E5, I, U, O = DTYPES
PROMOTE = {
    F: [F, F, F, None, None, F, F, F],
    H: [F, H, F, None, None, H, H, H],
    B: [F, F, B, None, None, B, B, B],
    E4: [None, None, None, E4, None, None, None, None],
    E5: [None, None, None, None, E5, None, None, None],
    I: [F, H, B, None, None, I, I, I],
    U: [F, H, B, None, None, I, U, U],
    O: [F, H, B, None, None, I, U, O],
}


def promote(a, b):
    if a is None or b is None:
        return None if (a is None and b is None) else (a if b is None else b)
    return PROMOTE[a][DTYPES.index(b)]


class Fail(Exception):
    pass


def join(acc, d):
    if acc is None:
        return d
    r = PROMOTE[acc][DTYPES.index(d)]
    if r is None:
        raise Fail()
    return r


def combine(higher, lower):
    if higher is None:
        return lower
    if lower is None:
        return higher
    if KIND[lower] > KIND[higher]:
        r = PROMOTE[higher][DTYPES.index(lower)]
        if r is None:
            raise Fail()
        return r
    return higher


def result_type(operands):
    """operands: ('dims', dtype) | ('zerodim', dtype) | ('number', value)"""
    dims = zero = wrapped = None
    try:
        for kind, v in operands:
            if kind == "number":
                wrapped = join(wrapped, "int32" if float(v).is_integer() else "float32")
            elif kind == "zerodim":
                zero = join(zero, v)
            else:
                dims = join(dims, v)
        return combine(dims, combine(zero, wrapped))
    except Fail:
        return None


def promotion_cases():
    cases = []
    for a in DTYPES:
        for b in DTYPES:
            for ka, kb in [("dims", "dims"), ("dims", "zerodim"), ("zerodim", "dims"), ("zerodim", "zerodim")]:
                cases.append({"a": [ka, a], "b": [kb, b], "result": result_type([(ka, a), (kb, b)])})
        for n in [3, 2.5]:
            for k in ["dims", "zerodim"]:
                cases.append({"a": [k, a], "b": ["number", n], "result": result_type([(k, a), ("number", n)])})
    return cases


def to_bf16(x):
    b = np.array([x], dtype=np.float32).view(np.uint32)[0].item()
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return float(np.array([b << 16], dtype=np.uint32).view(np.float32)[0])


def round_to(x, dtype):
    if dtype == "float32":
        return float(np.float32(x))
    if dtype == "float16":
        return float(np.float16(x))
    if dtype == "bfloat16":
        return to_bf16(x)
    return x


def conversion_cases():
    """int32 tensor (op) float tensor, both with dims: the int converted to the float dtype first."""
    cases = []
    for fdt, ints, fl in [
        ("float16", [2049, 2047, 4097, -2049, 30001], [2048, 2048, 4096, -2048, 30000]),
        ("bfloat16", [257, 513, 1025, -257, 16777217], [256, 512, 1024, -256, 16777216]),
        ("float32", [16777217, 16777219, -16777217, 2147483647, 33554435], [16777216, 16777220, -16777216, 2147483648, 33554436]),
    ]:
        fl = [round_to(v, fdt) for v in fl]
        conv = [round_to(v, fdt) for v in ints]
        cases.append(
            {
                "float": fdt,
                "ints": ints,
                "floats": fl,
                "sub": [round_to(c - f, fdt) for c, f in zip(conv, fl)],
                "add": [round_to(c + f, fdt) for c, f in zip(conv, fl)],
                "gt": [c > f for c, f in zip(conv, fl)],
                "eq": [c == f for c, f in zip(conv, fl)],
            }
        )
    return cases


def sum_cases():
    rng = np.random.default_rng(38)
    cases = [
        {"values": [2**31 - 1, 1, 2**30], "fits": False, "sum": 2**31 - 1 + 1 + 2**30},
        {"values": [2**31 - 1, 1, -1], "fits": True, "sum": 2**31 - 1},
        {"values": [-(2**31), -1], "fits": False, "sum": -(2**31) - 1},
        {"values": [-(2**31), 2**31 - 1, 5], "fits": True, "sum": 4},
        {"values": [], "fits": True, "sum": 0},
    ]
    for n in [1, 3, 257, 1025, 4099]:
        v = rng.integers(-(2**31), 2**31, size=n, dtype=np.int64)
        # Scaled so the total stays in range for half of them (partial sums still leave int32's range).
        if n % 2 == 1:
            v = v // n
        s = int(v.sum())
        cases.append({"values": [int(x) for x in v], "fits": -(2**31) <= s < 2**31, "sum": s})
    return cases


def main():
    out = {"dtypes": DTYPES, "promotion": promotion_cases(), "conversion": conversion_cases(), "sum": sum_cases()}
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "test", "fixtures", "torch-semantics", "cases.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {os.path.normpath(path)}: {len(out['promotion'])} promotion cases")


if __name__ == "__main__":
    main()
