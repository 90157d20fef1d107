// Launcher of the transposed 1-D convolution: conv-transpose1d.wgsl (one output word of 1 or 2 elements per
// invocation, any float dtype) or conv-transpose1d-blocked.wgsl (a block of output channels x same-phase positions
// per invocation, float32 output). One dispatch either way; strided views of any float dtypes are read in place,
// float32 accumulation.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel, type Shape } from '../../core/shape.js';
import type { ConvTranspose1dGeometry } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

/** Output channels (ocb) and positions of one phase (tb) one invocation of the blocked kernel computes. */
interface Block {
  readonly ocb: number; // 4 or 8: whole vec4 accumulators
  readonly tb: number;
}

/**
 * The blocked kernel's block for an output: only float32 outputs (one element per word; a packed word would mix
 * channels of two blocks), and only when a group has at least 4 output channels (the last blocks overlap).
 * m: positions in the longest phase, ceil(lout / stride); tb halves until it fits. 8 channels x 8 positions
 * (64 accumulators) measured fastest on SwiftShader for 256 -> 256 channels, k 4, stride 2, [1, 256, 4096] ->
 * [1, 256, 8192] (median wall times, process CPU times alike, variants interleaved in one process on a 2-core
 * machine shared with a test suite): packed 15.4 s, 8x1 5.2 s, 8x4 2.3 s, 8x6 1.9 s, 8x8 1.44 s, 8x12 1.4 s,
 * 8x16 1.5 s, 12x8 1.6 s, 4x8 2.1 s, 4x16 1.6 s; for 128 -> 128 channels at L 2048 the order was the same
 * (packed 3.3 s, 8x4 0.35 s, 16x4 0.45 s, 8x8 0.19 s, 16x8 0.22 s, 4x16 0.21 s). A select-free copy of the
 * channel loop for blocks inside x, and interleaving the positions of neighbouring invocations, changed nothing.
 */
function blockOf(outLanes: number, og: number, m: number): Block | undefined {
  if (outLanes !== 1 || og < 4) return undefined;
  const ocb = og >= 8 ? 8 : 4;
  let tb = 64 / ocb; // 64 accumulators: 4 x 16 also beat 4 x 8 (1.6 s against 2.1 s above)
  while (tb > 1 && tb > m) tb /= 2;
  return { ocb, tb };
}

/** WGSL snippets of the blocked kernel, unrolled: the accumulator struct, its init, the tap loads and fmas, stores. */
function blockedWgsl(blk: Block, hasBias: boolean) {
  const { ocb, tb } = blk;
  const quads = ocb / 4;
  const range = (k: number) => [...Array(k).keys()];
  const field = (i: number, qi: number) => `a${i * quads + qi}`;
  const quad = (f: (c: number) => string, qi: number) =>
    `vec4<f32>(${range(4)
      .map((l) => f(4 * qi + l))
      .join(', ')})`;
  const bias = (c: number) => (hasBias ? `load_bias(p.b_off + (oc0 + ${c}u) * p.bs)` : '0.0');
  const weight = (c: number) => `load_weight(wo + ${c}u * p.ws_o)`;
  // TB 1: q0 is inside x (the loop's two tests); more: each position clamps and selects.
  const columns =
    tb === 1
      ? ['let xo0 = xbase + u32(q0) * p.xs_l;']
      : [
          ...range(tb).map((i) => `let in${i} = q0 + ${i} >= 0 && q0 + ${i} < i32(p.l);`),
          ...range(tb).map((i) => `let xo${i} = xbase + u32(clamp(q0 + ${i}, 0, i32(p.l) - 1)) * p.xs_l;`),
        ];
  const loads = range(tb).map((i) => (tb === 1 ? `let v${i} = load_x(xo${i} + cs);` : `let v${i} = select(0.0, load_x(xo${i} + cs), in${i});`));
  const fma = [
    ...range(quads).map((qi) => `let wq${qi} = ${quad(weight, qi)};`),
    ...range(tb).flatMap((i) => range(quads).map((qi) => `acc.${field(i, qi)} = fma(vec4<f32>(v${i}), wq${qi}, acc.${field(i, qi)});`)),
  ];
  const store = range(tb).flatMap((i) => {
    const lines = range(ocb).map((c) => `out[o + ${c}u * p.lout + ${i}u * p.stride] = bitcast<u32>(acc.${field(i, c >> 2)}[${c & 3}]);`);
    return i === 0 ? lines : [`if (m0 + ${i}u < count) {`, ...lines.map((s) => `  ${s}`), '}'];
  });
  return {
    type: `struct Acc {\n${range(tb * quads)
      .map((f) => `  a${f}: vec4<f32>,`)
      .join('\n')}\n}\n`,
    ACC_INIT: `Acc(${range(tb)
      .flatMap(() => range(quads).map((qi) => quad(bias, qi)))
      .join(', ')})`,
    COLUMNS: columns.join('\n      '),
    LOADS: loads.join('\n        '),
    ACC_FMA: fma.join('\n        '),
    ACC_STORE: store.join('\n  '),
  };
}

const params = {
  n: 'u32', // output elements (packed: the grid's words)
  work: 'u32', // invocations doing work (blocked): batch x groups x channel blocks x phases x position blocks
  o: 'u32',
  og: 'u32',
  cg: 'u32', // output channels, per group; input channels per group
  lout: 'u32',
  l: 'u32',
  k: 'u32',
  stride: 'u32',
  dil: 'u32',
  pad: 'i32',
  jstep: 'u32', // stride / gcd(stride, dilation): taps between two whole input positions
  x_off: 'u32',
  xs_n: 'u32',
  xs_c: 'u32',
  xs_l: 'u32',
  w_off: 'u32',
  ws_c: 'u32',
  ws_o: 'u32',
  ws_k: 'u32',
  b_off: 'u32',
  bs: 'u32',
  groups: 'u32',
  nb: 'u32', // channel blocks per group (blocked)
  nph: 'u32', // phases: min(stride, lout) (blocked)
  nmb: 'u32', // position blocks per phase (blocked)
} as const;

/** bias: its dtype, or 'none'. */
interface Variant {
  readonly dtype: DType;
  readonly weight: DType;
  readonly bias: string;
}

const inputs = {
  x: { packed: 'dtype' },
  weight: { packed: 'weight' },
  bias: { packed: (v: Variant) => v.bias as DType, when: (v: Variant) => v.bias !== 'none' },
} as const;

const convTranspose1dPacked = defineKernel({
  name: 'conv_transpose1d',
  source: 'conv-transpose1d.wgsl',
  variant: { layout: ['packed'], dtype: 'dtype', weight: 'dtype', bias: 'string' },
  params,
  outputs: { out: { packed: 'dtype' } },
  inputs,
  grid: { words: 'n', element: 'conv_transpose1d_at' },
  code: (v) => ({ BIAS: v.bias !== 'none' ? 'load_bias(p.b_off + oc * p.bs)' : '0.0' }),
});

const convTranspose1dBlocked = defineKernel({
  name: 'conv_transpose1d',
  source: 'conv-transpose1d-blocked.wgsl',
  variant: { layout: ['blocked'], ocb: 'number', tb: 'number', dtype: 'dtype', weight: 'dtype', bias: 'string' },
  params,
  outputs: { out: 'u32' },
  inputs,
  grid: 'custom',
  constants: (v) => ({ OCB: v.ocb, TB: v.tb }),
  functions: (v) => blockedWgsl(v, v.bias !== 'none').type,
  code: (v) => {
    const { type: _, ...code } = blockedWgsl(v, v.bias !== 'none');
    return code;
  },
});

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * F.conv_transpose1d of strided views x [N, C, L], weight [C, O/groups, k] and bias [O] (see
 * Backend.convTranspose1d): contiguous output of outShape [N, O, Lout] in x's dtype; no dispatch when it is empty.
 */
export function convTranspose1dKernel(
  ctx: GpuContext,
  x: GpuOperand,
  weight: GpuOperand,
  bias: GpuOperand | undefined,
  g: ConvTranspose1dGeometry,
  outShape: Shape,
): GpuBuffer {
  const n = numel(outShape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const [, c, l] = x.view.shape;
  const [, og, k] = weight.view.shape;
  const [batch, o, lout] = outShape;
  const stride = g.stride;
  const blk = blockOf(lanes, og, Math.ceil(lout / stride));
  const nb = blk ? Math.ceil(og / blk.ocb) : 0;
  const nph = Math.min(stride, lout);
  const nmb = blk ? Math.ceil(Math.ceil(lout / stride) / blk.tb) : 0;
  const work = blk ? batch * g.groups * nb * nph * nmb : 0;
  const [xs_n, xs_c, xs_l] = x.view.strides;
  const [ws_c, ws_o, ws_k] = weight.view.strides;
  const p = {
    n,
    work,
    o,
    og,
    cg: c / g.groups,
    lout,
    l,
    k,
    stride,
    dil: g.dilation,
    pad: g.padding,
    jstep: stride / gcd(stride, g.dilation),
    x_off: x.view.offset,
    xs_n,
    xs_c,
    xs_l,
    w_off: weight.view.offset,
    ws_c,
    ws_o,
    ws_k,
    b_off: bias ? bias.view.offset : 0,
    bs: bias ? bias.view.strides[0] : 0,
    groups: g.groups,
    nb,
    nph,
    nmb,
  };
  const variant = { dtype: x.dtype, weight: weight.dtype, bias: bias ? bias.dtype : 'none' };
  const buffers = { out, x: x.buffer, weight: weight.buffer, bias: bias?.buffer };
  if (blk) convTranspose1dBlocked.run(ctx, { layout: 'blocked', ocb: blk.ocb, tb: blk.tb, ...variant }, p, buffers, { threads: work });
  else convTranspose1dPacked.run(ctx, { layout: 'packed', ...variant }, p, buffers);
  return out;
}
