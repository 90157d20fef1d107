import { lanesPerWord } from '../../../core/dtype.js';
import { numel, type Shape } from '../../../core/shape.js';
import type { ConvGeometry } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 256;

/** conv.wgsl's sections (see its header), by name. */
function sections(): Map<string, string> {
  const src = wgslSource(import.meta.url, 'conv.wgsl');
  const out = new Map<string, string>();
  for (const part of src.split(/^\/\/\/\/ /m).slice(1)) {
    const nl = part.indexOf('\n');
    out.set(part.slice(0, nl).trim(), part.slice(nl + 1));
  }
  return out;
}

/** Output channels (ocb) and columns (wb) one invocation of the blocked kernel computes; undefined: use packed. */
interface Block {
  ocb: 4 | 8;
  wb: number;
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

/** The tap loop's column step for one output column: skip a column outside the input, else its storage offset. */
function singleColumn(src: 'x' | 'p'): string {
  return `if (wx < 0 || wx >= i32(p.w)) {\n        continue;\n      }\n      let so0 = row + u32(wx) * p.${src}s_w;`;
}

/** WGSL snippets of the blocked kernel, unrolled: the accumulator struct, its init, the tap loads and fmas, stores. */
function blockedWgsl(blk: Block, hasBias: boolean, src: 'x' | 'p') {
  const { ocb, wb } = blk;
  const quads = ocb / 4;
  const range = (k: number) => [...Array(k).keys()];
  const field = (j: number, qi: number) => `a${j * quads + qi}`;
  const quad = (f: (c: number) => string, qi: number) => `vec4<f32>(${range(4).map((l) => f(4 * qi + l)).join(', ')})`;
  const bias = (c: number) => (hasBias ? `load_b(p.b_off + (oc0 + ${c}u) * p.bs)` : '0.0');
  const weight = (c: number) => `load_w(q + ${c}u * p.ws_o)`;
  const columns =
    wb === 1
      ? singleColumn(src)
      : [
          ...range(wb).map((j) => `let in${j} = wx + ${j} * i32(p.sw) >= 0 && wx + ${j} * i32(p.sw) < i32(p.w);`),
          `if (!(${range(wb).map((j) => `in${j}`).join(' || ')})) {\n        continue;\n      }`,
          ...range(wb).map((j) => `let so${j} = row + u32(clamp(wx + ${j} * i32(p.sw), 0, i32(p.w) - 1)) * p.${src}s_w;`),
        ].join('\n      ');
  const loads = range(wb)
    .map((j) => (wb === 1 ? `let v${j} = load_${src}(so${j} + cs);` : `let v${j} = select(0.0, load_${src}(so${j} + cs), in${j});`))
    .join('\n        ');
  const fma = [
    ...range(quads).map((qi) => `let wq${qi} = ${quad(weight, qi)};`),
    ...range(wb).flatMap((j) => range(quads).map((qi) => `acc.${field(j, qi)} = fma(vec4<f32>(v${j}), wq${qi}, acc.${field(j, qi)});`)),
  ].join('\n        ');
  return {
    type: `struct Acc {\n${range(wb * quads).map((f) => `  a${f}: vec4<f32>,`).join('\n')}\n}`,
    init: `Acc(${range(wb).flatMap(() => range(quads).map((qi) => quad(bias, qi))).join(', ')})`,
    columns,
    loads,
    fma,
    store: range(wb)
      .flatMap((j) => range(ocb).map((c) => `out[o + ${c}u * plane + ${j}u] = bitcast<u32>(acc.${field(j, c >> 2)}[${c & 3}]);`))
      .join('\n  '),
  };
}

/**
 * F.conv3d of strided views x [N, C, T, H, W], weight [O, C/groups, kt, kh, kw] and bias [O] in one dispatch, with
 * zero padding done by bounds checks (see conv.wgsl); previous [N, C, P, H, W] supplies the time positions [-P, 0).
 * Contiguous output of outShape in x's dtype.
 */
export function convKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, bias: GpuOperand | undefined, g: ConvGeometry, outShape: Shape, previous?: GpuOperand): GpuBuffer {
  const n = numel(outShape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const [nb, o, to, ho, wo] = outShape;
  const og = o / g.groups;
  const blk = blockOf(lanes, og, wo);
  const key = ['conv', blk ? `blocked${blk.ocb}x${blk.wb}` : 'packed', x.dtype, weight.dtype, bias ? bias.dtype : 'nobias', previous ? previous.dtype : 'noprev'].join('|');
  const pipeline = ctx.pipeline(key, () => {
    const parts = sections();
    const part = (name: string) => {
      const s = parts.get(name);
      if (s === undefined) throw new Error(`conv.wgsl has no section ${name}`);
      return s;
    };
    const blockedFor = { x: blk && blockedWgsl(blk, bias !== undefined, 'x'), p: blk && previous && blockedWgsl(blk, bias !== undefined, 'p') };
    const taps = (src: 'x' | 'p') => {
      const b = blockedFor[src];
      return fillTemplate(part('taps'), {
        SRC: src,
        COLUMNS: b ? b.columns : singleColumn(src),
        LOADS: b ? b.loads : `let v0 = load_${src}(so0 + cs);`,
        ACC_FMA: b ? b.fma : 'acc = fma(v0, load_w(q), acc);',
      });
    };
    const b = blockedFor.x;
    const main = blk && b
      ? fillTemplate(part('blocked'), { WG, OCB: blk.ocb, WB: blk.wb, ACC_INIT: b.init, ACC_STORE: b.store })
      : fillTemplate(part('packed'), { WG, LANES: lanes, BITS: 32 / lanes, BIAS: bias ? 'load_b(p.b_off + oc * p.bs)' : '0.0' });
    const prevBinding = 4 + (bias ? 1 : 0);
    return (
      commonWgsl() +
      fillTemplate(part('head'), {
        BIAS_BINDING: bias ? '@group(0) @binding(4) var<storage, read> bbuf: array<u32>;' : '',
        PREV_BINDING: previous ? `@group(0) @binding(${prevBinding}) var<storage, read> pbuf: array<u32>;` : '',
        ACC_TYPE: b ? b.type : 'alias Acc = f32;',
        FUNCTIONS:
          loadFn('load_x', 'xbuf', x.dtype, 'f32') +
          loadFn('load_w', 'wbuf', weight.dtype, 'f32') +
          (bias ? loadFn('load_b', 'bbuf', bias.dtype, 'f32') : '') +
          (previous ? loadFn('load_p', 'pbuf', previous.dtype, 'f32') : '') +
          encodeFn('encode_out', x.dtype, 'f32'),
        PREV_TAPS: previous
          ? 'else if (tx < 0 && tx >= -i32(p.np)) {\n      acc = taps_p(pbase + u32(tx + i32(p.np)) * p.ps_t, wa, h0, w0, acc);\n    }'
          : '',
      }) +
      taps('x') +
      (previous ? taps('p') : '') +
      main
    );
  });
  const [, , t, h, w] = x.view.shape;
  const [, cg, kt, kh, kw] = weight.view.shape;
  const blocksPerGroup = blk ? Math.ceil(og / blk.ocb) : 0;
  const blocksPerRow = blk ? Math.ceil(wo / blk.wb) : 0;
  const work = blk ? nb * g.groups * blocksPerGroup * to * ho * blocksPerRow : n;
  const pv = previous?.view;
  const params = uniformWords([
    work, o, to, ho, wo, cg, og, t, h, w, kt, kh, kw,
    ...g.stride, ...g.dilation, ...g.padBefore.map((v) => ({ i32: v })),
    x.view.offset, ...x.view.strides,
    weight.view.offset, ...weight.view.strides,
    bias ? bias.view.offset : 0, bias ? bias.view.strides[0] : 0,
    pv ? pv.shape[2] : 0, pv ? pv.offset : 0, ...(pv ? pv.strides : [0, 0, 0, 0, 0]),
    g.groups, blocksPerGroup, blocksPerRow,
  ]);
  const buffers = [out, x.buffer, weight.buffer, ...(bias ? [bias.buffer] : []), ...(previous ? [previous.buffer] : [])];
  ctx.dispatch(pipeline, params, buffers, grid1d(blk ? work : Math.ceil(n / lanes), WG));
  return out;
}
