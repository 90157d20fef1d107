// Launchers of the FFT family: one workgroup per row with the row in workgroup memory (fft-rows.wgsl) for transform
// sizes up to MAX_SHARED complex values, which covers every STFT and most rows people transform (Whisper's 400,
// 512, 1024, 2048; Bluestein lengths up to 1024). Longer rows run as one dispatch per pass over global memory
// (fft-global-*.wgsl). Both read their input and write their output through the same load/store functions, so the
// STFT's framing, padding and window and the power/magnitude epilogues cost no pass of their own.
import type { DType } from '../../core/dtype.js';
import type { FftOutput } from '../../runtime/backend.js';
import type { FftPlan } from '../../runtime/fft-plan.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { grid1d, wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';

/** Complex values a workgroup holds: 16 KiB of workgroup memory, WebGPU's guaranteed minimum. */
export const MAX_SHARED = 2048;
const MAX_PASSES = 16;

const INPUTS = ['complex', 'real', 'hermitian', 'frames'] as const;
const OUTPUTS = ['complex', 'real', 'power', 'magnitude'] as const;
export type FftLoad = (typeof INPUTS)[number];
export type FftStore = (typeof OUTPUTS)[number];

/** Where each row comes from and where its bins go (element strides of the views; see fft-load-*.wgsl). */
const IO_PARAMS = {
  rows: 'u32',
  r1: 'u32',
  n: 'u32',
  in_len: 'u32',
  x_off: 'u32',
  x_s0: 'u32',
  x_s1: 'u32',
  x_sj: 'u32',
  x_sc: 'u32',
  hop: 'u32',
  pad_left: 'u32',
  t_len: 'u32',
  w_off: 'u32',
  w_s: 'u32',
  out_bins: 'u32',
  o_s0: 'u32',
  o_s1: 'u32',
  o_sk: 'u32',
  scale: 'f32',
} as const;

const VARIANT = {
  dtype: 'dtype',
  wdtype: 'dtype',
  input: INPUTS,
  output: OUTPUTS,
  reflect: 'boolean',
  size: 'number',
  rpw: 'number',
  regs: 'number',
  wg: 'number',
  bluestein: 'boolean',
  inverse: 'boolean',
} as const;

const fftRows = defineKernel({
  name: 'fft_rows',
  source: 'fft-rows.wgsl',
  variant: VARIANT,
  params: { ...IO_PARAMS, passes: 'u32', radices: `u32[${MAX_PASSES}]` },
  outputs: { out: 'f32' },
  inputs: { x: { packed: 'dtype' }, window: { packed: 'wdtype', when: (v) => v.input === 'frames' }, tables: 'f32' },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({
    SIZE: v.size,
    RPW: v.rpw,
    REGS: v.regs,
    INPUT: INPUTS.indexOf(v.input),
    OUTPUT: OUTPUTS.indexOf(v.output),
    PAD: v.reflect ? 1 : 0,
  }),
  functions: (v) =>
    `const BLUESTEIN = ${v.bluestein};\nconst INVERSE = ${v.inverse};\n` +
    wgslSource('fft-math.wgsl') +
    wgslSource(v.input === 'frames' ? 'fft-load-frames.wgsl' : 'fft-load-rows.wgsl') +
    wgslSource('fft-store.wgsl') +
    wgslSource('fft-workgroup-passes.wgsl'),
});

const mathFunctions = (v: { bluestein: boolean; inverse: boolean }) =>
  `const BLUESTEIN = ${v.bluestein};\nconst INVERSE = ${v.inverse};\n` + wgslSource('fft-math.wgsl');
const ioConstants = (v: { size: number; input: FftLoad; output: FftStore; reflect: boolean }) => ({
  SIZE: v.size,
  INPUT: INPUTS.indexOf(v.input),
  OUTPUT: OUTPUTS.indexOf(v.output),
  PAD: v.reflect ? 1 : 0,
});
const GLOBAL_VARIANT = {
  dtype: 'dtype',
  wdtype: 'dtype',
  input: INPUTS,
  output: OUTPUTS,
  reflect: 'boolean',
  size: 'number',
  bluestein: 'boolean',
  inverse: 'boolean',
} as const;

// The global-memory path: load, one dispatch per pass (ping-pong), Bluestein's pointwise product, store.
const fftGlobalLoad = defineKernel({
  name: 'fft_load',
  source: 'fft-global-load.wgsl',
  variant: GLOBAL_VARIANT,
  params: { ...IO_PARAMS, total: 'u32' },
  outputs: { out: 'f32' },
  inputs: { x: { packed: 'dtype' }, window: { packed: 'wdtype', when: (v) => v.input === 'frames' }, tables: 'f32' },
  grid: { threads: 'total', invoke: 'fft_load_at' },
  constants: ioConstants,
  functions: (v) => mathFunctions(v) + wgslSource(v.input === 'frames' ? 'fft-load-frames.wgsl' : 'fft-load-rows.wgsl'),
});

const fftGlobalPass = defineKernel({
  name: 'fft_pass',
  source: 'fft-global-pass.wgsl',
  variant: { size: 'number', bluestein: 'boolean', inverse: 'boolean' },
  params: { total: 'u32', n: 'u32', radix: 'u32', span: 'u32', inverse: 'u32' },
  outputs: { out: 'f32' },
  inputs: { src: 'f32', tables: 'f32' },
  grid: { threads: 'total', invoke: 'fft_pass_at' },
  constants: (v) => ({ SIZE: v.size }),
  functions: mathFunctions,
});

const fftGlobalPointwise = defineKernel({
  name: 'fft_pointwise',
  source: 'fft-global-pointwise.wgsl',
  variant: { size: 'number', bluestein: 'boolean', inverse: 'boolean' },
  params: { total: 'u32', n: 'u32' },
  outputs: { out: 'f32' },
  inputs: { tables: 'f32' },
  grid: { threads: 'total', invoke: 'fft_pointwise_at' },
  constants: (v) => ({ SIZE: v.size }),
  functions: mathFunctions,
});

const fftGlobalStore = defineKernel({
  name: 'fft_store',
  source: 'fft-global-store.wgsl',
  variant: GLOBAL_VARIANT,
  params: { ...IO_PARAMS, total: 'u32' },
  outputs: { out: 'f32' },
  inputs: { work: 'f32', tables: 'f32' },
  grid: { threads: 'total', invoke: 'fft_store_at' },
  constants: ioConstants,
  functions: (v) => mathFunctions(v) + wgslSource('fft-store.wgsl'),
});

/** The float32 tables of a plan as the kernels read them: twiddles, then (Bluestein) the chirp and its FFT. */
const tableCache = new WeakMap<FftPlan, Float32Array>();
export function fftTables(plan: FftPlan): Float32Array {
  let t = tableCache.get(plan);
  if (!t) {
    const parts = [plan.twiddles, ...(plan.bluestein ? [plan.chirp!, plan.chirpFft!] : [])];
    t = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
    let at = 0;
    for (const p of parts) {
      t.set(p, at);
      at += p.length;
    }
    tableCache.set(plan, t);
  }
  return t;
}

/** Whether a plan's transform fits one workgroup. */
export function fitsWorkgroup(plan: FftPlan): boolean {
  return plan.stockham.size <= MAX_SHARED;
}

/** How a launch reads its rows: an fft view ([R0, R1, L(, 2)]) or STFT frames of signals [B, T]. */
export type FftSource =
  | { readonly kind: 'rows'; readonly x: GpuOperand; readonly input: 'complex' | 'real' | 'hermitian' }
  | {
      readonly kind: 'frames';
      readonly x: GpuOperand;
      readonly window: GpuOperand;
      readonly frames: number;
      readonly hop: number;
      readonly padLeft: number;
      readonly reflect: boolean;
    };

/** Where the bins go: rows R0 x R1, bins kept, element strides of the output per row dim and per bin. */
export interface FftDestination {
  readonly output: FftStore;
  readonly bins: number;
  readonly strides: readonly [number, number, number];
  /** Elements (float32 words) of the output buffer. */
  readonly elements: number;
}

function ioParams(plan: FftPlan, src: FftSource, dst: FftDestination, scale: number) {
  const x = src.x;
  const s = x.view.strides;
  const common = { n: plan.n, out_bins: dst.bins, o_s0: dst.strides[0], o_s1: dst.strides[1], o_sk: dst.strides[2], scale, x_off: x.view.offset };
  if (src.kind === 'frames') {
    const [batch, t] = x.view.shape;
    return {
      ...common,
      rows: batch * src.frames,
      r1: src.frames,
      in_len: 0,
      x_s0: s[0],
      x_s1: 0,
      x_sj: s[1],
      x_sc: 0,
      hop: src.hop,
      pad_left: src.padLeft,
      t_len: t,
      w_off: src.window.view.offset,
      w_s: src.window.view.strides[0] ?? 0,
    };
  }
  const complex = src.input !== 'real';
  const [r0, r1, length] = x.view.shape;
  const stored = src.input === 'hermitian' ? Math.floor(plan.n / 2) + 1 : plan.n;
  return {
    ...common,
    rows: r0 * r1,
    r1,
    in_len: Math.min(length, stored),
    x_s0: s[0],
    x_s1: s[1],
    x_sj: s[2],
    x_sc: complex ? s[3] : 0,
    hop: 0,
    pad_left: 0,
    t_len: 0,
    w_off: 0,
    w_s: 0,
  };
}

/**
 * Short rows share a workgroup up to this many values (128 invocations of 4): more rows per workgroup measured
 * slower on SwiftShader for Whisper's 400-point frames, fewer leave most invocations of a tiny transform idle.
 */
const SHARED_ROW_VALUES = 512;

/**
 * About this many values per invocation (4 radix-4 butterflies a pass): measured on SwiftShader for 3000 frames of
 * 400 points, 16 took 0.53 s against 1.26 s for 4 and 2.3 s for 2 (the per-invocation cost of a barrier dominates
 * there); a GPU runs a 400-point row as one 32-wide workgroup, a warp or a SIMD group.
 */
const VALUES_PER_INVOCATION = 16;

/**
 * Rows per workgroup (short rows share one, never more than there are rows), invocations per workgroup
 * and the registers one invocation needs in any pass.
 */
function workgroupShape(size: number, radices: readonly number[], rows: number): { rpw: number; wg: number; regs: number } {
  const rpw = Math.max(1, Math.min(Math.floor(SHARED_ROW_VALUES / size), rows));
  const values = rpw * size;
  let wg = 32;
  while (wg < 256 && wg * VALUES_PER_INVOCATION < values) wg *= 2;
  const regs = Math.max(1, ...radices.map((r) => r * Math.ceil(values / r / wg)));
  return { rpw, wg, regs };
}

/** Queues the transform of every row of src into a new float32 buffer laid out as dst says. */
export function fftKernel(ctx: GpuContext, plan: FftPlan, tables: GpuBuffer, src: FftSource, dst: FftDestination, inverse: boolean, scale: number): GpuBuffer {
  const out = ctx.alloc(wordBytes(dst.elements, 1));
  const io = ioParams(plan, src, dst, scale);
  if (io.rows === 0 || dst.bins === 0) return out;
  const { size, radices } = plan.stockham;
  if (radices.length > MAX_PASSES) throw new RangeError(`fft: ${radices.length} passes exceed ${MAX_PASSES}`);
  const wdtype: DType = src.kind === 'frames' ? src.window.dtype : 'float32';
  const input = src.kind === 'frames' ? 'frames' : src.input;
  const reflect = src.kind === 'frames' && src.reflect;
  const window = src.kind === 'frames' ? { window: src.window.buffer } : {};
  if (!fitsWorkgroup(plan)) {
    globalFft(ctx, plan, tables, { dtype: src.x.dtype, wdtype, input, output: dst.output, reflect, size, bluestein: plan.bluestein, inverse }, io, {
      out,
      x: src.x.buffer,
      tables,
      ...window,
    });
    return out;
  }
  const { rpw, wg, regs } = workgroupShape(size, radices, io.rows);
  fftRows.run(
    ctx,
    {
      dtype: src.x.dtype,
      wdtype,
      input,
      output: dst.output,
      reflect,
      size,
      rpw,
      regs,
      wg,
      bluestein: plan.bluestein,
      inverse,
    },
    { ...io, passes: radices.length, radices: [...radices] },
    { out, x: src.x.buffer, tables, ...window },
    { workgroups: grid1d(Math.ceil(io.rows / rpw), 1) },
  );
  return out;
}

type GlobalVariant = Parameters<typeof fftGlobalLoad.run>[1];
type IoParams = ReturnType<typeof ioParams>;

/** Rows too long for workgroup memory: 2 + passes (Bluestein: 3 + 2 passes) dispatches through two work buffers. */
function globalFft(
  ctx: GpuContext,
  plan: FftPlan,
  tables: GpuBuffer,
  v: GlobalVariant,
  io: IoParams,
  buffers: { out: GpuBuffer; x: GpuBuffer; tables: GpuBuffer; window?: GpuBuffer },
): void {
  const { size, radices } = plan.stockham;
  const total = io.rows * size;
  let a = ctx.alloc(wordBytes(2 * total, 1));
  let b = ctx.alloc(wordBytes(2 * total, 1));
  fftGlobalLoad.run(ctx, v, { ...io, total }, { out: a, x: buffers.x, tables, ...(buffers.window ? { window: buffers.window } : {}) });
  const small = { size, bluestein: v.bluestein, inverse: v.inverse };
  const passes = (inverse: boolean) => {
    let span = 1;
    for (const r of radices) {
      fftGlobalPass.run(ctx, small, { total: io.rows * (size / r), n: plan.n, radix: r, span, inverse: inverse ? 1 : 0 }, { out: b, src: a, tables });
      [a, b] = [b, a];
      span *= r;
    }
  };
  passes(v.bluestein ? false : v.inverse);
  if (v.bluestein) {
    fftGlobalPointwise.run(ctx, small, { total, n: plan.n }, { out: a, tables });
    passes(true);
  }
  fftGlobalStore.run(ctx, v, { ...io, total: io.rows * io.out_bins }, { out: buffers.out, work: a, tables });
  ctx.release(a);
  ctx.release(b);
}

/** How FftArgs' output maps onto a store: complex/half keep pairs, real keeps the real parts. */
export function storeOf(output: FftOutput): FftStore {
  return output === 'real' ? 'real' : 'complex';
}
