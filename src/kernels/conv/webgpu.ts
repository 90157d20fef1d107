// Launcher of the direct convolution: conv.wgsl (one output word per invocation, any dtype) or conv-blocked.wgsl
// (a block of output channels x columns per invocation, float32 output), both summing the taps of
// conv-window.wgsl, which is instantiated per input source (x, and previous when given).
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel, type Shape } from '../../core/shape.js';
import type { ConvGeometry } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { fillTemplate, wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';

/** Output channels (ocb) and columns (wb) one invocation of the blocked kernel computes; undefined: use packed. */
interface Block {
  readonly ocb: number; // 4 or 8: whole vec4 accumulators
  readonly wb: number;
}

/**
 * The blocked kernel's block for an output: only float32 outputs (one element per word; a packed word would mix
 * channels of two blocks), and only when a group has 4 channels (the last blocks overlap). 8 channels x 4 columns
 * (32 accumulators) measured fastest on SwiftShader for 64 -> 64 channels, 3x3x3 (process CPU time: packed 11.6 s,
 * 8x1 3.4 s, 8x2 2.1 s, 8x4 1.4 s, interleaved in one process on a shared 2-core machine).
 */
function blockOf(outLanes: number, og: number, wo: number): Block | undefined {
  if (outLanes !== 1 || og < 4) return undefined;
  return { ocb: og >= 8 ? 8 : 4, wb: wo >= 4 ? 4 : wo >= 2 ? 2 : 1 };
}

/** An input source of the taps: x, or previous's cached frames (strides p.ps_*). */
type Source = 'x' | 'p';
const LOAD: Record<Source, string> = { x: 'load_x', p: 'load_previous' };

/** The tap loop's column step for one output column: skip a column outside the input, else its storage offset. */
function singleColumn(src: Source): string {
  return `if (wx < 0 || wx >= i32(p.w)) {\n          continue;\n        }\n        let so0 = row + u32(wx) * p.${src}s_w;`;
}

/** WGSL snippets of the blocked kernel, unrolled: the accumulator struct, its init, the tap loads and fmas, stores. */
function blockedWgsl(blk: Block, hasBias: boolean, src: Source) {
  const { ocb, wb } = blk;
  const quads = ocb / 4;
  const range = (k: number) => [...Array(k).keys()];
  const field = (j: number, qi: number) => `a${j * quads + qi}`;
  const quad = (f: (c: number) => string, qi: number) =>
    `vec4<f32>(${range(4)
      .map((l) => f(4 * qi + l))
      .join(', ')})`;
  const bias = (c: number) => (hasBias ? `load_bias(p.b_off + (oc0 + ${c}u) * p.bs)` : '0.0');
  const weight = (c: number) => `load_weight(q + ${c}u * p.ws_o)`;
  const columns =
    wb === 1
      ? singleColumn(src)
      : [
          ...range(wb).map((j) => `let in${j} = wx + ${j} * i32(p.sw) >= 0 && wx + ${j} * i32(p.sw) < i32(p.w);`),
          `if (!(${range(wb)
            .map((j) => `in${j}`)
            .join(' || ')})) {\n          continue;\n        }`,
          ...range(wb).map((j) => `let so${j} = row + u32(clamp(wx + ${j} * i32(p.sw), 0, i32(p.w) - 1)) * p.${src}s_w;`),
        ].join('\n        ');
  const loads = range(wb)
    .map((j) => (wb === 1 ? `let v${j} = ${LOAD[src]}(so${j} + cs);` : `let v${j} = select(0.0, ${LOAD[src]}(so${j} + cs), in${j});`))
    .join('\n          ');
  const fma = [
    ...range(quads).map((qi) => `let wq${qi} = ${quad(weight, qi)};`),
    ...range(wb).flatMap((j) => range(quads).map((qi) => `acc.${field(j, qi)} = fma(vec4<f32>(v${j}), wq${qi}, acc.${field(j, qi)});`)),
  ].join('\n          ');
  return {
    type: `struct Acc {\n${range(wb * quads)
      .map((f) => `  a${f}: vec4<f32>,`)
      .join('\n')}\n}\n`,
    init: `Acc(${range(wb)
      .flatMap(() => range(quads).map((qi) => quad(bias, qi)))
      .join(', ')})`,
    columns,
    loads,
    fma,
    store: range(wb)
      .flatMap((j) => range(ocb).map((c) => `out[o + ${c}u * plane + ${j}u] = bitcast<u32>(acc.${field(j, c >> 2)}[${c & 3}]);`))
      .join('\n  '),
  };
}

/** What both kernels specialise on; bias and previous: their dtypes, or 'none'. */
interface ConvVariant {
  readonly dtype: DType;
  readonly weight: DType;
  readonly bias: string;
  readonly previous: string;
}

/** Acc and the windows of the sources (window_p adds nothing without previous). */
function windows(v: ConvVariant, blk: Block | undefined): string {
  const window = (src: Source) => {
    const b = blk && blockedWgsl(blk, v.bias !== 'none', src);
    return fillTemplate(wgslSource('conv-window.wgsl'), {
      SRC: src,
      COLUMNS: b ? b.columns : singleColumn(src),
      LOADS: b ? b.loads : `let v0 = ${LOAD[src]}(so0 + cs);`,
      ACC_FMA: b ? b.fma : 'acc = fma(v0, load_weight(q), acc);',
    });
  };
  const acc = blk ? blockedWgsl(blk, v.bias !== 'none', 'x').type : 'alias Acc = f32;\n';
  const none =
    '// No previous: nothing before x.\nfn window_p(base: u32, wbase: u32, t0: i32, frames: u32, h0: i32, w0: i32, acc: Acc) -> Acc {\n  return acc;\n}\n';
  return acc + window('x') + (v.previous !== 'none' ? window('p') : none);
}

const params = {
  work: 'u32', // invocations doing work: output words (packed) or output positions x channel blocks (blocked)
  o: 'u32', // output channels
  to: 'u32',
  ho: 'u32',
  wo: 'u32',
  cg: 'u32', // input channels per group
  og: 'u32', // output channels per group
  t: 'u32',
  h: 'u32',
  w: 'u32',
  kt: 'u32',
  kh: 'u32',
  kw: 'u32',
  st: 'u32',
  sh: 'u32',
  sw: 'u32',
  dt: 'u32',
  dh: 'u32',
  dw: 'u32',
  pt: 'i32',
  ph: 'i32',
  pw: 'i32', // zeros before each spatial dim (previous frames included)
  x_off: 'u32',
  xs_n: 'u32',
  xs_c: 'u32',
  xs_t: 'u32',
  xs_h: 'u32',
  xs_w: 'u32',
  w_off: 'u32',
  ws_o: 'u32',
  ws_c: 'u32',
  ws_t: 'u32',
  ws_h: 'u32',
  ws_w: 'u32',
  b_off: 'u32',
  bs: 'u32',
  np: 'u32', // previous frames P (0: none)
  p_off: 'u32',
  ps_n: 'u32',
  ps_c: 'u32',
  ps_t: 'u32',
  ps_h: 'u32',
  ps_w: 'u32',
  groups: 'u32',
  nb: 'u32', // channel blocks per group (blocked)
  nwb: 'u32', // column blocks per output row (blocked)
} as const;

const inputs = {
  x: { packed: 'dtype' },
  weight: { packed: 'weight' },
  bias: { packed: (v: ConvVariant) => v.bias as DType, when: (v: ConvVariant) => v.bias !== 'none' },
  previous: { packed: (v: ConvVariant) => v.previous as DType, when: (v: ConvVariant) => v.previous !== 'none' },
} as const;

const convPacked = defineKernel({
  name: 'conv',
  source: 'conv.wgsl',
  variant: { layout: ['packed'], dtype: 'dtype', weight: 'dtype', bias: 'string', previous: 'string' },
  params,
  outputs: { out: { packed: 'dtype' } },
  inputs,
  grid: { words: 'work', element: 'conv_at' },
  functions: (v) => windows(v, undefined),
  code: (v) => ({ BIAS: v.bias !== 'none' ? 'load_bias(p.b_off + oc * p.bs)' : '0.0' }),
});

const convBlocked = defineKernel({
  name: 'conv',
  source: 'conv-blocked.wgsl',
  variant: { layout: ['blocked'], ocb: 'number', wb: 'number', dtype: 'dtype', weight: 'dtype', bias: 'string', previous: 'string' },
  params,
  outputs: { out: 'u32' },
  inputs,
  grid: 'custom',
  constants: (v) => ({ OCB: v.ocb, WB: v.wb }),
  functions: (v) => windows(v, v),
  code: (v) => {
    const b = blockedWgsl(v, v.bias !== 'none', 'x');
    return { ACC_INIT: b.init, ACC_STORE: b.store };
  },
});

/**
 * F.conv3d of strided views x [N, C, T, H, W], weight [O, C/groups, kt, kh, kw] and bias [O] in one dispatch, with
 * zero padding done by bounds checks (see conv.wgsl); previous [N, C, P, H, W] supplies the time positions [-P, 0).
 * Contiguous output of outShape in x's dtype.
 */
export function convKernel(
  ctx: GpuContext,
  x: GpuOperand,
  weight: GpuOperand,
  bias: GpuOperand | undefined,
  g: ConvGeometry,
  outShape: Shape,
  previous?: GpuOperand,
): GpuBuffer {
  const n = numel(outShape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const [nb, o, to, ho, wo] = outShape;
  const og = o / g.groups;
  const blk = blockOf(lanes, og, wo);
  const [, , t, h, w] = x.view.shape;
  const [, cg, kt, kh, kw] = weight.view.shape;
  const blocksPerGroup = blk ? Math.ceil(og / blk.ocb) : 0;
  const blocksPerRow = blk ? Math.ceil(wo / blk.wb) : 0;
  const work = blk ? nb * g.groups * blocksPerGroup * to * ho * blocksPerRow : n;
  const pv = previous?.view;
  const [st, sh, sw] = g.stride;
  const [dt, dh, dw] = g.dilation;
  const [pt, ph, pw] = g.padBefore;
  const [xs_n, xs_c, xs_t, xs_h, xs_w] = x.view.strides;
  const [ws_o, ws_c, ws_t, ws_h, ws_w] = weight.view.strides;
  const [ps_n, ps_c, ps_t, ps_h, ps_w] = pv ? pv.strides : [0, 0, 0, 0, 0];
  const p = {
    work,
    o,
    to,
    ho,
    wo,
    cg,
    og,
    t,
    h,
    w,
    kt,
    kh,
    kw,
    st,
    sh,
    sw,
    dt,
    dh,
    dw,
    pt,
    ph,
    pw,
    x_off: x.view.offset,
    xs_n,
    xs_c,
    xs_t,
    xs_h,
    xs_w,
    w_off: weight.view.offset,
    ws_o,
    ws_c,
    ws_t,
    ws_h,
    ws_w,
    b_off: bias ? bias.view.offset : 0,
    bs: bias ? bias.view.strides[0] : 0,
    np: pv ? pv.shape[2] : 0,
    p_off: pv ? pv.offset : 0,
    ps_n,
    ps_c,
    ps_t,
    ps_h,
    ps_w,
    groups: g.groups,
    nb: blocksPerGroup,
    nwb: blocksPerRow,
  };
  const variant = { dtype: x.dtype, weight: weight.dtype, bias: bias ? bias.dtype : 'none', previous: previous ? previous.dtype : 'none' };
  const buffers = { out, x: x.buffer, weight: weight.buffer, bias: bias?.buffer, previous: previous?.buffer };
  if (blk) convBlocked.run(ctx, { layout: 'blocked', ocb: blk.ocb, wb: blk.wb, ...variant }, p, buffers, { threads: work });
  else convPacked.run(ctx, { layout: 'packed', ...variant }, p, buffers);
  return out;
}
