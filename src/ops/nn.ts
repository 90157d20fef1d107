// Transformer building blocks as single fused ops: RMSNorm, rotary embedding, attention with grouped-query heads
// and a causal mask, SwiGLU. Each is one kernel on the GPU; the CPU backend holds the reference.
import { runKernel } from '../kernels/registry.js';
import { ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import type { AttentionOptions, Backend, Operand } from '../runtime/backend.js';
import { commonBackend, requireDeviceScalar, requireDTypes, wrap } from './util.js';
import { differentiable, notDifferentiable } from '../autograd/function.js';
import { needsGrad } from '../autograd/node.js';
import { float32 } from './grad-rules.js';
import { gradMap } from './elementwise.js';
import { cat } from './shape-ops.js';
import { checkPagedIndex, pagedKv, type PagedIndex } from './paged-cache.js';
import { KV_DTYPES, ropeTableRotaryDim } from './attention-inputs.js';
import { isScaledKv, kvRowWidth } from '../core/kv-fp8.js';

const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

/**
 * RMSNorm over the last dim, as HF's Qwen3RMSNorm/LlamaRMSNorm: weight * (x * rsqrt(mean(x^2) + eps)) with the
 * normalized value rounded to x's dtype before the weight multiplies it. Float32 inside; result in x's dtype.
 */
export function rmsNorm(x: Tensor, weight: Tensor | undefined, eps: number): Tensor {
  const backend = commonBackend('rmsNorm', x, ...(weight ? [weight] : []));
  requireDTypes('rmsNorm', x, FLOAT_DTYPES);
  if (x.ndim === 0) throw new ShapeError('rmsNorm: x needs at least 1 dim');
  const d = x.shape[x.ndim - 1];
  if (weight) {
    requireDTypes('rmsNorm', weight, FLOAT_DTYPES);
    if (weight.ndim !== 1 || weight.shape[0] !== d)
      throw new ShapeError(`rmsNorm: weight must be [${d}] for x ${formatShape(x.shape)}, got ${formatShape(weight.shape)}`);
  }
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new RangeError(`rmsNorm: eps must be a finite number >= 0, got ${eps}`);
  const forward = () => wrap(backend, runKernel('rmsNorm', backend, { x: x.operand(), weight: weight?.operand(), eps }), x.dtype, x.shape);
  return differentiable('rmsNorm', [x, weight], forward, (g, s) => rmsNormRule(g, s.inputs[0] as Tensor, s.inputs[1] as Tensor | undefined, eps, s.needs[1]), {
    inputs: [0, 1],
  });
}

/** d rmsNorm, with r = rsqrt(mean(x^2) + eps), n = x r, gn = g w: dx = r (gn - n mean(gn n)), dw = sum of g n. */
function rmsNormRule(g: Tensor, x: Tensor, weight: Tensor | undefined, eps: number, weightNeedsGrad: boolean): (Tensor | undefined)[] {
  const x32 = float32(x);
  const g32 = float32(g);
  const r = x32.mul(x32).mean(-1, { keepdim: true }).add(eps).rsqrt();
  const n = x32.mul(r);
  const gn = weight ? g32.mul(float32(weight)) : g32;
  const dx = r.mul(gn.sub(n.mul(gn.mul(n).mean(-1, { keepdim: true }))));
  const dw =
    weight && weightNeedsGrad
      ? g32
          .mul(n)
          .reshape(-1, x.shape[x.ndim - 1])
          .sum(0)
      : undefined;
  return [dx, dw];
}

/**
 * Rotary position embedding in the rotate-half layout (HF Llama/Qwen): x [S, H, D] rotated at positions
 * positionOffset .. positionOffset + S - 1, with cos/sin float32 tables [P, R/2] (see models/qwen3/rope.ts): R = D
 * rotates the whole head, R < D (partial rotary, R even) its first R dims, the others passing through.
 */
export function rope(x: Tensor, cos: Tensor, sin: Tensor, positionOffset: number): Tensor {
  const backend = commonBackend('rope', x, cos, sin);
  requireDTypes('rope', x, FLOAT_DTYPES);
  requireDTypes('rope', cos, ['float32']);
  requireDTypes('rope', sin, ['float32']);
  if (x.ndim !== 3 || x.shape[2] % 2 !== 0) throw new ShapeError(`rope: x must be [S, H, D] with D even, got ${formatShape(x.shape)}`);
  const [s, , d] = x.shape;
  ropeTableRotaryDim('rope', cos, sin, d);
  if (!Number.isInteger(positionOffset) || positionOffset < 0 || positionOffset + s > cos.shape[0]) {
    throw new ShapeError(`rope: positions ${positionOffset}..${positionOffset + s - 1} are outside the ${cos.shape[0]}-position table`);
  }
  const forward = () => wrap(backend, runKernel('rope', backend, { x: x.operand(), cos: cos.operand(), sin: sin.operand(), positionOffset }), x.dtype, x.shape);
  // A rotation's transpose rotates back: the gradient is rope with sin negated.
  return differentiable('rope', [x, cos, sin], forward, (g, sv) => [rope(g, sv.inputs[1] as Tensor, (sv.inputs[2] as Tensor).neg(), positionOffset)], {
    inputs: [1, 2],
  });
}

export interface AttentionOpOptions {
  /** Default 1 / sqrt(D). */
  scale?: number;
  causal?: boolean;
  /**
   * Absolute position of query 0 relative to key 0; default Skv - Sq (the queries are the newest keys). An int32 [1]
   * tensor on the device is read by the kernel instead (captured decode steps: k, v are then the whole cache and
   * the causal mask hides the rows not written yet).
   */
  queryOffset?: number | Tensor;
  /**
   * A paged KV cache for a batch of sequences (pagedIndex): k and v are the shared pools [rows, Hkv, D], and query
   * row t attends causally to keys 0..position_t of its own sequence through its page table (queryOffset and causal
   * are implied; not differentiable). One dispatch (and a merge) serves the whole batch.
   */
  pages?: PagedIndex;
  /**
   * An output gate (Qwen3.5 / Qwen3.6 gated attention): the result is attention(q, k, v) * sigmoid(gate),
   * elementwise, applied in the kernel where the output is written. [Sq, Hq * D] or [Sq, Hq, D], any float dtype,
   * any strides: a column view of a wider projection (narrow(proj, 1, offset, Hq * D)) is read in place. When
   * q, k, v or the gate requires grad, it is composed (attention, then mul by sigmoid(gate)) so gradients flow.
   */
  gate?: Tensor;
}

/**
 * Scaled dot-product attention, q [Sq, Hq, D] against k, v [Skv, Hkv, D] with grouped-query heads (Hq a multiple
 * of Hkv), optionally causal; softmax in float32, one kernel. k and v may be views of a preallocated KV cache, an
 * FP8 one too: float8_e4m3fn [Skv, Hkv, kvRowWidth(D)] scaled rows (core/kv-fp8.ts), dequantized as they load.
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, options: AttentionOpOptions = {}): Tensor {
  const dynamic = typeof options.queryOffset === 'object' ? options.queryOffset : undefined;
  const gate = options.gate;
  const backend = commonBackend('attention', q, k, v, ...(gate ? [gate] : []), ...(dynamic ? [dynamic] : []), ...(options.pages ? [options.pages.index] : []));
  requireDTypes('attention', q, FLOAT_DTYPES);
  for (const t of [k, v]) requireDTypes('attention', t, KV_DTYPES);
  if (q.ndim !== 3 || k.ndim !== 3 || v.ndim !== 3) {
    throw new ShapeError(`attention: q, k and v must be [S, H, D], got ${formatShape(q.shape)}, ${formatShape(k.shape)}, ${formatShape(v.shape)}`);
  }
  const [sq, hq, d] = q.shape;
  const pages = options.pages;
  const [skv, hkv, dk] = k.shape;
  // An FP8 cache's rows carry their scale after the codes (core/kv-fp8.ts).
  const width = kvRowWidth(k.dtype, d);
  if (dk !== width || v.shape.join() !== k.shape.join() || (isScaledKv(v.dtype) && v.dtype !== k.dtype))
    throw new ShapeError(`attention: k and v must be [Skv, Hkv, ${width}] (an FP8 cache: both), got ${k.describe()} and ${v.describe()}`);
  const scaledKv = isScaledKv(k.dtype);
  if (scaledKv) {
    for (const t of [k, v]) {
      if (t.strides[2] !== 1 || t.offset % 4 !== 0 || t.strides[0] % 4 !== 0 || t.strides[1] % 4 !== 0)
        throw new ShapeError(`attention: an FP8 KV cache ${t.describe()} must have unit last stride and whole words per row`);
    }
  }
  if (hkv === 0 || hq % hkv !== 0) throw new ShapeError(`attention: ${hq} query heads are not a multiple of ${hkv} kv heads`);
  if (pages) checkPagedIndex('attention', pages, k, sq);
  if (dynamic) requireDeviceScalar('attention', 'a queryOffset tensor', dynamic, 'int32');
  const queryOffset = dynamic ? 0 : ((options.queryOffset as number | undefined) ?? skv - sq);
  if (!Number.isInteger(queryOffset)) throw new RangeError(`attention: queryOffset must be an integer, got ${queryOffset}`);
  const scale = options.scale ?? 1 / Math.sqrt(d);
  const causal = options.causal ?? false;
  if (gate) {
    requireDTypes('attention', gate, FLOAT_DTYPES);
    const flat = gate.ndim === 2 && gate.shape[0] === sq && gate.shape[1] === hq * d;
    const full = gate.ndim === 3 && gate.shape.join() === q.shape.join();
    if (!flat && !full)
      throw new ShapeError(`attention: gate must be [${sq}, ${hq * d}] or [${sq}, ${hq}, ${d}] (q ${formatShape(q.shape)}), got ${formatShape(gate.shape)}`);
    if (needsGrad(q, k, v, gate)) {
      // Differentiable by composition: the fused gate has no backward of its own.
      const plain = attention(q, k, v, { ...options, gate: undefined });
      const gated = float32(plain).mul(float32(gate).reshape([sq, hq, d]).sigmoid());
      return gated.dtype === q.dtype ? gated : gated.to(q.dtype);
    }
  }
  const forward = () =>
    wrap(
      backend,
      runKernel('attention', backend, {
        q: q.operand(),
        k: k.operand(),
        v: v.operand(),
        options: { scale, causal: causal || pages !== undefined, queryOffset },
        queryOffsetFrom: dynamic?.operand(),
        pages: pages && pagedKv(pages),
        gate: gate && gateOperand(gate, sq, hq, d),
      }),
      q.dtype,
      q.shape,
    );
  if (gate) return forward();
  if (scaledKv) return notDifferentiable('attention over an FP8 KV cache', [q, k, v], forward);
  if (pages) return notDifferentiable('attention over a paged cache', [q, k, v], forward);
  if (dynamic) return notDifferentiable('attention with a device queryOffset', [q, k, v], forward);
  return differentiable('attention', [q, k, v], forward, (g, s) => attentionRule(backend, g, s.inputs as Tensor[], { scale, causal, queryOffset }), {
    inputs: [0, 1, 2],
  });
}

/** The gate as a [Sq, Hq, D] operand over its own storage: a [Sq, Hq * D] view's columns split into heads. */
function gateOperand(gate: Tensor, sq: number, hq: number, d: number): Operand<unknown> {
  const o = gate.operand();
  if (gate.ndim === 3) return o;
  const [s0, s1] = o.view.strides;
  return { ...o, view: { shape: [sq, hq, d], strides: [s0, d * s1, s1], offset: o.view.offset } };
}

/**
 * d attention in one backend call (FlashAttention-2's backward: two kernels on WebGPU, recomputing the
 * probabilities from q and k, so nothing [H, Sq, Skv] is stored, in the forward or here): float32 dq, dk, dv, a
 * grouped kv head summing its query heads' gradients. A query that sees no key (the forward's zeros) passes none.
 */
function attentionRule(backend: Backend, g: Tensor, [q, k, v]: Tensor[], options: AttentionOptions): Tensor[] {
  const [dq, dk, dv] = runKernel('attentionBackward', backend, { q: q.operand(), k: k.operand(), v: v.operand(), dOut: g.operand(), options });
  return [wrap(backend, dq, 'float32', q.shape), wrap(backend, dk, 'float32', k.shape), wrap(backend, dv, 'float32', v.shape)];
}

/** SwiGLU of a fused gate/up projection: x [..., 2I] -> silu(x[..., :I]) * x[..., I:], one kernel. */
export function swiglu(x: Tensor): Tensor {
  const backend = commonBackend('swiglu', x);
  requireDTypes('swiglu', x, FLOAT_DTYPES);
  if (x.ndim === 0 || x.shape[x.ndim - 1] % 2 !== 0)
    throw new ShapeError(`swiglu: the last dim must be even (gate and up halves), got ${formatShape(x.shape)}`);
  const shape = [...x.shape.slice(0, -1), x.shape[x.ndim - 1] / 2];
  const forward = () => wrap(backend, runKernel('swiglu', backend, { x: x.operand() }), x.dtype, shape);
  return differentiable('swiglu', [x], forward, (g, s) => [swigluGrad(s.inputs[0] as Tensor, g)], { inputs: [0] });
}

/** d swiglu at the gate|up input x: out = silu(a) b gives da = g b silu'(a), db = g silu(a) (float32). */
export function swigluGrad(x: Tensor, g: Tensor): Tensor {
  const half = x.shape[x.ndim - 1] / 2;
  const a = float32(x.narrow(-1, 0, half));
  const b = float32(x.narrow(-1, half, half));
  const g32 = float32(g);
  return cat([gradMap('silu_grad', a, g32.mul(b)), g32.mul(a.silu())], -1);
}
